package clock_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/palacehq/palace/pkg/clock"
)

func Example() {
	c, err := clock.ParseControl("5m+3x30s")
	if err != nil {
		panic(err)
	}
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	s, _ := clock.New(c).Start(start, clock.First)

	// First thinks 5m40s: main time is gone and the first period ran out.
	moved := start.Add(5*time.Minute + 40*time.Second)
	s, _ = s.Move(moved, 0)
	p := s.Players[clock.First]
	fmt.Println(p.Main(), p.Periods, p.Period(), p.InByoYomi)

	// Second's turn: what the sweeper should wait for.
	d, _ := s.Deadline()
	at, kind, _ := s.NextMilestone(moved)
	fmt.Println(d.Sub(start), kind, at.Sub(start))

	// A move one millisecond after the deadline loses on time.
	_, err = s.Move(d.Add(time.Millisecond), 0)
	var fe *clock.FlagError
	fmt.Println(errors.Is(err, clock.ErrFlagged), errors.As(err, &fe) && fe.Side == clock.Second)
	// Output:
	// 0s 2 30s true
	// 12m10s entered_byoyomi 10m40s
	// true true
}
