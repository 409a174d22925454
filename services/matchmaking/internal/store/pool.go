package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/palacehq/palace/pkg/clock"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	"github.com/palacehq/palace/pkg/rulespb"
)

// Pool is one queue: players in it want the same game kind, time control
// and rated or casual, so any two of them can be paired.
type Pool struct {
	Kind    commonv1.GameKind
	Control clock.Control
	Rated   bool
}

// KindName is the short name of a game kind used in keys and pool ids.
func KindName(k commonv1.GameKind) (string, error) {
	switch k {
	case commonv1.GameKind_GAME_KIND_JANGGI:
		return "janggi", nil
	case commonv1.GameKind_GAME_KIND_XIANGQI:
		return "xiangqi", nil
	}
	// The rules' words: they say why an unknown name in JSON arrives unset.
	if _, err := rulespb.Variant(k); err != nil {
		return "", err
	}
	return "", fmt.Errorf("kind: %v is not played through matchmaking", k)
}

func kindFromName(s string) (commonv1.GameKind, error) {
	switch s {
	case "janggi":
		return commonv1.GameKind_GAME_KIND_JANGGI, nil
	case "xiangqi":
		return commonv1.GameKind_GAME_KIND_XIANGQI, nil
	}
	return 0, fmt.Errorf("unknown game kind %q", s)
}

// ID names the pool readably, e.g. "janggi/5m+3x30s/rated".
func (p Pool) ID() string { return p.named(p.Control.String()) }

// MetricLabel names the pool in the metrics (tickets waiting, matches,
// time to match, expiries): its id for the default time
// control, "<kind>/custom/<mode>" for any other. Players choose controls
// freely, and a label for each would be a series kept for good.
func (p Pool) MetricLabel() string {
	if p.Control == clock.Default() {
		return p.ID()
	}
	return p.named("custom")
}

func (p Pool) named(control string) string {
	k, _ := KindName(p.Kind)
	mode := "casual"
	if p.Rated {
		mode = "rated"
	}
	return k + "/" + control + "/" + mode
}

// Tag is the pool's hash tag: every key of a pool shares it, so one Lua
// script can pair two of its tickets atomically in Redis Cluster. It is a
// hash of the id so that ticket ids (which start with it) stay short.
func (p Pool) Tag() string {
	sum := sha256.Sum256([]byte(p.ID()))
	return hex.EncodeToString(sum[:8])
}

// ParsePool reads an id made by ID.
func ParsePool(id string) (Pool, error) {
	parts := strings.Split(id, "/")
	if len(parts) != 3 {
		return Pool{}, fmt.Errorf("pool id %q: want kind/control/mode", id)
	}
	k, err := kindFromName(parts[0])
	if err != nil {
		return Pool{}, err
	}
	c, err := clock.ParseControl(parts[1])
	if err != nil {
		return Pool{}, err
	}
	if parts[2] != "rated" && parts[2] != "casual" {
		return Pool{}, fmt.Errorf("pool id %q: mode must be rated or casual", id)
	}
	return Pool{Kind: k, Control: c, Rated: parts[2] == "rated"}, nil
}

// ControlFromPB reads a proto time control; nil is no clock.
func ControlFromPB(tc *commonv1.TimeControl) clock.Control {
	switch c := tc.GetControl().(type) {
	case *commonv1.TimeControl_ByoYomi:
		return clock.Control{Kind: clock.ByoYomi, MainTime: c.ByoYomi.GetMainTime().AsDuration(), Periods: int(c.ByoYomi.GetPeriods()), PeriodTime: c.ByoYomi.GetPeriodTime().AsDuration()}
	case *commonv1.TimeControl_Fischer:
		return clock.Control{Kind: clock.Fischer, MainTime: c.Fischer.GetMainTime().AsDuration(), Increment: c.Fischer.GetIncrement().AsDuration()}
	}
	return clock.Control{}
}

// ControlPB is the proto form of c; nil for no clock.
func ControlPB(c clock.Control) *commonv1.TimeControl {
	switch c.Kind {
	case clock.ByoYomi:
		return &commonv1.TimeControl{Control: &commonv1.TimeControl_ByoYomi{ByoYomi: &commonv1.ByoYomi{
			MainTime: durationpb.New(c.MainTime), Periods: uint32(c.Periods), PeriodTime: durationpb.New(c.PeriodTime),
		}}}
	case clock.Fischer:
		return &commonv1.TimeControl{Control: &commonv1.TimeControl_Fischer{Fischer: &commonv1.Fischer{
			MainTime: durationpb.New(c.MainTime), Increment: durationpb.New(c.Increment),
		}}}
	}
	return nil
}

// ErrEmptyControl is returned for a time control that is set but names no
// clock: a client's mistake (a misspelt "fischer" in JSON arrives so),
// taken for what it did not ask.
var ErrEmptyControl = errors.New("time_control: set byo_yomi or fischer, or leave time_control unset")

// OptionalControl validates a requested control that may be unset, as for a
// game against the AI: unset is no clock.
func OptionalControl(tc *commonv1.TimeControl) (clock.Control, error) {
	if tc != nil && tc.GetControl() == nil {
		return clock.Control{}, ErrEmptyControl
	}
	c := ControlFromPB(tc)
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("time_control: %w", err)
	}
	return c, nil
}

// ClockedControl validates a requested control for a game between two
// people, which always has a clock: unset is the online default
// (5m + 3 x 30 s), and a set control names one.
func ClockedControl(tc *commonv1.TimeControl) (clock.Control, error) {
	if tc == nil {
		return clock.Default(), nil
	}
	return OptionalControl(tc)
}
