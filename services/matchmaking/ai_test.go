package matchmaking_test

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
)

func TestPlayAi(t *testing.T) {
	e := newEnv(t, 1, nil)
	g := e.guest("Human")
	req := &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: janggi, Level: 4, Side: commonv1.Side_SIDE_SECOND}
	r, err := e.mm[0].PlayAi(g.ctx(), req)
	if err != nil {
		t.Fatal(err)
	}
	seat := r.GetSeat()
	if seat.GetSide() != commonv1.Side_SIDE_SECOND || seat.GetOpponentName() != "AI level 4" {
		t.Fatalf("seat %v", seat)
	}
	game := e.gameAs(t, seat)
	if game.GetTimeControl() != nil || game.GetRated() {
		t.Fatalf("AI game %v: want no clock, unrated", game)
	}
	// Janggi against the AI starts in setup, where the human (Han, second)
	// chooses a formation first.
	if game.GetStatus() != commonv1.GameStatus_GAME_STATUS_SETUP || game.GetTurn() != commonv1.Side_SIDE_SECOND {
		t.Fatalf("status %v turn %v: want setup with the human to choose", game.GetStatus(), game.GetTurn())
	}
	for _, s := range game.GetSeats() {
		human := s.GetSide() == commonv1.Side_SIDE_SECOND
		if human != (s.GetAiLevel() == 0) || (human && s.GetPlayerId() != g.id) || (!human && s.GetAiLevel() != 4) {
			t.Fatalf("seat %v", s)
		}
	}
	if _, err := e.game.Client.ChooseFormation(as(seat.GetToken()), &gamev1.ChooseFormationRequest{
		GameId: seat.GetGameId(), RequestId: rid(), Formation: commonv1.Formation_FORMATION_MA_SANG_MA_SANG,
	}); err != nil {
		t.Fatalf("the human cannot choose a formation: %v", err)
	}
	// A retry is the same game.
	again, err := e.mm[0].PlayAi(g.ctx(), req)
	if err != nil || again.GetSeat().GetGameId() != seat.GetGameId() {
		t.Fatalf("retry: %v %v", again, err)
	}
	// A clock when asked.
	clocked, err := e.mm[0].PlayAi(g.ctx(), &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 10, TimeControl: fischer(600e9, 5e9)})
	if err != nil {
		t.Fatal(err)
	}
	if e.gameAs(t, clocked.GetSeat()).GetTimeControl().GetFischer() == nil {
		t.Fatal("asked for a clock, got none")
	}

	for _, bad := range []*matchmakingv1.PlayAiRequest{
		{RequestId: rid(), Kind: janggi, Level: 0},
		{RequestId: rid(), Kind: janggi, Level: 11},
		{RequestId: rid(), Level: 3},
		{Kind: janggi, Level: 3},
		{RequestId: rid(), Kind: janggi, Level: 3, Side: 7},
	} {
		_, err := e.mm[0].PlayAi(g.ctx(), bad)
		wantCode(t, err, codes.InvalidArgument)
	}
}

// TestAnEmptyTimeControlIsRefused: a time_control that is set but names no
// clock (a JSON client that misspelt "fischer" sends one: the unknown field
// is dropped) is a client's mistake, refused as the game service's
// CreateGame refuses it, before anything is written; not taken for no
// clock (PlayAi) or the online default (EnterQueue, CreateInvite).
func TestAnEmptyTimeControlIsRefused(t *testing.T) {
	e := newEnv(t, 1, nil)
	g := e.guest("Human")
	empty := &commonv1.TimeControl{}
	for name, call := range map[string]func() error{
		"PlayAi": func() error {
			_, err := e.mm[0].PlayAi(g.ctx(), &matchmakingv1.PlayAiRequest{RequestId: rid(), Kind: xiangqi, Level: 3, TimeControl: empty})
			return err
		},
		"EnterQueue": func() error {
			_, err := e.mm[0].EnterQueue(g.ctx(), &matchmakingv1.EnterQueueRequest{RequestId: rid(), Kind: xiangqi, TimeControl: empty})
			return err
		},
		"CreateInvite": func() error {
			_, err := e.mm[0].CreateInvite(g.ctx(), &matchmakingv1.CreateInviteRequest{RequestId: rid(), Kind: xiangqi, TimeControl: empty})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			mm, games := keysUnder(t, e.cfg.KeyPrefix), keysUnder(t, e.game.Config.KeyPrefix)
			err := call()
			wantCode(t, err, codes.InvalidArgument)
			if !strings.Contains(err.Error(), "set byo_yomi or fischer") {
				t.Errorf("the refusal does not say what to send: %v", err)
			}
			if after := keysUnder(t, e.cfg.KeyPrefix); !slices.Equal(after, mm) {
				t.Errorf("matchmaking keys before %v, after %v", mm, after)
			}
			if after := keysUnder(t, e.game.Config.KeyPrefix); !slices.Equal(after, games) {
				t.Errorf("game keys before %v, after %v", games, after)
			}
		})
	}
}
