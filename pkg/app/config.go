// Package app runs a Palace process: flags with environment fallbacks,
// logging, telemetry, Redis, one server on one port, the services bound to
// it, and a clean stop. The per-service daemons and `palace serve` share
// it, so both start services the same way.
package app

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/palacehq/palace/pkg/auth"
	"github.com/palacehq/palace/pkg/server"
	"github.com/palacehq/palace/pkg/telemetry"
)

// DefaultOTLPFlushTimeout fits the stop of the deployment files: a pod
// gets 40 s, of which the preStop pause takes 5 s, the calls'
// --shutdown-timeout 20 s and the services' close at most 5 s.
const DefaultOTLPFlushTimeout = 5 * time.Second

// Config is what every Palace process is configured with.
type Config struct {
	Listen    string
	RedisAddr string
	// RedisWait is how long a process that starts while Redis is out of
	// reach waits for it before it gives up (0: not at all).
	RedisWait    time.Duration
	LogFormat    string
	LogLevel     string
	OTLPEndpoint string
	OTLPInsecure bool
	// OTLPFlushTimeout bounds the wait at stop for the collector to take
	// the spans still queued (0: DefaultOTLPFlushTimeout).
	OTLPFlushTimeout time.Duration
	ShutdownTimeout  time.Duration
	MaxRecvBytes     int
	// KeepaliveTime and KeepaliveTimeout: see server.Config (0: its
	// defaults).
	KeepaliveTime, KeepaliveTimeout time.Duration
	// BodyTimeout: see server.Config (0: its default).
	BodyTimeout time.Duration
	// MaxConnectionAge and MaxConnectionAgeGrace: see server.Config (an
	// age of 0: no limit).
	MaxConnectionAge, MaxConnectionAgeGrace time.Duration
	// EmbeddedRedis lets an empty RedisAddr start an in-process Redis
	// (miniredis). Only `palace serve` allows it: a lone daemon without a
	// real Redis could not share state with anyone.
	EmbeddedRedis bool
	// Pprof serves /debug/pprof/ on the listen port.
	Pprof bool
	// CORSOrigins is a comma-separated list of the web origins whose pages
	// may call the services from a browser.
	CORSOrigins string
	// CORSHeaders is a comma-separated list of further request headers
	// those pages may send.
	CORSHeaders string
	// NoRedis is for processes that keep no state (the rules service).
	NoRedis bool
	// NoPeers is for processes that call no other process (the rules
	// service; palace serve, whose services call each other through its
	// own port): they take no --peer-tls.
	NoPeers bool
	// ServiceKeys sign and verify the credentials services present to
	// each other's internal RPCs: "id:hexsecret,...", the first signs,
	// all verify (rotation). Empty: a random key for this process.
	ServiceKeys string
	// AllowPlaceholderKeys lets the process start with the placeholder
	// keys the deployment files ship, which anyone can sign with.
	AllowPlaceholderKeys bool
	// TLSCert and TLSKey are PEM files the listen port serves TLS with;
	// empty: plaintext.
	TLSCert, TLSKey string
	// PeerTLS is how this process reaches other Palace services: empty
	// for plaintext, "system" for TLS checked against the system's roots,
	// or a PEM file of the CA certificates that sign their certificates.
	PeerTLS string
	// SharedConnections: see server.Config.
	SharedConnections bool

	// flags is the flag set RegisterFlags defined the flags on: Validate
	// reports the environment values refused by any flag on it, the
	// services' included.
	flags *flag.FlagSet
}

// Env returns the environment value for a flag name: PALACE_ and the name
// upper-cased with dashes as underscores (--redis-addr: PALACE_REDIS_ADDR).
func Env(name string) string { return os.Getenv(envName(name)) }

// StringFlag defines a string flag whose default comes from its
// environment variable when set.
func StringFlag(fs *flag.FlagSet, p *string, name, def, usage string) {
	fs.StringVar(p, name, def, usage+" (env "+envName(name)+")")
	fromEnv(fs, name)
}

// IntFlag is StringFlag for integers.
func IntFlag(fs *flag.FlagSet, p *int, name string, def int, usage string) {
	fs.IntVar(p, name, def, usage+" (env "+envName(name)+")")
	fromEnv(fs, name)
}

// DurationFlag is StringFlag for durations.
func DurationFlag(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var((*durationValue)(p), name, usage+" (a `duration` with its unit; env "+envName(name)+")")
	fromEnv(fs, name)
}

// durationValue is flag's own duration flag but for its refusals, where
// flag says only "parse error": "20" for 20 seconds is the usual slip.
type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration: write a number with its unit, such as 20s, 500ms or 1m30s")
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) String() string { return (*time.Duration)(d).String() }

// BoolFlag is StringFlag for booleans.
func BoolFlag(fs *flag.FlagSet, p *bool, name string, def bool, usage string) {
	fs.BoolVar(p, name, def, usage+" (env "+envName(name)+")")
	fromEnv(fs, name)
}

// FloatFlag is StringFlag for floating-point numbers, finite ones only
// (FiniteFloatVar).
func FloatFlag(fs *flag.FlagSet, p *float64, name string, def float64, usage string) {
	FiniteFloatVar(fs, p, name, def, usage+" (env "+envName(name)+")")
	fromEnv(fs, name)
}

// FiniteFloatVar is flag.Float64Var refusing NaN and the infinities, which
// strconv reads as numbers: NaN passes every range check ("< 0" is false
// for it) and then poisons every comparison made with it, such as a
// pairing window no rating difference is ever within.
func FiniteFloatVar(fs *flag.FlagSet, p *float64, name string, def float64, usage string) {
	*p = def
	fs.Var((*finiteValue)(p), name, usage)
}

type finiteValue float64

func (f *finiteValue) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil:
		return errors.New("not a number")
	case math.IsNaN(v) || math.IsInf(v, 0):
		return errors.New("not a finite number")
	}
	*f = finiteValue(v)
	return nil
}

func (f *finiteValue) String() string { return strconv.FormatFloat(float64(*f), 'g', -1, 64) }

// fromEnv applies a flag's environment variable through the flag's own
// parser; the command line still overrides it. A value the parser refuses
// is kept on the flag for EnvErrors, which Validate reports, so that the
// process refuses to start: flag's parsers store their zero value on a
// parse error, and a PALACE_REDIS_WAIT_REPLICAS=" 1" read as 0 would
// quietly turn the wait for replicas off. Until then the flag keeps its
// default.
func fromEnv(fs *flag.FlagSet, name string) {
	v := Env(name)
	if v == "" {
		return
	}
	if err := fs.Set(name, v); err != nil {
		f := fs.Lookup(name)
		_ = f.Value.Set(f.DefValue)
		f.Value = &refusedValue{Value: f.Value, err: fmt.Errorf("%s=%q: not a valid --%s (default %q): %w", envName(name), v, name, f.DefValue, err)}
	}
}

// refusedValue is a flag whose value, from the environment or the
// command line, its parser refused, with that error; otherwise it is the
// flag's own value.
type refusedValue struct {
	flag.Value
	err error
}

// IsBoolFlag keeps a boolean flag usable as -name, without a value.
func (r *refusedValue) IsBoolFlag() bool {
	b, ok := r.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// String serves flag's help, which calls it on a zero value too.
func (r *refusedValue) String() string {
	if r == nil || r.Value == nil {
		return ""
	}
	return r.Value.String()
}

// EnvErrors reports the environment variables of fs's flags whose values
// their flags refused, and the command-line values refused while
// DeferValueErrors held them (nil: none). Config.Validate includes them
// for the flag set given to RegisterFlags; a command that registers flags
// with the helpers but no Config checks them itself.
func EnvErrors(fs *flag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		// A value refused on the command line wraps one refused from the
		// environment: both are named.
		for r, ok := f.Value.(*refusedValue); ok; r, ok = r.Value.(*refusedValue) {
			errs = append(errs, r.err)
		}
	})
	return errors.Join(errs...)
}

// DeferValueErrors makes fs's flags take a command-line value they refuse
// as no error, keeping their default, so that parsing goes on to the
// flags after it; call the function it returns once fs is parsed, which
// leaves each refusal on its flag for EnvErrors to report. Parsing stops
// at the first bad value otherwise, and every other bad flag would take
// a restart of its own to find. Unknown flags and -h still stop it.
func DeferValueErrors(fs *flag.FlagSet) (parsed func()) {
	fs.VisitAll(func(f *flag.Flag) {
		f.Value = &deferredValue{refusedValue: refusedValue{Value: f.Value}, flag: f}
	})
	usage := fs.Usage
	done := func() {
		fs.Usage = usage
		fs.VisitAll(func(f *flag.Flag) {
			d, ok := f.Value.(*deferredValue)
			if !ok {
				return
			}
			f.Value = d.Value
			if d.err != nil {
				f.Value = &d.refusedValue
			}
		})
	}
	// The help (-h, an unknown flag) names each flag's type and default
	// from its own value.
	fs.Usage = func() {
		done()
		if usage != nil {
			usage()
		}
	}
	return done
}

// deferredValue is a flag's value while DeferValueErrors holds it: a
// refusedValue whose error is set by the refusal, if one comes.
type deferredValue struct {
	refusedValue
	flag *flag.Flag
}

func (d *deferredValue) Set(s string) error {
	if err := d.Value.Set(s); err != nil {
		// flag's own parsers store their zero value on a parse error.
		_ = d.Value.Set(d.flag.DefValue)
		d.err = fmt.Errorf("--%s %q: %w", d.flag.Name, s, err)
	}
	return nil
}

func envName(flagName string) string {
	b := []byte("PALACE_" + flagName)
	for i, c := range b {
		switch {
		case c == '-':
			b[i] = '_'
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// RegisterFlags defines the common flags on fs with the given default
// listen address.
func (c *Config) RegisterFlags(fs *flag.FlagSet, defaultListen string) {
	c.flags = fs
	StringFlag(fs, &c.Listen, "listen", defaultListen, "host:port to serve gRPC, Connect, gRPC-Web and /metrics on")
	if !c.NoRedis {
		usage := "Redis address: host:port, redis://[user:pass@]host:port[/db], redis-cluster://[user:pass@]h1,h2 or redis-sentinel://[user:pass@]master@h1,h2, each URL form with go-redis options such as ?pool_size=100"
		if c.EmbeddedRedis {
			usage += "; empty starts an in-process Redis"
		}
		StringFlag(fs, &c.RedisAddr, "redis-addr", "", usage)
		DurationFlag(fs, &c.RedisWait, "redis-wait", time.Minute, "at start, how long to wait for a Redis out of reach (starting, restarting, not yet scheduled) before giving up, rather than exit at once into a restart loop; a Redis that refuses the credentials fails at once")
	}
	StringFlag(fs, &c.LogFormat, "log-format", "text", "log format: text or json")
	StringFlag(fs, &c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	StringFlag(fs, &c.OTLPEndpoint, "otlp-endpoint", "", "OTLP/gRPC collector for traces: host:port (TLS as --otlp-insecure says), http://host:port (plaintext) or https://host:port (TLS); empty: no export")
	BoolFlag(fs, &c.OTLPInsecure, "otlp-insecure", true, "send traces to a host:port --otlp-endpoint without TLS")
	DurationFlag(fs, &c.OTLPFlushTimeout, "otlp-flush-timeout", DefaultOTLPFlushTimeout, "at stop, after the calls, how long the collector may take to accept the spans still queued; those it has not taken by then are dropped, so a collector out of reach cannot hold up a stop past a supervisor's patience")
	DurationFlag(fs, &c.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "how long running calls may take to finish at stop")
	BoolFlag(fs, &c.Pprof, "pprof", false, "serve /debug/pprof/ for profiling, on the listen port: to whoever reaches it")
	StringFlag(fs, &c.CORSHeaders, "cors-headers", "", "comma-separated request headers pages of --cors-origins may send besides those of the protocols, authorization and trace context, e.g. x-request-id,sentry-trace: a call with any other header fails its preflight")
	StringFlag(fs, &c.CORSOrigins, "cors-origins", "", "comma-separated origins of web pages that may call from a browser over Connect or gRPC-Web, e.g. https://play.example.com,https://*.example.com; * for any; empty: the server's own origin only")
	IntFlag(fs, &c.MaxRecvBytes, "max-recv-bytes", 1<<20, "largest request message accepted")
	DurationFlag(fs, &c.KeepaliveTime, "keepalive-time", server.DefaultKeepaliveTime, "how long a client connection may stay silent before the server pings it")
	DurationFlag(fs, &c.BodyTimeout, "body-timeout", server.DefaultBodyTimeout, "how long a request (gRPC, Connect or gRPC-Web) may take to arrive after its headers before the call is refused DeadlineExceeded")
	DurationFlag(fs, &c.KeepaliveTimeout, "keepalive-timeout", server.DefaultKeepaliveTimeout, "how long the server waits for a ping's answer before it closes the connection: its streams end and its seats are announced disconnected")
	DurationFlag(fs, &c.MaxConnectionAge, "max-connection-age", server.DefaultMaxConnectionAge, "how long one client connection takes new calls before the client is sent to open another, which a balancer in front may send to another replica; 0: for ever")
	DurationFlag(fs, &c.MaxConnectionAgeGrace, "max-connection-age-grace", server.DefaultMaxConnectionAgeGrace, "how long the calls of a native gRPC connection past --max-connection-age may take to finish before it is closed: its streams still open end UNAVAILABLE, and their clients resume them")
	StringFlag(fs, &c.TLSCert, "tls-cert", "", "PEM certificate file (with its chain) to serve TLS with on the listen port, for gRPC, Connect, gRPC-Web and /metrics alike; read again when it changes; empty: plaintext, for a proxy in front that ends TLS")
	StringFlag(fs, &c.TLSKey, "tls-key", "", "PEM private key file of --tls-cert")
	BoolFlag(fs, &c.SharedConnections, "shared-connections", false, "serve native gRPC through the same HTTP server as Connect and gRPC-Web on every connection, instead of handing connections that start with native gRPC to grpc-go's own faster transport, which serves nothing else: set it behind a proxy that sends both over one pooled upstream connection")
	if !c.NoPeers {
		StringFlag(fs, &c.PeerTLS, "peer-tls", "", "how to reach the other Palace services this one calls (--game-addr): empty for plaintext, system for TLS checked against the system's root certificates, or a PEM file of the CA certificates that sign theirs")
	}
	StringFlag(fs, &c.ServiceKeys, "service-keys", "", "keys of the credentials Palace services present to each other's internal calls (creating games, expiring deadlines), id:hexsecret[,id:hexsecret]; first signs, all verify; the same in every process and tool; empty: random, so only services in this process are trusted")
	BoolFlag(fs, &c.AllowPlaceholderKeys, "allow-placeholder-keys", false, "start even with the placeholder keys of the deployment files (secrets that begin INSECURE-), which anyone with the repository can sign credentials with: for a throwaway deployment that nobody else reaches")
}

// Validate reports every problem at once, beginning with environment
// variables that the flags registered on RegisterFlags' flag set refused.
func (c Config) Validate() error {
	var errs []error
	if c.flags != nil {
		errs = append(errs, EnvErrors(c.flags))
	}
	if c.Listen == "" {
		errs = append(errs, errors.New("--listen is empty"))
	} else if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("--listen %q: want host:port, or :port for every interface: %w", c.Listen, err))
	}
	if c.RedisAddr == "" && !c.EmbeddedRedis && !c.NoRedis {
		errs = append(errs, errors.New("--redis-addr (PALACE_REDIS_ADDR) is required"))
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("--log-format %q: want text or json", c.LogFormat))
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "warning", "error":
	default:
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("--shutdown-timeout must be positive"))
	}
	if c.RedisWait < 0 {
		errs = append(errs, errors.New("--redis-wait must not be negative (0: do not wait)"))
	}
	if c.OTLPEndpoint != "" {
		if err := telemetry.CheckEndpoint(c.OTLPEndpoint); err != nil {
			errs = append(errs, fmt.Errorf("--otlp-endpoint %w", err))
		}
	}
	if c.OTLPFlushTimeout < 0 {
		errs = append(errs, fmt.Errorf("--otlp-flush-timeout must not be negative (0: %v)", DefaultOTLPFlushTimeout))
	}
	if c.BodyTimeout < 0 {
		errs = append(errs, fmt.Errorf("--body-timeout must not be negative (0: %v)", server.DefaultBodyTimeout))
	}
	if c.KeepaliveTime < 0 || c.KeepaliveTimeout < 0 {
		errs = append(errs, fmt.Errorf("--keepalive-time and --keepalive-timeout must not be negative (0: %v and %v)", server.DefaultKeepaliveTime, server.DefaultKeepaliveTimeout))
	}
	if c.MaxConnectionAge < 0 || c.MaxConnectionAgeGrace < 0 {
		errs = append(errs, fmt.Errorf("--max-connection-age and --max-connection-age-grace must not be negative (0: no limit and %v)", server.DefaultMaxConnectionAgeGrace))
	}
	if c.MaxRecvBytes < 1024 {
		errs = append(errs, errors.New("--max-recv-bytes must be at least 1024"))
	}
	for _, h := range c.Headers() {
		if !httpguts.ValidHeaderFieldName(h) {
			errs = append(errs, fmt.Errorf("--cors-headers: %q is not a header name", h))
		}
	}
	for _, o := range c.Origins() {
		if err := server.ValidateOrigin(o); err != nil {
			errs = append(errs, fmt.Errorf("--cors-origins: %w", err))
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together: give both, or neither for plaintext"))
	} else if c.TLSCert != "" {
		if err := server.CheckCertFiles(c.TLSCert, c.TLSKey); err != nil {
			errs = append(errs, fmt.Errorf("--tls-cert and --tls-key: %w", err))
		}
	}
	if len(c.Headers()) > 0 && len(c.Origins()) == 0 {
		errs = append(errs, errors.New("--cors-headers needs --cors-origins: without origins no browser page of another origin calls"))
	}
	if strings.TrimSpace(c.ServiceKeys) != "" {
		ring, err := auth.ParseKeyring(c.ServiceKeys)
		if err == nil {
			err = checkPlaceholders(ring, c.AllowPlaceholderKeys)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--service-keys: %w", err))
		}
	}
	return errors.Join(errs...)
}

// checkPlaceholders refuses a keyring that holds a placeholder key of the
// deployment files, unless allowed (--allow-placeholder-keys): a process
// started with one by mistake would take credentials anyone can forge.
func checkPlaceholders(ring *auth.Keyring, allowed bool) error {
	if ids := ring.Placeholders(); len(ids) > 0 && !allowed {
		return fmt.Errorf("key %s is a placeholder published with the deployment files (its secret begins INSECURE-): anyone can sign credentials with it; generate your own with palace keygen, or pass --allow-placeholder-keys (PALACE_ALLOW_PLACEHOLDER_KEYS=true) for a throwaway deployment nobody else reaches", strings.Join(ids, ", "))
	}
	return nil
}

// Origins lists the allowed browser origins of --cors-origins.
func (c Config) Origins() []string { return commaList(c.CORSOrigins) }

// Headers lists the further request headers of --cors-headers.
func (c Config) Headers() []string { return commaList(c.CORSHeaders) }

func commaList(s string) []string {
	var out []string
	for o := range strings.SplitSeq(s, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
}

// ParseFlags parses a daemon's arguments, which are flags only: a stray
// argument (a flag written without its dashes, say) is refused rather
// than ignored. A value a flag refused, from the command line or the
// environment, is left to Config.Validate, whose RegisterFlags every
// daemon's flag set holds, to be named with every other bad flag.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	parsed := DeferValueErrors(fs)
	err := fs.Parse(args)
	parsed()
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: %s takes flags only (-h lists them)", fs.Arg(0), fs.Name())
	}
	return nil
}

// ResetToDefaults sets every flag of fs back to its default, undoing the
// environment's values: a service's DefaultConfig is what its flags
// default to, whatever PALACE_* variables the process (a test run, say)
// happens to have.
func ResetToDefaults(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) { _ = f.Value.Set(f.DefValue) })
}
