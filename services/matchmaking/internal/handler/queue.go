package handler

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/palacehq/palace/pkg/apierr"
	"github.com/palacehq/palace/pkg/auth"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// MaxRequestIDBytes bounds client-chosen request ids.
const MaxRequestIDBytes = 128

// Casual self-estimates must lie in this range.
const (
	MinCasualRating = 100
	MaxCasualRating = 3000
)

// EnterQueue puts the caller's ticket into its pool.
func (h *Handler) EnterQueue(ctx context.Context, req *matchmakingv1.EnterQueueRequest) (*matchmakingv1.EnterQueueResponse, error) {
	c, err := h.player(ctx)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	pool, err := h.poolOf(c, req)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	rating, err := h.queueRating(ctx, c, pool, req.GetCasualRating())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	now := h.now()
	t := store.Ticket{
		Pool: pool.ID(), Player: c.Subject, Name: c.Name, NamedAt: namedAt(c), Rating: rating, Entered: now, Expires: now.Add(h.cfg.TicketTTL),
		State: store.StateWaiting,
	}
	// For a new ticket only: a retry is answered with its ticket. A
	// request is the pool's: the same id in another pool is another entry.
	made, admitted := store.Made{Player: c.Subject, What: "entry", Request: pool.ID() + " " + req.GetRequestId()}, false
	admit := func() error {
		if pool.Rated && h.cfg.MaxAborts > 0 {
			if err := h.admitRated(ctx, c.Subject, pool, now); err != nil {
				return err
			}
		}
		err := h.admit(ctx, made, h.cfg.Entries, "you", "queue entry", "queue entries")
		admitted = err == nil
		return err
	}
	id, outcome, err := h.store.Enter(ctx, pool, t, req.GetRequestId(), h.cfg.TicketTTL+time.Hour, admit)
	if admitted && errors.Is(err, store.ErrTooManyPools) {
		// Refused after its admission, before its ticket was written: it
		// entered nothing, and counts for nothing. (After any other
		// failure, a retry with the same request_id, counted once, may be
		// writing it.)
		if err := h.store.Unadmit(ctx, made); err != nil {
			h.log.WarnContext(ctx, "queue entry refused but counted", "player", c.Subject, "err", err)
		}
	}
	if errors.Is(err, store.ErrRacedEntries) {
		return nil, h.fail(ctx, apierr.New(apierr.Conflict, "other queue entries of yours are being made at this moment: retry, and learn which ticket waits"))
	}
	if errors.Is(err, store.ErrSlowEntry) {
		return nil, h.fail(ctx, &apierr.Error{Code: apierr.Unavailable, Err: err, Msg: "the queue's storage was too slow to make your entry safely, and nothing was entered: retry with the same request_id"})
	}
	if errors.Is(err, store.ErrTooManyPools) {
		return nil, h.fail(ctx, apierr.New(apierr.ResourceExhausted, "the queue already serves the most kinds and time controls it takes at once (--max-pools): choose a time control that others are waiting with, or retry later"))
	}
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	h.entered(pool)
	switch outcome {
	case store.Busy:
		return nil, h.fail(ctx, apierr.New(apierr.AlreadyExists, "you already have ticket %s in this pool, waiting or paired: watch it, or cancel it while it waits", id).
			WithInfo(TicketExistsReason, map[string]string{"ticket_id": id}))
	case store.BusyElsewhere:
		return nil, h.fail(ctx, apierr.New(apierr.AlreadyExists, "you already have ticket %s in another pool, waiting or paired (a player waits in one pool at a time): watch it, or cancel it while it waits and enter again", id).
			WithInfo(TicketExistsReason, map[string]string{"ticket_id": id}))
	case store.Withdrawn, store.Duplicate:
		if outcome == store.Withdrawn {
			h.log.InfoContext(ctx, "ticket withdrawn: its player's game started elsewhere", "ticket", id, "player", c.Subject)
		}
		t, err = h.store.Ticket(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			// The request is remembered longer than its ticket.
			return nil, h.fail(ctx, apierr.New(apierr.NotFound, "ticket %s of this request_id has expired: enter the queue with a new request_id", id))
		}
		if err != nil {
			return nil, h.fail(ctx, err)
		}
		if t.Player != c.Subject {
			// Another player's id and request id read alike in the key.
			return nil, h.fail(ctx, apierr.New(apierr.Invalid, "request_id %q cannot be used: choose another", req.GetRequestId()))
		}
	default:
		t.ID = id
	}
	return &matchmakingv1.EnterQueueResponse{Ticket: ticketPB(t)}, nil
}

// admitRated refuses a new ticket of a rated pool to a player who has
// aborted as many rated games of its kind in the window as allowed,
// saying when there is room. A retry, and an entry while a ticket waits,
// are answered as before.
func (h *Handler) admitRated(ctx context.Context, player string, pool store.Pool, now time.Time) error {
	wait, n, err := h.store.AbortWait(ctx, pool.Kind, player, h.cfg.MaxAborts, now)
	if err != nil || wait <= 0 {
		return err
	}
	kind, _ := store.KindName(pool.Kind)
	kind = strings.ToUpper(kind[:1]) + kind[1:]
	games, them := "games", "them"
	if n == 1 {
		games, them = "game", "it"
	}
	return limited(wait, "you aborted %d rated %s of %s in the last %v, or let %s abort without a first move: you may enter a rated %s queue again in %v",
		n, games, kind, store.AbortWindow, them, kind)
}

// poolOf validates a queue request, reporting every problem at once.
func (h *Handler) poolOf(c auth.Claims, req *matchmakingv1.EnterQueueRequest) (store.Pool, error) {
	var errs []error
	if err := checkID("request_id", req.GetRequestId(), MaxRequestIDBytes); err != nil {
		errs = append(errs, err)
	}
	if _, err := store.KindName(req.GetKind()); err != nil {
		errs = append(errs, err)
	}
	control, err := store.ClockedControl(req.GetTimeControl())
	if err != nil {
		errs = append(errs, err)
	}
	if r := req.GetCasualRating(); r != 0 && (r < MinCasualRating || r > MaxCasualRating) {
		errs = append(errs, apierr.New(apierr.Invalid, "casual_rating: %d is outside %d..%d", r, MinCasualRating, MaxCasualRating))
	}
	if err := apierr.Problems(errs...); err != nil {
		return store.Pool{}, err
	}
	if req.GetRated() && c.Kind != auth.KindAccount {
		return store.Pool{}, apierr.New(apierr.PermissionDenied, "rated games need a Google account: sign in with Google or play casual")
	}
	return store.Pool{Kind: req.GetKind(), Control: control, Rated: req.GetRated()}, nil
}

// queueRating is the rating a ticket is paired by: the player's Elo in
// rated pools; in casual ones the Elo when the player has one, else their
// own estimate, else the start rating.
func (h *Handler) queueRating(ctx context.Context, c auth.Claims, pool store.Pool, estimate int32) (int, error) {
	if c.Kind == auth.KindAccount {
		r, has, err := h.store.RatingOnly(ctx, pool.Kind, c.Subject)
		if err != nil {
			return 0, err
		}
		if has || pool.Rated {
			return r, nil
		}
	}
	if estimate != 0 {
		return int(estimate), nil
	}
	return store.StartRating, nil
}

// ticketFor reads a ticket the caller owns.
func (h *Handler) ticketFor(ctx context.Context, player, id string) (store.Ticket, error) {
	if _, err := store.TicketTag(id); err != nil {
		return store.Ticket{}, apierr.Wrap(apierr.Invalid, err)
	}
	t, err := h.store.Ticket(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return t, apierr.New(apierr.NotFound, "ticket %s not found (or expired)", id)
	}
	if err != nil {
		return t, err
	}
	if t.Player != player {
		return t, apierr.New(apierr.PermissionDenied, "ticket %s is another player's", id)
	}
	return t, nil
}

// CancelTicket takes a waiting ticket out of its pool.
func (h *Handler) CancelTicket(ctx context.Context, req *matchmakingv1.CancelTicketRequest) (*matchmakingv1.CancelTicketResponse, error) {
	c, err := h.player(ctx)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	if _, err := h.ticketFor(ctx, c.Subject, req.GetTicketId()); err != nil {
		return nil, h.fail(ctx, err)
	}
	out, err := h.store.Cancel(ctx, req.GetTicketId(), c.Subject)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	switch out {
	case store.CancelNotFound:
		return nil, h.fail(ctx, apierr.New(apierr.NotFound, "ticket %s not found (or expired)", req.GetTicketId()))
	case store.CancelNotOwner:
		return nil, h.fail(ctx, apierr.New(apierr.PermissionDenied, "ticket %s is another player's", req.GetTicketId()))
	case store.CancelTooLate:
		return nil, h.fail(ctx, apierr.New(apierr.Precondition, "ticket %s already has an opponent", req.GetTicketId()))
	}
	if err := h.store.Publish(ctx, req.GetTicketId()); err != nil {
		h.log.WarnContext(ctx, "notify cancelled ticket", "err", err)
	}
	t, err := h.store.Ticket(ctx, req.GetTicketId())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	return &matchmakingv1.CancelTicketResponse{Ticket: ticketPB(t)}, nil
}

// WatchTicket streams a ticket's changes until it is settled.
func (h *Handler) WatchTicket(req *matchmakingv1.WatchTicketRequest, ss matchmakingv1.MatchmakingService_WatchTicketServer) error {
	ctx := ss.Context()
	c, err := h.player(ctx)
	if err != nil {
		return h.fail(ctx, err)
	}
	id := req.GetTicketId()
	var last string
	check := func(ctx context.Context) error {
		_, err := h.ticketFor(ctx, c.Subject, id)
		return err
	}
	return h.watch(ctx, c.Subject, id, check, func(ctx context.Context, beat bool) (bool, bool, time.Duration, error) {
		t, err := h.ticketFor(ctx, c.Subject, id)
		if err != nil {
			return false, false, 0, err
		}
		sent := t.State != last || beat
		if sent {
			last = t.State
			if err := ss.Send(&matchmakingv1.WatchTicketResponse{Ticket: ticketPB(t)}); err != nil {
				return false, false, 0, err
			}
		}
		return sent, terminalTicket(t.State), 0, nil
	})
}
