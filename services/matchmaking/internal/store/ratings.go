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
	b := s.ratingBase(o.Kind)
	keys := []string{b + "rating", b + "games", b + "lb", b + "names", b + "done:" + o.GameID, b + "h:" + o.A.ID, b + "h:" + o.B.ID, b + "named"}
	// Waited for: the caller forgets the pending game once this returns, and
	// a rating lost in a failover after that would never be applied again.
	var v []int64
	err := s.write(ctx, keys[0], func(c redis.Cmdable) (err error) {
		v, err = rateScript.Run(ctx, c, keys, o.GameID, o.A.ID, o.A.Name, o.B.ID, o.B.Name,
			strconv.FormatFloat(o.ScoreA, 'f', -1, 64), o.At.UnixMilli(), StartRating, KProvisional, KEstablished,
			ProvisionalGames, HistoryLength, int64(doneTTL/time.Second), unixMilli(o.A.NamedAt), unixMilli(o.B.NamedAt)).Int64Slice()
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

// CountAbort counts one aborted rated game of kind against player, once
// per game id; it reports whether this call counted it. The game ended at
// at: it keeps the player out of the rated queue (AbortWait) until an
// AbortWindow after that, as of now.
func (s *Store) CountAbort(ctx context.Context, kind commonv1.GameKind, gameID, player string, at, now time.Time) (bool, error) {
	b := s.ratingBase(kind)
	keys := []string{b + "aborts", b + "done:" + gameID, s.abortLogKey(kind, player)}
	var n int
	err := s.write(ctx, keys[0], func(c redis.Cmdable) (err error) {
		n, err = abortScript.Run(ctx, c, keys, player, int64(doneTTL/time.Second), gameID, at.UnixMilli(), AbortWindow.Milliseconds(), now.UnixMilli()).Int()
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

// PlayerRating reads a player's rating (StartRating before any game).
func (s *Store) PlayerRating(ctx context.Context, kind commonv1.GameKind, player string) (Rating, error) {
	b := s.ratingBase(kind)
	pipe := s.rdb.Pipeline()
	r := pipe.HGet(ctx, b+"rating", player)
	g := pipe.HGet(ctx, b+"games", player)
	n := pipe.HGet(ctx, b+"names", player)
	sc := pipe.ZScore(ctx, b+"lb", player)
	ab := pipe.HGet(ctx, b+"aborts", player)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Rating{}, fmt.Errorf("read rating: %w", err)
	}
	aborts, _ := ab.Int()
	out := Rating{Player: player, Name: n.Val(), Rating: StartRating, Aborts: aborts}
	if v, err := r.Int(); err == nil {
		out.Rating = v
	}
	out.Games, _ = g.Int()
	if score, err := sc.Result(); err == nil {
		if out.Rank, err = s.rankOf(ctx, b, score); err != nil {
			return Rating{}, err
		}
	}
	return out, nil
}

// aboveScore is the bound of ZCOUNT for the ratings above score.
func aboveScore(score float64) string { return "(" + strconv.FormatFloat(score, 'f', -1, 64) }

// rankOf is the rank of a rating of score on the leaderboard under b:
// one more than the players rated higher, so that equal ratings share a
// rank (1, 2, 2, 4), whatever their ids.
func (s *Store) rankOf(ctx context.Context, b string, score float64) (int64, error) {
	above, err := s.rdb.ZCount(ctx, b+"lb", aboveScore(score), "+inf").Result()
	if err != nil {
		return 0, fmt.Errorf("read rank: %w", err)
	}
	return above + 1, nil
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

// Leaderboard reads ranks from start (0-based) to stop inclusive, and the
// number of rated players.
func (s *Store) Leaderboard(ctx context.Context, kind commonv1.GameKind, start, stop int64) ([]Rating, int64, error) {
	b := s.ratingBase(kind)
	pipe := s.rdb.Pipeline()
	zs := pipe.ZRevRangeWithScores(ctx, b+"lb", start, stop)
	total := pipe.ZCard(ctx, b+"lb")
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, 0, fmt.Errorf("read leaderboard: %w", err)
	}
	if len(zs.Val()) == 0 {
		return nil, total.Val(), nil
	}
	ids := make([]string, len(zs.Val()))
	for i, z := range zs.Val() {
		ids[i] = z.Member.(string)
	}
	pipe = s.rdb.Pipeline()
	names := pipe.HMGet(ctx, b+"names", ids...)
	games := pipe.HMGet(ctx, b+"games", ids...)
	aborts := pipe.HMGet(ctx, b+"aborts", ids...)
	// Equal ratings share a rank: the first of a page may share its rank
	// with players on the page before.
	above := pipe.ZCount(ctx, b+"lb", aboveScore(zs.Val()[0].Score), "+inf")
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, 0, fmt.Errorf("read leaderboard players: %w", err)
	}
	out := make([]Rating, len(ids))
	for i, z := range zs.Val() {
		out[i] = Rating{Player: ids[i], Rating: int(z.Score), Rank: start + int64(i) + 1}
		switch {
		case i == 0:
			out[i].Rank = above.Val() + 1
		case z.Score == zs.Val()[i-1].Score:
			out[i].Rank = out[i-1].Rank
		}
		if n, ok := names.Val()[i].(string); ok {
			out[i].Name = n
		}
		if g, ok := games.Val()[i].(string); ok {
			out[i].Games, _ = strconv.Atoi(g)
		}
		if a, ok := aborts.Val()[i].(string); ok {
			out[i].Aborts, _ = strconv.Atoi(a)
		}
	}
	return out, total.Val(), nil
}

// Rank returns a player's 0-based place on the leaderboard, or
// ErrNotFound: where a page around the player starts. Equal ratings are
// in an order of Redis' (by id), and share a rank (Rating.Rank).
func (s *Store) Rank(ctx context.Context, kind commonv1.GameKind, player string) (int64, error) {
	r, err := s.rdb.ZRevRank(ctx, s.ratingBase(kind)+"lb", player).Result()
	if errors.Is(err, redis.Nil) {
		return 0, ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("read rank: %w", err)
	}
	return r, nil
}
