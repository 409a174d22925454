package main

import (
	"os"
	"testing"

	"github.com/palacehq/palace/pkg/apptest"
)

// TestMain gives every server and load tool these tests start the same
// --service-keys (through their environment fallback), as a deployment
// gives every process the same keys.
func TestMain(m *testing.M) {
	if err := os.Setenv("PALACE_SERVICE_KEYS", apptest.ServiceKeys); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}
