package game_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game/gametest"
)

// redisState is everything stored about a game, to prove a refused
// request changed nothing: its own keys, and its entries in the keys all
// games share (the deadline index, the AI's job queue).
func redisState(t *testing.T, env *gametest.Env, id string) string {
	t.Helper()
	ctx := context.Background()
	p := env.Config.KeyPrefix + "{g:" + id + "}"
	st := env.Redis.HGetAll(ctx, p).Val()
	n := env.Redis.XLen(ctx, p+":e").Val()
	moves := env.Redis.LRange(ctx, p+":m", 0, -1).Val()
	return fmt.Sprintf("%v|%d|%v|%s", st, n, moves, sharedState(t, env, id))
}

// sharedState is what the keys all games share hold of game id: the
// members of sorted sets and the entries of streams that name it.
func sharedState(t *testing.T, env *gametest.Env, id string) string {
	t.Helper()
	ctx := context.Background()
	keys, err := env.Redis.Keys(ctx, env.Config.KeyPrefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		if strings.Contains(k, "{g:") {
			continue
		}
		switch env.Redis.Type(ctx, k).Val() {
		case "zset":
			for _, m := range env.Redis.ZRange(ctx, k, 0, -1).Val() {
				if strings.Contains(m, id) {
					fmt.Fprintf(&b, "%s:%s ", k, m)
				}
			}
		case "stream":
			for _, e := range env.Redis.XRange(ctx, k, "-", "+").Val() {
				if strings.Contains(fmt.Sprint(e.Values), id) {
					fmt.Fprintf(&b, "%s:%s ", k, e.ID)
				}
			}
		}
	}
	return b.String()
}

func TestBadInputChangesNothing(t *testing.T) {
	env := gametest.Start(t, nil)
	x := xiangqi(t, env)
	x.move(t, "h3e3")
	janggi := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_JANGGI})
	// A Janggi game in check: Han's chariot gives check down the e-file.
	jCheck := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_JANGGI, Start: &commonv1.Position{Fen: "4k4/9/9/9/9/9/9/4r4/4K4/9 w - - 0 1"}})
	ended := xiangqi(t, env)
	if _, err := env.Client.Resign(ended.as(commonv1.Side_SIDE_FIRST), &gamev1.ResignRequest{GameId: ended.id, RequestId: rid()}); err != nil {
		t.Fatal(err)
	}
	other := xiangqi(t, env)
	// Abortable, but begun: both first moves made.
	begun := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, PlayersMayAbort: true})
	begun.move(t, "h3e3")
	begun.move(t, "h10g8")
	red, black := commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND
	abort := func(tb *table, side commonv1.Side) func() error {
		return func() error {
			_, err := env.Client.Abort(tb.as(side), &gamev1.AbortRequest{GameId: tb.id, RequestId: rid()})
			return err
		}
	}
	mv := func(tb *table, side commonv1.Side, m string, version uint64) func() error {
		return func() error {
			_, err := env.Client.MakeMove(tb.as(side), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), ExpectedVersion: version, Move: &commonv1.Move{Coordinate: m}})
			return err
		}
	}
	tests := []struct {
		name     string
		game     *table
		call     func() error
		wantCode codes.Code
		wantMsg  string
	}{
		{name: "unknown game", game: x, call: func() error {
			_, err := env.Client.GetGame(context.Background(), &gamev1.GetGameRequest{GameId: "nosuchgame"})
			return err
		}, wantCode: codes.NotFound, wantMsg: "not found"},
		{name: "illegal move names the move and why", game: x, call: mv(x, black, "a10a3", 0), wantCode: codes.InvalidArgument, wantMsg: "a10a3"},
		{name: "malformed move", game: x, call: mv(x, black, "z9z9", 0), wantCode: codes.InvalidArgument, wantMsg: "z9z9"},
		{name: "oversized move", game: x, call: mv(x, black, strings.Repeat("a", 5000), 0), wantCode: codes.InvalidArgument},
		{name: "out of turn", game: x, call: mv(x, red, "b3e3", 0), wantCode: codes.FailedPrecondition, wantMsg: "turn"},
		{name: "move during setup", game: janggi, call: mv(janggi, red, "a4a5", 0), wantCode: codes.FailedPrecondition, wantMsg: "formations"},
		{name: "move after the end", game: ended, call: mv(ended, black, "h10g8", 0), wantCode: codes.FailedPrecondition, wantMsg: "ended"},
		{name: "pass while in check", game: jCheck, call: func() error {
			_, err := env.Client.Pass(jCheck.as(red), &gamev1.PassRequest{GameId: jCheck.id, RequestId: rid()})
			return err
		}, wantCode: codes.FailedPrecondition, wantMsg: "check"},
		{name: "pass in xiangqi", game: x, call: func() error {
			_, err := env.Client.Pass(x.as(black), &gamev1.PassRequest{GameId: x.id, RequestId: rid()})
			return err
		}, wantCode: codes.FailedPrecondition, wantMsg: "Janggi"},
		{name: "undo outside an AI game", game: x, call: func() error {
			_, err := env.Client.Undo(x.as(red), &gamev1.UndoRequest{GameId: x.id, RequestId: rid()})
			return err
		}, wantCode: codes.FailedPrecondition, wantMsg: "AI"},
		{name: "abort of a game created without aborts", game: x, call: abort(x, black), wantCode: codes.FailedPrecondition, wantMsg: "without aborts by its players"},
		{name: "abort once both sides have moved", game: begun, call: abort(begun, black), wantCode: codes.FailedPrecondition, wantMsg: "the game has begun"},
		{name: "abort after the end", game: ended, call: abort(ended, black), wantCode: codes.FailedPrecondition, wantMsg: "ended"},
		{name: "abort without a credential", game: begun, call: func() error {
			_, err := env.Client.Abort(context.Background(), &gamev1.AbortRequest{GameId: begun.id, RequestId: rid()})
			return err
		}, wantCode: codes.Unauthenticated},
		{name: "abort with another game's seat", game: begun, call: func() error {
			_, err := env.Client.Abort(other.as(red), &gamev1.AbortRequest{GameId: begun.id, RequestId: rid()})
			return err
		}, wantCode: codes.PermissionDenied},
		{name: "draw offer in janggi", game: jCheck, call: func() error {
			_, err := env.Client.OfferDraw(jCheck.as(red), &gamev1.OfferDrawRequest{GameId: jCheck.id, RequestId: rid()})
			return err
		}, wantCode: codes.FailedPrecondition},
		{name: "stale version", game: x, call: mv(x, black, "h10g8", 1), wantCode: codes.Aborted, wantMsg: "version 3"},
		{name: "version ahead of the game", game: x, call: mv(x, black, "h10g8", 9), wantCode: codes.Aborted, wantMsg: "expected_version 9 is ahead of the game, which is at version 3"},
		{name: "answer a draw in janggi", game: jCheck, call: func() error {
			_, err := env.Client.AnswerDraw(jCheck.as(red), &gamev1.AnswerDrawRequest{GameId: jCheck.id, RequestId: rid()})
			return err
		}, wantCode: codes.FailedPrecondition, wantMsg: "Xiangqi rule"},
		{name: "no credential", game: x, call: func() error {
			_, err := env.Client.MakeMove(context.Background(), &gamev1.MakeMoveRequest{GameId: x.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h10g8"}})
			return err
		}, wantCode: codes.Unauthenticated},
		{name: "forged credential", game: x, call: func() error {
			_, err := env.Client.MakeMove(gametest.As(context.Background(), x.seats[black]+"x"), &gamev1.MakeMoveRequest{GameId: x.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h10g8"}})
			return err
		}, wantCode: codes.Unauthenticated},
		{name: "another game's seat", game: x, call: func() error {
			_, err := env.Client.MakeMove(other.as(black), &gamev1.MakeMoveRequest{GameId: x.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h10g8"}})
			return err
		}, wantCode: codes.PermissionDenied},
		{name: "forged credential reading an unknown game", game: x, call: func() error {
			// Refused before Redis is asked, so it cannot tell a private
			// game that exists from one that does not.
			_, err := env.Client.GetGame(gametest.As(context.Background(), x.seats[black]+"x"), &gamev1.GetGameRequest{GameId: "nosuchgame"})
			return err
		}, wantCode: codes.Unauthenticated},
		{name: "forged credential streaming a public game", game: x, call: func() error {
			st, err := env.Client.StreamEvents(gametest.As(context.Background(), x.seats[black]+"x"), &gamev1.StreamEventsRequest{GameId: x.id})
			if err != nil {
				return err
			}
			_, err = st.Recv()
			return err
		}, wantCode: codes.Unauthenticated},
		{name: "private game without a seat", game: janggi, call: func() error {
			_, err := env.Client.GetGame(context.Background(), &gamev1.GetGameRequest{GameId: janggi.id})
			return err
		}, wantCode: codes.PermissionDenied},
		{name: "missing request id", game: x, call: func() error {
			_, err := env.Client.MakeMove(x.as(black), &gamev1.MakeMoveRequest{GameId: x.id, Move: &commonv1.Move{Coordinate: "h10g8"}})
			return err
		}, wantCode: codes.InvalidArgument, wantMsg: "request_id"},
		{name: "game id with a brace", game: x, call: func() error {
			_, err := env.Client.GetGame(context.Background(), &gamev1.GetGameRequest{GameId: "a}b"})
			return err
		}, wantCode: codes.InvalidArgument},
		{name: "request id with an invisible character", game: x, call: func() error {
			_, err := env.Client.MakeMove(x.as(black), &gamev1.MakeMoveRequest{GameId: x.id, RequestId: "a\u202eb", Move: &commonv1.Move{Coordinate: "h10g8"}})
			return err
		}, wantCode: codes.InvalidArgument, wantMsg: `request_id: contains '\u202e' (U+202E) at byte 1`},
		{name: "request id with a no-break space", game: x, call: func() error {
			_, err := env.Client.MakeMove(x.as(black), &gamev1.MakeMoveRequest{GameId: x.id, RequestId: "a\u00a0b", Move: &commonv1.Move{Coordinate: "h10g8"}})
			return err
		}, wantCode: codes.InvalidArgument, wantMsg: `request_id: contains '\u00a0' (U+00A0)`},
		{name: "oversized request", game: x, call: func() error {
			_, err := env.Client.MakeMove(x.as(black), &gamev1.MakeMoveRequest{GameId: x.id, RequestId: strings.Repeat("r", 2<<20), Move: &commonv1.Move{Coordinate: "h10g8"}})
			return err
		}, wantCode: codes.ResourceExhausted},
		{name: "bad create: one seat, bad fen", game: x, call: func() error {
			_, err := env.Client.CreateGame(context.Background(), &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats()[:1], Start: &commonv1.Position{Fen: "xx"}})
			return err
		}, wantCode: codes.InvalidArgument, wantMsg: "seats"},
		{name: "bad create: a time control that sets nothing", game: x, call: func() error {
			_, err := env.Client.CreateGame(context.Background(), &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(), TimeControl: &commonv1.TimeControl{}})
			return err
		}, wantCode: codes.InvalidArgument, wantMsg: "time_control: set byo_yomi or fischer"},
		{name: "bad create: a time control wrong twice, on one line", game: x, call: func() error {
			_, err := env.Client.CreateGame(context.Background(), &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(),
				TimeControl: &commonv1.TimeControl{Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{Periods: 1000}}}})
			if strings.Contains(status.Convert(err).Message(), "\n") {
				return fmt.Errorf("a message of more than one line: %w", err)
			}
			return err
		}, wantCode: codes.InvalidArgument, wantMsg: "; "},
		{name: "bad create: a seat's name over 24 characters, a player id over 128", game: x, call: func() error {
			long := seats()
			// 24 Hangul (72 bytes) are a name the service takes.
			long[0].DisplayName, long[0].PlayerId = strings.Repeat("장", 24), strings.Repeat("p", 129)
			long[1].DisplayName = strings.Repeat("장", 25)
			_, err := env.Client.CreateGame(context.Background(), &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: long})
			if msg := status.Convert(err).Message(); strings.Contains(msg, "seats[0].display_name") || !strings.Contains(msg, "seats[0].player_id: longer than 128 bytes") {
				return fmt.Errorf("refusal %q: want seat 0's id named, not its name", msg)
			}
			return err
		}, wantCode: codes.InvalidArgument, wantMsg: "seats[1].display_name: 25 characters, at most 24 allowed"},
		{name: "formation unset (a misspelt name in JSON)", game: janggi, call: func() error {
			_, err := env.Client.ChooseFormation(janggi.as(black), &gamev1.ChooseFormationRequest{GameId: janggi.id, RequestId: rid()})
			return err
		}, wantCode: codes.InvalidArgument, wantMsg: "formation: required, one of FORMATION_MA_SANG_SANG_MA"},
		{name: "formation unknown (a number no release names)", game: janggi, call: func() error {
			_, err := env.Client.ChooseFormation(janggi.as(black), &gamev1.ChooseFormationRequest{GameId: janggi.id, RequestId: rid(), Formation: 9})
			return err
		}, wantCode: codes.InvalidArgument, wantMsg: "formation: 9 is not a formation: want one of FORMATION_MA_SANG_SANG_MA"},
		{name: "bad create: a seat's side unset (a misspelt name in JSON)", game: x, call: func() error {
			unset := seats()
			unset[0].Side = commonv1.Side_SIDE_UNSPECIFIED
			_, err := env.Client.CreateGame(context.Background(), &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: unset})
			return err
		}, wantCode: codes.InvalidArgument, wantMsg: "seats[0].side: required, SIDE_FIRST or SIDE_SECOND (in JSON, any other name is dropped and arrives unset)"},
		{name: "bad create: a private game between two AI seats", game: x, call: func() error {
			_, err := env.Client.CreateGame(context.Background(), &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(1, 1)})
			return err
		}, wantCode: codes.InvalidArgument, wantMsg: "a game between two AI seats must be public"},
		{name: "bad create: a seat's name on two lines", game: x, call: func() error {
			two := seats()
			two[1].DisplayName = "Kim\nLee"
			_, err := env.Client.CreateGame(context.Background(), &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: two})
			return err
		}, wantCode: codes.InvalidArgument, wantMsg: "seats[1].display_name: contains an unprintable character U+000A"},
		{name: "bad create: setup and first-move times out of range", game: x, call: func() error {
			_, err := env.Client.CreateGame(context.Background(), &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_JANGGI, Seats: seats(),
				SetupTime: durationpb.New(500 * time.Millisecond), FirstMoveTime: durationpb.New(25 * time.Hour)})
			if msg := status.Convert(err).Message(); !strings.Contains(msg, "setup_time: 500ms is out of range 1s..1h0m0s") {
				return fmt.Errorf("refusal %q: want setup_time named with its range", msg)
			}
			return err
		}, wantCode: codes.InvalidArgument, wantMsg: "first_move_time: 25h0m0s is out of range 1s..24h0m0s"},
		{name: "bad create: a setup time beyond any duration", game: x, call: func() error {
			_, err := env.Client.CreateGame(context.Background(), &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_JANGGI, Seats: seats(),
				SetupTime: &durationpb.Duration{Seconds: 300e9}, FirstMoveTime: &durationpb.Duration{Seconds: -300e9}})
			if msg := status.Convert(err).Message(); !strings.Contains(msg, "first_move_time: under -292 years is out of range") {
				return fmt.Errorf("refusal %q: want the first-move time said to be beyond range", msg)
			}
			return err
		}, wantCode: codes.InvalidArgument, wantMsg: "setup_time: over 292 years is out of range"},
		{name: "bad create: no kind", game: x, call: func() error {
			_, err := env.Client.CreateGame(context.Background(), &gamev1.CreateGameRequest{RequestId: rid(), Seats: seats()})
			return err
		}, wantCode: codes.InvalidArgument, wantMsg: "kind"},
		{name: "stream ahead of the game", game: x, call: func() error {
			st, err := env.Client.StreamEvents(context.Background(), &gamev1.StreamEventsRequest{GameId: x.id, AfterVersion: 99})
			if err != nil {
				return err
			}
			_, err = st.Recv()
			return err
		}, wantCode: codes.OutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := redisState(t, env, tt.game.id)
			err := tt.call()
			if status.Code(err) != tt.wantCode || !strings.Contains(status.Convert(err).Message(), tt.wantMsg) {
				t.Fatalf("got %v, want %v containing %q", err, tt.wantCode, tt.wantMsg)
			}
			if after := redisState(t, env, tt.game.id); after != before {
				t.Fatalf("refused request changed Redis:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestMalformedRequestsNeverReachRedis: a request whose fields are
// malformed is refused from what it says alone, so it is answered at once
// while Redis answers nothing.
func TestMalformedRequestsNeverReachRedis(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	env := gametest.StartOn(t, proxy.Addr(), nil)
	x := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats()})
	red := x.as(commonv1.Side_SIDE_FIRST)
	tests := []struct {
		name    string
		call    func(ctx context.Context) error
		wantMsg string
	}{
		{name: "create from a FEN that does not parse", call: func(ctx context.Context) error {
			_, err := env.Client.CreateGame(ctx, &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(), Start: &commonv1.Position{Fen: "xx"}})
			return err
		}, wantMsg: "start: bad FEN"},
		{name: "create from a position the rules refuse", call: func(ctx context.Context) error {
			// The Red general outside its palace.
			_, err := env.Client.CreateGame(ctx, &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(), Start: &commonv1.Position{Fen: "4k4/9/9/9/9/9/9/9/9/K8 w - - 0 1"}})
			return err
		}, wantMsg: "start: "},
		{name: "create from a position already over", call: func(ctx context.Context) error {
			_, err := env.Client.CreateGame(ctx, &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(), Start: &commonv1.Position{Fen: "3k5/4R4/4R4/9/9/9/9/9/9/4K4 b - - 0 1"}})
			return err
		}, wantMsg: "start: the game would be over before it starts"},
		{name: "a move that is not coordinates", call: func(ctx context.Context) error {
			_, err := env.Client.MakeMove(red, &gamev1.MakeMoveRequest{GameId: x.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "z9z9"}})
			return err
		}, wantMsg: "z9z9"},
		{name: "a move without a request id", call: func(ctx context.Context) error {
			_, err := env.Client.MakeMove(red, &gamev1.MakeMoveRequest{GameId: x.id, Move: &commonv1.Move{Coordinate: "h3e3"}})
			return err
		}, wantMsg: "request_id"},
		{name: "a read of a game id with a brace", call: func(ctx context.Context) error {
			_, err := env.Client.GetGame(ctx, &gamev1.GetGameRequest{GameId: "a}b"})
			return err
		}, wantMsg: "game_id"},
		{name: "a resume after the commit of no event", call: func(ctx context.Context) error {
			return streamFirst(ctx, env, &gamev1.StreamEventsRequest{GameId: x.id, AfterCommit: "abc"})
		}, wantMsg: "after_commit names the commit of the event at after_version, and after_version is 0"},
		{name: "a resume after an oversized commit", call: func(ctx context.Context) error {
			return streamFirst(ctx, env, &gamev1.StreamEventsRequest{GameId: x.id, AfterVersion: 1, AfterCommit: strings.Repeat("a", 33)})
		}, wantMsg: "after_commit: longer than 32 bytes"},
		{name: "a resume after a commit with a control character", call: func(ctx context.Context) error {
			return streamFirst(ctx, env, &gamev1.StreamEventsRequest{GameId: x.id, AfterVersion: 1, AfterCommit: "ab\x00"})
		}, wantMsg: "after_commit: contains"},
	}
	proxy.Hold()
	defer proxy.Restore()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			err := tt.call(ctx)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tt.wantMsg) {
				t.Fatalf("with Redis held: got %v, want InvalidArgument containing %q", err, tt.wantMsg)
			}
		})
	}
}

// TestASeatsNameIsStoredAsChecked: the name is checked without the spaces
// around it, and stored so: a newline or a run of spaces after it would
// reach every app.
func TestASeatsNameIsStoredAsChecked(t *testing.T) {
	env := gametest.Start(t, nil)
	padded := seats()
	padded[0].DisplayName = " Kim\n" + strings.Repeat(" ", 200)
	r, err := env.Client.CreateGame(context.Background(), &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: padded})
	if err != nil {
		t.Fatal(err)
	}
	if name := r.GetGame().GetSeats()[0].GetDisplayName(); name != "Kim" {
		t.Fatalf("stored %q, want %q", name, "Kim")
	}
}

// streamFirst opens a stream and reads its first message: a refusal
// arrives with it.
func streamFirst(ctx context.Context, env *gametest.Env, req *gamev1.StreamEventsRequest) error {
	st, err := env.Client.StreamEvents(ctx, req)
	if err != nil {
		return err
	}
	_, err = st.Recv()
	return err
}

// TestUnreachableStartsAreRefused: a custom start whose
// pieces stand where no game of the rules (../shared/RULES.md) can ever
// put them is refused with InvalidArgument naming start, and writes
// nothing, as a guard outside its palace or an elephant across the river
// is. Each position below is otherwise ordinary: generals in their
// palaces, not facing, nobody in check, material on the board.
func TestUnreachableStartsAreRefused(t *testing.T) {
	env := gametest.Start(t, nil)
	ctx := context.Background()
	X, J := commonv1.GameKind_GAME_KIND_XIANGQI, commonv1.GameKind_GAME_KIND_JANGGI
	keys := func() int { return len(env.Redis.Keys(ctx, env.Config.KeyPrefix+"*").Val()) }
	before := keys()
	for _, c := range []struct {
		name string
		kind commonv1.GameKind
		fen  string
	}{
		// An advisor moves only along the palace diagonals: d1 f1 e2 d3 f3.
		{"xiangqi advisor on e3, off the palace diagonals", X, "3k5/9/9/9/9/9/9/4A4/9/R3K4 w - - 0 1"},
		// An elephant reaches only a3 c1 c5 e3 g1 g5 i3; from d2 it then
		// plays d2b4 and d2f4, moves no game has.
		{"xiangqi elephant on d2, no elephant point", X, "3k5/9/9/9/9/9/9/9/3B5/R3K4 w - - 0 1"},
		// A soldier never moves backward: Red's start on rank 4.
		{"xiangqi red soldier on a3, behind its start", X, "3k5/9/9/9/9/9/9/P8/9/R3K4 w - - 0 1"},
		// Before the river a soldier only moves forward: files a c e g i.
		{"xiangqi red soldier on b4, off its files before the river", X, "3k5/9/9/9/9/9/1P7/9/9/R3K4 w - - 0 1"},
		{"xiangqi black soldier on c8, behind its start", X, "3k5/9/2p6/9/9/9/9/9/9/R3K4 w - - 0 1"},
		// Janggi soldiers move forward or sideways, never backward: Cho's
		// start on rank 4, Han's on rank 7.
		{"janggi cho soldier on a3, behind its start", J, "3k5/9/9/9/9/9/9/P8/4K4/9 w - - 0 1"},
		{"janggi han soldier on i9, behind its start", J, "3k5/8p/9/9/9/9/9/9/4K4/9 w - - 0 1"},
	} {
		_, err := env.Client.CreateGame(ctx, &gamev1.CreateGameRequest{RequestId: rid(), Kind: c.kind, Seats: seats(), Start: &commonv1.Position{Fen: c.fen}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "start") {
			t.Errorf("%s (%s): CreateGame = %v, want InvalidArgument naming start", c.name, c.fen, err)
		}
	}
	if n := keys(); n != before {
		t.Errorf("the unreachable starts wrote %d keys to Redis", n-before)
	}
}

// TestEverySeatFieldIsNamed: CreateGame collects its refusals
// to report them all at once (as it does across fields: kind, seats,
// time_control, start...), so that a tournament system fixing its
// request learns every bad field in one round trip. A seat whose
// display name is refused must still have its ai_level and player_id
// judged and named.
func TestEverySeatFieldIsNamed(t *testing.T) {
	env := gametest.Start(t, nil)
	s := seats()
	s[0].DisplayName, s[0].AiLevel = "tab\there", 11
	s[1].DisplayName, s[1].PlayerId = strings.Repeat("y", 30), strings.Repeat("x", 200)
	_, err := env.Client.CreateGame(context.Background(), &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: s})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("CreateGame = %v, want InvalidArgument", err)
	}
	for _, field := range []string{"seats[0].display_name", "seats[0].ai_level", "seats[1].display_name", "seats[1].player_id"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("the refusal does not name %s: %v", field, err)
		}
	}
}
