// Package clock binds the clock service (palace.clock.v1.ClockService) to
// a Palace process.
package clock

import (
	"context"
	"errors"
	"flag"

	"github.com/palacehq/palace/pkg/app"
	clockv1 "github.com/palacehq/palace/pkg/gen/palace/clock/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/services/clock/internal/handler"
)

// Config configures the clock service.
type Config struct {
	// GameAddr is the game service's address; empty means this process.
	GameAddr string
}

// RegisterFlags defines the clock service's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	app.StringFlag(fs, &c.GameAddr, "game-addr", "", "game service host:port; empty: this process")
}

// Bind registers the clock service.
func Bind(cfg Config) app.Binder {
	return func(_ context.Context, rt *app.Runtime) (func() error, error) {
		cc, err := rt.Dial(cfg.GameAddr)
		if err != nil {
			return nil, errors.Join(errors.New("clock service: game client"), err)
		}
		h := handler.New(rt.Log.With("component", "clock"), gamev1.NewGameServiceClient(cc))
		rt.Server.RegisterService(&clockv1.ClockService_ServiceDesc, h)
		return cc.Close, nil
	}
}
