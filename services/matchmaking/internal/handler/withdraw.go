package handler

import (
	"context"
	"errors"
	"time"

	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// withdrawTickets takes out of their pools the tickets of players, entered
// before since, when a game of theirs starts outside the queue at since (an
// invite or a rematch accepted, a game against the AI): a player waits for
// one game at a time, so the queue must not pair them into a second game,
// with its clock running, that they no longer wait for. A ticket paired by
// then keeps its game. The game goes ahead whatever happens here, so a
// failure is logged, not returned.
func (h *Handler) withdrawTickets(ctx context.Context, since time.Time, players ...string) {
	for _, p := range players {
		if err := h.withdrawTicket(ctx, since, p); err != nil {
			h.log.WarnContext(ctx, "withdraw the waiting ticket of a player whose game started elsewhere", "player", p, "err", err)
		}
	}
}

func (h *Handler) withdrawTicket(ctx context.Context, since time.Time, player string) error {
	id, err := h.store.LiveTicket(ctx, player, h.now())
	if err != nil || id == "" {
		return err
	}
	t, err := h.store.Ticket(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	// A ticket entered since was asked for after the game began.
	if t.State != store.StateWaiting && t.State != store.StateEntering || !t.Entered.Before(since) {
		return nil
	}
	out, err := h.store.Cancel(ctx, id, player)
	if err != nil || out != store.CancelDone {
		return err
	}
	h.log.InfoContext(ctx, "ticket withdrawn: its player's game started elsewhere", "ticket", id, "player", player)
	return h.store.Publish(ctx, id)
}
