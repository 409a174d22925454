package handler

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/palacehq/palace/pkg/apierr"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/services/matchmaking/internal/games"
	"github.com/palacehq/palace/services/matchmaking/internal/store"
)

// inviteGrace keeps an invite readable after its link expired or was
// used, so its creator still learns what happened.
const inviteGrace = time.Hour

// inviteStall is how long a friend's claim of an invite may go without
// its game before a watcher of the invite completes it (settleStalled).
const inviteStall = 10 * time.Second

func inviteTopic(token string) string { return "i:" + token }

// CreateInvite creates a friend link.
func (h *Handler) CreateInvite(ctx context.Context, req *matchmakingv1.CreateInviteRequest) (*matchmakingv1.CreateInviteResponse, error) {
	c, err := h.player(ctx)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
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
	if err := apierr.Problems(errs...); err != nil {
		return nil, h.fail(ctx, err)
	}
	// One fingerprint for all: a retry is never counted again while the
	// invite is kept. The invite itself tells a retry from another request
	// under its id (below), so that replicas of earlier releases, whose
	// fingerprint this is, still agree with this one.
	made := store.Made{Player: c.Subject, What: "invite", Request: req.GetRequestId(), Fingerprint: "invite", Keep: h.cfg.InviteTTL + inviteGrace}
	if err := h.admit(ctx, made, h.cfg.Invites, "you", "invite", "invites"); err != nil {
		return nil, h.fail(ctx, err)
	}
	inv, err := h.store.CreateInvite(ctx, store.Invite{
		Creator: c.Subject, CreatorName: c.Name, Kind: req.GetKind(), Control: control,
		Expires: h.now().Add(h.cfg.InviteTTL),
	}, req.GetRequestId(), h.cfg.InviteTTL+inviteGrace)
	if errors.Is(err, store.ErrOtherRequest) {
		return nil, h.fail(ctx, apierr.New(apierr.Invalid, "request_id %q cannot be used: choose another", req.GetRequestId()))
	}
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	if inv.Kind != req.GetKind() || inv.Control != control || inv.CreatorName != c.Name {
		// Answering with the first invite would send the friend a game
		// other than the one this request asks for.
		kind, _ := store.KindName(inv.Kind)
		return nil, h.fail(ctx, apierr.New(apierr.Invalid,
			"request_id %q was used for another request, an invite to %s %s from %q: a retry repeats its request (its kind, time control and, after a new sign-in, name); use a new request_id for new invites",
			req.GetRequestId(), kind, inv.Control, inv.CreatorName))
	}
	return &matchmakingv1.CreateInviteResponse{Invite: h.inviteAnswer(ctx, inv, c.Subject)}, nil
}

// readInvite reads an invite for anyone holding its token; an expired
// open invite does not exist for them.
func (h *Handler) readInvite(ctx context.Context, token string) (store.Invite, error) {
	if !store.ValidInviteToken(token) {
		return store.Invite{}, apierr.New(apierr.Invalid, "token: malformed")
	}
	inv, err := h.store.Invite(ctx, token)
	if errors.Is(err, store.ErrNotFound) {
		return inv, apierr.New(apierr.NotFound, "invite not found or expired")
	}
	return inv, err
}

// GetInvite shows an invite to whoever holds the link.
func (h *Handler) GetInvite(ctx context.Context, req *matchmakingv1.GetInviteRequest) (*matchmakingv1.GetInviteResponse, error) {
	inv, err := h.readInvite(ctx, req.GetToken())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	if inv.State == store.InviteOpen && !h.now().Before(inv.Expires) {
		return nil, h.fail(ctx, apierr.New(apierr.NotFound, "invite not found or expired"))
	}
	inv = h.settleStalled(ctx, inv, h.now())
	return &matchmakingv1.GetInviteResponse{Invite: invitePB(inv, "", h.now())}, nil
}

// CancelInvite withdraws the caller's open invite.
func (h *Handler) CancelInvite(ctx context.Context, req *matchmakingv1.CancelInviteRequest) (*matchmakingv1.CancelInviteResponse, error) {
	c, err := h.player(ctx)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	if _, err := h.readInvite(ctx, req.GetToken()); err != nil {
		return nil, h.fail(ctx, err)
	}
	out, err := h.store.CancelInvite(ctx, req.GetToken(), c.Subject, h.now())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	switch out {
	case store.InviteNotFound:
		return nil, h.fail(ctx, apierr.New(apierr.NotFound, "invite not found or expired"))
	case store.InviteNotOwner:
		return nil, h.fail(ctx, apierr.New(apierr.PermissionDenied, "only the invite's creator can cancel it"))
	case store.InviteTooLate:
		return nil, h.fail(ctx, apierr.New(apierr.Precondition, "the invite was already accepted"))
	}
	if err := h.store.Publish(ctx, inviteTopic(req.GetToken())); err != nil {
		h.log.WarnContext(ctx, "notify cancelled invite", "err", err)
	}
	inv, err := h.readInvite(ctx, req.GetToken())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	return &matchmakingv1.CancelInviteResponse{Invite: invitePB(inv, c.Subject, h.now())}, nil
}

// AcceptInvite creates the invite's game for the creator and the caller.
func (h *Handler) AcceptInvite(ctx context.Context, req *matchmakingv1.AcceptInviteRequest) (*matchmakingv1.AcceptInviteResponse, error) {
	c, err := h.player(ctx)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	token := req.GetToken()
	if _, err := h.readInvite(ctx, token); err != nil {
		return nil, h.fail(ctx, err)
	}
	out, err := h.store.AcceptInvite(ctx, token, c.Subject, c.Name, h.now(), drawInviteSides())
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	switch out {
	case store.InviteNotFound:
		return nil, h.fail(ctx, apierr.New(apierr.NotFound, "invite not found or expired"))
	case store.InviteOwn:
		return nil, h.fail(ctx, apierr.New(apierr.Invalid, "this is your own invite: send the link to a friend"))
	case store.InviteUsed:
		return nil, h.fail(ctx, apierr.New(apierr.Precondition, "the invite was already used"))
	case store.InviteWasCxl:
		return nil, h.fail(ctx, apierr.New(apierr.Precondition, "the invite was cancelled"))
	}
	inv, err := h.readInvite(ctx, token)
	if err != nil {
		return nil, h.fail(ctx, err)
	}
	if inv, err = h.completeInvite(ctx, inv); err != nil {
		return nil, h.fail(ctx, err)
	}
	return &matchmakingv1.AcceptInviteResponse{Invite: h.inviteAnswer(ctx, inv, c.Subject)}, nil
}

// drawInviteSides draws who moves first in an invite's game, as its
// friend claims it: unlike a draw from the token, which both players hold
// beforehand, no player can foretell it and send (or accept) only a link
// that seats them first. The runtime's generator is seeded unpredictably.
func drawInviteSides() store.InviteSides {
	if rand.IntN(2) == 0 {
		return store.CreatorFirst
	}
	return store.FriendFirst
}

// completeInvite creates the game of an invite its friend holds
// (accepting), once both players' tickets in the queue are withdrawn, and
// records it; the game's request id makes it the same
// game however often, and by whomever, this runs. It returns the invite
// as it then is. An invite whose game is recorded is answered as it is:
// once the game service keeps the game no longer, the same request would
// make a new game under its id.
func (h *Handler) completeInvite(ctx context.Context, inv store.Invite) (store.Invite, error) {
	if inv.State == store.InviteAccepted && inv.Game != "" {
		return inv, nil
	}
	h.withdrawTickets(ctx, inv.AcceptingSince, inv.Creator, inv.Friend)
	creator := games.Human{ID: inv.Creator, Name: inv.CreatorName}
	friend := games.Human{ID: inv.Friend, Name: inv.FriendName}
	first, second := creator, friend
	creatorFirst := inv.Sides == store.CreatorFirst
	if inv.Sides == store.SidesUndrawn {
		creatorFirst = games.FirstIsA("invite", inv.Token) // claimed by an earlier release
	}
	if !creatorFirst {
		first, second = friend, creator
	}
	g, err := h.games.CreateHuman(ctx, games.Spec{
		RequestID: games.RequestID("inv", inv.Token), Kind: inv.Kind, Control: inv.Control,
		First: first, Second: second,
	})
	if err != nil {
		return inv, err
	}
	cs, fs := g.First.Seat, g.Second.Seat
	if !creatorFirst {
		cs, fs = fs, cs
	}
	if err := h.store.CompleteInvite(ctx, inv.Token, g.ID, cs, fs, inviteGrace); err != nil {
		return inv, err
	}
	if err := h.store.Publish(ctx, inviteTopic(inv.Token)); err != nil {
		h.log.WarnContext(ctx, "notify accepted invite", "err", err)
	}
	return h.readInvite(ctx, inv.Token)
}

// inviteAnswer is inv as player sees it, with their seat's credential
// fresh once its game is recorded: the creator, who may learn of the game
// long after (a watch, a retried create), as the friend.
func (h *Handler) inviteAnswer(ctx context.Context, inv store.Invite, player string) *matchmakingv1.Invite {
	if inv.State == store.InviteAccepted && inv.Game != "" {
		switch player {
		case inv.Creator:
			inv.CreatorSeat = h.fresh(ctx, inv.Game, inv.CreatorSeat)
		case inv.Friend:
			inv.FriendSeat = h.fresh(ctx, inv.Game, inv.FriendSeat)
		}
	}
	return invitePB(inv, player, h.now())
}

// settleStalled completes an invite whose friend claimed it at least
// inviteStall ago and whose game was never recorded: the friend's call
// died (its replica was killed, or the game service was down) and its
// client did not retry. Otherwise the creator would see the invite open
// for as long as it is kept, and nobody else could accept it.
func (h *Handler) settleStalled(ctx context.Context, inv store.Invite, now time.Time) store.Invite {
	if inv.State != store.InviteAccepting || now.Sub(inv.AcceptingSince) < inviteStall {
		return inv
	}
	cctx, cancel := bestEffort(ctx)
	defer cancel()
	done, err := h.completeInvite(cctx, inv)
	if err != nil {
		// Named by its players: its token lets anyone who reads the log
		// look the invite up.
		h.log.WarnContext(ctx, "complete stalled invite", "creator", inv.Creator, "friend", inv.Friend, "err", err)
		return inv
	}
	return done
}

// WatchInvite streams an invite's changes to its creator (or its friend)
// until it is settled.
func (h *Handler) WatchInvite(req *matchmakingv1.WatchInviteRequest, ss matchmakingv1.MatchmakingService_WatchInviteServer) error {
	ctx := ss.Context()
	c, err := h.player(ctx)
	if err != nil {
		return h.fail(ctx, err)
	}
	token := req.GetToken()
	var last matchmakingv1.InviteState
	readable := func(ctx context.Context) (store.Invite, error) {
		inv, err := h.readInvite(ctx, token)
		if err == nil && c.Subject != inv.Creator && c.Subject != inv.Friend {
			err = apierr.New(apierr.PermissionDenied, "only the invite's creator, and the friend who accepted it, can watch it")
		}
		return inv, err
	}
	check := func(ctx context.Context) error {
		_, err := readable(ctx)
		return err
	}
	return h.watch(ctx, c.Subject, inviteTopic(token), check, func(ctx context.Context, beat bool) (bool, bool, time.Duration, error) {
		inv, err := readable(ctx)
		if err != nil {
			return false, false, 0, err
		}
		now := h.now()
		inv = h.settleStalled(ctx, inv, now)
		pb := h.inviteAnswer(ctx, inv, c.Subject)
		sent := pb.GetState() != last || beat
		if sent {
			last = pb.GetState()
			if err := ss.Send(&matchmakingv1.WatchInviteResponse{Invite: pb}); err != nil {
				return false, false, 0, err
			}
		}
		if last != matchmakingv1.InviteState_INVITE_STATE_OPEN {
			return sent, true, 0, nil
		}
		if inv.State == store.InviteAccepting {
			// Wake when a claim that has not completed by then stalled.
			return sent, false, max(inv.AcceptingSince.Add(inviteStall).Sub(now), time.Second), nil
		}
		// Wake at the expiry to report it.
		return sent, false, inv.Expires.Sub(now) + time.Millisecond, nil
	})
}
