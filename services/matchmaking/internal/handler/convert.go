package handler

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/services/matchmaking/internal/games"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// ts is t to the millisecond, as the store keeps every instant: an answer
// made from what a call has in hand shows what a later read shows.
func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t.Truncate(time.Millisecond))
}

func seatPB(game string, g store.Grant, oppID, oppName string) *matchmakingv1.Seat {
	return &matchmakingv1.Seat{
		GameId: game, Side: games.SidePB(g.Side), Token: g.Token, TokenExpiresAt: ts(g.Expires),
		OpponentId: oppID, OpponentName: oppName,
	}
}

var ticketStates = map[string]matchmakingv1.TicketState{
	store.StateWaiting: matchmakingv1.TicketState_TICKET_STATE_WAITING,
	// Entering is waiting to the player: its entry is being made.
	store.StateEntering:  matchmakingv1.TicketState_TICKET_STATE_WAITING,
	store.StatePaired:    matchmakingv1.TicketState_TICKET_STATE_PAIRED,
	store.StateMatched:   matchmakingv1.TicketState_TICKET_STATE_MATCHED,
	store.StateCancelled: matchmakingv1.TicketState_TICKET_STATE_CANCELLED,
	store.StateExpired:   matchmakingv1.TicketState_TICKET_STATE_EXPIRED,
}

func ticketPB(t store.Ticket) *matchmakingv1.Ticket {
	out := &matchmakingv1.Ticket{
		TicketId: t.ID, State: ticketStates[t.State], Rating: int32(t.Rating),
		EnteredAt: ts(t.Entered), ExpiresAt: ts(t.Expires),
	}
	if p, err := store.ParsePool(t.Pool); err == nil {
		out.Kind, out.TimeControl, out.Rated = p.Kind, store.ControlPB(p.Control), p.Rated
	}
	if t.State == store.StateMatched {
		out.Seat = seatPB(t.Game, store.Grant{Side: t.Side, Token: t.Token, Expires: t.TokenExpires}, t.Opponent, t.OpponentName)
	}
	return out
}

func terminalTicket(state string) bool {
	return state == store.StateMatched || state == store.StateCancelled || state == store.StateExpired
}

// invitePB shows an invite to player (empty: anyone holding the link,
// who sees no seat).
func invitePB(inv store.Invite, player string, now time.Time) *matchmakingv1.Invite {
	out := &matchmakingv1.Invite{
		Token: inv.Token, Kind: inv.Kind, TimeControl: store.ControlPB(inv.Control),
		CreatorId: inv.Creator, CreatorName: inv.CreatorName, ExpiresAt: ts(inv.Expires),
	}
	switch inv.State {
	case store.InviteOpen, store.InviteAccepting:
		out.State = matchmakingv1.InviteState_INVITE_STATE_OPEN
		if inv.State == store.InviteOpen && !now.Before(inv.Expires) {
			out.State = matchmakingv1.InviteState_INVITE_STATE_EXPIRED
		}
	case store.InviteAccepted:
		out.State = matchmakingv1.InviteState_INVITE_STATE_ACCEPTED
		switch player {
		case inv.Creator:
			out.Seat = seatPB(inv.Game, inv.CreatorSeat, inv.Friend, inv.FriendName)
		case inv.Friend:
			out.Seat = seatPB(inv.Game, inv.FriendSeat, inv.Creator, inv.CreatorName)
		}
	case store.InviteCancelled:
		out.State = matchmakingv1.InviteState_INVITE_STATE_CANCELLED
	}
	return out
}

func ratingPB(kind commonv1.GameKind, r store.Rating) *matchmakingv1.Rating {
	return &matchmakingv1.Rating{
		PlayerId: r.Player, DisplayName: r.Name, Kind: kind, Rating: int32(r.Rating), Games: uint32(r.Games),
		Rank: uint64(max(r.Rank, 0)), Provisional: r.Games < store.ProvisionalGames, Aborts: uint32(r.Aborts),
	}
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms) }
