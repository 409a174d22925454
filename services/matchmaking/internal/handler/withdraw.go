package handler

import (
	"context"
	"errors"
	"time"

	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// withdrawTickets takes out of their pools the tickets of players, entered
// by since, when a game of theirs starts outside the queue at since (an
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
	// First, for an entry of the player's dated by since whose claim of
	// the live-ticket record comes after the read below. Failing, it
	// keeps none of the withdrawal from the tickets already there.
	beganErr := h.store.GameBegan(ctx, player, since)
	err := h.withdrawLive(ctx, since, player)
	return errors.Join(beganErr, err)
}

// withdrawLive withdraws the player's live ticket if it was entered by
// since.
func (h *Handler) withdrawLive(ctx context.Context, since time.Time, player string) error {
	id, err := h.liveTicket(ctx, player)
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
	// A ticket entered since was asked for after the game began; one of
	// the same millisecond is taken for entered before.
	if t.State != store.StateWaiting && t.State != store.StateEntering || t.Entered.After(since) {
		return nil
	}
	out, err := h.store.Cancel(ctx, id, player)
	if err != nil || out != store.CancelDone {
		return err
	}
	h.log.InfoContext(ctx, "ticket withdrawn: its player's game started elsewhere", "ticket", id, "player", player)
	return h.store.Publish(ctx, id)
}

// liveTicket is the player's live ticket, waiting for an entry of theirs
// on its way (sent before the game began, say from another device) to
// write its ticket or give up: seldom, and for at most the entry's budget.
func (h *Handler) liveTicket(ctx context.Context, player string) (string, error) {
	giveUp := time.Now().Add(h.store.EntryBudget() + time.Second)
	for {
		id, err := h.store.LiveTicket(ctx, player, h.now())
		if !errors.Is(err, store.ErrRacedEntries) || time.Now().After(giveUp) {
			return id, err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
