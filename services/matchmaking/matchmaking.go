// Package matchmaking binds the matchmaking service
// (palace.matchmaking.v1.MatchmakingService) to a Palace process.
package matchmaking

import (
	"context"
	"flag"
	"time"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/auth"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/services/matchmaking/internal/handler"
)

// Config configures the matchmaking service.
type Config struct {
	// SigningKeys signs player credentials: "id:hexsecret,...", the first
	// signs, all verify. Empty: a random key for this process only.
	SigningKeys string
	// GuestTTL is how long a guest credential lasts.
	GuestTTL time.Duration
}

// RegisterFlags defines the matchmaking service's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	app.StringFlag(fs, &c.SigningKeys, "player-signing-keys", "", "player credential keys id:hexsecret[,id:hexsecret]; first signs; empty: random, this process only")
	app.DurationFlag(fs, &c.GuestTTL, "guest-ttl", 30*24*time.Hour, "lifetime of a guest credential")
}

// Bind registers the matchmaking service.
func Bind(cfg Config) app.Binder {
	return func(_ context.Context, rt *app.Runtime) (func() error, error) {
		log := rt.Log.With("component", "matchmaking")
		ring, ephemeral, err := auth.KeyringFromConfig(cfg.SigningKeys)
		if err != nil {
			return nil, err
		}
		if ephemeral {
			log.Warn("no --player-signing-keys: player credentials are signed with a random key and die with this process")
		}
		h := handler.New(log, ring, cfg.GuestTTL, time.Now)
		rt.Server.RegisterService(&matchmakingv1.MatchmakingService_ServiceDesc, h)
		return nil, nil
	}
}
