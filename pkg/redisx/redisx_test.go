package redisx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
)

func TestParseOptions(t *testing.T) {
	tests := []struct {
		name        string
		addr        string
		wantAddrs   []string
		wantCluster bool
		wantMaster  string
		wantDB      int
		wantErr     string
	}{
		{name: "host port", addr: "127.0.0.1:6379", wantAddrs: []string{"127.0.0.1:6379"}},
		{name: "url with db", addr: "redis://localhost:6380/2", wantAddrs: []string{"localhost:6380"}, wantDB: 2},
		{name: "cluster url", addr: "redis-cluster://a:1,b:2,c:3", wantAddrs: []string{"a:1", "b:2", "c:3"}, wantCluster: true},
		{name: "bare list is a cluster", addr: "a:1, b:2", wantAddrs: []string{"a:1", "b:2"}, wantCluster: true},
		{name: "cluster of one seed", addr: "redis-cluster://a:1", wantAddrs: []string{"a:1"}, wantCluster: true},
		{name: "IPv6 hosts", addr: "redis-cluster://[::1],[fe80::1]:7000", wantAddrs: []string{"[::1]:6379", "[fe80::1]:7000"}, wantCluster: true},
		{name: "sentinel", addr: "redis-sentinel://mymaster@s1:26379,s2:26379/1", wantAddrs: []string{"s1:26379", "s2:26379"}, wantMaster: "mymaster", wantDB: 1},
		{name: "empty", addr: " ", wantErr: "empty"},
		{name: "unknown scheme", addr: "memcached://x:1", wantErr: "unknown scheme"},
		{name: "sentinel without master", addr: "redis-sentinel://s1:26379", wantErr: "master@"},
		{name: "sentinel bad db", addr: "redis-sentinel://m@s1:1/x", wantErr: "not a number"},
		{name: "cluster without hosts", addr: "redis-cluster://", wantErr: "no host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := ParseOptions(tt.addr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(o.Addrs, tt.wantAddrs) || o.IsClusterMode != tt.wantCluster || o.MasterName != tt.wantMaster || o.DB != tt.wantDB {
				t.Fatalf("got addrs=%v cluster=%v master=%q db=%d", o.Addrs, o.IsClusterMode, o.MasterName, o.DB)
			}
		})
	}
}

func TestNewPingsRealServer(t *testing.T) {
	c, err := New(context.Background(), redistest.Addr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestNewFailsOnUnreachableServer(t *testing.T) {
	// Port 1 on loopback refuses at once.
	if _, err := New(context.Background(), "127.0.0.1:1"); err == nil {
		t.Fatal("New succeeded against a closed port")
	}
}

func TestWriteWaitsForReplicas(t *testing.T) {
	ctx := context.Background()
	pair := redistest.NewPair(t)
	rdb, onReplica, link := pair.Master.Client(t), pair.Replica.Client(t), pair.Link

	set := func(v string) func(redis.Cmdable) error {
		return func(c redis.Cmdable) error { return c.Set(ctx, "k", v, 0).Err() }
	}
	one := Replication{Replicas: 1, Timeout: time.Second}
	if err := one.Write(ctx, rdb, "k", set("1")); err != nil {
		t.Fatalf("write with a linked replica: %v", err)
	}
	// Confirmed means readable there, with no waiting on the test's side.
	if got, err := onReplica.Get(ctx, "k").Result(); err != nil || got != "1" {
		t.Fatalf("replica holds %q (%v) right after the confirmed write, want 1", got, err)
	}
	if err := (Replication{Replicas: 2, Timeout: 100 * time.Millisecond}).Write(ctx, rdb, "k", set("2")); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("two replicas asked of one: %v, want ErrNotReplicated", err)
	}

	link.Cut()
	if err := one.Write(ctx, rdb, "k", set("3")); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("write with the link cut: %v, want ErrNotReplicated", err)
	}
	// The master has it: a wait is no undo.
	if got, _ := rdb.Get(ctx, "k").Result(); got != "3" {
		t.Fatalf("master holds %q, want 3", got)
	}
	if err := (Replication{}).Write(ctx, rdb, "k", set("4")); err != nil {
		t.Fatalf("write asking no replica, with the link cut: %v", err)
	}

	link.Restore()
	// A write that confirms covers the earlier ones on the master too.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := one.Write(ctx, rdb, "other", func(c redis.Cmdable) error { return c.Set(ctx, "other", "x", 0).Err() })
		if err == nil {
			break
		}
		if !errors.Is(err, ErrNotReplicated) || time.Now().After(deadline) {
			t.Fatalf("write after the link came back: %v", err)
		}
	}
	if got, _ := onReplica.Get(ctx, "k").Result(); got != "4" {
		t.Fatalf("replica holds %q after a later confirmed write, want 4", got)
	}
}

func TestWriteCoveringConfirmsWhatOthersWrote(t *testing.T) {
	ctx := context.Background()
	pair := redistest.NewPair(t)
	other, mine, onReplica := pair.Master.Client(t), pair.Master.Client(t), pair.Replica.Client(t)
	one := Replication{Replicas: 1, Timeout: 200 * time.Millisecond}
	var got string
	read := func(c redis.Cmdable) (err error) {
		got, err = c.Get(ctx, "{g}:answer").Result()
		return err
	}

	// Another connection stores an answer that the replica does not get.
	pair.Link.Blackhole()
	if err := other.Set(ctx, "{g}:answer", "a1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A call that only reads it must not confirm it.
	if err := one.WriteCovering(ctx, mine, "{g}:answer", read); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("reading another connection's unreplicated write: %v, want ErrNotReplicated", err)
	}
	pair.Link.Restore()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := one.WriteCovering(ctx, mine, "{g}:answer", read)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrNotReplicated) || time.Now().After(deadline) {
			t.Fatalf("reading it once the replica is back: %v", err)
		}
	}
	if v, err := onReplica.Get(ctx, "{g}:answer").Result(); err != nil || v != "a1" || got != "a1" {
		t.Fatalf("confirmed answer %q, replica holds %q (%v): want a1 on both", got, v, err)
	}
	// Redis 7.0 happens to let a connection that wrote nothing wait for
	// everything before it, which the checks above cannot tell from the
	// scratch write; WAIT promises only the connection's own writes, so
	// the scratch write must be there, and confirmed.
	if n, err := onReplica.Exists(ctx, "{g}:answer:cover").Result(); err != nil || n != 1 {
		t.Fatalf("scratch key on the replica: %d (%v), want it written and confirmed", n, err)
	}
	// Without replicas asked for, nothing but the call itself is written.
	if err := (Replication{}).WriteCovering(ctx, mine, "{h}", func(c redis.Cmdable) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if n, _ := mine.Exists(ctx, "{h}:cover").Result(); n != 0 {
		t.Fatal("a scratch key was written with no replicas asked for")
	}
}

func TestCoverKeySharesTheSlot(t *testing.T) {
	for key, want := range map[string]string{
		"mm:{i:ab}":  "mm:{i:ab}:cover",
		"{g:1}:e":    "{g:1}:e:cover",
		"plain":      "{plain}:cover",
		"a}{b}c":     "a}{b}c:cover",
		"x{}y{z}":    "",
		"open{only":  "",
		"close}only": "",
	} {
		got, err := coverKey(key)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("coverKey(%q) = %q, %v; want %q", key, got, err, want)
		}
	}
}

func TestWarnIfShortNamesTheMissingReplicas(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Own(t).Client(t)
	for _, tt := range []struct {
		r    Replication
		warn bool
	}{{Replication{}, false}, {Replication{Replicas: 1, Timeout: time.Second}, true}} {
		var out strings.Builder
		tt.r.WarnIfShort(ctx, rdb, slog.New(slog.NewTextHandler(&out, nil)))
		if got := strings.Contains(out.String(), "wait_for=1") && strings.Contains(out.String(), "connected=0"); got != tt.warn {
			t.Errorf("%+v on a server without replicas logged %q, want a warning: %v", tt.r, out.String(), tt.warn)
		}
	}
}

func TestConnectedReplicas(t *testing.T) {
	ctx := context.Background()
	pair := redistest.NewPair(t)
	for _, tt := range []struct {
		name string
		rdb  redis.UniversalClient
		want int
	}{
		{"master with a replica", pair.Master.Client(t), 1},
		{"the replica itself", pair.Replica.Client(t), 0},
		{"cluster without replicas", redistest.NewCluster(t, 2).Client(t), 0},
	} {
		if n, err := ConnectedReplicas(ctx, tt.rdb); err != nil || n != tt.want {
			t.Errorf("%s: %d replicas (%v), want %d", tt.name, n, err, tt.want)
		}
	}
}

func TestWriteReachesTheMasterOfItsKey(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 3)
	rdb := cl.Client(t)
	// The test's masters have no replicas: every write is refused
	// confirmation, and none may fail for reaching the wrong master.
	r := Replication{Replicas: 1, Timeout: 20 * time.Millisecond}
	for i := range 30 {
		key := fmt.Sprintf("{k%d}", i)
		err := r.Write(ctx, rdb, key, func(c redis.Cmdable) error { return c.Set(ctx, key, i, 0).Err() })
		if !errors.Is(err, ErrNotReplicated) {
			t.Fatalf("write of %s: %v, want ErrNotReplicated", key, err)
		}
		if got, err := rdb.Get(ctx, key).Int(); err != nil || got != i {
			t.Fatalf("%s = %d (%v), want %d", key, got, err, i)
		}
	}
}

func TestReplicationValidate(t *testing.T) {
	for _, tt := range []struct {
		r    Replication
		want string
	}{
		{Replication{}, ""},
		{Replication{Replicas: 1, Timeout: time.Second}, ""},
		{Replication{Replicas: -1}, "negative"},
		{Replication{Replicas: 1}, "positive timeout"},
	} {
		err := tt.r.Validate()
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%+v: %v, want %q", tt.r, err, tt.want)
		}
	}
}

func TestCheckKeyPrefix(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", "prod:", "single:", "a-b.c/"} {
		if err := CheckKeyPrefix(p); err != nil {
			t.Errorf("CheckKeyPrefix(%q) = %v, want nil", p, err)
		}
	}
	for _, p := range []string{"{prod}:", "a{", "}b", "x{y}z:"} {
		err := CheckKeyPrefix(p)
		if err == nil || !strings.Contains(err.Error(), "must not contain") {
			t.Errorf("CheckKeyPrefix(%q) = %v, want an error", p, err)
		}
	}
}

// TestClusterClientFindsAPromotedReplicaSoon: a master dies and Redis
// Cluster promotes its replica. Its connections are refused, so no MOVED
// tells the client; only a reload of its map does, and a client of New
// must reload within seconds of the promotion, not after go-redis'
// default minute.
func TestClusterClientFindsAPromotedReplicaSoon(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 3)
	cl.AddReplicas(t)
	rdb, err := New(ctx, cl.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	const key = "{failover}"
	if err := rdb.Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// The slot's master and replica, from a client of the test's own.
	probe := cl.Client(t)
	node, err := probe.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(cl.Nodes, func(s *redistest.Server) bool { return s.Addr == node.Options().Addr })
	replica := redis.NewClient(&redis.Options{Addr: cl.Replicas[i].Addr})
	t.Cleanup(func() { _ = replica.Close() })

	cl.Nodes[i].Kill()
	// Commands keep coming meanwhile, as they would in production.
	var promoted time.Time
	// What is tested is the client once the replica is a master, not the
	// cluster's own election, which on a loaded machine can take rounds
	// of its timeouts: past a while, the replica takes over at once.
	takeover := time.Now().Add(30 * time.Second)
	for deadline := time.Now().Add(60 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("the replica was never promoted")
		}
		if !takeover.IsZero() && time.Now().After(takeover) {
			t.Log("no election within 30s: the replica takes over")
			if err := replica.Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil {
				t.Fatalf("CLUSTER FAILOVER TAKEOVER: %v", err)
			}
			takeover = time.Time{}
		}
		_ = rdb.Set(ctx, key, "during", 0).Err()
		if role, err := replica.Do(ctx, "ROLE").Slice(); err == nil && len(role) > 0 && role[0] == "master" {
			promoted = time.Now()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		err := rdb.Set(ctx, key, "after", 0).Err()
		if err == nil {
			break
		}
		if since := time.Since(promoted); since > 15*time.Second {
			t.Fatalf("%v after the replica's promotion, writes still fail: %v", since, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestEvictionPolicy: a Redis that evicts keys when full is told from one
// that refuses writes instead.
func TestEvictionPolicy(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		policy, limit string
		evicts        bool
	}{{"noeviction", "100mb", false}, {"volatile-lru", "100mb", true}, {"allkeys-lfu", "100mb", true}, {"volatile-lru", "0", false}} {
		srv := redistest.Own(t, "--maxmemory-policy", tc.policy, "--maxmemory", tc.limit)
		policy, evicts, err := EvictionPolicy(ctx, srv.Client(t))
		if err != nil || policy != tc.policy || evicts != tc.evicts {
			t.Fatalf("a Redis with maxmemory-policy %s, maxmemory %s: %q, evicts %v, %v; want evicts %v", tc.policy, tc.limit, policy, evicts, err, tc.evicts)
		}
	}
}

// TestClusterOfOneSeed: a cluster named by one seed gets the cluster
// client's short reload of the slots' map too, and Reach fails while
// any master is out of reach, not only the one it happens to ask.
func TestClusterOfOneSeed(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 3)
	rdb, err := New(ctx, "redis-cluster://"+cl.Nodes[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	c, ok := rdb.(*redis.ClusterClient)
	if !ok || c.Options().ClusterStateReloadInterval != clusterReload {
		t.Fatalf("a %T; want a cluster client that reloads the slots every %v", rdb, clusterReload)
	}
	if err := Reach(ctx, rdb); err != nil {
		t.Fatalf("every master up: %v", err)
	}
	cl.Nodes[2].Kill()
	if err := Reach(ctx, rdb); err == nil {
		t.Fatal("Reach succeeded with a master killed")
	}
}

// TestTheEvictionPolicyOfOneClusterMasterWasMissed: on a Redis Cluster
// one master of which evicts keys when full (a live game's state on it
// could be evicted), EvictionPolicy, behind the start-up warning, read one
// master, the next in turn (CONFIG GET has no routing of its own), and two
// calls in three missed it. Every master is read.
func TestTheEvictionPolicyOfOneClusterMasterWasMissed(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 3)
	// Only the last master evicts.
	ev := cl.Nodes[2].Client(t)
	if err := ev.ConfigSet(ctx, "maxmemory", "100mb").Err(); err != nil {
		t.Fatal(err)
	}
	if err := ev.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	rdb, err := New(ctx, cl.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	missed := 0
	for range 6 {
		policy, evicts, err := EvictionPolicy(ctx, rdb)
		if err != nil {
			t.Fatal(err)
		}
		if !evicts {
			missed++
			t.Logf("EvictionPolicy answered %q, evicts=false", policy)
		}
	}
	if missed > 0 {
		t.Fatalf("%d of 6 calls of EvictionPolicy missed the master that evicts (allkeys-lru): the start-up warning depends on which master answers", missed)
	}
}

// TestOneClusterNodeGivenAsHostPortWasReachedAlone: an operator gives
// --redis-addr one node of a Redis Cluster as host:port (as a managed
// cluster's endpoint is often written). New connected a plain client, the
// process started and said it served, and every command on a key of
// another master's slots was answered MOVED (Unavailable to clients): two
// games in three never worked. New reaches the whole cluster from it.
func TestOneClusterNodeGivenAsHostPortWasReachedAlone(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 3)
	rdb, err := New(ctx, cl.Nodes[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	failed := 0
	var first error
	for i := range 30 {
		key := fmt.Sprintf("%s{g:%d}", redistest.Prefix(t), i)
		if err := rdb.Set(ctx, key, 1, 0).Err(); err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if failed > 0 {
		t.Fatalf("New(%q) of a cluster node gave a %T without error, and %d of 30 game keys cannot be written (%v)", cl.Nodes[0].Addr, rdb, failed, first)
	}
}

// TestASingleMasterClusterBehindAnAddressItDoesNotAnnounceStarts: a
// cluster of one master (every slot on it), reached at an address other
// than the one it announces (a container's port published on the host, a
// port-forward, NAT), given as host:port: every key is reached there, since
// no MOVED comes from a node that serves all slots, where a cluster client
// following CLUSTER SLOTS would go to the announced address, out of reach.
// It is a cluster client all the same, every slot at the given address,
// for callers that keep a script's keys to one slot on a cluster
// (TestASingleMasterClusterBehindAnUnannouncedAddressIsSwept in the clock
// service).
func TestASingleMasterClusterBehindAnAddressItDoesNotAnnounceStarts(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 1)
	redistest.AnnounceElsewhere(t, cl.Nodes[0])
	start := time.Now()
	rdb, err := New(ctx, cl.Nodes[0].Addr)
	if err != nil {
		t.Fatalf("New(%q) of a single-master cluster that serves every slot at this address: %v (after %v); "+
			"every key is reached there", cl.Nodes[0].Addr, err, time.Since(start).Round(time.Millisecond))
	}
	defer rdb.Close()
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("New gave a %T for a node of a cluster; want a cluster client", rdb)
	}
	for i := range 10 {
		if err := rdb.Set(ctx, fmt.Sprintf("%s{g:%d}", redistest.Prefix(t), i), 1, time.Minute).Err(); err != nil {
			t.Fatalf("%T: set: %v", rdb, err)
		}
	}
}

// TestAClusterNodeJustRestartedWasReachedAlone: the node given as
// host:port is one master of three, restarted (an operator's rolling
// restart, or the deployment brought up together with Redis). For its
// first seconds CLUSTER INFO says cluster_size:1 (cluster_state:fail): New
// took the node for a cluster of one master, connected a plain client, and
// every key of the other masters' slots was answered MOVED for the life of
// the process. A node of any cluster gets a cluster client following the
// nodes' map, unless none reaches the nodes and this one serves every
// slot (then one whose map is that node's address).
func TestAClusterNodeJustRestartedWasReachedAlone(t *testing.T) {
	ctx := context.Background()
	cl := redistest.NewCluster(t, 3)
	n := cl.Nodes[0]
	n.Stop()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	info, _ := n.Client(t).ClusterInfo(ctx).Result()
	t.Logf("CLUSTER INFO right after the restart: %q", info)
	rdb, err := New(ctx, n.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	time.Sleep(3 * time.Second) // the cluster is fine again
	failed := 0
	var first error
	for i := range 30 {
		if err := rdb.Set(ctx, fmt.Sprintf("%s{g:%d}", redistest.Prefix(t), i), 1, time.Minute).Err(); err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if failed > 0 {
		t.Fatalf("New(%q) of a master of a three-master cluster just restarted gave a %T, and %d of 30 game keys cannot be written (%v)", n.Addr, rdb, failed, first)
	}
}
