// Package ai binds the AI service (palace.ai.v1.AIService) to a Palace
// process.
package ai

import (
	"context"

	"github.com/palacehq/palace/pkg/app"
	aiv1 "github.com/palacehq/palace/pkg/gen/palace/ai/v1"
)

type service struct {
	aiv1.UnimplementedAIServiceServer
}

// Bind registers the AI service.
func Bind() app.Binder {
	return func(_ context.Context, rt *app.Runtime) (func() error, error) {
		rt.Server.RegisterService(&aiv1.AIService_ServiceDesc, &service{})
		return nil, nil
	}
}
