package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/palacehq/palace/pkg/auth"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/rulespb"
)

// matchedTicket is a ticket of player p in pool, told it plays game on
// side against opponent, with a credential of that seat.
func matchedTicket(t *testing.T, p string, pool int, game string, side commonv1.Side, opponent string) *mmTicket {
	t.Helper()
	ring, err := auth.NewKeyring(auth.Key{ID: "k", Secret: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := rulespb.SideFrom(side)
	token, err := ring.Sign(auth.Claims{Kind: auth.KindSeat, Subject: p, Game: game, Side: s.String(), IssuedAt: time.Now().Unix(), ExpiresAt: time.Now().Add(time.Hour).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	return &mmTicket{player: p, pool: pool, ticketID: "t-" + p, state: matchmakingv1.TicketState_TICKET_STATE_MATCHED,
		games: []string{game}, seat: &matchmakingv1.Seat{GameId: game, Side: side, OpponentId: opponent, Token: token}}
}

// queueLeftover is a matchmaking service that takes back the tickets a
// report leaves waiting.
type queueLeftover struct {
	matchmakingv1.MatchmakingServiceClient
}

func (queueLeftover) CancelTicket(context.Context, *matchmakingv1.CancelTicketRequest, ...grpc.CallOption) (*matchmakingv1.CancelTicketResponse, error) {
	return &matchmakingv1.CancelTicketResponse{}, nil
}

// TestMatchmakingReportJudgesEachPairing builds the tickets' stories by
// hand and requires the report to count each wrong pairing, each ticket
// left waiting beside a partner, and each ticket never settled, and the
// games read back to seat whom the tickets say.
func TestMatchmakingReportJudgesEachPairing(t *testing.T) {
	first, second := commonv1.Side_SIDE_FIRST, commonv1.Side_SIDE_SECOND
	// matched is a ticket of player p in pool, seated in game on side
	// against opponent.
	matched := func(p string, pool int, game string, side commonv1.Side, opponent string) *mmTicket {
		return matchedTicket(t, p, pool, game, side, opponent)
	}
	waiting := func(p string, pool int) *mmTicket {
		return &mmTicket{player: p, pool: pool, ticketID: "t-" + p, state: matchmakingv1.TicketState_TICKET_STATE_WAITING}
	}
	pair := func() []*mmTicket {
		return []*mmTicket{matched("a", 0, "g1", first, "b"), matched("b", 0, "g1", second, "a")}
	}
	edit := func(edit func([]*mmTicket)) []*mmTicket { ts := pair(); edit(ts); return ts }
	type want struct{ matched, games, doublePaired, waiting, unmatched, unsettled int }
	tests := []struct {
		name    string
		tickets []*mmTicket
		want    want
	}{
		{name: "a pair", tickets: pair(), want: want{matched: 2, games: 1}},
		{name: "alone in its game", tickets: pair()[:1], want: want{matched: 1, games: 1, doublePaired: 1}},
		{name: "three in a game", want: want{matched: 3, games: 1, doublePaired: 3},
			tickets: append(pair(), matched("c", 0, "g1", second, "a"))},
		{name: "paired with itself", want: want{matched: 2, games: 1, doublePaired: 2},
			tickets: []*mmTicket{matched("a", 0, "g1", first, "a"), matched("a", 0, "g1", second, "a")}},
		{name: "across pools", tickets: edit(func(ts []*mmTicket) { ts[1].pool = 1 }), want: want{matched: 2, games: 1, doublePaired: 2}},
		{name: "on one side", tickets: edit(func(ts []*mmTicket) { ts[1].seat.Side = first }), want: want{matched: 2, games: 1, doublePaired: 2}},
		{name: "told no side", tickets: edit(func(ts []*mmTicket) { ts[1].seat.Side = commonv1.Side_SIDE_UNSPECIFIED }), want: want{matched: 2, games: 1, doublePaired: 2}},
		// The tool passed a player handed its opponent's credential.
		{name: "handed the opponent's credential", tickets: edit(func(ts []*mmTicket) { ts[1].seat.Token = ts[0].seat.Token }), want: want{matched: 2, games: 1, doublePaired: 2}},
		{name: "handed no credential", tickets: edit(func(ts []*mmTicket) { ts[1].seat.Token = "" }), want: want{matched: 2, games: 1, doublePaired: 2}},
		{name: "handed a credential of another game", tickets: edit(func(ts []*mmTicket) { ts[1].seat.Token = matched("b", 0, "g2", second, "a").seat.Token }), want: want{matched: 2, games: 1, doublePaired: 2}},
		// Its partner's watch failed: the pairing is unseen, not wrong.
		{name: "beside a partner unheard of", want: want{matched: 1, games: 1, unsettled: 1}, tickets: []*mmTicket{
			matched("a", 0, "g1", first, "b"), {player: "b", ticketID: "t-b", state: matchmakingv1.TicketState_TICKET_STATE_UNSPECIFIED}}},
		{name: "told of another opponent", tickets: edit(func(ts []*mmTicket) { ts[1].seat.OpponentId = "c" }), want: want{matched: 2, games: 1, doublePaired: 2}},
		{name: "reported with two games", tickets: edit(func(ts []*mmTicket) { ts[0].games = append(ts[0].games, "g2") }), want: want{matched: 2, games: 1, doublePaired: 1}},
		{name: "two waiting in a pool", tickets: []*mmTicket{waiting("a", 0), waiting("b", 0), waiting("c", 1)},
			want: want{waiting: 3, unmatched: 2}},
		{name: "watch lost", want: want{unsettled: 1}, tickets: []*mmTicket{
			{player: "a", ticketID: "t-a", state: matchmakingv1.TicketState_TICKET_STATE_UNSPECIFIED}}},
		{name: "never entered", tickets: []*mmTicket{{player: "a"}}, want: want{unsettled: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &mmLoad{mm: []matchmakingv1.MatchmakingServiceClient{queueLeftover{}}, pools: mmPools(false), tickets: tt.tickets}
			rep := l.report(t.Context(), 0, 1)
			got := want{rep.Matched, rep.Games, rep.DoublePaired, rep.Waiting, rep.Unmatched, rep.Unsettled}
			if got != tt.want || rep.Errors != 0 {
				t.Fatalf("report %+v, want %+v and no error", rep, tt.want)
			}
		})
	}
	// The game read back must seat exactly the pair, each on its side.
	pool := mmPools(false)[0]
	seated := func(seats ...*gamev1.Seat) *gamev1.Game {
		return &gamev1.Game{Kind: pool.kind, TimeControl: pool.tc, Seats: seats}
	}
	a, b := &gamev1.Seat{Side: first, PlayerId: "a"}, &gamev1.Seat{Side: second, PlayerId: "b"}
	for _, tc := range []struct {
		name  string
		game  *gamev1.Game
		right bool
	}{
		{name: "as reported", game: seated(a, b), right: true},
		{name: "sides swapped", game: seated(&gamev1.Seat{Side: first, PlayerId: "b"}, &gamev1.Seat{Side: second, PlayerId: "a"})},
		{name: "another player", game: seated(a, &gamev1.Seat{Side: second, PlayerId: "c"})},
		{name: "one seat", game: seated(a)},
	} {
		l := &mmLoad{game: readBack{game: tc.game}, pools: mmPools(false), tickets: pair()}
		rep := l.report(t.Context(), 0, 1)
		if wantBad := map[bool]int{true: 0, false: 2}[tc.right]; rep.GamesChecked != 1 || rep.DoublePaired != wantBad || rep.Errors != 0 {
			t.Errorf("%s: %d games checked, %d tickets wrongly paired, %d errors; want 1, %d, 0", tc.name, rep.GamesChecked, rep.DoublePaired, rep.Errors, wantBad)
		}
	}
}

// TestMatchmakingReportFaulty: the exit status reports each fault the
// report shows on its own, not only a wrong pairing.
func TestMatchmakingReportFaulty(t *testing.T) {
	good := mmReport{Tickets: 10, Matched: 8, Waiting: 2, Games: 4}
	tests := []struct {
		name string
		edit func(*mmReport)
		want bool
	}{
		{name: "all settled", edit: func(*mmReport) {}, want: false},
		{name: "double paired", edit: func(r *mmReport) { r.DoublePaired = 1 }, want: true},
		{name: "unmatched beside a partner", edit: func(r *mmReport) { r.Unmatched = 1 }, want: true},
		{name: "unsettled", edit: func(r *mmReport) { r.Unsettled = 1 }, want: true},
		{name: "errors", edit: func(r *mmReport) { r.Errors = 1 }, want: true},
		{name: "watches opened again", edit: func(r *mmReport) { r.Rewatched = 3 }, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good
			tt.edit(&r)
			if got := r.faulty(); got != tt.want {
				t.Fatalf("faulty() = %v for %+v, want %v", got, r, tt.want)
			}
		})
	}
}

// TestASeatClaimOfAnotherSpellingIsRight: a seat credential's side is
// read by rules.ParseSide everywhere (first/cho/red in any case), and the
// game service admits such a credential for its seat; the load tool read
// only "first"/"second", and would have counted a right pairing wrong.
func TestASeatClaimOfAnotherSpellingIsRight(t *testing.T) {
	parsed, err := auth.ParseKeys(playerKeys)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := auth.NewKeyring(parsed...)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ticket := func(player, opponent, side string, pbSide commonv1.Side) *mmTicket {
		tok, err := ring.Sign(auth.Claims{Kind: auth.KindSeat, Subject: player, Game: "g1", Side: side, IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return &mmTicket{player: player, seat: &matchmakingv1.Seat{GameId: "g1", Side: pbSide, OpponentId: opponent, Token: tok}}
	}
	for _, names := range [][2]string{{"cho", "han"}, {"red", "black"}, {"First", "Second"}} {
		a := ticket("pa", "pb", names[0], commonv1.Side_SIDE_FIRST)
		b := ticket("pb", "pa", names[1], commonv1.Side_SIDE_SECOND)
		if !pairedRightly("g1", []*mmTicket{a, b}) {
			t.Errorf("seats claiming sides %q/%q (which the game service admits for SIDE_FIRST/SIDE_SECOND) judged a wrong pairing", names[0], names[1])
		}
	}
}
