package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
)

// MaxPlayerGames is how many games a player's list keeps: the newest.
const MaxPlayerGames = 100

// Entry is one game matchmaking made for a player, as that player sees
// it when it is made.
type Entry struct {
	Game string
	Kind commonv1.GameKind
	// Side is the player's side, as the rules name it (Grant.Side).
	Side string
	// Opponent is "ai" against the AI.
	Opponent, OpponentName string
	Rated                  bool
	// Control is clock.Control{} for no clock.
	Control clock.Control
	Created time.Time
}

// playerKey is the key of one of player's things: all share the
// player's hash tag, so that each script on them touches one slot.
func (s *Store) playerKey(player, rest string) string {
	return s.prefix + "mm:{pl:" + player + "}:" + rest
}

func (s *Store) playerGamesKey(player string) string { return s.playerKey(player, "g") }
func (s *Store) playerInfoKey(player string) string  { return s.playerKey(player, "gi") }

// encode writes an entry's fields but its game id (the hash field) as
// "kind|side|rated|control|created ms|opponent|opponent name": player
// ids hold no '|' (they are checked like every id that becomes part of a
// key), and the name, which may, comes last.
func (e Entry) encode() string {
	return strings.Join([]string{
		strconv.Itoa(int(e.Kind)), e.Side, b2s(e.Rated), e.Control.String(),
		strconv.FormatInt(e.Created.UnixMilli(), 10), e.Opponent, e.OpponentName,
	}, "|")
}

func decodeEntry(game, s string) (Entry, error) {
	f := strings.SplitN(s, "|", 7)
	if len(f) != 7 {
		return Entry{}, fmt.Errorf("game %s: entry %q has %d fields, want 7", game, s, len(f))
	}
	kind, kerr := strconv.Atoi(f[0])
	c, cerr := clock.ParseControl(f[3])
	created, terr := strconv.ParseInt(f[4], 10, 64)
	if err := errors.Join(kerr, cerr, terr); err != nil {
		return Entry{}, fmt.Errorf("game %s: entry %q: %w", game, s, err)
	}
	return Entry{
		Game: game, Kind: commonv1.GameKind(kind), Side: f[1], Rated: f[2] == "1", Control: c,
		Created: time.UnixMilli(created), Opponent: f[5], OpponentName: f[6],
	}, nil
}

// AddPlayerGame adds a game to player's list, keeping the newest
// MaxPlayerGames, the list kept for keep from now. It is one script on
// the player's slot, so a retry of a creation (same game id) changes
// nothing but the list's lifetime: the game keeps its first entry and
// time. It reports whether the game was new to the list, and when it was
// first listed (e.Created, or that of the first call).
func (s *Store) AddPlayerGame(ctx context.Context, player string, e Entry, keep time.Duration) (bool, time.Time, error) {
	keys := []string{s.playerGamesKey(player), s.playerInfoKey(player)}
	var res []int64
	err := s.write(ctx, keys[0], func(c redis.Cmdable) (err error) {
		res, err = addGameScript.Run(ctx, c, keys, e.Game, e.Created.UnixMilli(), e.encode(), MaxPlayerGames, keep.Milliseconds()).Int64Slice()
		return err
	})
	if err != nil {
		return false, time.Time{}, fmt.Errorf("list game %s for %s: %w", e.Game, player, err)
	}
	return res[0] == 1, time.UnixMilli(res[1]), nil
}

// UnlistPlayerGame takes a game off player's list: one made for a match
// that was given up meanwhile, of which the player was never told. Both
// keys share the player's hash tag, so the two deletions are one
// transaction.
func (s *Store) UnlistPlayerGame(ctx context.Context, player, game string) error {
	gamesKey, infoKey := s.playerGamesKey(player), s.playerInfoKey(player)
	err := s.write(ctx, gamesKey, func(c redis.Cmdable) error {
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.ZRem(ctx, gamesKey, game)
			p.HDel(ctx, infoKey, game)
			return nil
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("unlist game %s for %s: %w", game, player, err)
	}
	return nil
}

// PlayerGames returns player's listed games made since then, newest
// first, at most limit (at most MaxPlayerGames are kept). A player without
// games has none, not ErrNotFound.
func (s *Store) PlayerGames(ctx context.Context, player string, since time.Time, limit int) ([]Entry, error) {
	if limit <= 0 {
		return nil, nil
	}
	// Entries older than a game's record are dropped when the next game is
	// listed; until then they are passed over here.
	ids, err := s.rdb.ZRevRangeByScore(ctx, s.playerGamesKey(player), &redis.ZRangeBy{
		Min: strconv.FormatInt(since.UnixMilli(), 10), Max: "+inf", Count: int64(limit),
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("list games of %s: %w", player, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	vals, err := s.rdb.HMGet(ctx, s.playerInfoKey(player), ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("list games of %s: %w", player, err)
	}
	out := make([]Entry, 0, len(ids))
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			// Trimmed or expired between the two reads: it is gone.
			continue
		}
		e, err := decodeEntry(ids[i], str)
		if err != nil {
			return nil, fmt.Errorf("list games of %s: %w", player, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// PlayerGame returns player's entry of one listed game, or ErrNotFound.
func (s *Store) PlayerGame(ctx context.Context, player, game string) (Entry, error) {
	v, err := s.rdb.HGet(ctx, s.playerInfoKey(player), game).Result()
	if errors.Is(err, redis.Nil) {
		return Entry{}, ErrNotFound
	}
	if err != nil {
		return Entry{}, fmt.Errorf("read game %s of %s: %w", game, player, err)
	}
	return decodeEntry(game, v)
}
