package redistest

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func noDocker(context.Context) bool { return false }

func ping(t *testing.T, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("ping %s: %v", addr, err)
	}
}

func TestFindUsesREDIS_ADDRFirst(t *testing.T) {
	f := Finder{
		Getenv: env(map[string]string{"REDIS_ADDR": "10.0.0.1:7000"}),
		LookPath: func(string) (string, error) {
			t.Fatal("looked for a binary although REDIS_ADDR is set")
			return "", nil
		},
		DockerUp: func(context.Context) bool { t.Fatal("asked Docker although REDIS_ADDR is set"); return false },
	}
	inst, err := f.Find(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if inst.Addr != "10.0.0.1:7000" || inst.Source != FromEnv {
		t.Fatalf("got %+v, want REDIS_ADDR's address", inst)
	}
	if err := inst.Stop(); err != nil {
		t.Fatalf("Stop of an external server: %v", err)
	}
}

func TestFindStartsBinaryWithoutDocker(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if DefaultFinder().Required() {
			t.Fatal("REDISTEST_REQUIRE is set but redis-server is not on PATH")
		}
		t.Skip("redis-server not installed: apt-get install -y redis-server")
	}
	f := Finder{Getenv: env(nil), LookPath: exec.LookPath, DockerUp: noDocker}
	inst, err := f.Find(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if inst.Source != FromBinary {
		t.Fatalf("source %q, want %q", inst.Source, FromBinary)
	}
	ping(t, inst.Addr)
	if err := inst.Stop(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: inst.Addr, MaxRetries: -1})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatal("server still answers after Stop")
	}
}

func TestFindWithNothingSaysHowToGetRedis(t *testing.T) {
	f := Finder{
		Getenv:   env(nil),
		LookPath: func(string) (string, error) { return "", exec.ErrNotFound },
		DockerUp: noDocker,
	}
	_, err := f.Find(context.Background())
	if !errors.Is(err, ErrNoRedis) {
		t.Fatalf("err = %v, want ErrNoRedis", err)
	}
	for _, want := range []string{"REDIS_ADDR", "redis-server", "Docker"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not mention %s", err, want)
		}
	}
}

func TestRequired(t *testing.T) {
	tests := []struct {
		name string
		val  string
		want bool
	}{
		{name: "unset", val: "", want: false},
		{name: "one", val: "1", want: true},
		{name: "true", val: "true", want: true},
		{name: "zero", val: "0", want: false},
		{name: "garbage", val: "maybe", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Finder{Getenv: env(map[string]string{"REDISTEST_REQUIRE": tt.val})}
			if got := f.Required(); got != tt.want {
				t.Fatalf("Required() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClientReachesSharedServer(t *testing.T) {
	c := Client(t)
	p := Prefix(t)
	ctx := context.Background()
	if err := c.Set(ctx, p+"k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	defer c.Del(ctx, p+"k")
	if got := c.Get(ctx, p+"k").Val(); got != "v" {
		t.Fatalf("got %q", got)
	}
	if Prefix(t) == p {
		t.Fatal("two prefixes are equal")
	}
}

// TestProxyCutsAndRestores: a client through the proxy works, loses its
// connection and cannot reconnect while the proxy is cut, and works again
// after Restore.
func TestProxyCutsAndRestores(t *testing.T) {
	p := NewProxy(t, Addr(t))
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Cut()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("a ping got through a cut proxy")
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("a new connection got through a cut proxy")
	}
	p.Restore()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("after Restore: %v", err)
	}
}

// TestProxyBlackholeLosesAnswersOnly: through a blackhole a command still
// reaches the server, its answer never comes back, and after Restore the
// client works again on a fresh connection.
func TestProxyBlackholeLosesAnswersOnly(t *testing.T) {
	p := NewProxy(t, Addr(t))
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ReadTimeout: 300 * time.Millisecond})
	defer c.Close()
	direct := Client(t)
	ctx := context.Background()
	key := Prefix(t) + "n"
	defer direct.Del(ctx, key)
	if err := c.Incr(ctx, key).Err(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Blackhole()
	if err := c.Incr(ctx, key).Err(); err == nil {
		t.Fatal("an answer came back through a blackhole")
	}
	if n, err := direct.Get(ctx, key).Int(); err != nil || n != 2 {
		t.Fatalf("the server has %d (%v), want 2: the command did not get through", n, err)
	}
	p.Restore()
	if n, err := c.Incr(ctx, key).Result(); err != nil || n != 3 {
		t.Fatalf("after Restore: %d, %v; want 3", n, err)
	}
}

// TestProxyHoldKeepsCommandsUntilRelease: held commands reach the
// server only when released; Release sends on those it passes, in order,
// and fails the others' connections, after which both clients work.
func TestProxyHoldKeepsCommandsUntilRelease(t *testing.T) {
	p := NewProxy(t, Addr(t))
	opts := &redis.Options{Addr: p.Addr(), MaxRetries: -1, PoolSize: 1, ReadTimeout: 10 * time.Second}
	passed, failed := redis.NewClient(opts), redis.NewClient(opts)
	defer passed.Close()
	defer failed.Close()
	direct := Client(t)
	ctx := context.Background()
	key := Prefix(t) + "n"
	defer direct.Del(ctx, key, key+":order", key+":other")
	for _, c := range []*redis.Client{passed, failed} {
		if err := c.Ping(ctx).Err(); err != nil { // a connection each, before the hold
			t.Fatalf("through the proxy: %v", err)
		}
	}
	p.Hold()
	defer p.Restore()
	pipe := make(chan []redis.Cmder, 1)
	go func() {
		cmds, _ := passed.Pipelined(ctx, func(pl redis.Pipeliner) error {
			pl.Incr(ctx, key)
			pl.Append(ctx, key+":order", "a")
			pl.Append(ctx, key+":order", "b")
			return nil
		})
		pipe <- cmds
	}()
	other := make(chan error, 1)
	go func() { other <- failed.Set(ctx, key+":other", "x", 0).Err() }()
	time.Sleep(300 * time.Millisecond)
	if n, _ := direct.Exists(ctx, key, key+":other").Result(); n != 0 {
		t.Fatalf("%d held keys written before the release", n)
	}
	p.Release(func(held []byte) bool { return bytes.Contains(bytes.ToLower(held), []byte("incr")) })
	for _, c := range <-pipe {
		if c.Err() != nil {
			t.Fatalf("a released command: %v", c.Err())
		}
	}
	if got := direct.Get(ctx, key+":order").Val(); got != "ab" {
		t.Fatalf("released commands ran as %q, want in order sent (ab)", got)
	}
	if err := <-other; err == nil {
		t.Fatal("a command Release did not pass was answered")
	}
	if n, _ := direct.Exists(ctx, key+":other").Result(); n != 0 {
		t.Fatal("a command Release did not pass reached the server")
	}
	if err := failed.Set(ctx, key+":other", "y", 0).Err(); err != nil {
		t.Fatalf("after the release, on a fresh connection: %v", err)
	}
}

// TestProxyPassLetsOneCommandThrough: during a hold, Pass sends on the
// commands that match and holds the rest, and later ones, until Restore.
func TestProxyPassLetsOneCommandThrough(t *testing.T) {
	p := NewProxy(t, Addr(t))
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, PoolSize: 1, ReadTimeout: 10 * time.Second})
	defer c.Close()
	direct := Client(t)
	ctx := context.Background()
	key := Prefix(t) + "p"
	defer direct.Del(ctx, key)
	if err := c.Ping(ctx).Err(); err != nil { // the connection, before the hold
		t.Fatalf("through the proxy: %v", err)
	}
	p.Hold()
	defer p.Restore()
	done := make(chan error, 1)
	go func() {
		if err := c.Append(ctx, key, "first.").Err(); err != nil {
			done <- err
			return
		}
		done <- c.Append(ctx, key, "second").Err()
	}()
	has := func(s string) func([]byte) bool { return func(b []byte) bool { return bytes.Contains(b, []byte(s)) } }
	for !p.Holds(has("first.")) {
		time.Sleep(5 * time.Millisecond)
	}
	p.Pass(has("first."))
	for !p.Holds(has("second")) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := direct.Get(ctx, key).Val(); got != "first." {
		t.Fatalf("after passing the first command the key is %q, want the second held", got)
	}
	p.Restore()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := direct.Get(ctx, key).Val(); got != "first.second" {
		t.Fatalf("after Restore the key is %q, want both", got)
	}
}

// TestOwnServerKeepsAcknowledgedWritesThroughACrash: every write the
// server acknowledged before it was killed is there after the restart.
func TestOwnServerKeepsAcknowledgedWritesThroughACrash(t *testing.T) {
	s := Own(t)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	for range 100 {
		if err := c.Incr(ctx, "n").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Get(ctx, "n").Int(); err != nil || n != 100 {
		t.Fatalf("after the crash: %d, %v; want 100", n, err)
	}
}
