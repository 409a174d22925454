package redisx

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/palacehq/palace/pkg/redistest"
)

// The URL's own options must reach the client, not only its address.
func TestParseOptionsKeepsURLOptions(t *testing.T) {
	o, err := ParseOptions("redis://user:pw@127.0.0.1:6379/2?protocol=2&pool_size=300&read_timeout=9s&dial_timeout=20s&client_name=gamed")
	if err != nil {
		t.Fatal(err)
	}
	if o.Username != "user" || o.Password != "pw" || o.DB != 2 || o.Protocol != 2 || o.PoolSize != 300 ||
		o.ReadTimeout != 9*time.Second || o.DialTimeout != 20*time.Second || o.ClientName != "gamed" {
		t.Fatalf("got user=%q pass=%q db=%d protocol=%d pool=%d read=%v dial=%v name=%q",
			o.Username, o.Password, o.DB, o.Protocol, o.PoolSize, o.ReadTimeout, o.DialTimeout, o.ClientName)
	}
	// Without one given, the dial timeout is still 5 s.
	if o, err := ParseOptions("redis://127.0.0.1:6379"); err != nil || o.DialTimeout != 5*time.Second {
		t.Fatalf("dial timeout %v (%v), want 5s", o.DialTimeout, err)
	}
}

func TestParseOptionsCredentialsAndOptions(t *testing.T) {
	for _, tt := range []struct {
		addr                     string
		addrs                    []string
		user, pass, sUser, sPass string
		master                   string
		check                    func(*redis.UniversalOptions) bool
	}{
		{addr: "redis-cluster://:pw@10.0.0.1:6379,10.0.0.2:6379", addrs: []string{"10.0.0.1:6379", "10.0.0.2:6379"}, pass: "pw"},
		{addr: "redis-cluster://u:p%40ss@a:1,b:2?pool_size=7&read_only=true&dial_timeout=3s", addrs: []string{"a:1", "b:2"}, user: "u", pass: "p@ss",
			check: func(o *redis.UniversalOptions) bool {
				return o.PoolSize == 7 && o.ReadOnly && o.DialTimeout == 3*time.Second
			}},
		{addr: "redis-cluster://h1,h2", addrs: []string{"h1:6379", "h2:6379"}},
		{addr: "redis-sentinel://u:pw@mymaster@s1:26379,s2/1?pool_size=4", addrs: []string{"s1:26379", "s2:26379"}, master: "mymaster",
			user: "u", pass: "pw", sUser: "u", sPass: "pw", check: func(o *redis.UniversalOptions) bool { return o.DB == 1 && o.PoolSize == 4 }},
		{addr: "redis-sentinel://:pw@m@s1:1?sentinel_password=", addrs: []string{"s1:1"}, master: "m", pass: "pw"},
		{addr: "redis-sentinel://m@s1:1?sentinel_password=spw", addrs: []string{"s1:1"}, master: "m", sPass: "spw"},
	} {
		o, err := ParseOptions(tt.addr)
		if err != nil {
			t.Errorf("%s: %v", tt.addr, err)
			continue
		}
		if !slices.Equal(o.Addrs, tt.addrs) || o.Username != tt.user || o.Password != tt.pass || o.SentinelUsername != tt.sUser ||
			o.SentinelPassword != tt.sPass || o.MasterName != tt.master || (tt.check != nil && !tt.check(o)) {
			t.Errorf("%s: addrs=%q user=%q pass=%q sentinel user=%q pass=%q master=%q, or other options lost", tt.addr, o.Addrs, o.Username, o.Password,
				o.SentinelUsername, o.SentinelPassword, o.MasterName)
		}
	}
}

func TestParseOptionsRefusesMalformedHosts(t *testing.T) {
	for addr, want := range map[string]string{
		"redis-cluster://a:1,,b:2":                     "host 2: empty",
		"redis-cluster://:1":                           "empty host name",
		"redis-cluster://u:secret@x@a:1":               "more than one '@'",
		"redis-sentinel://u:secret@x@m@a:1":            "more than one '@'",
		"u:secret@a:1":                                 "contains '@'",
		"redis-cluster://a:1/0":                        "no database",
		"redis-cluster://a:1?bogus=1":                  "unexpected option",
		"redis-cluster://u:secret@a:1?password=secret": "option password",
		"redis-sentinel://m@a:1?replica_only=true":     "not supported",
		"redis://u:sec/ret@a:1":                        "malformed URL",
		"redis-cluster://a:1?addr=b:2":                 "option addr",
		"redis-sentinel://@a:1":                        "master@",
		"redis-sentinel://m@a:1?master_name=other":     "option master_name",
		"redis-cluster://a:70000":                      "port is not a number",
		// go-redis reads these as one odd host, or as localhost.
		"redis://h1:6379,h2:6379":                  "use redis-cluster://",
		"redis://:6379":                            "empty host name",
		"redis://":                                 "no host",
		"redis://a:99999":                          "port is not a number",
		"rediss://user:secret@:6380/0":             "empty host name",
		"redis://a:1?pool_size=-3":                 "option pool_size -3",
		"redis-cluster://a:1?pool_size=-3":         "option pool_size -3",
		"redis://a:1?max_retries=-2":               "option max_retries -2",
		"redis-sentinel://m@a:1?min_idle_conns=-1": "option min_idle_conns -1",
	} {
		_, err := ParseOptions(addr)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", addr, err, want)
			continue
		}
		if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "sec/ret") {
			t.Errorf("%s: error %q shows the password", addr, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for addr, want := range map[string]string{
		"redis://user:pw@h:1/2?pool_size=3":          "redis://user:xxxxx@h:1/2?pool_size=3",
		"rediss://:pw@h:1":                           "rediss://:xxxxx@h:1",
		"redis://pw@h:1":                             "redis://xxxxx@h:1",
		"redis-cluster://:p@w@a:1,b:2":               "redis-cluster://:xxxxx@a:1,b:2",
		"redis-sentinel://u:pw@m@a:1":                "redis-sentinel://u:xxxxx@m@a:1",
		"redis-sentinel://m@a:1?sentinel_password=s": "redis-sentinel://m@a:1?sentinel_password=xxxxx",
		"redis-sentinel://m@a:1/0":                   "redis-sentinel://m@a:1/0",
		"a:1,b:2":                                    "a:1,b:2",
		"redis://s3/cr:et@h:1":                       "redis://xxxxx@h:1",
		"redis://h:1?password=se%zzcret":             "redis://h:1?xxxxx",
	} {
		if got := Redact(addr); got != want {
			t.Errorf("Redact(%q) = %q, want %q", addr, got, want)
		}
	}
}

func TestNewWithPassword(t *testing.T) {
	ctx := context.Background()
	const pw = "s3cret-pw"
	s := redistest.OwnWithPassword(t, pw)
	for _, addr := range []string{"redis://:" + pw + "@" + s.Addr, "redis://palace:" + pw + "@" + s.Addr + "/1?pool_size=2"} {
		c, err := New(ctx, addr)
		if err != nil {
			t.Fatalf("%s: %v", Redact(addr), err)
		}
		_ = c.Close()
	}
	_, err := New(ctx, "redis://palace:wrong-"+pw+"@"+s.Addr)
	if err == nil || strings.Contains(err.Error(), pw) {
		t.Fatalf("wrong password: %v, want an error without the password", err)
	}
}

func TestNewClusterWithPassword(t *testing.T) {
	ctx := context.Background()
	const pw = "cluster-pw"
	cl := redistest.NewCluster(t, 2)
	if err := cl.Client(t).ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error {
		return n.ConfigSet(ctx, "requirepass", pw).Err()
	}); err != nil {
		t.Fatal(err)
	}
	addr := strings.Replace(cl.URL(), "://", "://:"+pw+"@", 1)
	c, err := New(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Set(ctx, "{k}", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestNewSentinelWithPassword(t *testing.T) {
	ctx := context.Background()
	const pw = "master-pw"
	st := redistest.NewSentinel(t, 0)
	if err := st.Master.Client(t).ConfigSet(ctx, "requirepass", pw).Err(); err != nil {
		t.Fatal(err)
	}
	// The sentinel asks for no password: sentinel_password= says so.
	addr := strings.Replace(st.URL(), "://", "://:"+pw+"@", 1) + "?sentinel_password="
	c, err := New(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Set(ctx, "k", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// One user:pass serves the servers and the sentinels alike.
func TestNewSentinelSharingThePassword(t *testing.T) {
	ctx := context.Background()
	const pw = "shared-pw"
	st := redistest.NewSentinel(t, 0)
	if err := st.Master.Client(t).ConfigSet(ctx, "requirepass", pw).Err(); err != nil {
		t.Fatal(err)
	}
	sc := redis.NewClient(&redis.Options{Addr: st.Addr})
	defer sc.Close()
	if err := sc.Do(ctx, "ACL", "SETUSER", "default", "resetpass", ">"+pw).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(ctx, strings.Replace(st.URL(), "://", "://:"+pw+"@", 1)); err != nil {
		t.Fatal(err)
	}
	// Before the fix the password went to neither.
	if _, err := New(ctx, st.URL()); err == nil {
		t.Fatal("connected without the password")
	}
}

// FuzzParseOptions: an address from a flag or the environment never
// panics the parser, and its redacted form never shows the password the
// parser found in it.
func FuzzParseOptions(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1:6379", "redis://u:pw@h:1/2?pool_size=3", "rediss://:p@h",
		"redis-cluster://:pw@a:1,b:2", "redis-sentinel://u:pw@master@a:1,b?sentinel_password=x",
		"redis://%zz@h", "redis-cluster://@", "redis-sentinel://m@", "::::", "redis://h:99999",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		o, err := ParseOptions(addr)
		red := Redact(addr)
		if err != nil || o.Password == "" || len(o.Password) < 6 {
			return
		}
		// A password short enough to occur by chance in the rest of the
		// address proves nothing; one of six bytes or more must be gone.
		if strings.Count(addr, o.Password) == 1 && strings.Contains(red, o.Password) {
			t.Fatalf("Redact(%q) = %q shows the password %q", addr, red, o.Password)
		}
	})
}

// TestSentinelWithoutMasterHidesThePassword: user:pass@hosts with the
// master name left out is refused, and its password is in neither the
// redacted address nor the error.
func TestSentinelWithoutMasterHidesThePassword(t *testing.T) {
	const addr = "redis-sentinel://admin:s3cret-pw@127.0.0.1:1"
	if red := Redact(addr); strings.Contains(red, "s3cret") {
		t.Fatalf("Redact(%q) = %q", addr, red)
	}
	_, err := ParseOptions(addr)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("ParseOptions(%q): %v, want a refusal without the password", addr, err)
	}
	if red := Redact("redis-sentinel://u:pw@mymaster@h:1"); red != "redis-sentinel://u:xxxxx@mymaster@h:1" {
		t.Fatalf("Redact of a full sentinel address: %q", red)
	}
}

// replyErr is an answer of Redis that refuses, as go-redis reports one.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// TestOutOfReach: what may mend by waiting (no answer, an answer that
// Redis cannot serve yet) from what cannot (a refusal, a certificate).
func TestOutOfReach(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New("dial tcp 10.0.0.1:6379: connect: connection refused"), true},
		{fmt.Errorf("redis at x: %w", replyErr("LOADING Redis is loading the dataset in memory")), true},
		{fmt.Errorf("redis at x: %w", replyErr("CLUSTERDOWN The cluster is down")), true},
		{fmt.Errorf("redis at x: %w", replyErr("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.")), true},
		{fmt.Errorf("redis at x: %w", replyErr("WRONGPASS invalid username-password pair")), false},
		{fmt.Errorf("redis at x: %w", replyErr("NOAUTH Authentication required.")), false},
		{fmt.Errorf("redis at x: %w", &tls.CertificateVerificationError{Err: errors.New("x509: certificate signed by unknown authority")}), false},
	} {
		if got := OutOfReach(c.err); got != c.want {
			t.Errorf("OutOfReach(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
