// Package engine is Palace's game-tree search for Janggi and Xiangqi.
//
// It is a single-threaded iterative-deepening alpha-beta search (principal
// variation search with aspiration windows) over pkg/rules positions, with
// a fixed-size transposition table, quiescence search, check extensions,
// null-move pruning, late-move reductions and a hand-written evaluation per
// game. The search knows the game's adjudication rules (docs/rules.md "How a game
// ends"), so it scores repetitions, perpetual checks, Janggi passes, bikjang
// and the ply limits the way the game layer will decide them.
//
// # Decisive results are mate scores
//
// Every way a game can end with a winner is scored like a mate at the ply it
// happens: checkmate, Xiangqi stalemate, a losing perpetual check, and the
// Janggi endings decided by points (two passes, bikjang, repetition, 200
// plies). A Janggi line that ends "on points" in the side to move's favour is
// a forced win, and the rules give it the same weight as a mate, so the
// engine does too; the UCI layer reports such lines as "score mate N".
// Xiangqi draws (repetition, 120 plies without a capture, no attacking
// material) score 0.
//
// # Null move and the Janggi pass
//
// Null-move pruning asks "if I did nothing, would I still be above beta?".
// In Xiangqi doing nothing is not a move, so the null move is a pure search
// device: it is never searched when the side to move is in check, when the
// previous ply was itself a null move, or when the side to move has no
// chariot, horse or cannon (zugzwang is real in Xiangqi, and stalemate
// loses). Positions after a null move are never compared with positions
// before it for repetition, because that path is not a game.
//
// In Janggi doing nothing IS a move: the pass, legal whenever the side to
// move is not in check. So the engine's null move in Janggi is exactly the
// legal pass, made with rules.Position.Make, recorded in the path as a pass
// and adjudicated as one (the reply pass ends the game on points). That makes
// the null-move hypothesis sound in Janggi: a side can always do at least as
// well as passing, so there is no zugzwang. What must not happen is a null
// move right after a pass, because that second pass is not "doing nothing"
// but ending the game; the search skips null-move pruning there and the real
// pass is searched (and scored exactly) with the other moves. The
// transposition table keys positions reached by a pass apart from the same
// board reached by a move, since a pass in reply ends the game in the first
// case only.
//
// # Reproducibility
//
// With a depth or node limit (no time limit, no Stop) a search is a pure
// function of the position, its history, the limits, the seeds and the
// transposition table's contents. Call Clear before a search whose answer
// must not depend on earlier searches. Randomness (the levels' noise) comes
// only from the seeds and the position, never from the clock.
package engine
