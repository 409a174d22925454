package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
)

// Invite states as stored.
const (
	InviteOpen      = "open"
	InviteAccepting = "accepting"
	InviteAccepted  = "accepted"
	InviteCancelled = "cancelled"
)

// Invite is a friend invite as stored.
type Invite struct {
	Token       string
	Creator     string
	CreatorName string
	Kind        commonv1.GameKind
	Control     clock.Control
	State       string
	Expires     time.Time
	Friend      string
	FriendName  string
	Game        string
	// AcceptingSince is when Friend claimed the invite (state accepting).
	AcceptingSince time.Time
	// Sides is who moves first, drawn when Friend claimed the invite:
	// SidesUndrawn for a claim stored without it (by an earlier release).
	Sides InviteSides
	// Seats, once accepted.
	CreatorSeat, FriendSeat Grant
}

// ValidInviteToken reports whether s can be an invite token.
func ValidInviteToken(s string) bool { return len(s) == 32 && isHex(s) }

func (s *Store) inviteKey(token string) string { return s.prefix + "mm:{i:" + token + "}" }

// CreateInvite stores a new invite, or returns the one made for the same
// request. keep is how long it stays readable: its lifetime and a grace
// period in which the creator still learns that it expired.
func (s *Store) CreateInvite(ctx context.Context, inv Invite, requestID string, keep time.Duration) (Invite, error) {
	reqKey := s.prefix + "mm:{ireq:" + inv.Creator + ":" + requestID + "}"
	token := randomHex(16)
	var ok bool
	err := s.write(ctx, reqKey, func(c redis.Cmdable) (err error) {
		ok, err = c.SetNX(ctx, reqKey, token, keep).Result()
		return err
	})
	if err != nil {
		return Invite{}, fmt.Errorf("claim invite request: %w", err)
	}
	if !ok {
		prev, err := s.rdb.Get(ctx, reqKey).Result()
		if err != nil {
			return Invite{}, fmt.Errorf("read invite request: %w", err)
		}
		if got, err := s.Invite(ctx, prev); err == nil {
			if got.Creator != inv.Creator {
				// Another player's id and request id read alike here.
				return Invite{}, ErrOtherRequest
			}
			return got, nil
		} else if !errors.Is(err, ErrNotFound) {
			return Invite{}, err
		}
		// The first attempt claimed the request but stopped before storing
		// the invite: store it now under the token it claimed.
		token = prev
	}
	inv.Token, inv.State = token, InviteOpen
	key := s.inviteKey(token)
	err = s.write(ctx, key, func(c redis.Cmdable) error {
		_, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.HSetNX(ctx, key, "creator", inv.Creator)
			pipe.HSetNX(ctx, key, "cname", inv.CreatorName)
			pipe.HSetNX(ctx, key, "kind", int32(inv.Kind))
			pipe.HSetNX(ctx, key, "tc", inv.Control.String())
			pipe.HSetNX(ctx, key, "state", InviteOpen)
			pipe.HSetNX(ctx, key, "exp", inv.Expires.UnixMilli())
			pipe.PExpire(ctx, key, keep)
			return nil
		})
		return err
	})
	if err != nil {
		return Invite{}, fmt.Errorf("store invite: %w", err)
	}
	return s.Invite(ctx, token)
}

// Invite reads an invite; ErrNotFound when it does not exist any more.
func (s *Store) Invite(ctx context.Context, token string) (Invite, error) {
	m, err := s.rdb.HGetAll(ctx, s.inviteKey(token)).Result()
	if err != nil {
		return Invite{}, fmt.Errorf("read invite: %w", err)
	}
	if len(m) == 0 || m["creator"] == "" {
		return Invite{}, ErrNotFound
	}
	kind, _ := strconv.Atoi(m["kind"])
	c, err := clock.ParseControl(m["tc"])
	if err != nil {
		return Invite{}, fmt.Errorf("an invite's stored time control: %w", err) // not its token, a secret
	}
	return Invite{
		Token: token, Creator: m["creator"], CreatorName: m["cname"], Kind: commonv1.GameKind(kind), Control: c,
		State: m["state"], Expires: ms(m["exp"]), Friend: m["acceptor"], FriendName: m["aname"], Game: m["game"],
		AcceptingSince: ms(m["accat"]), Sides: InviteSides(m["cfirst"]),
		CreatorSeat: Grant{Side: m["csid"], Token: m["ctok"], Expires: ms(m["cexp"])},
		FriendSeat:  Grant{Side: m["asid"], Token: m["atok"], Expires: ms(m["aexp"])},
	}, nil
}

// InviteOutcome is the answer of an invite change.
type InviteOutcome string

const (
	InviteNotFound InviteOutcome = "nf"
	InviteOwn      InviteOutcome = "own"
	InviteUsed     InviteOutcome = "used"
	InviteWasCxl   InviteOutcome = "cancelled"
	InviteGo       InviteOutcome = "go"
	InviteNotOwner InviteOutcome = "perm"
	InviteTooLate  InviteOutcome = "late"
	InviteOK       InviteOutcome = "ok"
)

func (s *Store) inviteOp(ctx context.Context, token string, args ...any) (InviteOutcome, error) {
	var res string
	err := s.write(ctx, s.inviteKey(token), func(c redis.Cmdable) (err error) {
		res, err = inviteScript.Run(ctx, c, []string{s.inviteKey(token)}, args...).Text()
		if errors.Is(err, redis.Nil) {
			err = nil
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("invite %s: %w", args[0], err)
	}
	return InviteOutcome(res), nil
}

// InviteSides is an invite's draw of who moves first, as stored.
type InviteSides string

const (
	SidesUndrawn InviteSides = ""
	CreatorFirst InviteSides = "1"
	FriendFirst  InviteSides = "0"
)

// AcceptInvite claims an invite for player: InviteGo means the caller
// holds it and must create (or, on a retry, re-create) the game. sides is
// kept by the first claim only, so that every retry makes the same game.
func (s *Store) AcceptInvite(ctx context.Context, token, player, name string, now time.Time, sides InviteSides) (InviteOutcome, error) {
	if sides != CreatorFirst && sides != FriendFirst {
		return "", fmt.Errorf("accept invite: sides %q are not drawn", sides)
	}
	return s.inviteOp(ctx, token, "accept", player, name, now.UnixMilli(), string(sides))
}

// CancelInvite withdraws player's open invite.
func (s *Store) CancelInvite(ctx context.Context, token, player string, now time.Time) (InviteOutcome, error) {
	return s.inviteOp(ctx, token, "cancel", player, now.UnixMilli())
}

// CompleteInvite records the game of an accepted invite.
func (s *Store) CompleteInvite(ctx context.Context, token, game string, creator, friend Grant, keep time.Duration) error {
	_, err := s.inviteOp(ctx, token, "complete", game, creator.Side, creator.Token, creator.Expires.UnixMilli(),
		friend.Side, friend.Token, friend.Expires.UnixMilli(), keep.Milliseconds())
	return err
}
