package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/palacehq/palace/pkg/auth"
	"github.com/palacehq/palace/pkg/logging"
	"github.com/palacehq/palace/pkg/redisx"
	"github.com/palacehq/palace/pkg/server"
	"github.com/palacehq/palace/pkg/telemetry"
)

// Runtime is what a service gets to bind itself to a process.
type Runtime struct {
	Log    *slog.Logger
	Tel    *telemetry.Telemetry
	Server *server.Server
	Redis  redis.UniversalClient
	// redisAddr is Redis' address: the in-process one's when
	// --redis-addr is empty.
	redisAddr string
	// Addr is the address the process listens on; services in one
	// process reach each other through it, over the same gRPC API a
	// separate deployment uses.
	Addr string
	// ServiceKeys verify the credentials of internal calls; Dial's
	// connections present one signed with them.
	ServiceKeys *auth.Keyring
	// ServiceKeysRandom is set when --service-keys was empty: only
	// services in this process share the keys.
	ServiceKeysRandom bool
	// allowPlaceholders is --allow-placeholder-keys.
	allowPlaceholders bool
	serviceCreds      *auth.ServiceCredentials
	// peerTLS is --peer-tls, for calls to other processes; selfTLS
	// secures those to this process's own port when it serves TLS
	// (plaintext otherwise, whatever peerTLS says).
	peerTLS string
	selfTLS *tls.Config
}

// serviceTokenTTL is the life of the credentials a process presents to
// other services; it signs a new one well before the old one expires.
const serviceTokenTTL = time.Hour

// WarnIfServiceKeysRandom tells the operator, once a service that takes
// or makes internal calls across processes starts, that without
// --service-keys those calls are refused.
func (rt *Runtime) WarnIfServiceKeysRandom(log *slog.Logger, consequence string) {
	if rt.ServiceKeysRandom {
		log.Warn("no --service-keys: internal calls between processes are refused; give every process and tool the same keys", "consequence", consequence)
	}
}

// RedisForWaiting connects a Redis client of its own for n callers that
// each hold a connection while they wait (blocking reads): on the
// process's client, as many of them as its pool holds would leave every
// other call of the process waiting for a connection. Its connections
// are named for CLIENT LIST (redisx.NewForWaiting). The caller closes it.
func (rt *Runtime) RedisForWaiting(ctx context.Context, n int, name string) (redis.UniversalClient, error) {
	if rt.redisAddr == "" {
		return nil, errors.New("no redis: the process runs without one")
	}
	return redisx.NewForWaiting(ctx, rt.redisAddr, n, name)
}

// SigningKeys is the keyring of a service's signing keys flag (random
// when keys is empty, so that credentials die with the process). A
// placeholder key of the deployment files is refused unless
// --allow-placeholder-keys; then it is warned of at every start.
func (rt *Runtime) SigningKeys(flag, keys string) (ring *auth.Keyring, ephemeral bool, err error) {
	ring, ephemeral, err = signingKeys(flag, keys, rt.allowPlaceholders)
	if err != nil {
		return nil, false, err
	}
	rt.warnPlaceholders(flag, ring)
	return ring, ephemeral, nil
}

func signingKeys(flag, keys string, allowPlaceholders bool) (ring *auth.Keyring, ephemeral bool, err error) {
	ring, ephemeral, err = auth.KeyringFromConfig(keys)
	if err == nil {
		err = checkPlaceholders(ring, allowPlaceholders)
	}
	if err != nil {
		return nil, false, fmt.Errorf("--%s: %w", flag, err)
	}
	return ring, ephemeral, nil
}

func (rt *Runtime) warnPlaceholders(flag string, ring *auth.Keyring) {
	if ids := ring.Placeholders(); len(ids) > 0 {
		rt.Log.Warn("placeholder keys allowed: anyone with the deployment files can sign credentials; set your own before anyone else can reach this process", "flag", "--"+flag, "keys", ids)
	}
}

// Dial returns a client connection to target with tracing, so calls
// between services join one trace, and opts. An empty target means this
// process.
func (rt *Runtime) Dial(target string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if target == "" {
		target = rt.Addr
	}
	var creds credentials.TransportCredentials
	switch {
	case target == rt.Addr && rt.selfTLS != nil:
		creds = credentials.NewTLS(rt.selfTLS)
	case target == rt.Addr:
		creds = insecure.NewCredentials()
	default:
		// Read here, not at start: a process that calls no other service
		// starts whatever a shared settings block says.
		c, err := PeerCredentials(rt.peerTLS)
		if err != nil {
			return nil, fmt.Errorf("dial %s: --peer-tls: %w", target, err)
		}
		creds = c
	}
	cc, err := grpc.NewClient(target, append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(reconnect),
		grpc.WithKeepaliveParams(peerKeepalive),
		grpc.WithPerRPCCredentials(rt.serviceCreds),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(
			otelgrpc.WithTracerProvider(rt.Tel.Tracer),
			otelgrpc.WithMeterProvider(rt.Tel.Meter),
			otelgrpc.WithPropagators(rt.Tel.Propagator),
		)),
	}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", target, err)
	}
	return cc, nil
}

// CallTimeout bounds each unary call on a connection by d, or sooner if
// its context ends sooner: a peer that holds calls without answering (a
// frozen host, a network split) is otherwise given up only by keepalive,
// some 20 s later, and a caller without a deadline of its own waits as
// long. Streams are left alone: they are meant to last.
func CallTimeout(d time.Duration) grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return invoker(ctx, method, req, reply, cc, opts...)
	})
}

// PeerCredentials reads --peer-tls: empty for plaintext, "system" for TLS
// checked against the system's roots, else a PEM file of CA certificates.
func PeerCredentials(peerTLS string) (credentials.TransportCredentials, error) {
	cfg, err := PeerTLSConfig(peerTLS)
	if err != nil || cfg == nil {
		return insecure.NewCredentials(), err
	}
	return credentials.NewTLS(cfg), nil
}

// PeerTLSConfig is the TLS configuration of --peer-tls; nil for
// plaintext.
func PeerTLSConfig(peerTLS string) (*tls.Config, error) {
	switch peerTLS {
	case "":
		return nil, nil
	case "system":
		return &tls.Config{MinVersion: tls.VersionTLS12}, nil
	}
	pem, err := os.ReadFile(peerTLS)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA certificates: %s holds no PEM certificate", peerTLS)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, nil
}

// CallsGameService is the check of a daemon that calls the game service
// at addr without running it: an empty addr would mean this process,
// which does not serve games, and every call would fail while the process
// looked healthy; why says what needs the address. Its --peer-tls, read
// only by the first call otherwise, is checked with it.
func (c Config) CallsGameService(addr, why string) func() error {
	return func() error {
		var errs []error
		if addr == "" {
			errs = append(errs, fmt.Errorf("--game-addr (PALACE_GAME_ADDR) is required%s, which this process does not run (palace serve runs every service in one process)", why))
		}
		if _, err := PeerTLSConfig(c.PeerTLS); err != nil {
			errs = append(errs, fmt.Errorf("--peer-tls: %w", err))
		}
		return errors.Join(errs...)
	}
}

// CheckTarget checks the address of another service (--game-addr): one
// gRPC target, which gRPC itself reads only at the first call. Several
// replicas are reached through one name: a load balancer's, or a DNS name
// listing them all (dns:///game:8080).
func CheckTarget(target string) error {
	if strings.Contains(target, ",") {
		return fmt.Errorf("%q: want one address (host:port, or dns:///name:port for a name listing every replica), not a list", target)
	}
	if strings.TrimSpace(target) != target {
		return fmt.Errorf("%q: spaces around the address", target)
	}
	return nil
}

// reconnect has a connection between Palace services come back within
// about two seconds of its server, not after gRPC's default back-off,
// which grows to two minutes: a clock service whose game service
// restarted would flag its games, and an AI worker play, that much late.
var reconnect = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
	MinConnectTimeout: 5 * time.Second,
}

// peerKeepalive has a connection to another service pinged when silent,
// so that a peer that stopped answering without closing it (a frozen
// host, a network path lost) is found dead within Time+Timeout and its
// calls go to a new connection, instead of waiting on this one until TCP
// gives up. Servers accept pings every 10 s (pkg/server).
var peerKeepalive = keepalive.ClientParameters{Time: 15 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}

// Binder binds one service to the process and returns what to close at
// stop (may be nil).
type Binder func(ctx context.Context, rt *Runtime) (closer func() error, err error)

// Options name the process and what to run in it.
type Options struct {
	// Name is the service.name of telemetry and the logger's "service".
	Name     string
	Config   Config
	Services []Binder
	// Checks are the services' own config checks, run with Config's before
	// anything starts: a bad flag is reported at once, not once Redis is
	// reached, which may take --redis-wait.
	Checks []func() error
	// SigningKeys are the services' signing keys flags (name without
	// dashes: its value), checked as SigningKeys will check them, with
	// the other checks.
	SigningKeys map[string]string
	// LogOutput defaults to stderr.
	LogOutput io.Writer
	// OwnsProcess is set by a daemon's main: this Run is the only one in
	// its process, and may set what a library keeps per process (the Redis
	// client's own log lines, written as records of this Run's logger).
	OwnsProcess bool
	// OnServing, when set, is called with the listening address once every
	// service is bound (tests use it with Listen "127.0.0.1:0").
	OnServing func(addr string)
}

// distinct is errs, those that join several taken apart, without nils
// and without repeats of a message: a flag that two services share is
// checked by both.
func distinct(errs []error) []error {
	var out []error
	seen := map[string]bool{}
	var add func(err error)
	add = func(err error) {
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				add(e)
			}
			return
		}
		if err != nil && !seen[err.Error()] {
			seen[err.Error()] = true
			out = append(out, err)
		}
	}
	for _, err := range errs {
		add(err)
	}
	return out
}

// Run starts everything, serves until ctx is cancelled, and then closes
// in reverse order of creation.
func Run(ctx context.Context, o Options) (err error) {
	// Every bad flag at once, of every service: one restart fixes them all.
	bad := []error{o.Config.Validate()}
	for _, check := range o.Checks {
		bad = append(bad, check())
	}
	for _, flag := range slices.Sorted(maps.Keys(o.SigningKeys)) {
		_, _, err := signingKeys(flag, o.SigningKeys[flag], o.Config.AllowPlaceholderKeys)
		bad = append(bad, err)
	}
	if err := errors.Join(distinct(bad)...); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	out := o.LogOutput
	if out == nil {
		out = os.Stderr
	}
	log := logging.New(out, o.Config.LogFormat, o.Config.LogLevel).With("service", o.Name)
	if o.OwnsProcess {
		// Its default writes unstructured lines to stderr, which break a
		// JSON log stream just when Redis is in trouble.
		redis.SetLogger(redisLog{log})
		// Likewise OpenTelemetry's: the trace exporter's complaints (a
		// collector out of reach, spans dropped) and its own log (an
		// OTEL_EXPORTER_OTLP_* variable it cannot read, not quoted).
		otel.SetErrorHandler(otelLog{log})
		otel.SetLogger(logr.FromSlogHandler(telemetry.HideQuoted(log.With("component", "telemetry").Handler())))
	}

	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i]())
		}
	}()

	tel, err := telemetry.New(ctx, telemetry.Config{ServiceName: o.Name, OTLPEndpoint: o.Config.OTLPEndpoint, OTLPInsecure: o.Config.OTLPInsecure})
	if err != nil {
		return err
	}
	closers = append(closers, func() error { return flushTelemetry(tel, o.Config, log) })

	// Listening first reports a bad --listen, a port taken or unreadable
	// TLS files at once, not after --redis-wait.
	srv := server.New(server.Config{
		Listen: o.Config.Listen, MaxRecvBytes: o.Config.MaxRecvBytes, ShutdownTimeout: o.Config.ShutdownTimeout,
		KeepaliveTime: o.Config.KeepaliveTime, KeepaliveTimeout: o.Config.KeepaliveTimeout, BodyTimeout: o.Config.BodyTimeout,
		MaxConnectionAge: o.Config.MaxConnectionAge, MaxConnectionAgeGrace: o.Config.MaxConnectionAgeGrace,
		Pprof: o.Config.Pprof, CORSOrigins: o.Config.Origins(), CORSHeaders: o.Config.Headers(),
		TLSCertFile: o.Config.TLSCert, TLSKeyFile: o.Config.TLSKey, SharedConnections: o.Config.SharedConnections,
	}, log, tel)
	lis, err := srv.Listen()
	if err != nil {
		return err
	}
	closers = append(closers, func() error {
		if err := lis.Close(); err != nil && !isClosed(err) {
			return err
		}
		return nil
	})

	var rdb redis.UniversalClient
	redisAddr := o.Config.RedisAddr
	if !o.Config.NoRedis {
		if redisAddr == "" {
			// Validate allows that only with EmbeddedRedis.
			if redisAddr, err = embeddedRedis(log, &closers); err != nil {
				return err
			}
		}
		if rdb, err = connectRedis(ctx, redisAddr, o.Config.RedisWait, log, &closers); err != nil {
			return stoppedStarting(ctx, log, "waiting for redis", err)
		}
		if err := registerRedisReachable(tel.Meter.Meter("palace/redis"), rdb); err != nil {
			return fmt.Errorf("redis metrics: %w", err)
		}
	}
	keys, random, err := auth.KeyringFromConfig(o.Config.ServiceKeys)
	if err != nil {
		return fmt.Errorf("--service-keys: %w", err)
	}
	rt := &Runtime{Log: log, Tel: tel, Server: srv, Redis: rdb, redisAddr: redisAddr, Addr: lis.Addr().String(),
		ServiceKeys: keys, ServiceKeysRandom: random, allowPlaceholders: o.Config.AllowPlaceholderKeys, serviceCreds: auth.NewServiceCredentials(keys, o.Name, serviceTokenTTL),
		peerTLS: o.Config.PeerTLS, selfTLS: srv.SelfTLS()}
	rt.warnPlaceholders("service-keys", keys)
	var closeServices []func() error
	closers = append(closers, func() error { return closeWithin(closeServices, servicesCloseTimeout, log) })
	for _, bind := range o.Services {
		closer, err := bind(ctx, rt)
		if err != nil {
			return stoppedStarting(ctx, log, "starting its services", err)
		}
		if closer != nil {
			closeServices = append(closeServices, closer)
		}
	}
	if o.OnServing != nil {
		o.OnServing(rt.Addr)
	}
	return srv.Serve(ctx, lis)
}

// stoppedStarting is Run's answer to err, met while the process started
// (waiting for Redis, its services' first calls): nil when the process
// was stopped meanwhile, a stop asked for, which a supervisor must not
// record as a failure; err otherwise.
func stoppedStarting(ctx context.Context, log *slog.Logger, while string, err error) error {
	if ctx.Err() == nil {
		return err
	}
	log.Info("stopped while "+while, "err", err)
	return nil
}

// embeddedRedis starts an in-process Redis, for a process started
// without --redis-addr, and returns its address.
func embeddedRedis(log *slog.Logger, closers *[]func() error) (string, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return "", fmt.Errorf("in-process redis: %w", err)
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go countDownTTLs(mr, ttlTick, stop, stopped)
	*closers = append(*closers, func() error {
		close(stop)
		<-stopped
		mr.Close()
		return nil
	})
	log.Warn("no --redis-addr given: started an in-process Redis (miniredis); state is lost at exit", "redis_addr", mr.Addr())
	return mr.Addr(), nil
}

// connectRedis connects to addr, waiting up to wait for a Redis out of
// reach.
func connectRedis(ctx context.Context, addr string, wait time.Duration, log *slog.Logger, closers *[]func() error) (redis.UniversalClient, error) {
	rdb, err := awaitRedis(ctx, addr, wait, log)
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, rdb.Close)
	// The address may hold a password: logs get it redacted.
	log.Info("connected to redis", "redis_addr", redisx.Redact(addr))
	switch policy, evicts, err := redisx.EvictionPolicy(ctx, rdb); {
	case err != nil:
		log.Debug("could not read redis' eviction policy", "err", err)
	case evicts:
		log.Warn("redis evicts keys when it is full: a live game could lose its state or event log; set maxmemory-policy noeviction, so that a full redis refuses writes (which clients retry) instead",
			"maxmemory_policy", policy)
	}
	return rdb, nil
}

// ttlTick is how often the in-process Redis counts its keys' TTLs down:
// a key expires up to this much sooner or later than on a real Redis (a
// tick counts a whole interval for a key set within it), and each count
// walks every key.
const ttlTick = 100 * time.Millisecond

// countDownTTLs lets the keys of the in-process Redis expire as time
// passes, as on a real Redis, until stop is closed; miniredis counts TTLs
// down only when told to, and finished games, leases and every other key
// with a TTL would otherwise stay for good. Told every tick, not on every
// command (its ClockTTL), which walks and sorts every key each time.
func countDownTTLs(mr *miniredis.Miniredis, every time.Duration, stop <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	tick := time.NewTicker(every)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			mr.FastForward(now.Sub(last))
			last = now
		}
	}
}

// redisLog writes the Redis client's own lines (failed dials, sentinel
// and cluster changes) as records of a process's logger. The client logs
// only trouble and topology changes, each worth an operator's look.
type redisLog struct{ log *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.log.Log(ctx, slog.LevelWarn, "redis client", "detail", strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// servicesCloseTimeout bounds the services' own closing at stop, once the
// calls have ended: leases given up, seats announced disconnected, a last
// job acknowledged. Each of these waits on Redis, and a stalled Redis held
// a game process's stop for 45 s, past the pod's grace (the Redis client
// heeds no context deadline, only its own read timeout, and retries).
const servicesCloseTimeout = 5 * time.Second

// closeWithin runs closers, newest first, and stops waiting for them after
// timeout in all. What is still running then, or failed (Redis out of
// reach as the process stops), is left unfinished, as a crash would leave
// it, which every service recovers from: other replicas take over the
// leases, seats and jobs the process held. So a stop during an outage is
// a warning and a clean exit, not a failed process. The Redis client
// closes next and ends what still waits on it.
func closeWithin(closers []func() error, timeout time.Duration, log *slog.Logger) error {
	done := make(chan error, 1)
	go func() {
		var err error
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i]())
		}
		done <- err
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			log.Warn("stop: the services' closing failed (Redis out of reach?); left unfinished, as after a crash, for other replicas to take over",
				"err", err)
		}
	case <-t.C:
		log.Warn("stop: the services' closing did not end in time (Redis stalled or out of reach?); left unfinished, as after a crash, for other replicas to take over",
			"timeout", timeout.String())
	}
	return nil
}

// otelLog writes what OpenTelemetry's SDK reports as records of a
// process's logger.
type otelLog struct{ log *slog.Logger }

func (o otelLog) Handle(err error) {
	o.log.Warn("telemetry", "detail", telemetry.ExportErrorText(err))
}

// flushTelemetry stops the providers, giving the trace collector up to
// --otlp-flush-timeout to take the spans still queued. The exporter waits
// 10 s for each batch, so a collector out of reach would otherwise hold a
// stop for as many times 10 s as batches are queued, and have the process
// killed before it ends. Spans dropped for want of a collector are the
// collector's trouble, not a failure of the process's stop.
func flushTelemetry(tel *telemetry.Telemetry, cfg Config, log *slog.Logger) error {
	timeout := cfg.OTLPFlushTimeout
	if timeout == 0 {
		timeout = DefaultOTLPFlushTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := tel.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn("stop: the spans the trace collector had not taken within --otlp-flush-timeout are dropped",
			"otlp_endpoint", telemetry.RedactEndpoint(cfg.OTLPEndpoint), "otlp_flush_timeout", timeout.String())
		return nil
	}
	return err
}

// redisRetryEvery spaces the attempts to reach Redis at start, and
// redisWaitLogEvery the warnings while it stays out of reach.
const (
	redisRetryEvery   = time.Second
	redisWaitLogEvery = 10 * time.Second
)

// awaitRedis connects to addr, trying again every redisRetryEvery while
// Redis is out of reach, for up to wait: a deployment starts its
// processes and its Redis together, and a process that exits at once
// only enters a restart loop whose back-off outlasts Redis' start. An
// answer that refuses (a wrong password) fails at once: waiting mends
// nothing.
func awaitRedis(ctx context.Context, addr string, wait time.Duration, log *slog.Logger) (redis.UniversalClient, error) {
	// An address that does not parse fails at once: waiting mends nothing.
	if _, err := redisx.ParseOptions(addr); err != nil {
		return nil, err
	}
	start := time.Now()
	var logged time.Time
	for {
		rdb, err := redisx.New(ctx, addr)
		if err == nil {
			return rdb, nil
		}
		if !redisx.OutOfReach(err) || ctx.Err() != nil {
			return nil, err
		}
		waited := time.Since(start)
		if waited >= wait {
			if wait > 0 {
				return nil, fmt.Errorf("waited %v (--redis-wait): %w", waited.Round(time.Second), err)
			}
			return nil, err
		}
		if time.Since(logged) >= redisWaitLogEvery {
			log.Warn("redis out of reach: waiting for it before serving", "redis_addr", redisx.Redact(addr), "waited", waited.Round(time.Second), "redis_wait", wait, "err", err)
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for redis: %w", ctx.Err())
		case <-time.After(redisRetryEvery):
		}
	}
}
