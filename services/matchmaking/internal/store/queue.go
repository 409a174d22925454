package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/clock"
	"github.com/palacehq/palace/pkg/redisx"
)

// Ticket states as stored.
const (
	StateWaiting = "waiting"
	// StateEntering: written, not yet waiting for pairing (activate.lua).
	StateEntering  = "entering"
	StatePaired    = "paired"
	StateMatched   = "matched"
	StateCancelled = "cancelled"
	StateExpired   = "expired"
)

// Ticket is a queue ticket as stored.
type Ticket struct {
	ID     string
	Pool   string
	Player string
	Name   string
	// NamedAt is when Name was given (Player.NamedAt).
	NamedAt time.Time
	Rating  int
	// Entered and Expires bound the wait.
	Entered, Expires time.Time
	State            string
	Match            string
	// Set once matched.
	Game         string
	Side         string
	Token        string
	TokenExpires time.Time
	Opponent     string
	OpponentName string
	MatchedAt    time.Time
}

// TicketTag returns the pool tag a ticket id starts with, or an error for
// a malformed id.
func TicketTag(id string) (string, error) {
	tag, rnd, ok := strings.Cut(id, ".")
	if !ok || len(tag) != 16 || len(rnd) != 16 || !isHex(tag) || !isHex(rnd) {
		return "", errors.New("ticket_id: malformed")
	}
	return tag, nil
}

func (s *Store) poolBase(tag string) string { return s.prefix + "mm:{p:" + tag + "}:" }
func (s *Store) registryKey() string        { return s.prefix + "mm:{pools}" }

// queueKeys are KEYS[1..3] of the queue scripts.
func (s *Store) queueKeys(tag string) []string {
	b := s.poolBase(tag)
	return []string{b + "q", b + "meta", b + "pl"}
}

// registryRefresh is how often one process refreshes a busy pool's entry
// in the registry.
const registryRefresh = 10 * time.Second

// EnterOutcome says what Enter did.
type EnterOutcome int

const (
	// Entered a new ticket.
	Entered EnterOutcome = iota
	// Duplicate: the request id was seen; the id is its ticket.
	Duplicate
	// Busy: the player already waits in this pool with the returned ticket.
	Busy
	// BusyElsewhere: the player already waits in another pool, or is
	// being paired there, with the returned ticket. (An entry to another
	// pool still being made is ErrRacedEntries: its ticket may never be.)
	BusyElsewhere
	// Withdrawn: the new ticket, entered by the start of a game of the
	// player's outside the queue, was withdrawn before it waited (see
	// GameBegan).
	Withdrawn
)

// defaultClaimGrace bounds the time between an entry's claim of the
// player's live-ticket record and the write of its ticket. A record older
// than that naming no ticket is an entry that failed, or a ticket expired,
// and holds nothing. An entry gives up before its script once half of it
// has passed since the date of its claim, on its own clock: the other half
// is for the clocks of replicas, which date claims, to disagree, and for
// the script's round trip.
const defaultClaimGrace = 10 * time.Second

// Enter puts a new ticket for t.Player into pool. keep is how long the
// ticket stays readable.
//
// A player has one live ticket (waiting, or paired while its game is made)
// at a time, across pools: paired in two pools at once, they would be
// handed two games. Each pool's script keeps one per pool; across pools,
// whose keys lie in other hash slots, a record of the player's live ticket
// does, claimed by compare-and-set before the ticket is written. Tickets
// never return to waiting, so a ticket seen ended stays ended.
//
// admit, when set, is asked only when a new ticket would be made: a retry
// and a live ticket of the player are answered as such first. Its error
// is returned, and nothing is entered.
func (s *Store) Enter(ctx context.Context, pool Pool, t Ticket, requestID string, keep time.Duration, admit func() error) (string, EnterOutcome, error) {
	tag := pool.Tag()
	b := s.poolBase(tag)
	requestKey := b + "r:" + t.Player + ":" + requestID
	// A retry is answered as it was, whatever the player entered since.
	prior, err := s.requestTicket(ctx, requestKey)
	if err != nil {
		return "", 0, err
	}
	if prior != "" {
		return s.duplicate(ctx, t.Player, tag, prior, requestKey, t.Entered, keep)
	}
	id := tag + "." + randomHex(8)
	// Others judge a claim's age by its date, and its budget counts from
	// it: the entry's time, or now, if that is ahead of this clock or
	// already a grace behind it (a request read that took that long).
	claimed := t.Entered
	if d := time.Since(claimed); d < 0 || d >= s.claimGrace {
		claimed = time.Now()
	}
	claim := liveRecord(id, claimed)
	prev, other, err := s.claimLive(ctx, t.Player, tag, claim, t.Entered, keep)
	if err != nil {
		return "", 0, err
	}
	if other != "" {
		if otherTag, _ := TicketTag(other); otherTag == tag {
			return s.busy(ctx, t, tag, requestKey, other, Busy, keep)
		}
		return s.busy(ctx, t, tag, requestKey, other, BusyElsewhere, keep)
	}
	if admit != nil {
		// The pool's own record of the player's ticket, as the script reads
		// it: the live-ticket record may name another entry's claim.
		held, err := s.liveInPool(ctx, tag, t.Player, t.Entered)
		if err == nil && held != "" {
			id, outcome, err := s.busy(ctx, t, tag, requestKey, held, Busy, keep)
			if swapErr := s.swapLive(ctx, t.Player, claim, liveRecord(held, t.Entered), keep); err == nil {
				err = swapErr
			}
			return id, outcome, err
		}
		if err == nil {
			err = admit()
		}
		if err != nil {
			// Best effort, as below.
			_ = s.swapLive(ctx, t.Player, claim, prev, keep)
			return "", 0, err
		}
	}
	// Register the pool before the ticket: an idle-pool sweep that races
	// with this sees the fresh score and keeps the pool (dropidle.lua).
	// Only now, for an entry that is not refused: a refused one enters no
	// ticket, and must not take one of the pools served at once (a player
	// waiting elsewhere, sending entries of other time controls, would
	// fill the bound for everyone).
	// Within registryRefresh of this process's last registration the write
	// is skipped: a pool is dropped only after an idle time far longer
	// than a ticket's lifetime plus registryRefresh, and never while a
	// ticket waits in it.
	if last, ok := s.registered.Load(pool.ID()); !ok || t.Entered.Sub(last.(time.Time)) > registryRefresh || t.Entered.Before(last.(time.Time)) {
		var ok bool
		err := s.write(ctx, s.registryKey(), func(c redis.Cmdable) (err error) {
			ok, err = registerScript.Run(ctx, c, []string{s.registryKey()}, pool.ID(), t.Entered.UnixMilli(), s.boundFor(pool)).Bool()
			return err
		})
		if err != nil {
			_ = s.swapLive(ctx, t.Player, claim, prev, keep)
			return "", 0, fmt.Errorf("register pool: %w", err)
		}
		if !ok {
			_ = s.swapLive(ctx, t.Player, claim, prev, keep)
			return "", 0, ErrTooManyPools
		}
		s.registered.Store(pool.ID(), t.Entered)
		s.pruneRegistered(t.Entered)
	}
	if time.Since(claimed) > s.claimGrace/2 {
		// Slow (a retried read, a WAIT, a pause): an entry to another pool
		// may soon take the claim for a dead one and enter. The retry
		// claims afresh.
		_ = s.swapLive(ctx, t.Player, claim, prev, keep)
		return "", 0, fmt.Errorf("enter ticket %v after its claim: %w", time.Since(claimed).Round(time.Millisecond), ErrSlowEntry)
	}
	// Only an entry that still holds its claim writes a ticket: another
	// entry of the player may have claimed the record since, whose date
	// and ticket, not this one's, others judge it by (an entry to another
	// pool may even have taken this claim for a dead one). The retry finds
	// the winner's ticket, or enters.
	cur, err := s.rdb.Get(ctx, s.liveKey(t.Player)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", 0, fmt.Errorf("read live ticket: %w", err)
	}
	if cur != claim {
		// A retry of this request that has written its ticket since is
		// the answer.
		if prior, err := s.requestTicket(ctx, requestKey); err != nil || prior != "" {
			if err != nil {
				return "", 0, err
			}
			return s.duplicate(ctx, t.Player, tag, prior, requestKey, t.Entered, keep)
		}
		return "", 0, fmt.Errorf("enter ticket: another entry claimed the player's record: %w", ErrRacedEntries)
	}
	keys := append(s.queueKeys(tag), b+"t:"+id, requestKey)
	var res []string
	err = s.write(ctx, keys[0], func(c redis.Cmdable) (err error) {
		res, err = enterScript.Run(ctx, c, keys,
			id, t.Player, t.Name, t.Rating, t.Entered.UnixMilli(), t.Expires.UnixMilli(),
			int64(keep/time.Second), b, pool.ID(), unixMilli(t.NamedAt), int64((keep+s.RequestGrace)/time.Second),
			s.claimGrace.Milliseconds(), claimed.UnixMilli()).StringSlice()
		return err
	})
	if err != nil {
		// The claim stays: the script may have run and its answer been
		// lost, and then the claim names the ticket, entering, which a
		// retry, answered from the request, lets wait. A claim of a ticket
		// never written holds nothing after the claim grace.
		return "", 0, fmt.Errorf("enter ticket: %w", err)
	}
	switch {
	case res[0] == "dup" && res[1] == id:
		// This entry's own script, run again by the client after its
		// answer was lost: the ticket is this call's, and waits as its
		// first answer would have let it.
	case res[0] == "dup":
		// Another attempt's ticket, whose own call may have died or lost
		// its answer before letting it wait: answered as a retry that
		// finds the request is (duplicate), once the record is put back.
		if err := s.swapLive(ctx, t.Player, claim, prev, keep); err != nil {
			return "", 0, err
		}
		return s.duplicate(ctx, t.Player, tag, res[1], requestKey, t.Entered, keep)
	case res[0] == "busy":
		return res[1], Busy, s.swapLive(ctx, t.Player, claim, liveRecord(res[1], t.Entered), keep)
	}
	if other, err := s.settle(ctx, t.Player, tag, res[1], claim, t.Entered, keep); err != nil || other != "" {
		if other != "" {
			return other, BusyElsewhere, nil
		}
		return "", 0, err
	}
	if withdrawn, err := s.withdrawIfBegan(ctx, t.Player, res[1], t.Entered); err != nil || withdrawn {
		return res[1], Withdrawn, err
	}
	if err := s.activate(ctx, tag, res[1], requestKey, claimed); err != nil {
		return "", 0, err
	}
	return res[1], Entered, nil
}

// duplicate answers a retry of the request that made ticket id. A ticket
// still entering (its entry's answer lost, or its process killed) is let
// wait as its entry would have, or yields; either way the retry is
// answered with the ticket as it is then.
func (s *Store) duplicate(ctx context.Context, player, tag, id, requestKey string, now time.Time, keep time.Duration) (string, EnterOutcome, error) {
	st, claimed, err := s.ticketState(ctx, id)
	if err != nil || st != StateEntering {
		return id, Duplicate, err
	}
	if _, err := s.settle(ctx, player, tag, id, "", now, keep); err != nil {
		return "", 0, err
	}
	t, err := s.Ticket(ctx, id)
	if err != nil {
		return "", 0, err
	}
	if withdrawn, err := s.withdrawIfBegan(ctx, player, id, t.Entered); err != nil || withdrawn {
		return id, Duplicate, err
	}
	if err := s.activate(ctx, tag, id, requestKey, claimed); err != nil && !errors.Is(err, ErrRacedEntries) {
		// Too late (ErrSlowEntry): the request is forgotten, and the next
		// retry enters afresh.
		return "", 0, err
	}
	return id, Duplicate, nil
}

// GameBegan records that a game of player's began outside the queue at
// since (an invite or a rematch accepted, a game against the AI), before
// the caller withdraws the player's live ticket entered by then. An entry
// of the player's dated by since that the caller does not see, its claim
// of the player's live-ticket record coming after the caller's read of it,
// finds this record once its ticket is written, and withdraws the ticket
// itself (withdrawIfBegan): the record and the live-ticket record share a
// hash slot, so one of the two always sees the other.
func (s *Store) GameBegan(ctx context.Context, player string, since time.Time) error {
	key := s.beganKey(player)
	err := s.write(ctx, key, func(c redis.Cmdable) error {
		// Past an entry's budget from its claim, which came after the
		// caller's read, and room for the clocks of replicas to disagree.
		return beganScript.Run(ctx, c, []string{key}, since.UnixMilli(), (2 * s.claimGrace).Milliseconds()).Err()
	})
	if err != nil {
		return fmt.Errorf("record a game begun outside the queue: %w", err)
	}
	return nil
}

func (s *Store) beganKey(player string) string { return s.prefix + "mm:{u:" + player + "}:began" }

// withdrawIfBegan cancels entering ticket id of player's, entered at
// entered, if a game of the player's began outside the queue since
// (GameBegan): a ticket of the same millisecond is taken for entered
// before.
func (s *Store) withdrawIfBegan(ctx context.Context, player, id string, entered time.Time) (bool, error) {
	ms, err := s.rdb.Get(ctx, s.beganKey(player)).Int64()
	if errors.Is(err, redis.Nil) || err == nil && ms < entered.UnixMilli() {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read games begun outside the queue: %w", err)
	}
	out, err := s.Cancel(ctx, id, player)
	if err != nil {
		return false, fmt.Errorf("withdraw ticket %s: %w", id, err)
	}
	if out != CancelDone {
		return false, nil
	}
	return true, s.Publish(ctx, id)
}

// activate lets entering ticket id, whose claim is dated claimed, wait for
// pairing, unless half the claim grace has passed since (ErrSlowEntry: it
// is expired, and its request, at requestKey, forgotten, so that a retry
// enters afresh) or it has ended meanwhile (ErrRacedEntries).
func (s *Store) activate(ctx context.Context, tag, id, requestKey string, claimed time.Time) error {
	b := s.poolBase(tag)
	keys := append(s.queueKeys(tag), b+"t:"+id, requestKey)
	var res string
	err := s.write(ctx, keys[0], func(c redis.Cmdable) (err error) {
		res, err = activateScript.Run(ctx, c, keys, id, claimed.Add(s.claimGrace/2).UnixMilli()).Text()
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("let ticket wait: %w", err)
	case res == "ok":
		return nil
	case res == "late":
		return fmt.Errorf("let ticket wait: %w", ErrSlowEntry)
	}
	return fmt.Errorf("let ticket wait: it is %q: %w", res, ErrRacedEntries)
}

// settle makes sure, before ticket id (entering, its entry's claim
// claim, "" for a retry's) waits, that the player's live-ticket record
// names it, should another entry have claimed the record while this one
// was between its last check and its script: one of the same pool (whose
// ticket, if written, has ended, the pool's script having entered this
// one), or one of another pool that found the record naming nothing live.
// If the record then keeps the player in another pool, this ticket yields
// (cancelled, never having waited) and other is that pool's ticket, or
// ErrRacedEntries if that one is still on its way.
func (s *Store) settle(ctx context.Context, player, tag, id, claim string, now time.Time, keep time.Duration) (other string, err error) {
	key := s.liveKey(player)
	for range 3 {
		cur, err := s.rdb.Get(ctx, key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", fmt.Errorf("read live ticket: %w", err)
		}
		curID, _, _ := strings.Cut(cur, "|")
		if (claim != "" && cur == claim) || curID == id {
			return "", nil
		}
		if curTag, terr := TicketTag(curID); terr == nil && curTag == tag {
			if _, live, err := s.ticketLive(ctx, curID, now); err != nil || live {
				return "", err
			}
		} else if cur != "" {
			other, err := s.holdingTicket(ctx, player, cur, tag, now)
			if other != "" || errors.Is(err, ErrRacedEntries) {
				if out, cerr := s.Cancel(ctx, id, player); cerr != nil {
					return "", fmt.Errorf("withdraw ticket %s: %w", id, cerr)
				} else if out != CancelDone {
					// Let wait by a retry, and paired since: too late.
					return "", fmt.Errorf("withdraw ticket %s for %s: %s", id, other, out)
				}
				if other == "" {
					return "", fmt.Errorf("enter ticket: an entry to another pool is on its way: %w", ErrRacedEntries)
				}
				return other, nil
			}
			if err != nil {
				return "", err
			}
		}
		ok, err := s.casLive(ctx, player, cur, liveRecord(id, now), keep)
		if err != nil {
			return "", fmt.Errorf("record live ticket: %w", err)
		}
		if ok {
			return "", nil
		}
	}
	return "", fmt.Errorf("record live ticket: %w", ErrRacedEntries)
}

// requestTicket reads the ticket made for a request, "" for none yet.
func (s *Store) requestTicket(ctx context.Context, requestKey string) (string, error) {
	var id string
	err := s.write(ctx, requestKey, func(c redis.Cmdable) (err error) {
		id, err = c.Get(ctx, requestKey).Result()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("read request: %w", err)
	}
	return id, nil
}

// busy answers an entry that found ticket other in its way with outcome,
// unless the request has a ticket now: a retry read its request before
// its first call, still being served, wrote that ticket, which is then the
// one in the way, and the retry's answer is the first's.
func (s *Store) busy(ctx context.Context, t Ticket, tag, requestKey, other string, outcome EnterOutcome, keep time.Duration) (string, EnterOutcome, error) {
	prior, err := s.requestTicket(ctx, requestKey)
	switch {
	case err != nil:
		return "", 0, err
	case prior != "":
		return s.duplicate(ctx, t.Player, tag, prior, requestKey, t.Entered, keep)
	}
	return other, outcome, nil
}

func (s *Store) liveKey(player string) string { return s.prefix + "mm:{u:" + player + "}:live" }

// liveRecord is a live-ticket record: the ticket and when it was claimed.
func liveRecord(id string, claimed time.Time) string {
	return id + "|" + strconv.FormatInt(claimed.UnixMilli(), 10)
}

// claimLive makes claim the player's live-ticket record, unless the record
// names a ticket that keeps the player out of pool tag: then it returns
// that ticket as other (of pool tag itself when the player waits there).
// prev is the record replaced.
func (s *Store) claimLive(ctx context.Context, player, tag, claim string, now time.Time, keep time.Duration) (prev, other string, err error) {
	key := s.liveKey(player)
	// Each round fails only when another entry of the same player claimed
	// the record in between; the next round then finds that entry's ticket.
	for range 3 {
		cur, err := s.rdb.Get(ctx, key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", "", fmt.Errorf("read live ticket: %w", err)
		}
		if other, err = s.holdingTicket(ctx, player, cur, tag, now); err != nil || other != "" {
			return "", other, err
		}
		ok, err := s.casLive(ctx, player, cur, claim, keep)
		if err != nil {
			return "", "", fmt.Errorf("claim live ticket: %w", err)
		}
		if ok {
			return cur, "", nil
		}
	}
	return "", "", fmt.Errorf("claim live ticket: %w", ErrRacedEntries)
}

// ErrSlowEntry means that an entry took so long between its claim of the
// player's live-ticket record and the write of its ticket that it gave up:
// nothing was entered, and a retry claims afresh.
var ErrSlowEntry = errors.New("the entry was too slow to be made safely")

// ErrRacedEntries means that other entries of the same player kept
// claiming the player's live-ticket record first, or that one to another
// pool is being made: a retry finds its ticket, or enters.
var ErrRacedEntries = errors.New("other entries of the same player keep racing this one")

// holdingTicket returns the ticket a live-ticket record names when it
// keeps the player out of pool tag: one that waits or is paired. The
// record is the player's last claim, which names a ticket that may never
// have been written (its entry failed, was killed, or was answered busy
// and lost the answer) or that has ended: then the pool it names is read,
// and a live ticket of the player there is returned instead, since the
// pool's own record of its tickets is the truth of it. A claim of another
// pool within claimGrace, its ticket not written yet and none live there,
// is ErrRacedEntries: that entry may yet be refused, and its ticket never
// be, so it is no ticket to name to the player. A live ticket of pool tag
// itself is returned too, though the pool's script would refuse the entry
// as well. A claim of pool tag not written yet is left to the pool's
// script, which keeps one ticket per player.
func (s *Store) holdingTicket(ctx context.Context, player, record, tag string, now time.Time) (string, error) {
	id, claimedMs, ok := strings.Cut(record, "|")
	idTag, err := TicketTag(id)
	if !ok || err != nil {
		return "", nil
	}
	found, live, err := s.ticketLive(ctx, id, now)
	switch {
	case err != nil:
		return "", err
	case live:
		return id, nil
	case idTag == tag:
		return "", nil
	}
	if held, err := s.liveInPool(ctx, idTag, player, now); err != nil || held != "" {
		return held, err
	}
	if !found {
		if age := now.Sub(ms(claimedMs)); age < s.claimGrace && age > -s.claimGrace {
			return "", ErrRacedEntries
		}
	}
	return "", nil
}

// LiveTicket returns the player's ticket that waits, is paired or is
// entering, in whichever pool ("" when none): the one the live-ticket
// record names, or the player's in the pool the record names. It is
// ErrRacedEntries while an entry of the player is on its way, its ticket
// not written yet: within EntryBudget that entry writes it, or gives up.
func (s *Store) LiveTicket(ctx context.Context, player string, now time.Time) (string, error) {
	record, err := s.rdb.Get(ctx, s.liveKey(player)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("read live ticket: %w", err)
	}
	return s.holdingTicket(ctx, player, record, "", now)
}

// EntryBudget is how long an entry may take from its claim of the
// player's live-ticket record to its ticket waiting.
func (s *Store) EntryBudget() time.Duration { return s.claimGrace / 2 }

// liveInPool returns player's ticket in pool tag when it waits or is
// paired: the pool's script would answer the entry busy.
func (s *Store) liveInPool(ctx context.Context, tag, player string, now time.Time) (string, error) {
	id, err := s.rdb.HGet(ctx, s.queueKeys(tag)[2], player).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read ticket of %s: %w", player, err)
	}
	if _, live, err := s.ticketLive(ctx, id, now); !live {
		return "", err
	}
	return id, nil
}

// ticketLive reads whether ticket id waits or is paired, or is entering
// and its entry, judged at now, may still be on its way; found is false
// when it is not stored (not yet, or no longer).
func (s *Store) ticketLive(ctx context.Context, id string, now time.Time) (found, live bool, err error) {
	state, claimed, err := s.ticketState(ctx, id)
	if err != nil || state == "" {
		return false, false, err
	}
	if state == StateEntering {
		age := now.Sub(claimed)
		return true, age < s.claimGrace && age > -s.claimGrace, nil
	}
	return true, state == StateWaiting || state == StatePaired, nil
}

// ticketState reads ticket id's state ("" when it is not stored) and the
// date of its entry's claim.
func (s *Store) ticketState(ctx context.Context, id string) (string, time.Time, error) {
	tag, err := TicketTag(id)
	if err != nil {
		return "", time.Time{}, err
	}
	f, err := s.rdb.HMGet(ctx, s.poolBase(tag)+"t:"+id, "state", "claimed").Result()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("read ticket: %w", err)
	}
	state, _ := f[0].(string)
	claimed, _ := f[1].(string)
	return state, ms(claimed), nil
}

// swapLive sets the player's live-ticket record from want to record ("":
// none), unless another entry changed it since.
func (s *Store) swapLive(ctx context.Context, player, want, record string, keep time.Duration) error {
	if _, err := s.casLive(ctx, player, want, record, keep); err != nil {
		return fmt.Errorf("restore live ticket: %w", err)
	}
	return nil
}

// casLive sets the player's live-ticket record from want to record ("":
// none), kept keep, and reports whether it was want.
func (s *Store) casLive(ctx context.Context, player, want, record string, keep time.Duration) (bool, error) {
	key := s.liveKey(player)
	var ok bool
	err := s.write(ctx, key, func(c redis.Cmdable) (err error) {
		ok, err = swapLiveScript.Run(ctx, c, []string{key}, want, record, int64(keep/time.Second)).Bool()
		return err
	})
	return ok, err
}

// pruneRegistered drops the entries of registered that skip nothing any
// more, at most once per registryRefresh.
func (s *Store) pruneRegistered(now time.Time) {
	last := s.pruned.Load()
	if now.UnixMilli()-last < registryRefresh.Milliseconds() || !s.pruned.CompareAndSwap(last, now.UnixMilli()) {
		return
	}
	s.registered.Range(func(k, v any) bool {
		if now.Sub(v.(time.Time)) > registryRefresh {
			// Only the old time: another Enter may have stored a fresh one.
			s.registered.CompareAndDelete(k, v)
		}
		return true
	})
}

// boundFor is the most pools served at once that pool's registration
// checks: none for a pool of the default time control, which is always
// served, so that custom time controls filling the bound (one guest can
// open them all) lock nobody out of the queue.
func (s *Store) boundFor(pool Pool) int {
	if pool.Control == clock.Default() {
		return 0
	}
	return s.MaxPools
}

// Ticket reads a ticket.
func (s *Store) Ticket(ctx context.Context, id string) (Ticket, error) {
	tag, err := TicketTag(id)
	if err != nil {
		return Ticket{}, err
	}
	m, err := s.rdb.HGetAll(ctx, s.poolBase(tag)+"t:"+id).Result()
	if err != nil {
		return Ticket{}, fmt.Errorf("read ticket: %w", err)
	}
	if len(m) == 0 {
		return Ticket{}, ErrNotFound
	}
	t := ticketFrom(id, m)
	if t.State == StateEntering && time.Since(ms(m["claimed"])) >= 2*s.claimGrace {
		// Its entry died, and no retry came: it can never wait (activate
		// refuses it after half the grace), it holds the player nowhere
		// after the grace, and it ends, as it would have, after twice the
		// grace, so that no replica's clock within the skew allowed still
		// takes it for live.
		t.State = StateExpired
	}
	return t, nil
}

func ticketFrom(id string, m map[string]string) Ticket {
	return Ticket{
		ID: id, Pool: m["pool"], Player: m["player"], Name: m["name"], NamedAt: ms(m["named"]), Rating: atoi(m["rating"]),
		Entered: ms(m["enq"]), Expires: ms(m["exp"]), State: m["state"], Match: m["match"],
		Game: m["game"], Side: m["side"], Token: m["token"], TokenExpires: ms(m["tokexp"]),
		Opponent: m["opp"], OpponentName: m["opp_name"], MatchedAt: ms(m["matched_at"]),
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// unixMilli is t in Unix ms as ms reads it back: "" for the zero time.
func unixMilli(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

func ms(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.UnixMilli(n)
}

// CancelOutcome says what Cancel did.
type CancelOutcome string

const (
	CancelNotFound CancelOutcome = "nf"
	CancelNotOwner CancelOutcome = "perm"
	CancelDone     CancelOutcome = "ok"
	// CancelTooLate: an opponent was already found.
	CancelTooLate CancelOutcome = "late"
)

// Cancel takes player's waiting ticket out of its pool.
func (s *Store) Cancel(ctx context.Context, id, player string) (CancelOutcome, error) {
	tag, err := TicketTag(id)
	if err != nil {
		return "", err
	}
	keys := append(s.queueKeys(tag), s.poolBase(tag)+"t:"+id)
	var res string
	err = s.write(ctx, keys[0], func(c redis.Cmdable) (err error) {
		res, err = cancelScript.Run(ctx, c, keys, player, (s.claimGrace / 2).Milliseconds()).Text()
		return err
	})
	if err != nil {
		return "", fmt.Errorf("cancel ticket: %w", err)
	}
	return CancelOutcome(res), nil
}

// Pools lists the pools that had a ticket recently, with the time of
// their last entry.
func (s *Store) Pools(ctx context.Context) (map[Pool]time.Time, error) {
	zs, err := s.rdb.ZRangeWithScores(ctx, s.registryKey(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	out := make(map[Pool]time.Time, len(zs))
	for _, z := range zs {
		p, err := ParsePool(z.Member.(string))
		if err != nil {
			continue // written by a newer version; not ours to pair
		}
		out[p] = time.UnixMilli(int64(z.Score))
	}
	return out, nil
}

// PairParams tune a pairing pass.
type PairParams struct {
	Now time.Time
	// BaseWindow is the rating difference accepted at once; it grows by
	// WidenPerSecond for every second a ticket waits, up to MaxWindow
	// (0: without bound, so any two tickets of a pool pair eventually).
	BaseWindow, WidenPerSecond, MaxWindow float64
	MaxPairs                              int
	// Keep is how long match records and tickets stay readable; a match
	// no less than its tickets.
	Keep time.Duration
}

// Match is two paired tickets.
type Match struct {
	ID   string
	A, B string
	// PairedAt is when the tickets were paired (read back with the match).
	PairedAt time.Time
	// Who holds the tickets, when known (a pass returns them).
	PlayerA, PlayerB Seated
}

// Seated is a paired ticket's player.
type Seated struct {
	ID, Name string
	// NamedAt is when Name was given (Player.NamedAt).
	NamedAt time.Time
	Entered time.Time
}

// PairResult is one pool's pass.
type PairResult struct {
	Pool    Pool
	Matches []Match
	Expired []string
	Err     error
}

// Pair runs one pairing pass over each pool, in one round trip; with
// Replication, one pool after another, each confirmed before its matches
// are started (a pool whose wait failed reports the error, and its
// matches are taken over as stalled).
func (s *Store) Pair(ctx context.Context, pools []Pool, p PairParams) []PairResult {
	keys := func(pool Pool) []string {
		b := s.poolBase(pool.Tag())
		return append(s.queueKeys(pool.Tag()), b+"creating", b+"seq")
	}
	args := func(pool Pool) []any {
		return []any{s.poolBase(pool.Tag()), p.Now.UnixMilli(), p.BaseWindow, p.WidenPerSecond, p.MaxWindow, p.MaxPairs, pool.Tag(), int64(p.Keep / time.Second)}
	}
	replies := make([]func() ([]any, error), len(pools))
	if s.waits() {
		for i, pool := range pools {
			var v []any
			k := keys(pool)
			err := s.write(ctx, k[0], func(c redis.Cmdable) (err error) {
				v, err = pairScript.Run(ctx, c, k, args(pool)...).Slice()
				return err
			})
			replies[i] = func() ([]any, error) { return v, err }
		}
		return pairResults(pools, replies)
	}
	calls := make([]redisx.ScriptCall, len(pools))
	for i, pool := range pools {
		calls[i] = redisx.ScriptCall{Keys: keys(pool), Args: args(pool)}
	}
	for i, c := range redisx.RunScripts(ctx, s.rdb, pairScript, calls) {
		replies[i] = c.Slice
	}
	return pairResults(pools, replies)
}

// pairResults reads each pool's pass from its script's reply.
func pairResults(pools []Pool, replies []func() ([]any, error)) []PairResult {
	out := make([]PairResult, len(pools))
	for i, reply := range replies {
		out[i].Pool = pools[i]
		v, err := reply()
		if err != nil {
			out[i].Err = fmt.Errorf("pair pool %s: %w", pools[i].ID(), err)
			continue
		}
		if len(v) != 2 {
			out[i].Err = fmt.Errorf("pair pool %s: unexpected reply %v", pools[i].ID(), v)
			continue
		}
		m := strs(v[0])
		for j := 0; j+10 < len(m); j += 11 {
			out[i].Matches = append(out[i].Matches, Match{
				ID: m[j], A: m[j+1], B: m[j+2],
				PlayerA: Seated{ID: m[j+3], Name: m[j+4], Entered: ms(m[j+5]), NamedAt: ms(m[j+6])},
				PlayerB: Seated{ID: m[j+7], Name: m[j+8], Entered: ms(m[j+9]), NamedAt: ms(m[j+10])},
			})
		}
		out[i].Expired = strs(v[1])
	}
	return out
}

func strs(v any) []string {
	xs, _ := v.([]any)
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// MatchTickets reads a match and both of its tickets.
func (s *Store) MatchTickets(ctx context.Context, pool Pool, matchID string) (Match, Ticket, Ticket, error) {
	b := s.poolBase(pool.Tag())
	m, err := s.rdb.HGetAll(ctx, b+"m:"+matchID).Result()
	if err != nil {
		return Match{}, Ticket{}, Ticket{}, fmt.Errorf("read match: %w", err)
	}
	if m["a"] == "" || m["b"] == "" {
		return Match{}, Ticket{}, Ticket{}, ErrNotFound
	}
	mt := Match{ID: matchID, A: m["a"], B: m["b"], PairedAt: ms(m["at"])}
	a, b2, err := s.tickets(ctx, pool, mt)
	mt.PlayerA = Seated{ID: a.Player, Name: a.Name, NamedAt: a.NamedAt, Entered: a.Entered}
	mt.PlayerB = Seated{ID: b2.Player, Name: b2.Name, NamedAt: b2.NamedAt, Entered: b2.Entered}
	return mt, a, b2, err
}

// tickets reads both tickets of a match in one round trip.
func (s *Store) tickets(ctx context.Context, pool Pool, m Match) (Ticket, Ticket, error) {
	b := s.poolBase(pool.Tag())
	pipe := s.rdb.Pipeline()
	ca := pipe.HGetAll(ctx, b+"t:"+m.A)
	cb := pipe.HGetAll(ctx, b+"t:"+m.B)
	if _, err := pipe.Exec(ctx); err != nil {
		return Ticket{}, Ticket{}, fmt.Errorf("read tickets: %w", err)
	}
	if len(ca.Val()) == 0 || len(cb.Val()) == 0 {
		return Ticket{}, Ticket{}, ErrNotFound
	}
	return ticketFrom(m.A, ca.Val()), ticketFrom(m.B, cb.Val()), nil
}

// Tickets reads both tickets of a match.
func (s *Store) Tickets(ctx context.Context, pool Pool, m Match) (Ticket, Ticket, error) {
	return s.tickets(ctx, pool, m)
}

// Grant is one ticket's seat in a created game.
type Grant struct {
	Side    string
	Token   string
	Expires time.Time
}

// Finish records the game of a match on both tickets and notifies their
// watchers. It reports whether this call did it (false: it already was,
// by a retry or another replica). When record is set, the game's record
// (store.SaveGame, without pending rating) is written first: a match is
// complete only with it.
func (s *Store) Finish(ctx context.Context, pool Pool, m Match, gameID string, a, b Grant, now time.Time, keep time.Duration, record *Game, recordKeep time.Duration) (bool, error) {
	if record != nil {
		if err := s.SaveGame(ctx, *record, recordKeep, nil); err != nil {
			return false, err
		}
	}
	keys, channel := s.matchWrite(pool, m)
	var n int
	err := s.write(ctx, keys[0], func(c redis.Cmdable) (err error) {
		n, err = finishScript.Run(ctx, c, keys, m.ID, gameID, a.Side, a.Token, a.Expires.UnixMilli(), b.Side, b.Token, b.Expires.UnixMilli(),
			now.UnixMilli(), int64(keep/time.Second), channel).Int()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("finish match: %w", err)
	}
	if n < 0 {
		// Left among the matches being created (finish.lua): whoever gave
		// it up takes it out once its game is undone.
		return false, ErrMatchVoid
	}
	if s.waits() {
		// Also when a retry found the match finished: the attempt that
		// finished it failed its wait and told nobody.
		if err := s.Publish(ctx, m.A, m.B); err != nil {
			return false, fmt.Errorf("notify the tickets of match %s: %w", m.ID, err)
		}
		if err := s.DropStalled(ctx, pool, m.ID); err != nil {
			return false, err
		}
	}
	return n == 1, nil
}

// matchWrite is what finish.lua and void.lua take: the keys of a match
// and its tickets, and the channel to tell the tickets' watchers on, or ""
// when the caller tells them once replicas confirm the change.
func (s *Store) matchWrite(pool Pool, m Match) (keys []string, channel string) {
	base := s.poolBase(pool.Tag())
	keys = []string{base + "creating", base + "m:" + m.ID, base + "t:" + m.A, base + "t:" + m.B, base + "pl"}
	if s.waits() {
		return keys, ""
	}
	return keys, s.Channel()
}

// ErrMatchVoid: the match was given up (Void) before its game was
// recorded, or is gone.
var ErrMatchVoid = errors.New("match given up")

// MarkMade notes on a match the game made for it, before anything lists
// the game for its players: a replica that gives the match up (Void)
// then learns of the game and undoes it, even when the one that made it
// died. It returns ErrMatchVoid when the match was given up (or is gone):
// nobody undoes a game noted after that, so it must be listed nowhere.
func (s *Store) MarkMade(ctx context.Context, pool Pool, matchID, gameID string) error {
	key := s.poolBase(pool.Tag()) + "m:" + matchID
	var n int
	err := s.write(ctx, key, func(c redis.Cmdable) (err error) {
		n, err = markMadeScript.Run(ctx, c, []string{key}, gameID).Int()
		return err
	})
	if err != nil {
		return fmt.Errorf("note the game of match %s: %w", matchID, err)
	}
	if n == 0 {
		return ErrMatchVoid
	}
	return nil
}

// Voided is what Void did.
type Voided struct {
	// GaveUp is false when the match's game was recorded first.
	GaveUp bool
	// Made is the game noted for the match (MarkMade), if any.
	Made string
	// Since is when the match was first given up.
	Since time.Time
}

// Void gives up a match whose game could not be made, or finds it given
// up already: both tickets end expired, kept at least keep, and their
// players may enter again. A match with a game noted for it (Voided.Made) stays among
// those being created until the caller has undone the game and dropped
// it (DropStalled), so that a failure to undo it is retried, by Void
// again.
func (s *Store) Void(ctx context.Context, pool Pool, m Match, now time.Time, keep time.Duration) (Voided, error) {
	keys, channel := s.matchWrite(pool, m)
	var res []any
	err := s.write(ctx, keys[0], func(c redis.Cmdable) (err error) {
		res, err = voidScript.Run(ctx, c, keys, m.ID, now.UnixMilli(), channel, int64(keep/time.Second)).Slice()
		return err
	})
	if err != nil {
		return Voided{}, fmt.Errorf("give up match %s: %w", m.ID, err)
	}
	if len(res) != 3 {
		return Voided{}, fmt.Errorf("give up match %s: unexpected reply %v", m.ID, res)
	}
	n, _ := res[0].(int64)
	made, _ := res[1].(string)
	since, _ := res[2].(int64)
	v := Voided{GaveUp: n == 1, Made: made, Since: time.UnixMilli(since)}
	if v.GaveUp && s.waits() {
		// Also when a retry found the match given up already: the attempt
		// that gave it up failed its wait and told nobody.
		if err := s.Publish(ctx, m.A, m.B); err != nil {
			return v, fmt.Errorf("notify the tickets of match %s: %w", m.ID, err)
		}
		if made == "" {
			if err := s.DropStalled(ctx, pool, m.ID); err != nil {
				return v, err
			}
		}
	}
	return v, nil
}

// ClaimStalled takes over matches whose game creation began before cutoff
// (its creator crashed or failed), restarting their lease at now.
func (s *Store) ClaimStalled(ctx context.Context, pool Pool, cutoff, now time.Time, limit int) ([]string, error) {
	ids, err := claimScript.Run(ctx, s.rdb, []string{s.poolBase(pool.Tag()) + "creating"}, cutoff.UnixMilli(), now.UnixMilli(), limit).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("claim stalled matches: %w", err)
	}
	return ids, nil
}

// DropStalled forgets a match that cannot be completed (its records
// expired).
func (s *Store) DropStalled(ctx context.Context, pool Pool, matchID string) error {
	if err := s.rdb.ZRem(ctx, s.poolBase(pool.Tag())+"creating", matchID).Err(); err != nil {
		return fmt.Errorf("drop stalled match: %w", err)
	}
	return nil
}

// Counts are a pool's waiting tickets and unfinished matches.
type Counts struct{ Waiting, Creating int64 }

// Count reads the sizes of several pools in one round trip.
func (s *Store) Count(ctx context.Context, pools []Pool) ([]Counts, error) {
	pipe := s.rdb.Pipeline()
	type pair struct{ q, c *redis.IntCmd }
	cmds := make([]pair, len(pools))
	for i, p := range pools {
		b := s.poolBase(p.Tag())
		cmds[i] = pair{pipe.ZCard(ctx, b+"q"), pipe.ZCard(ctx, b+"creating")}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("count pools: %w", err)
	}
	out := make([]Counts, len(pools))
	for i, c := range cmds {
		out[i] = Counts{Waiting: c.q.Val(), Creating: c.c.Val()}
	}
	return out, nil
}

// DropIdle forgets pool when it had no entry since cutoff; the caller has
// checked that it is empty.
func (s *Store) DropIdle(ctx context.Context, pool Pool, cutoff time.Time) (bool, error) {
	n, err := dropIdleScript.Run(ctx, s.rdb, []string{s.registryKey()}, pool.ID(), cutoff.UnixMilli()).Int()
	if err != nil {
		return false, fmt.Errorf("drop idle pool: %w", err)
	}
	return n == 1, nil
}
