// Package clock implements server-authoritative game clocks for Janggi and
// Xiangqi: byo-yomi (main time followed by fixed-length periods), Fischer
// (main time plus an increment after each move) and "no clock" (games
// against the AI).
//
// # Model
//
// A game's clock is a [State]: a small value (arrays and integers only, no
// pointers, slices or maps) that the game service stores next to the board,
// for example as JSON in Redis. Every duration inside it is an int64 count
// of milliseconds and every instant a Unix time in milliseconds, so the
// encoding is exact and language-neutral. A State only records what each
// player had when the running side's turn started ([State.TurnStartMs]);
// the time spent since then is derived from the caller's "now". Nothing
// ticks in the background and the package never reads the system clock:
// every method that needs the time takes it as an argument, which keeps
// the arithmetic deterministic, testable and safe to replay. Methods never
// modify their receiver; they return a new State.
//
// The lifecycle is [New] (idle) → [State.Start] (running) →
// [State.Move]… → [State.Stop] (stopped, final values kept; Start may
// resume it). Move charges the mover the time since its turn started,
// consumes byo-yomi periods or adds the Fischer increment, and starts the
// opponent's clock at the same instant.
//
// # Byo-yomi
//
// Main time is spent first. When it reaches zero the player is "in
// byo-yomi" and each move must then be made within one period. A move made
// within the period does not consume it: the next turn starts with a full
// period again. Each time a whole period runs out a period is lost and a
// fresh one starts immediately, so one long think can cost several periods.
// The player whose last period runs out loses on time. Main time and
// periods are one budget: the deadline of a turn is its start plus the main
// time left plus the time left in the current period plus the remaining
// full periods.
//
// # Boundary rule
//
// Time is counted in whole milliseconds (sub-millisecond parts of the
// instants passed in are dropped, rounding towards the past) and every
// boundary belongs to the player: having exactly zero left is still in
// time. A move exactly at [State.Deadline] is accepted (under a
// [LagPolicy], only if its reported lag covers the grace the deadline
// includes: see Lag compensation); the player is flagged from the next
// millisecond on, so [State.Flag] is false at the deadline and true one
// millisecond later. Periods follow the same rule: a
// move exactly at the end of a period keeps that period, and the period is
// lost one millisecond after its end. This is why the instants reported by
// [State.Events] for "period used" and "flagged" lie one millisecond after
// the boundary: each event's instant is the first one at which
// [State.Snapshot] shows it, so a sweeper that sleeps until
// [State.NextMilestone] and then calls Flag sees the flag immediately.
//
// A "now" earlier than the turn start (a server clock stepping back) is
// treated as no time elapsed rather than as time given back.
//
// # Excused time
//
// [State.Excuse] leaves part of the running turn uncharged, as if it had
// started that much later: time in which the side could not move because
// the service could not take moves. The largest total given during a turn
// counts (so excusing is idempotent), never more than the turn has lasted;
// the turn's deadline and milestones move later with it, and the next turn
// starts with nothing excused.
//
// # Lag compensation
//
// A [LagPolicy] (zero by default: no compensation) lets the service credit
// back part of the network delay a client reports for its move. Each player
// has a lag bank (starting full at [LagPolicy.BankCap], see
// [State.WithLag]). On a move, a reported lag that is negative or larger
// than [MaxReportedLag] is treated as 0; otherwise the credit is the
// smallest of the reported lag, MaxPerMove, the player's bank and the time
// actually elapsed, so the charged time never becomes negative. The credit
// is debited from the bank, then the bank refills by RefillPerMove, never
// above BankCap. The credit applies to the timeliness check too: a move
// arriving after the clock reached zero is in time if the credit covers the
// overrun. So that a sweeper never flags a player whose move could still be
// rescued that way, [State.Deadline], [State.Flag] and the "flagged" event
// include a grace equal to the largest credit the running player could
// still obtain (min(MaxPerMove, bank, MaxReportedLag)); with the zero policy
// the grace is zero and the deadline is exactly main time plus periods.
// During the grace [State.Snapshot] shows the player at zero but not
// flagged. Milestones before the flag (entering byo-yomi, periods used)
// describe the clock as the server sees it; a later move with a lag credit
// may land before a milestone that was already announced, and the State it
// returns is authoritative. So may a move the service judges at an instant
// before a milestone announced meanwhile (its commit raced the
// announcement's).
package clock
