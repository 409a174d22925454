// Package rules binds the stateless rules service
// (palace.rules.v1.RulesService) to a Palace process.
package rules

import (
	"context"

	"github.com/palacehq/palace/pkg/app"
	rulesv1 "github.com/palacehq/palace/pkg/gen/palace/rules/v1"
	"github.com/palacehq/palace/services/rules/internal/handler"
)

// Bind registers the rules service. It needs no Redis and no peers.
func Bind() app.Binder {
	return func(_ context.Context, rt *app.Runtime) (func() error, error) {
		h := handler.New(rt.Log.With("component", "rules"))
		rt.Server.RegisterService(&rulesv1.RulesService_ServiceDesc, h)
		return nil, nil
	}
}
