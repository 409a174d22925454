package app

import (
	"bytes"
	"context"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/palacehq/palace/pkg/redistest"
)

// registered defines the common flags and one a service would add on the
// same flag set, as every daemon and `palace serve` do.
func registered(t *testing.T) (*Config, *int) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c := &Config{Listen: "x", NoRedis: true}
	c.RegisterFlags(fs, "127.0.0.1:0")
	var replicas int
	IntFlag(fs, &replicas, "redis-wait-replicas", 0, "replicas")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	return c, &replicas
}

func TestEnvValueAFlagRefusesStopsStart(t *testing.T) {
	for _, tt := range []struct{ env, value string }{
		{"PALACE_OTLP_INSECURE", "yes"},
		{"PALACE_REDIS_WAIT_REPLICAS", " 1"},
		{"PALACE_SHUTDOWN_TIMEOUT", "20"},
		{"PALACE_MAX_RECV_BYTES", "1MiB"},
	} {
		t.Run(tt.env, func(t *testing.T) {
			t.Setenv(tt.env, tt.value)
			c, _ := registered(t)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.env+"=") {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tt.env)
			}
			if err := Run(context.Background(), Options{Name: "test", Config: *c}); err == nil || !strings.Contains(err.Error(), tt.env) {
				t.Fatalf("Run() = %v, want it refused for %s", err, tt.env)
			}
		})
	}
}

func TestEnvValuesApply(t *testing.T) {
	t.Setenv("PALACE_OTLP_INSECURE", "false")
	t.Setenv("PALACE_REDIS_WAIT_REPLICAS", "2")
	t.Setenv("PALACE_SHUTDOWN_TIMEOUT", "20s")
	t.Setenv("PALACE_MAX_CONNECTION_AGE", "0")
	c, replicas := registered(t)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.OTLPInsecure || *replicas != 2 || c.ShutdownTimeout != 20*time.Second || c.MaxConnectionAge != 0 {
		t.Fatalf("insecure=%v replicas=%d shutdown=%v connection age=%v", c.OTLPInsecure, *replicas, c.ShutdownTimeout, c.MaxConnectionAge)
	}
}

// A refused value leaves the default, not the parser's zero.
func TestRefusedEnvValueKeepsTheDefault(t *testing.T) {
	t.Setenv("PALACE_OTLP_INSECURE", "yes")
	t.Setenv("PALACE_PAIRING_WINDOW", "wide")
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var insecure bool
	var window float64
	BoolFlag(fs, &insecure, "otlp-insecure", true, "")
	FloatFlag(fs, &window, "pairing-window", 200, "")
	if !insecure || window != 200 {
		t.Fatalf("insecure=%v window=%v, want the defaults", insecure, window)
	}
	err := EnvErrors(fs)
	if err == nil || !strings.Contains(err.Error(), "PALACE_OTLP_INSECURE") || !strings.Contains(err.Error(), "PALACE_PAIRING_WINDOW") {
		t.Fatalf("EnvErrors = %v, want both variables", err)
	}
}

// NaN and the infinities read as numbers to strconv, and NaN passes every
// range check ("< 0" is false for it): a pairing window of NaN let no two
// tickets pair again. A float flag refuses them, from the environment and
// from the command line, and still takes a finite number.
func TestAFloatFlagRefusesWhatIsNotAFiniteNumber(t *testing.T) {
	for _, v := range []string{"NaN", "nan", "+Inf", "-inf", "Infinity", "1e400"} {
		t.Run(v, func(t *testing.T) {
			t.Setenv("PALACE_PAIRING_WINDOW", v)
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var window float64
			FloatFlag(fs, &window, "pairing-window", 200, "")
			if err := EnvErrors(fs); err == nil || !strings.Contains(err.Error(), "PALACE_PAIRING_WINDOW") || window != 200 {
				t.Fatalf("from the environment: EnvErrors = %v, window %v; want PALACE_PAIRING_WINDOW refused and the default kept", err, window)
			}
			if err := fs.Parse([]string{"--pairing-window", v}); err == nil {
				t.Fatalf("--pairing-window %s taken, as %v", v, window)
			}
		})
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var window float64
	FloatFlag(fs, &window, "pairing-window", 200, "")
	if err := fs.Parse([]string{"--pairing-window", "-1.5e2"}); err != nil || window != -150 {
		t.Fatalf("--pairing-window -1.5e2: %v, window %v", err, window)
	}
}

// A flag whose environment value was refused still works as a flag: a
// boolean one as -name, and the help lists it.
func TestRefusedEnvFlagStillParses(t *testing.T) {
	t.Setenv("PALACE_OTLP_INSECURE", "yes")
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var help bytes.Buffer
	fs.SetOutput(&help)
	insecure := true
	BoolFlag(fs, &insecure, "otlp-insecure", true, "send traces without TLS")
	if err := fs.Parse([]string{"-otlp-insecure=false", "-otlp-insecure"}); err != nil || !insecure {
		t.Fatalf("parse: %v, insecure=%v", err, insecure)
	}
	fs.PrintDefaults()
	if !strings.Contains(help.String(), "send traces without TLS") || strings.Contains(help.String(), "panic") {
		t.Fatalf("help: %q", help.String())
	}
	if EnvErrors(fs) == nil {
		t.Fatal("the refused value is forgotten once the command line set the flag")
	}
}

func TestConnectRedisLogsNoPassword(t *testing.T) {
	const pw = "hunter2-secret"
	s := redistest.OwnWithPassword(t, pw)
	var out bytes.Buffer
	var closers []func() error
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	log := slog.New(slog.NewTextHandler(&out, nil))
	if _, err := connectRedis(context.Background(), "redis://:"+pw+"@"+s.Addr, 0, log, &closers); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), pw) || !strings.Contains(out.String(), s.Addr) {
		t.Fatalf("log %q: want the address without the password", out.String())
	}
	// A wrong password fails at once, however long the process may wait
	// for a Redis out of reach: waiting mends nothing.
	begun := time.Now()
	_, err := connectRedis(context.Background(), "redis://:wrong-"+pw+"@"+s.Addr, time.Minute, log, &closers)
	if err == nil || strings.Contains(err.Error(), pw) || time.Since(begun) > 5*time.Second {
		t.Fatalf("wrong password: %v after %v, want an error at once, without the password", err, time.Since(begun))
	}
}

// TestConnectRedisWarnsOfEviction: a Redis that evicts keys when full
// can take a live game's state: the process says so at start, and says
// nothing of a Redis that refuses writes instead.
func TestConnectRedisWarnsOfEviction(t *testing.T) {
	for _, tc := range []struct {
		policy string
		warn   bool
	}{{"volatile-lru", true}, {"noeviction", false}} {
		s := redistest.Own(t, "--maxmemory-policy", tc.policy, "--maxmemory", "100mb")
		var out bytes.Buffer
		var closers []func() error
		log := slog.New(slog.NewTextHandler(&out, nil))
		if _, err := connectRedis(context.Background(), s.Addr, 0, log, &closers); err != nil {
			t.Fatal(err)
		}
		for _, c := range closers {
			_ = c()
		}
		warned := strings.Contains(out.String(), "level=WARN") && strings.Contains(out.String(), "maxmemory_policy="+tc.policy)
		if warned != tc.warn {
			t.Fatalf("maxmemory-policy %s: log %q; want a warning %v", tc.policy, out.String(), tc.warn)
		}
	}
}

// TestAProcessWaitsForRedis: a process started while its Redis is out of
// reach waits for it (--redis-wait), saying so, and goes on once it
// answers; past the wait it gives up, naming the flag.
func TestAProcessWaitsForRedis(t *testing.T) {
	proxy := redistest.NewProxy(t, redistest.Addr(t))
	proxy.Cut()
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	var closers []func() error
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	begun := time.Now()
	time.AfterFunc(1500*time.Millisecond, proxy.Restore)
	rdb, err := connectRedis(context.Background(), proxy.Addr(), time.Minute, log, &closers)
	if err != nil {
		t.Fatalf("connecting to a Redis back after 1.5 s: %v", err)
	}
	if waited := time.Since(begun); waited < time.Second {
		t.Fatalf("connected after %v, while Redis was out of reach for 1.5 s", waited)
	}
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "redis out of reach: waiting for it") {
		t.Fatalf("log %q: want the wait told", out.String())
	}

	proxy.Cut()
	begun = time.Now()
	_, err = connectRedis(context.Background(), proxy.Addr(), 1500*time.Millisecond, log, &closers)
	if err == nil || !strings.Contains(err.Error(), "--redis-wait") || time.Since(begun) < time.Second {
		t.Fatalf("a Redis out of reach past --redis-wait: %v after %v, want an error naming the flag after the wait", err, time.Since(begun))
	}
	begun = time.Now()
	if _, err = connectRedis(context.Background(), proxy.Addr(), 0, log, &closers); err == nil || time.Since(begun) > 5*time.Second {
		t.Fatalf("without a wait: %v after %v, want an error at once", err, time.Since(begun))
	}
	// An address that does not parse fails at once too.
	begun = time.Now()
	if _, err = connectRedis(context.Background(), "redis://"+proxy.Addr()+"/not-a-db", time.Minute, log, &closers); err == nil || time.Since(begun) > 5*time.Second {
		t.Fatalf("a malformed address: %v after %v, want an error at once", err, time.Since(begun))
	}
}

func TestCheckTarget(t *testing.T) {
	tests := []struct {
		name   string
		target string
		ok     bool
	}{
		{name: "empty: this process", target: "", ok: true},
		{name: "host and port", target: "game:8080", ok: true},
		{name: "dns name of every replica", target: "dns:///game.palace.svc:8080", ok: true},
		{name: "a list", target: "g1:8080,g2:8080", ok: false},
		{name: "spaces", target: " game:8080", ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckTarget(tt.target); (err == nil) != tt.ok {
				t.Fatalf("CheckTarget(%q) = %v; want ok %v", tt.target, err, tt.ok)
			}
		})
	}
}

// TestParseFlagsRefusesStrayArguments: a flag written without its dashes
// must stop a daemon, not start it with the default silently.
func TestParseFlagsRefusesStrayArguments(t *testing.T) {
	fs := flag.NewFlagSet("gamed", flag.ContinueOnError)
	level := fs.String("log-level", "info", "")
	if err := ParseFlags(fs, []string{"--log-level", "debug"}); err != nil || *level != "debug" {
		t.Fatalf("flags only: %v, level %q", err, *level)
	}
	fs = flag.NewFlagSet("gamed", flag.ContinueOnError)
	fs.String("log-level", "info", "")
	err := ParseFlags(fs, []string{"log-level=debug"})
	if err == nil || !strings.Contains(err.Error(), `"log-level=debug"`) || !strings.Contains(err.Error(), "gamed takes flags only") {
		t.Fatalf("a stray argument: %v", err)
	}
}

// TestResetToDefaultsLeavesTheEnvironmentOut: defaults read in a process
// with PALACE_* variables set are still the flags' defaults.
func TestResetToDefaultsLeavesTheEnvironmentOut(t *testing.T) {
	t.Setenv("PALACE_SEAT_TTL", "1s")
	t.Setenv("PALACE_NAME", "from-env")
	t.Setenv("PALACE_COUNT", "not-a-number")
	fs := flag.NewFlagSet("defaults", flag.ContinueOnError)
	var ttl time.Duration
	var name string
	var count int
	DurationFlag(fs, &ttl, "seat-ttl", time.Hour, "")
	StringFlag(fs, &name, "name", "palace", "")
	IntFlag(fs, &count, "count", 3, "")
	if ttl != time.Second || name != "from-env" {
		t.Fatalf("the environment did not apply: %v %q", ttl, name)
	}
	ResetToDefaults(fs)
	if ttl != time.Hour || name != "palace" || count != 3 {
		t.Fatalf("after ResetToDefaults: %v %q %d, want the defaults", ttl, name, count)
	}
}

// A duration written without its unit, the usual slip, is refused with
// how to write one, on the command line and in the environment; flag's
// own duration flag said only "parse error".
func TestADurationWithoutAUnitSaysHowToWriteOne(t *testing.T) {
	const hint = "write a number with its unit, such as 20s"
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	c := &Config{}
	c.RegisterFlags(fs, "127.0.0.1:0")
	if err := fs.Parse([]string{"--shutdown-timeout", "20"}); err == nil || !strings.Contains(err.Error(), hint) {
		t.Fatalf("--shutdown-timeout 20: %v, want %q", err, hint)
	}
	t.Setenv("PALACE_SHUTDOWN_TIMEOUT", "20")
	c, _ = registered(t)
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), hint) {
		t.Fatalf("PALACE_SHUTDOWN_TIMEOUT=20: %v, want %q", err, hint)
	}
}

// Log levels are read without regard to case, as ParseLevel reads them:
// WARN must not stop a process that would log at warn.
func TestLogLevelsIgnoreCase(t *testing.T) {
	t.Setenv("PALACE_LOG_LEVEL", "WARN")
	c, _ := registered(t)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestValidateRefusesSettingsThatCannotServe: a setting that would stop
// every call or the server's start is refused before anything starts.
func TestValidateRefusesSettingsThatCannotServe(t *testing.T) {
	for _, tt := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.ShutdownTimeout = 0 }, "--shutdown-timeout must be positive"},
		{func(c *Config) { c.OTLPFlushTimeout = -time.Second }, "--otlp-flush-timeout must not be negative"},
		{func(c *Config) { c.MaxRecvBytes = 1023 }, "--max-recv-bytes must be at least 1024"},
		{func(c *Config) { c.TLSCert = "cert.pem" }, "--tls-cert and --tls-key go together"},
		{func(c *Config) { c.TLSKey = "key.pem" }, "--tls-cert and --tls-key go together"},
		{func(c *Config) { c.NoRedis = false }, "--redis-addr (PALACE_REDIS_ADDR) is required"},
		{func(c *Config) { c.MaxConnectionAge = -time.Minute }, "--max-connection-age and --max-connection-age-grace must not be negative"},
		{func(c *Config) { c.MaxConnectionAgeGrace = -time.Second }, "--max-connection-age and --max-connection-age-grace must not be negative"},
	} {
		c, _ := registered(t)
		if err := c.Validate(); err != nil {
			t.Fatalf("the defaults: %v", err)
		}
		tt.set(c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate() = %v, want %q", err, tt.want)
		}
	}
}

func deferredFlags(out *bytes.Buffer) (*flag.FlagSet, *Config, *int, *float64) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(out)
	c := &Config{Listen: "127.0.0.1:0", NoRedis: true}
	c.RegisterFlags(fs, "127.0.0.1:0")
	var replicas int
	IntFlag(fs, &replicas, "redis-wait-replicas", 0, "replicas")
	var window float64
	FloatFlag(fs, &window, "pairing-window", 200, "window")
	return fs, c, &replicas, &window
}

// TestDeferredValuesAreReportedAndKeepTheDefault: refused command-line
// values, alone, repeated, boolean, are all reported and leave the
// default; good values apply.
func TestDeferredValuesAreReportedAndKeepTheDefault(t *testing.T) {
	for _, tt := range []struct {
		name   string
		args   []string
		refuse []string
		check  func(c *Config, r *int, w *float64) bool
	}{
		{"bool maybe", []string{"-pprof=maybe"}, []string{"--pprof"}, func(c *Config, r *int, w *float64) bool { return !c.Pprof }},
		{"bool bare", []string{"-pprof", "-otlp-insecure=false"}, nil, func(c *Config, r *int, w *float64) bool { return c.Pprof && !c.OTLPInsecure }},
		{"good then bad", []string{"--shutdown-timeout", "20s", "--shutdown-timeout", "20"}, []string{"--shutdown-timeout"}, nil},
		{"bad then good", []string{"--shutdown-timeout", "20", "--shutdown-timeout", "20s"}, []string{"--shutdown-timeout"}, nil},
		{"int bad then float bad", []string{"--redis-wait-replicas", " 1", "--pairing-window", "NaN", "--max-recv-bytes", "1e6"}, []string{"--redis-wait-replicas", "--pairing-window", "--max-recv-bytes"},
			func(c *Config, r *int, w *float64) bool { return *r == 0 && *w == 200 && c.MaxRecvBytes == 1<<20 }},
		{"all good", []string{"--redis-wait-replicas", "2", "--pairing-window", "5", "--shutdown-timeout", "3s"}, nil,
			func(c *Config, r *int, w *float64) bool {
				return *r == 2 && *w == 5 && c.ShutdownTimeout == 3*time.Second
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			fs, c, r, w := deferredFlags(&out)
			if err := ParseFlags(fs, tt.args); err != nil {
				t.Fatalf("parse: %v\n%s", err, out.String())
			}
			err := EnvErrors(fs)
			for _, f := range tt.refuse {
				if err == nil || !strings.Contains(err.Error(), f) {
					t.Errorf("EnvErrors = %v, want %s", err, f)
				}
			}
			if tt.refuse == nil && err != nil {
				t.Errorf("EnvErrors = %v", err)
			}
			if tt.check != nil && !tt.check(c, r, w) {
				t.Errorf("values: %+v r=%d w=%v", c, *r, *w)
			}
		})
	}
}

// TestHelpIsUnchangedByDeferredValues: -h names each flag's type and
// default from its own value, not from the wrapper that defers its errors.
func TestHelpIsUnchangedByDeferredValues(t *testing.T) {
	var a, b bytes.Buffer
	fs, _, _, _ := deferredFlags(&a)
	if err := fs.Parse([]string{"-h"}); err != flag.ErrHelp {
		t.Fatal(err)
	}
	fs2, _, _, _ := deferredFlags(&b)
	if err := ParseFlags(fs2, []string{"-h"}); err != flag.ErrHelp {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Fatalf("help differs:\n%s\n----\n%s", a.String(), b.String())
	}
}

// TestEnvAndCommandLineBothRefusedAreBothNamed: PALACE_SHUTDOWN_TIMEOUT
// and --shutdown-timeout both refused: the command line's refusal wraps
// the environment's, and EnvErrors reported the outer one only, so the
// environment's took another restart to find.
func TestEnvAndCommandLineBothRefusedAreBothNamed(t *testing.T) {
	t.Setenv("PALACE_SHUTDOWN_TIMEOUT", "20")
	var out bytes.Buffer
	fs, _, _, _ := deferredFlags(&out)
	if err := ParseFlags(fs, []string{"--shutdown-timeout", "30"}); err != nil {
		t.Fatal(err)
	}
	err := EnvErrors(fs)
	if err == nil || !strings.Contains(err.Error(), "PALACE_SHUTDOWN_TIMEOUT") || !strings.Contains(err.Error(), `--shutdown-timeout "30"`) {
		t.Fatalf("EnvErrors = %v, want both PALACE_SHUTDOWN_TIMEOUT=\"20\" and --shutdown-timeout \"30\" named", err)
	}
}
