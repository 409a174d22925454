package ai_test

import (
	"context"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/aijobs"
	"github.com/palacehq/palace/pkg/apptest"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	"github.com/palacehq/palace/pkg/logging"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/ai/internal/worker"
	"github.com/palacehq/palace/services/game"
)

// TestAJobHeldThroughALongOutageIsTriedAgainOnceTheGameServiceAnswers: a
// worker whose game service stays out of reach past its outage wait (its
// Redis restarting for longer) holds the job it failed; once the game
// service answers again, it tries that job at once. It used to leave the
// job for the claim timeout (30 s by default), the AI's clock running all
// the while; here the claim timeout is an hour, so only the worker's own
// try can make the move.
func TestAJobHeldThroughALongOutageIsTriedAgainOnceTheGameServiceAnswers(t *testing.T) {
	const keys = "k1:0303030303030303030303030303030303030303030303030303030303030303"
	gcfg := game.DefaultConfig()
	gcfg.SigningKeys = keys
	g, prefix := startAIGameWith(t, gcfg, commonv1.GameKind_GAME_KIND_XIANGQI, 0)
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	gcfg.KeyPrefix = prefix
	cut := gamev1.NewGameServiceClient(apptest.Start(t, proxy.Addr(), game.Bind(gcfg)))
	rdb := redistest.Client(t)
	q := aijobs.New(rdb, prefix)
	q.ClaimAfter = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := &worker.Worker{Name: "w", Log: logging.Discard(), Queue: q, Games: cut, Mover: worker.NewBuiltin(4), OutageWait: 300 * time.Millisecond}
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	proxy.Cut()
	if _, err := g.games.MakeMove(g.human, &gamev1.MakeMoveRequest{GameId: g.id, RequestId: "h1", Move: &commonv1.Move{Coordinate: "h3e3"}}); err != nil {
		t.Fatal(err)
	}
	// Past the outage wait: the job failed and the worker waits for its
	// game service, holding the job.
	for deadline := time.Now().Add(10 * time.Second); groupConsumers(t, rdb, prefix)["w"].Pending != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the worker took no job")
		}
	}
	time.Sleep(2 * time.Second)
	proxy.Restore()
	g.waitForWithin(t, 15*time.Second, "the AI's move once its game service answers again", func(x *gamev1.Game) bool { return len(x.GetMoves()) == 2 })
}
