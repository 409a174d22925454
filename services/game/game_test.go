package game_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/auth"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
)

var reqSeq atomic.Int64

func rid() string { return fmt.Sprintf("r%d-%d", time.Now().UnixNano(), reqSeq.Add(1)) }

type table struct {
	env   *gametest.Env
	id    string
	seats map[commonv1.Side]string
}

func (tb *table) as(side commonv1.Side) context.Context {
	return gametest.As(context.Background(), tb.seats[side])
}

func seats(ai ...uint32) []*gamev1.Seat {
	s := []*gamev1.Seat{
		{Side: commonv1.Side_SIDE_FIRST, PlayerId: "p1", DisplayName: "One"},
		{Side: commonv1.Side_SIDE_SECOND, PlayerId: "p2", DisplayName: "Two"},
	}
	for i, lvl := range ai {
		s[i].AiLevel = lvl
	}
	return s
}

func create(t testing.TB, env *gametest.Env, req *gamev1.CreateGameRequest) *table {
	t.Helper()
	if req.RequestId == "" {
		req.RequestId = rid()
	}
	if req.Seats == nil {
		req.Seats = seats()
	}
	// With --redis-wait-replicas a slow replica answers Unavailable: retry
	// with the same request id, as the API asks of every client.
	var resp *gamev1.CreateGameResponse
	retrying(t, "CreateGame", func() (err error) {
		resp, err = env.Client.CreateGame(context.Background(), req)
		return err
	})
	tb := &table{env: env, id: resp.GetGameId(), seats: map[commonv1.Side]string{}}
	for _, c := range resp.GetCredentials() {
		tb.seats[c.GetSide()] = c.GetToken()
	}
	// An AI seat gets no credential from CreateGame: the test signs one to
	// play it, as the service does for the AI's worker.
	for _, s := range req.GetSeats() {
		if s.GetAiLevel() > 0 {
			tb.seats[s.GetSide()] = env.SeatCredential(t, tb.id, s.GetPlayerId(), s.GetSide())
		}
	}
	return tb
}

func xiangqi(t *testing.T, env *gametest.Env) *table {
	return create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true})
}

func (tb *table) get(t testing.TB) *gamev1.Game {
	t.Helper()
	g, err := tb.env.Client.GetGame(tb.as(commonv1.Side_SIDE_FIRST), &gamev1.GetGameRequest{GameId: tb.id})
	if err != nil {
		t.Fatalf("GetGame: %v", err)
	}
	return g.GetGame()
}

func (tb *table) move(t *testing.T, mv string) *gamev1.MakeMoveResponse {
	t.Helper()
	side := tb.get(t).GetTurn()
	req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: mv}}
	var resp *gamev1.MakeMoveResponse
	retrying(t, "move "+mv, func() (err error) {
		resp, err = tb.env.Client.MakeMove(tb.as(side), req)
		return err
	})
	return resp
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want %v", err, code)
	}
}

func TestCreateMoveAndRead(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := xiangqi(t, env)
	g := tb.get(t)
	if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING || len(g.GetLegalMoves()) != 44 || g.GetVersion() != 2 {
		t.Fatalf("new game: status %v, %d legal moves, version %d", g.GetStatus(), len(g.GetLegalMoves()), g.GetVersion())
	}
	resp := tb.move(t, "h3e3")
	if resp.GetMove().GetNotation() != "C2.5" || resp.GetGame().GetTurn() != commonv1.Side_SIDE_SECOND || resp.GetGame().GetVersion() != 3 {
		t.Fatalf("after h3e3: notation %q turn %v version %d", resp.GetMove().GetNotation(), resp.GetGame().GetTurn(), resp.GetGame().GetVersion())
	}
	if got := tb.get(t).GetPosition().GetFen(); got != "rnbakabnr/9/1c5c1/p1p1p1p1p/9/9/P1P1P1P1P/1C2C4/9/RNBAKABNR b - - 1 1" {
		t.Fatalf("position %q", got)
	}
}

// TestRacingMovesApplyOnce sends the same move twice at once, with
// different request ids, many times: exactly one must be applied each time.
// onEachWritePath runs test against a service committing through the plain
// Redis client (the default) and one batching its commits
// (--redis-autopipeline).
func onEachWritePath(t *testing.T, test func(t *testing.T, env *gametest.Env)) {
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("autopipeline=%v", batched), func(t *testing.T) {
			test(t, gametest.Start(t, func(c *game.Config) { c.AutoPipeline, c.SigningKeys = batched, keyOne }))
		})
	}
}

func TestRacingMovesApplyOnce(t *testing.T) { onEachWritePath(t, racingMovesApplyOnce) }

func racingMovesApplyOnce(t *testing.T, env *gametest.Env) {
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tb := xiangqi(t, env)
	g := tb.get(t)
	for r := range rounds {
		if g.GetStatus() != commonv1.GameStatus_GAME_STATUS_ONGOING {
			tb = xiangqi(t, env)
			g = tb.get(t)
		}
		mv := g.GetLegalMoves()[rng.IntN(len(g.GetLegalMoves()))].GetCoordinate()
		ctx := tb.as(g.GetTurn())
		var wg sync.WaitGroup
		var ok atomic.Int32
		errs := make([]error, 2)
		for i := range 2 {
			wg.Go(func() {
				_, err := env.Client.MakeMove(ctx, &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: mv}})
				if err == nil {
					ok.Add(1)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		if ok.Load() != 1 {
			t.Fatalf("round %d: %d of 2 racing moves applied (errors %v)", r, ok.Load(), errs)
		}
		for _, err := range errs {
			if err != nil && status.Code(err) != codes.FailedPrecondition {
				t.Fatalf("round %d: loser got %v, want FailedPrecondition", r, err)
			}
		}
		next := tb.get(t)
		if len(next.GetMoves()) != len(g.GetMoves())+1 {
			t.Fatalf("round %d: %d moves after one race, had %d", r, len(next.GetMoves()), len(g.GetMoves()))
		}
		g = next
	}
}

// TestARequestIDUsedAgainWritesNothingAhead: a request id used again for
// another command, once the game has moved on, is refused before the
// command writes anything. A timed game's new deadline and the AI's job
// are written ahead of the commit, which alone would find the id used:
// twenty such refusals must not leave twenty deadlines to sweep, or
// twenty jobs that hold the AI's workers up.
func TestARequestIDUsedAgainWritesNothingAhead(t *testing.T) {
	env := gametest.Start(t, nil)
	red := commonv1.Side_SIDE_FIRST
	fischer := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(10 * time.Minute), Increment: durationpb.New(5 * time.Second)}}}
	for _, tc := range []struct {
		name string
		req  *gamev1.CreateGameRequest
	}{
		{"a timed game", &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer}},
		{"a game against the AI", &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(0, 3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := create(t, env, tc.req)
			id := rid()
			first := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: id, Move: &commonv1.Move{Coordinate: "h3e3"}}
			if _, err := env.Client.MakeMove(tb.as(red), first); err != nil {
				t.Fatal(err)
			}
			// Black's reply (the AI's, played with its seat's credential):
			// the process holds the game, and no longer the first answer.
			tb.move(t, "h10g8")
			before := redisState(t, env, tb.id)
			again := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: id, Move: &commonv1.Move{Coordinate: "c4c5"}}
			for range 20 {
				if _, err := env.Client.MakeMove(tb.as(red), again); status.Code(err) != codes.InvalidArgument {
					t.Fatalf("Red's other move with the first move's request_id: %v, want InvalidArgument", err)
				}
			}
			if after := redisState(t, env, tb.id); after != before {
				t.Fatalf("the refused moves changed Redis:\nbefore %s\nafter  %s", before, after)
			}
			if _, err := env.Client.MakeMove(tb.as(red), first); err != nil {
				t.Fatalf("the retry of the first move: %v", err)
			}
			tb.move(t, "c4c5")
		})
	}
}

// TestARefusedRequestIsJudgedAnew: a refusal changes nothing and is not
// remembered, so the same command sent again with its request id is
// judged on the game as it is then (as the API documents): Black's move
// refused as out of turn is made once it is Black's turn, and its retry
// then gets that answer.
func TestARefusedRequestIsJudgedAnew(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := xiangqi(t, env)
	black := commonv1.Side_SIDE_SECOND
	req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h10g8"}}
	before := redisState(t, env, tb.id)
	if _, err := env.Client.MakeMove(tb.as(black), req); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Black's move on Red's turn: %v, want FailedPrecondition", err)
	}
	if after := redisState(t, env, tb.id); after != before {
		t.Fatalf("the refusal changed Redis:\nbefore %s\nafter  %s", before, after)
	}
	tb.move(t, "h3e3")
	first, err := env.Client.MakeMove(tb.as(black), req)
	if err != nil {
		t.Fatalf("the same request on Black's turn: %v", err)
	}
	again, err := env.Client.MakeMove(tb.as(black), req)
	if err != nil || !proto.Equal(again, first) || first.GetMove().GetMove().GetCoordinate() != "h10g8" {
		t.Fatalf("its retry: %v (%v), want the same answer, Black's h10g8, as %v", again, err, first)
	}
}

// TestRequestIDOfAnotherCommandIsRefused: a request id already answered
// and used again by the same seat for another command is refused with
// InvalidArgument and changes nothing, whether the answer is found in the
// process' cache, by the commit script, or by a process that never saw the
// game; the first command's retry still gets its answer.
func TestRequestIDOfAnotherCommandIsRefused(t *testing.T) {
	onEachWritePath(t, requestIDOfAnotherCommandIsRefused)
}

func requestIDOfAnotherCommandIsRefused(t *testing.T, env *gametest.Env) {
	tb := xiangqi(t, env)
	red := commonv1.Side_SIDE_FIRST
	id := rid()
	move := func(side commonv1.Side, mv string) func() error {
		return func() error {
			_, err := tb.env.Client.MakeMove(tb.as(side), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: id, Move: &commonv1.Move{Coordinate: mv}})
			return err
		}
	}
	first := move(red, "h3e3")
	if err := first(); err != nil {
		t.Fatal(err)
	}
	others := []struct {
		name string
		call func() error
	}{
		{"the same seat's other move", move(red, "b3e3")},
		{"the same seat's resignation", func() error {
			_, err := tb.env.Client.Resign(tb.as(red), &gamev1.ResignRequest{GameId: tb.id, RequestId: id})
			return err
		}},
		{"the same seat's draw offer", func() error {
			_, err := tb.env.Client.OfferDraw(tb.as(red), &gamev1.OfferDrawRequest{GameId: tb.id, RequestId: id})
			return err
		}},
	}
	refused := func(where string) {
		t.Helper()
		for _, o := range others {
			before := redisState(t, env, tb.id)
			err := o.call()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "the first seat's move h3e3") {
				t.Fatalf("%s, %s with the request_id of the first seat's move: %v; want InvalidArgument naming that move", where, o.name, err)
			}
			if after := redisState(t, env, tb.id); after != before {
				t.Fatalf("%s, the refused %s changed Redis:\nbefore %s\nafter  %s", where, o.name, before, after)
			}
		}
		if err := first(); err != nil {
			t.Fatalf("%s, the retry of the first move: %v", where, err)
		}
	}
	refused("right after it") // the answer is this process' last
	tb.move(t, "h10g8")
	refused("after another command") // found by the commit script
	other := gametest.Start(t, func(c *game.Config) {
		c.KeyPrefix, c.SigningKeys, c.AutoPipeline = env.Config.KeyPrefix, env.Config.SigningKeys, env.Config.AutoPipeline
	})
	tb.env = other
	refused("on another process") // found by its first read
	if n := len(tb.get(t).GetMoves()); n != 2 {
		t.Fatalf("%d moves, want 2", n)
	}
}

// TestEachSeatsRequestIDsAreItsOwn: the two players' apps may use the same
// request ids (counters, say): the other seat's use of one refuses nothing,
// and each seat's retry gets its own first answer, whether the other
// seat's answer is found in the process' cache, by the commit script, or
// by a process that never saw the game.
func TestEachSeatsRequestIDsAreItsOwn(t *testing.T) { onEachWritePath(t, eachSeatsRequestIDsAreItsOwn) }

func eachSeatsRequestIDsAreItsOwn(t *testing.T, env *gametest.Env) {
	// The creator's request id is no seat's either: a tournament system
	// that counts its requests from 1 takes no id from the players.
	x := rid()
	tb := create(t, env, &gamev1.CreateGameRequest{RequestId: x, Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Public: true})
	red, black := commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND
	y, w := rid(), rid()
	type sent struct {
		side commonv1.Side
		req  *gamev1.MakeMoveRequest
		resp *gamev1.MakeMoveResponse
	}
	var moves []sent
	move := func(where string, side commonv1.Side, id, mv string) {
		t.Helper()
		req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: id, Move: &commonv1.Move{Coordinate: mv}}
		resp, err := tb.env.Client.MakeMove(tb.as(side), req)
		if err != nil {
			t.Fatalf("%s, %s with a request id the other seat used: %v", where, mv, err)
		}
		moves = append(moves, sent{side, req, resp})
	}
	move("first", red, x, "h3e3")
	move("right after it", black, x, "h10g8") // found in the cache
	move("on", red, y, "h1g3")
	if _, err := tb.env.Client.OfferDraw(tb.as(black), &gamev1.OfferDrawRequest{GameId: tb.id, RequestId: w}); err != nil {
		t.Fatal(err)
	}
	move("after another command", black, y, "b10c8") // found by the commit script
	tb.env = gametest.Start(t, func(c *game.Config) {
		c.KeyPrefix, c.SigningKeys, c.AutoPipeline = env.Config.KeyPrefix, env.Config.SigningKeys, env.Config.AutoPipeline
	})
	move("on another process", red, w, "b1c3") // found by its first read
	before := redisState(t, env, tb.id)
	for _, m := range moves {
		again, err := tb.env.Client.MakeMove(tb.as(m.side), m.req)
		if err != nil || !proto.Equal(again, m.resp) {
			t.Fatalf("the retry of %v's %s: %v, %v; want its first answer %v", m.side, m.req.GetMove().GetCoordinate(), again, err, m.resp)
		}
	}
	if after := redisState(t, env, tb.id); after != before {
		t.Fatalf("the retries changed Redis:\nbefore %s\nafter  %s", before, after)
	}
	if n := len(tb.get(t).GetMoves()); n != len(moves) {
		t.Fatalf("%d moves, want %d", n, len(moves))
	}
}

func TestRetriedRequestAnswersIdentically(t *testing.T) {
	onEachWritePath(t, retriedRequestAnswersIdentically)
}

func retriedRequestAnswersIdentically(t *testing.T, env *gametest.Env) {
	tb := xiangqi(t, env)
	req := &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "b3e3"}}
	first, err := env.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), req)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, err := env.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), req)
		if err != nil {
			t.Fatalf("retry: %v", err)
		}
		if !proto.Equal(first, again) {
			t.Fatal("a retry answered differently")
		}
	}
	if n := len(tb.get(t).GetMoves()); n != 1 {
		t.Fatalf("%d moves after one move retried 3 times", n)
	}
	// The answer is kept without its legal moves, which a retry computes
	// from the answer's own position, not from the game's current one.
	stored, err := env.Redis.HGet(context.Background(), env.Config.KeyPrefix+"{g:"+tb.id+"}", "r:"+req.GetRequestId()).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	// It is kept behind the label of the command it answered.
	label, stored, ok := bytes.Cut(stored[1:], []byte{0})
	if !ok || string(label) != "the first seat's move b3e3" {
		t.Fatalf("kept answer labelled %q (%v)", label, ok)
	}
	var kept gamev1.MakeMoveResponse
	if err := proto.Unmarshal(stored, &kept); err != nil {
		t.Fatal(err)
	}
	if len(kept.GetGame().GetLegalMoves()) != 0 || len(first.GetGame().GetLegalMoves()) == 0 || kept.GetGame().GetPosition().GetFen() != first.GetGame().GetPosition().GetFen() {
		t.Fatalf("kept answer has %d legal moves (answer %d) at %q", len(kept.GetGame().GetLegalMoves()), len(first.GetGame().GetLegalMoves()), kept.GetGame().GetPosition().GetFen())
	}
	tb.move(t, "h10g8")
	again, err := env.Client.MakeMove(tb.as(commonv1.Side_SIDE_FIRST), req)
	if err != nil {
		t.Fatalf("retry after the next move: %v", err)
	}
	if !proto.Equal(first, again) {
		t.Fatal("a retry after the next move answered differently")
	}
	// The same request_id on CreateGame returns the same game.
	creq := &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats()}
	a, err := env.Client.CreateGame(context.Background(), creq)
	if err != nil {
		t.Fatal(err)
	}
	b, err := env.Client.CreateGame(context.Background(), creq)
	if err != nil || !proto.Equal(a, b) {
		t.Fatalf("retried CreateGame: %v, equal=%v", err, proto.Equal(a, b))
	}
}

// Signing keys for tests that run several processes of one deployment.
const (
	keyOne = "k1:0101010101010101010101010101010101010101010101010101010101010101"
	keyTwo = "k2:0202020202020202020202020202020202020202020202020202020202020202"
)

// Rotating the signing key keeps everyone seated: a process started with
// a new first key and the old one after it accepts the old credentials
// and signs new ones with the new key; once the old key is dropped, its
// credentials are refused.
func TestSigningKeyRotationKeepsSeats(t *testing.T) {
	const k1, k2 = keyOne, keyTwo
	before := gametest.Start(t, func(c *game.Config) { c.SigningKeys = k1 })
	tb := xiangqi(t, before)
	rotated := gametest.Start(t, func(c *game.Config) { c.SigningKeys = k2 + "," + k1; c.KeyPrefix = before.Config.KeyPrefix })
	tb.env = rotated
	tb.move(t, "h3e3")
	fresh := xiangqi(t, rotated)
	if !strings.HasPrefix(fresh.seats[commonv1.Side_SIDE_FIRST], "k2.") {
		t.Fatalf("new credential %q is not signed with the new key k2", fresh.seats[commonv1.Side_SIDE_FIRST])
	}
	dropped := gametest.Start(t, func(c *game.Config) { c.SigningKeys = k2; c.KeyPrefix = before.Config.KeyPrefix })
	_, err := dropped.Client.MakeMove(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h10g8"}})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("credential of a dropped key: %v, want Unauthenticated", err)
	}
	fresh.env = dropped
	fresh.move(t, "h3e3")
}

// TestARetriedCreationGetsLiveCredentials: a creation sent again gets
// its first answer while the credentials in it are good for most of
// their life; once their key is dropped, or they near their end, it gets
// new ones for the same seats, so that a caller keeping what a retry
// returns keeps credentials that work.
func TestARetriedCreationGetsLiveCredentials(t *testing.T) {
	req := &gamev1.CreateGameRequest{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats()}
	before := gametest.Start(t, func(c *game.Config) { c.SigningKeys = keyOne })
	first, err := before.Client.CreateGame(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	rotated := gametest.Start(t, func(c *game.Config) { c.SigningKeys = keyTwo + "," + keyOne; c.KeyPrefix = before.Config.KeyPrefix })
	if again, err := rotated.Client.CreateGame(context.Background(), req); err != nil || !proto.Equal(again, first) {
		t.Fatalf("retried while its key is accepted: %v, same answer %v; want the first answer", err, proto.Equal(again, first))
	}
	dropped := gametest.Start(t, func(c *game.Config) { c.SigningKeys = keyTwo; c.KeyPrefix = before.Config.KeyPrefix })
	again, err := dropped.Client.CreateGame(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(again.GetGame(), first.GetGame()) || again.GetGameId() != first.GetGameId() {
		t.Fatalf("retried after its key was dropped: the game differs from the first answer's")
	}
	tb := &table{env: dropped, id: again.GetGameId(), seats: map[commonv1.Side]string{}}
	for i, c := range again.GetCredentials() {
		if c.GetSide() != first.GetCredentials()[i].GetSide() || !strings.HasPrefix(c.GetToken(), "k2.") {
			t.Fatalf("credential %d of the retry: side %v, token %.3s...; want side %v signed with k2", i, c.GetSide(), c.GetToken(), first.GetCredentials()[i].GetSide())
		}
		tb.seats[c.GetSide()] = c.GetToken()
	}
	tb.move(t, "h3e3")
	tb.move(t, "h10g8")

	short := gametest.Start(t, func(c *game.Config) { c.SeatTTL = 4 * time.Second })
	req.RequestId = rid()
	first, err = short.Client.CreateGame(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := short.Client.CreateGame(context.Background(), req); err != nil || !proto.Equal(again, first) {
		t.Fatalf("retried at once: %v, same answer %v; want the first answer", err, proto.Equal(again, first))
	}
	time.Sleep(2100 * time.Millisecond)
	again, err = short.Client.CreateGame(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range again.GetCredentials() {
		if was := first.GetCredentials()[i].GetExpiresAt().AsTime(); !c.GetExpiresAt().AsTime().After(was) {
			t.Fatalf("credential %d of a retry with under half its life left runs out at %v, as the first (%v); want a new one", i, c.GetExpiresAt().AsTime(), was)
		}
	}
}

// TestADeadSeatCredentialSaysHowToGetANewOne: a seat credential that ran
// out, or whose key was removed, is refused with its reason and with the
// way to a new one for the same seat; a forged one gets neither.
func TestADeadSeatCredentialSaysHowToGetANewOne(t *testing.T) {
	const keys = "k1:" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	env := gametest.Start(t, func(c *game.Config) { c.SigningKeys = keys })
	tb := xiangqi(t, env)
	ring, err := auth.ParseKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	removed, err := auth.NewKeyring(auth.Key{ID: "removed", Secret: []byte(strings.Repeat("r", 32))})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	seat := auth.Claims{Kind: auth.KindSeat, Subject: "p1", Game: tb.id, Side: "first", IssuedAt: now.Add(-2 * time.Hour).Unix(), ExpiresAt: now.Add(-time.Hour).Unix()}
	expired, err := ring.Sign(seat)
	if err != nil {
		t.Fatal(err)
	}
	seat.ExpiresAt = now.Add(time.Hour).Unix()
	unknown, err := removed.Sign(seat)
	if err != nil {
		t.Fatal(err)
	}
	for tok, reason := range map[string]string{expired: auth.ExpiredReason, unknown: auth.KeyUnknownReason, tb.seats[commonv1.Side_SIDE_FIRST] + "x": ""} {
		_, err := env.Client.MakeMove(gametest.As(context.Background(), tok), &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h3e3"}})
		way := strings.Contains(status.Convert(err).Message(), "ResumeGame") && strings.Contains(status.Convert(err).Message(), "IssueSeatCredentials")
		if status.Code(err) != codes.Unauthenticated || apierr.ReasonOf(err) != reason || way != (reason != "") {
			t.Errorf("%v: reason %q, says the way to a new one %v; want Unauthenticated, %q, %v", err, apierr.ReasonOf(err), way, reason, reason != "")
		}
	}
}

// TestADeadSeatCredentialOfAnotherGameHoldsNoSeat: a seat credential of
// another game that ran out, or whose key was removed, holds no seat of
// this one, as a live one of another game does not: it may still watch a
// public game, and a command is refused as not this game's, not sent to
// get a new credential for a seat of this game that it never held.
func TestADeadSeatCredentialOfAnotherGameHoldsNoSeat(t *testing.T) {
	const keys = "k1:" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	env := gametest.Start(t, func(c *game.Config) { c.SigningKeys = keys })
	public := xiangqi(t, env)
	ring, err := auth.ParseKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	removed, err := auth.NewKeyring(auth.Key{ID: "removed", Secret: []byte(strings.Repeat("r", 32))})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	seat := auth.Claims{Kind: auth.KindSeat, Subject: "p1", Game: "another", Side: "first", IssuedAt: now.Add(-2 * time.Hour).Unix(), ExpiresAt: now.Add(-time.Hour).Unix()}
	expired, err := ring.Sign(seat)
	if err != nil {
		t.Fatal(err)
	}
	seat.ExpiresAt = now.Add(time.Hour).Unix()
	unknown, err := removed.Sign(seat)
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"expired": expired, "key removed": unknown} {
		ctx := gametest.As(context.Background(), tok)
		if _, err := env.Client.GetGame(ctx, &gamev1.GetGameRequest{GameId: public.id}); err != nil {
			t.Errorf("%s: GetGame of a public game: %v; want it read, as without a credential", name, err)
		}
		_, err := env.Client.MakeMove(ctx, &gamev1.MakeMoveRequest{GameId: public.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h3e3"}})
		if status.Code(err) != codes.PermissionDenied || strings.Contains(status.Convert(err).Message(), "ResumeGame") {
			t.Errorf("%s: MakeMove: %v; want PermissionDenied, naming no way to a new credential", name, err)
		}
	}
}

// TestBearerSchemeIgnoresCase: some HTTP clients and proxies write the
// scheme "bearer"; the seat credential is the same.
func TestBearerSchemeIgnoresCase(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := xiangqi(t, env)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "bearer "+tb.seats[commonv1.Side_SIDE_FIRST])
	if _, err := env.Client.MakeMove(ctx, &gamev1.MakeMoveRequest{GameId: tb.id, RequestId: rid(), Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatalf("a move with \"bearer\": %v", err)
	}
}

// TestRetryAfterADeadlineGetsItsFirstAnswer: a request answered before
// the player's time ran out, sent again after it, is a retry like any
// other: it gets the first answer and changes nothing, even from the
// process that committed it (whose copy of the game the retry could
// otherwise run on).
func TestRetryAfterADeadlineGetsItsFirstAnswer(t *testing.T) {
	env := gametest.Start(t, nil)
	fischer1s := &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{MainTime: durationpb.New(time.Second)}}}
	tb := create(t, env, &gamev1.CreateGameRequest{Kind: commonv1.GameKind_GAME_KIND_XIANGQI, TimeControl: fischer1s})
	tb.move(t, "h3e3")
	tb.move(t, "h10g8")
	offer := &gamev1.OfferDrawRequest{GameId: tb.id, RequestId: rid()}
	first, err := env.Client.OfferDraw(tb.as(commonv1.Side_SIDE_FIRST), offer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.AnswerDraw(tb.as(commonv1.Side_SIDE_SECOND), &gamev1.AnswerDrawRequest{GameId: tb.id, RequestId: rid()}); err != nil {
		t.Fatal(err)
	}
	before := redisState(t, env, tb.id)
	// Red's second and the lag grace run out.
	time.Sleep(2500 * time.Millisecond)
	again, err := env.Client.OfferDraw(tb.as(commonv1.Side_SIDE_FIRST), offer)
	if err != nil {
		t.Fatalf("retry after Red's flag: %v; want the first answer", err)
	}
	if !proto.Equal(first, again) {
		t.Fatal("the retry answered differently")
	}
	if after := redisState(t, env, tb.id); after != before {
		t.Fatal("the retry changed the game in Redis")
	}
}

// TestRetriedCreateGameWritesNothingAgain: a retried CreateGame gets the
// game it made, and queues no second AI job nor a second deadline.
func TestRetriedCreateGameWritesNothingAgain(t *testing.T) {
	env := gametest.Start(t, nil)
	ctx := context.Background()
	// Everything under the prefix but the game's own keys: the AI job
	// queue and the deadline index.
	sideWrites := func() int64 {
		t.Helper()
		var n int64
		keys, err := env.Redis.Keys(ctx, env.Config.KeyPrefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			switch env.Redis.Type(ctx, k).Val() {
			case "zset":
				n += env.Redis.ZCard(ctx, k).Val()
			case "stream":
				if !strings.Contains(k, "{g:") {
					n += env.Redis.XLen(ctx, k).Val()
				}
			}
		}
		return n
	}
	for _, req := range []*gamev1.CreateGameRequest{
		{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_XIANGQI, Seats: seats(3)},
		{RequestId: rid(), Kind: commonv1.GameKind_GAME_KIND_JANGGI, Seats: seats()},
	} {
		first, err := env.Client.CreateGame(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		written := sideWrites()
		again, err := env.Client.CreateGame(ctx, req)
		if err != nil || !proto.Equal(first, again) {
			t.Fatalf("retried CreateGame %v: %v, same answer %v", req.GetKind(), err, proto.Equal(first, again))
		}
		if n := sideWrites(); n != written {
			t.Fatalf("retried CreateGame %v: %d AI jobs and deadlines, %d before the retry", req.GetKind(), n, written)
		}
	}
}

// TestADeclinedOfferWaitsForAMove: a side whose draw offer was declined may
// offer again only once it has moved, so that its opponent is not asked
// again and again in one position; the refusal changes nothing. The
// opponent's own offers are not held back by it.
func TestADeclinedOfferWaitsForAMove(t *testing.T) {
	env := gametest.Start(t, nil)
	tb := xiangqi(t, env)
	red, black := commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND
	offer := func(side commonv1.Side) error {
		_, err := env.Client.OfferDraw(tb.as(side), &gamev1.OfferDrawRequest{GameId: tb.id, RequestId: rid()})
		return err
	}
	decline := func(side commonv1.Side) {
		t.Helper()
		if _, err := env.Client.AnswerDraw(tb.as(side), &gamev1.AnswerDrawRequest{GameId: tb.id, RequestId: rid()}); err != nil {
			t.Fatalf("decline: %v", err)
		}
	}
	refused := func(side commonv1.Side) {
		t.Helper()
		before := redisState(t, env, tb.id)
		err := offer(side)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "before you move") {
			t.Fatalf("%v offers again before moving: %v; want FailedPrecondition", side, err)
		}
		if after := redisState(t, env, tb.id); after != before {
			t.Fatalf("the refused offer changed Redis:\nbefore %s\nafter  %s", before, after)
		}
	}
	if err := offer(red); err != nil {
		t.Fatal(err)
	}
	decline(black)
	refused(red)
	if err := offer(black); err != nil {
		t.Fatalf("the opponent's offer after declining: %v", err)
	}
	decline(red)
	refused(black)
	refused(red)

	tb.move(t, "h3e3")
	if err := offer(red); err != nil {
		t.Fatalf("an offer after moving: %v", err)
	}
	tb.move(t, "h10g8") // declines red's offer
	refused(red)
	if err := offer(black); err != nil {
		t.Fatalf("an offer after moving: %v", err)
	}
	if err := offer(red); status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "pending") {
		t.Fatalf("an offer while the opponent's is pending: %v", err)
	}
}
