package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
)

// Elo parameters. A player's K-factor is KProvisional for their first
// ProvisionalGames rated games of a kind (their rating moves fast while it
// is uncertain), then KEstablished.
const (
	StartRating      = 1200
	KProvisional     = 40
	KEstablished     = 20
	ProvisionalGames = 30
	// HistoryLength is how many rating changes are kept per player and kind.
	HistoryLength = 500
	// doneTTL keeps the per-game "applied" marker far longer than any
	// duplicate delivery could arrive.
	doneTTL = 90 * 24 * time.Hour
)

func (s *Store) ratingBase(kind commonv1.GameKind) string {
	k, _ := KindName(kind)
	return s.prefix + "mm:{r:" + k + "}:"
}

// Outcome is one rated game's result for rating.
type Outcome struct {
	GameID string
	Kind   commonv1.GameKind
	// A and B are the players, with their names as the game knew them;
	// ScoreA is A's score: 1, 0.5 or 0.
	A, B   Player
	ScoreA float64
	// At is when the game ended: the players' changes are dated so.
	At time.Time
	// Applier names who applies it (a rating consumer), so that its retry
	// after a reply lost is answered as applied, not as a duplicate.
	Applier string
}

// Applied is what ApplyRating did.
type Applied struct {
	// Done is false when the game had already been applied.
	Done            bool
	ABefore, AAfter int
	BBefore, BAfter int
}

// ApplyRating updates both players' ratings for one game, once per game id.
func (s *Store) ApplyRating(ctx context.Context, o Outcome) (Applied, error) {
	if o.A.ID == "" || o.B.ID == "" {
		return Applied{}, fmt.Errorf("apply rating of game %s: a player without an id", o.GameID)
	}
	b := s.ratingBase(o.Kind)
	keys := []string{b + "rating", b + "games", b + "lb", b + "names", s.doneKey(o.Kind, o.GameID), b + "h:" + o.A.ID, b + "h:" + o.B.ID, b + "named"}
	// Waited for: the caller forgets the pending game once this returns, and
	// a rating lost in a failover after that would never be applied again.
	var v []int64
	err := s.write(ctx, keys[0], func(c redis.Cmdable) (err error) {
		v, err = rateScript.Run(ctx, c, keys, o.GameID, o.A.ID, o.A.Name, o.B.ID, o.B.Name,
			strconv.FormatFloat(o.ScoreA, 'f', -1, 64), o.At.UnixMilli(), StartRating, KProvisional, KEstablished,
			ProvisionalGames, HistoryLength, int64(doneTTL/time.Second), unixMilli(o.A.NamedAt), unixMilli(o.B.NamedAt), o.Applier).Int64Slice()
		return err
	})
	if err != nil {
		return Applied{}, fmt.Errorf("apply rating: %w", err)
	}
	if v[0] == 0 {
		return Applied{}, nil
	}
	return Applied{Done: true, ABefore: int(v[1]), AAfter: int(v[2]), BBefore: int(v[3]), BAfter: int(v[4])}, nil
}

// AbortWindow is how long an aborted rated game counts against its
// player's entering a rated queue.
const AbortWindow = time.Hour

func (s *Store) abortLogKey(kind commonv1.GameKind, player string) string {
	return s.ratingBase(kind) + "recentaborts:" + player
}

// doneKey is game gameID's marker of its rating or abort, once applied
// (or void: Unrate).
func (s *Store) doneKey(kind commonv1.GameKind, gameID string) string {
	return s.ratingBase(kind) + "done:" + gameID
}

// abortedByKey names the player a game's abort was counted against.
func (s *Store) abortedByKey(kind commonv1.GameKind, gameID string) string {
	return s.ratingBase(kind) + "abortedby:" + gameID
}

// Unrate makes rated game gameID of kind, made for a match given up whose
// players were never told of it, count for nobody: its ending, settled
// later, is neither rated nor counted as an abort, and an abort counted
// already is taken back. players are the game's two players.
func (s *Store) Unrate(ctx context.Context, kind commonv1.GameKind, gameID string, players ...string) error {
	b := s.ratingBase(kind)
	keys := []string{b + "aborts", s.doneKey(kind, gameID), s.abortedByKey(kind, gameID)}
	args := []any{int64(doneTTL / time.Second), gameID}
	for _, p := range players {
		keys = append(keys, s.abortLogKey(kind, p))
		args = append(args, p)
	}
	err := s.write(ctx, keys[0], func(c redis.Cmdable) error {
		return unrateScript.Run(ctx, c, keys, args...).Err()
	})
	if err != nil {
		return fmt.Errorf("unrate game: %w", err)
	}
	return nil
}

// CountAbort counts one aborted rated game of kind against player, once
// per game id; it reports whether this call (or an earlier one by the
// same counter, by, whose reply was lost) counted it. The game ended at
// at: it keeps the player out of the rated queue (AbortWait) until an
// AbortWindow after that, as of now.
func (s *Store) CountAbort(ctx context.Context, kind commonv1.GameKind, gameID, player, by string, at, now time.Time) (bool, error) {
	b := s.ratingBase(kind)
	keys := []string{b + "aborts", s.doneKey(kind, gameID), s.abortLogKey(kind, player), s.abortedByKey(kind, gameID)}
	var n int
	err := s.write(ctx, keys[0], func(c redis.Cmdable) (err error) {
		n, err = abortScript.Run(ctx, c, keys, player, int64(doneTTL/time.Second), gameID, at.UnixMilli(), AbortWindow.Milliseconds(), now.UnixMilli(), by).Int()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("count abort: %w", err)
	}
	return n == 1, nil
}

// AbortWait is how long player must wait before entering a rated queue
// of kind, having aborted most of its rated games in the last
// AbortWindow; zero when it may enter now, or most is 0 (no bound). n is
// how many aborts the window holds.
func (s *Store) AbortWait(ctx context.Context, kind commonv1.GameKind, player string, most int, now time.Time) (wait time.Duration, n int, err error) {
	if most <= 0 {
		return 0, 0, nil
	}
	since := now.Add(-AbortWindow).UnixMilli()
	at, err := s.rdb.ZRangeByScoreWithScores(ctx, s.abortLogKey(kind, player), &redis.ZRangeBy{Min: "(" + strconv.FormatInt(since, 10), Max: "+inf"}).Result()
	if err != nil {
		return 0, 0, fmt.Errorf("recent aborts: %w", err)
	}
	if len(at) < most {
		return 0, len(at), nil
	}
	// Room comes once all but most - 1 have left the window: with a bound
	// lowered since, more than the oldest must leave.
	leaves := time.UnixMilli(int64(at[len(at)-most].Score)).Add(AbortWindow)
	return max(time.Millisecond, leaves.Sub(now)), len(at), nil
}

// Rating is one player's rating of one kind.
type Rating struct {
	Player string
	Name   string
	Rating int
	Games  int
	// Aborts counts the rated games the player aborted, or let abort
	// without a first move.
	Aborts int
	// Rank is 1-based; 0 when the player has no rated game.
	Rank int64
}

// PlayerRating reads a player's rating (StartRating before any game) and
// its rank, as one moment (rating.lua).
func (s *Store) PlayerRating(ctx context.Context, kind commonv1.GameKind, player string) (Rating, error) {
	b := s.ratingBase(kind)
	raw, err := ratingScript.Run(ctx, s.rdb, []string{b + "rating", b + "games", b + "names", b + "aborts", b + "lb"}, player).Slice()
	if err != nil {
		return Rating{}, fmt.Errorf("read rating: %w", err)
	}
	if len(raw) != 5 {
		return Rating{}, fmt.Errorf("read rating: %d values, want 5", len(raw))
	}
	out := Rating{Player: player, Rating: StartRating, Name: field(raw[2])}
	if v, err := strconv.Atoi(field(raw[0])); err == nil {
		out.Rating = v
	}
	out.Games, _ = strconv.Atoi(field(raw[1]))
	out.Aborts, _ = strconv.Atoi(field(raw[3]))
	out.Rank, _ = raw[4].(int64)
	return out, nil
}

// field is a script's string value, "" for one not kept (nil).
func field(v any) string {
	s, _ := v.(string)
	return s
}

// RatingOnly reads a player's rating, StartRating when there is none.
func (s *Store) RatingOnly(ctx context.Context, kind commonv1.GameKind, player string) (int, bool, error) {
	v, err := s.rdb.HGet(ctx, s.ratingBase(kind)+"rating", player).Int()
	if errors.Is(err, redis.Nil) {
		return StartRating, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read rating: %w", err)
	}
	return v, true, nil
}

// Change is one entry of a player's rating history.
type Change struct {
	Game           string  `json:"g"`
	Score          float64 `json:"s"`
	Before         int     `json:"b"`
	After          int     `json:"a"`
	Opponent       string  `json:"o"`
	OpponentName   string  `json:"on"`
	OpponentBefore int     `json:"ob"`
	AtMs           int64   `json:"t"`
}

// Rename shows a player's name, given at at (their sign-in), on the
// leaderboards and in their ratings from now on, unless a newer one is
// shown already. Changes already in rating histories keep the name of
// their day. Every signed-in player is recorded, rated or not: one whose
// first rated game began before the sign-in would otherwise have that
// game's older name shown (rate.lua). That is two hash fields per kind
// and account that ever signed in, never expired, as the ratings are.
func (s *Store) Rename(ctx context.Context, player, name string, at time.Time) error {
	for _, k := range []commonv1.GameKind{commonv1.GameKind_GAME_KIND_JANGGI, commonv1.GameKind_GAME_KIND_XIANGQI} {
		b := s.ratingBase(k)
		if err := renameScript.Run(ctx, s.rdb, []string{b + "names", b + "named"}, player, name, at.UnixMilli()).Err(); err != nil {
			return fmt.Errorf("rename on the %v leaderboard: %w", k, err)
		}
	}
	return nil
}

// HistoryPage is one page of a player's rating history, latest first.
type HistoryPage struct {
	Changes []Change
	// Next is the History start of the page after this one, 0 when no
	// older change is kept.
	Next int64
}

// ErrNoSuchPage is a History start beyond the player's rated games: no
// page of theirs led there.
var ErrNoSuchPage = errors.New("no page of this history starts there")

// History reads a page of a player's rating changes, latest first: at
// most limit changes older than the page start below (a HistoryPage.Next;
// 0 for the latest). Changes are numbered by the player's rated games, so
// the next page neither skips nor repeats a change when more are rated
// between the reads.
func (s *Store) History(ctx context.Context, kind commonv1.GameKind, player string, below int64, limit int) (HistoryPage, error) {
	b := s.ratingBase(kind)
	raw, err := historyScript.Run(ctx, s.rdb, []string{b + "games", b + "h:" + player}, player, below, limit).Slice()
	if err != nil {
		return HistoryPage{}, fmt.Errorf("read history: %w", err)
	}
	if len(raw) < 2 { // {-1}: below is past the player's games
		return HistoryPage{}, fmt.Errorf("history below %d: %w", below, ErrNoSuchPage)
	}
	first, _ := raw[0].(int64)
	more, _ := raw[1].(int64)
	page := HistoryPage{Changes: make([]Change, 0, len(raw)-2)}
	for _, r := range raw[2:] {
		var c Change
		str, _ := r.(string)
		if err := json.Unmarshal([]byte(str), &c); err != nil {
			return HistoryPage{}, fmt.Errorf("decode history: %w", err)
		}
		page.Changes = append(page.Changes, c)
	}
	if last := first - int64(len(page.Changes)) + 1; more == 1 && last > 1 {
		page.Next = last
	}
	return page, nil
}

// Page is where a leaderboard page is: the places Start to Stop (0-based,
// inclusive), or, when Around names a player, Reach places each side of
// that player's.
type Page struct {
	Start, Stop int64
	Around      string
	Reach       int64
}

// Leaderboard reads a page of the leaderboard and the number of rated
// players, as one moment (leaderboard.lua): ranks, ratings and games all
// agree, however many games are rated meanwhile. ErrNotFound when the
// player to centre on has no rated game.
func (s *Store) Leaderboard(ctx context.Context, kind commonv1.GameKind, page Page) ([]Rating, int64, error) {
	b := s.ratingBase(kind)
	raw, err := leaderboardScript.Run(ctx, s.rdb, []string{b + "lb", b + "names", b + "games", b + "aborts"},
		page.Start, page.Stop, page.Around, page.Reach).Slice()
	if err != nil {
		return nil, 0, fmt.Errorf("read leaderboard: %w", err)
	}
	if len(raw) == 1 {
		return nil, 0, fmt.Errorf("leaderboard around %s: %w", page.Around, ErrNotFound)
	}
	if len(raw) < 3 || (len(raw)-3)%5 != 0 {
		return nil, 0, fmt.Errorf("read leaderboard: %d values", len(raw))
	}
	total, _ := raw[0].(int64)
	start, _ := raw[1].(int64)
	above, _ := raw[2].(int64)
	out := make([]Rating, 0, (len(raw)-3)/5)
	for i, e := 0, raw[3:]; len(e) >= 5; i, e = i+1, e[5:] {
		r := Rating{Player: field(e[0]), Name: field(e[2]), Rank: start + int64(i) + 1}
		r.Rating, _ = strconv.Atoi(field(e[1]))
		r.Games, _ = strconv.Atoi(field(e[3]))
		r.Aborts, _ = strconv.Atoi(field(e[4]))
		switch {
		case i == 0:
			r.Rank = above + 1
		case r.Rating == out[i-1].Rating:
			r.Rank = out[i-1].Rank
		}
		out = append(out, r)
	}
	return out, total, nil
}
