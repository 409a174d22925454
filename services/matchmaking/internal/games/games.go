// Package games creates games through the game service for matchmaking's
// three ways to meet (queue, invite, rematch) and the AI, lists each game
// for its human players (ListGames), and remembers each human game (for
// rematches) and each rated one (for ratings).
package games

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/clock"
	"github.com/palacehq/palace/pkg/displayname"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/rules"
	"github.com/palacehq/palace/pkg/rulespb"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// Creator creates and records games.
type Creator struct {
	game  gamev1.GameServiceClient
	store *store.Store
	// keep is how long a game's record stays (rematch offers, rating),
	// and its players' lists of games after their latest game.
	keep time.Duration
	// now stamps the games listed for their players.
	now func() time.Time
}

// New returns a Creator; a nil now is time.Now.
func New(game gamev1.GameServiceClient, st *store.Store, keep time.Duration, now func() time.Time) *Creator {
	if now == nil {
		now = time.Now
	}
	return &Creator{game: game, store: st, keep: keep, now: now}
}

// Game is the game service client.
func (c *Creator) Game() gamev1.GameServiceClient { return c.game }

// RequestID derives a game service request id from parts: the same parts
// give the same id, so a retry after a crash creates the same game
// (the game service remembers request ids).
func RequestID(kind string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return kind + "-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// FirstIsA decides sides at random but reproducibly from a seed (which
// holds random ids), so a retried creation asks for the same game.
func FirstIsA(seed ...string) bool {
	h := sha256.New()
	for _, p := range seed {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum(nil)[0]&1 == 0
}

// Human is one person to seat; NamedAt is when they were given Name
// (store.Player.NamedAt), zero when unknown.
type Human struct {
	ID, Name string
	NamedAt  time.Time
}

// Spec is a game between two people.
type Spec struct {
	RequestID     string
	Kind          commonv1.GameKind
	Control       clock.Control
	Rated, Public bool
	// First and Second by side.
	First, Second Human
}

// CreateHuman creates a game between two people, remembers it, and, when
// rated, records it as pending before anyone can learn of it (so its end
// cannot be missed).
func (c *Creator) CreateHuman(ctx context.Context, s Spec) (store.Game, error) {
	g, err := c.Create(ctx, s)
	if err != nil {
		return g, err
	}
	if err := c.store.SaveGame(ctx, g, c.keep, c.Pending(g)); err != nil {
		return store.Game{}, err
	}
	return g, nil
}

// MaxPlayerIDBytes is the game service's limit on a seat's player id.
const MaxPlayerIDBytes = 128

// Create creates a game between two people and lists it for both, but
// does not remember it for rematches and ratings: the caller must
// (CreateHuman does).
func (c *Creator) Create(ctx context.Context, s Spec) (store.Game, error) {
	g, err := c.Make(ctx, s)
	if err != nil {
		return store.Game{}, err
	}
	if err := c.List(ctx, g); err != nil {
		return store.Game{}, err
	}
	return g, nil
}

// Make creates a game between two people through the game service, and
// lists it for nobody: a caller that must note the game somewhere before
// a player's list names it (a match, which may be given up) calls List
// after that; Create does both.
func (c *Creator) Make(ctx context.Context, s Spec) (store.Game, error) {
	resp, err := c.game.CreateGame(ctx, &gamev1.CreateGameRequest{
		RequestId: s.RequestID, Kind: s.Kind, TimeControl: store.ControlPB(s.Control),
		Rated: s.Rated, Public: s.Public,
		// A player matched with someone they did not want, or who pressed
		// play by mistake, leaves before the first moves without a loss.
		PlayersMayAbort: true,
		Seats: []*gamev1.Seat{
			{Side: commonv1.Side_SIDE_FIRST, PlayerId: s.First.ID, DisplayName: displayname.Fit(s.First.Name)},
			{Side: commonv1.Side_SIDE_SECOND, PlayerId: s.Second.ID, DisplayName: displayname.Fit(s.Second.Name)},
		},
	})
	if err != nil {
		return store.Game{}, GameError("create game", err)
	}
	g := store.Game{
		ID: resp.GetGameId(), Kind: s.Kind, Control: s.Control, Rated: s.Rated, Public: s.Public,
		First:  store.Player{ID: s.First.ID, Name: s.First.Name, NamedAt: s.First.NamedAt},
		Second: store.Player{ID: s.Second.ID, Name: s.Second.Name, NamedAt: s.Second.NamedAt},
	}
	for _, cr := range resp.GetCredentials() {
		grant := store.Grant{Side: SideName(cr.GetSide()), Token: cr.GetToken(), Expires: cr.GetExpiresAt().AsTime()}
		switch cr.GetSide() {
		case commonv1.Side_SIDE_FIRST:
			g.First.Seat = grant
		case commonv1.Side_SIDE_SECOND:
			g.Second.Seat = grant
		}
	}
	if g.First.Seat.Token == "" || g.Second.Seat.Token == "" {
		return store.Game{}, fmt.Errorf("create game %s: the game service returned no credential for a seat", g.ID)
	}
	return g, nil
}

// List lists a game made by Make for both of its players. It must come
// before anyone can learn of the game, so that no game a player was told
// of is missing from their list; a failure fails the creation, whose
// retry (the same request id, the same game) lists it.
func (c *Creator) List(ctx context.Context, g store.Game) error {
	now := c.now()
	for _, p := range []struct {
		me, opp store.Player
		side    commonv1.Side
	}{{g.First, g.Second, commonv1.Side_SIDE_FIRST}, {g.Second, g.First, commonv1.Side_SIDE_SECOND}} {
		if _, _, err := c.list(ctx, p.me.ID, store.Entry{
			Game: g.ID, Kind: g.Kind, Side: SideName(p.side), Opponent: p.opp.ID, OpponentName: p.opp.Name,
			Rated: g.Rated, Control: g.Control, Created: now,
		}); err != nil {
			return err
		}
	}
	return nil
}

// list adds a game to a player's list of games, kept as long as the
// game's record, and reports whether this call listed it and when it was
// first listed.
func (c *Creator) list(ctx context.Context, player string, e store.Entry) (bool, time.Time, error) {
	return c.store.AddPlayerGame(ctx, player, e, c.keep)
}

// clockSkew is the most by which the clocks of matchmaking's replicas and
// Redis' may differ.
const clockSkew = 5 * time.Second

// Keep is how long game records are kept.
func (c *Creator) Keep() time.Duration { return c.keep }

// Pending is the pending-rating record of a rated game; nil for a casual one.
func (c *Creator) Pending(g store.Game) *store.Pending {
	if !g.Rated {
		return nil
	}
	return &store.Pending{
		Game: g.ID, Kind: int32(g.Kind), First: g.First.ID, FName: g.First.Name,
		Second: g.Second.ID, SName: g.Second.Name, Token: g.First.Seat.Token,
		FNamedAt: unixMilli(g.First.NamedAt), SNamedAt: unixMilli(g.Second.NamedAt),
	}
}

// unixMilli is t in Unix ms, 0 for the zero time (unknown).
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// AISpec is a game against the AI.
type AISpec struct {
	RequestID string
	Kind      commonv1.GameKind
	Level     uint32
	Human     Human
	HumanSide commonv1.Side
	// Control is clock.Control{} for no clock.
	Control clock.Control
}

// AIGame is a game made against the AI.
type AIGame struct {
	ID string
	// Seat is the human's.
	Seat store.Grant
	// Created is when matchmaking first listed the game, by its own clock
	// (that of its tickets, not the game service's): for a retry of the
	// same request, when the first call listed it.
	Created time.Time
}

// CreateAI creates an unrated, private game against the AI.
func (c *Creator) CreateAI(ctx context.Context, s AISpec) (AIGame, error) {
	began := c.now()
	human := &gamev1.Seat{Side: s.HumanSide, PlayerId: s.Human.ID, DisplayName: displayname.Fit(s.Human.Name)}
	aiSide := commonv1.Side_SIDE_SECOND
	if s.HumanSide == commonv1.Side_SIDE_SECOND {
		aiSide = commonv1.Side_SIDE_FIRST
	}
	ai := &gamev1.Seat{Side: aiSide, PlayerId: AIPlayerID, DisplayName: AIName(s.Level), AiLevel: s.Level}
	resp, err := c.game.CreateGame(ctx, &gamev1.CreateGameRequest{
		RequestId: s.RequestID, Kind: s.Kind, TimeControl: store.ControlPB(s.Control), Seats: []*gamev1.Seat{human, ai},
		PlayersMayAbort: true,
	})
	if err != nil {
		return AIGame{}, GameError("create AI game", err)
	}
	var grant store.Grant
	for _, cr := range resp.GetCredentials() {
		if cr.GetSide() == s.HumanSide {
			grant = store.Grant{Side: SideName(s.HumanSide), Token: cr.GetToken(), Expires: cr.GetExpiresAt().AsTime()}
		}
	}
	if grant.Token == "" {
		return AIGame{}, fmt.Errorf("create AI game %s: no credential for the human's seat", resp.GetGameId())
	}
	// Listed before the human learns of the game, as Create does.
	added, listed, err := c.list(ctx, s.Human.ID, store.Entry{
		Game: resp.GetGameId(), Kind: s.Kind, Side: grant.Side, Opponent: AIPlayerID, OpponentName: AIName(s.Level),
		Control: s.Control, Created: c.now(),
	})
	if err != nil {
		return AIGame{}, err
	}
	if made := resp.GetGame().GetCreatedAt().AsTime(); added && made.Before(began.Add(-clockSkew)) {
		// Listed by this call, but made by an earlier one whose listing
		// was lost (a Redis failover): the game service's time is the
		// nearest to when it began.
		listed = made
	}
	return AIGame{ID: resp.GetGameId(), Seat: grant, Created: listed}, nil
}

// AIPlayerID is the player id of every seat the AI plays.
const AIPlayerID = "ai"

// AIName is the display name of the AI at a level.
func AIName(level uint32) string { return fmt.Sprintf("AI level %d", level) }

// SideName is the stored name of a side, as the rules name it.
func SideName(s commonv1.Side) string {
	if s == commonv1.Side_SIDE_SECOND {
		return rules.Second.String()
	}
	return rules.First.String()
}

// SidePB reads a stored side name; unspecified if it names no side.
func SidePB(s string) commonv1.Side {
	side, err := rules.ParseSide(s)
	if err != nil {
		return commonv1.Side_SIDE_UNSPECIFIED
	}
	return rulespb.Side(side)
}

// GameError turns a game service failure into a domain error: the
// transient ones become Unavailable (the caller may retry with the same
// request id), everything else stays internal and is logged at the edge.
func GameError(op string, err error) error {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted:
		return &apierr.Error{Code: apierr.Unavailable, Msg: "the game service is unavailable: retry the call as it was (with the same request_id, if it has one)", Err: fmt.Errorf("%s: %w", op, err)}
	case codes.Canceled:
		return fmt.Errorf("%s: %w", op, context.Canceled)
	}
	return fmt.Errorf("%s: %w", op, err)
}
