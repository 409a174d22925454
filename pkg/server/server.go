// Package server is the gRPC wiring every Palace service shares: health,
// reflection, OpenTelemetry stats handlers, panic recovery, request
// logging, message size limits, Connect and gRPC-Web (binary through
// vanguard, text translated to it) on the same port, Prometheus /metrics
// and graceful shutdown.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/palacehq/palace/pkg/telemetry"
)

// The keepalive defaults: a silent connection is pinged after
// DefaultKeepaliveTime and closed when no answer comes within
// DefaultKeepaliveTimeout.
const (
	DefaultKeepaliveTime    = 30 * time.Second
	DefaultKeepaliveTimeout = 10 * time.Second
)

// DefaultBodyTimeout bounds a request body's arrival (Config.BodyTimeout).
const DefaultBodyTimeout = 30 * time.Second

// The connection age defaults (Config.MaxConnectionAge): most games end
// within DefaultMaxConnectionAge, so most event streams never see their
// connection renewed.
const (
	DefaultMaxConnectionAge      = 30 * time.Minute
	DefaultMaxConnectionAgeGrace = 30 * time.Second
)

// Config is the transport configuration of one listening port.
type Config struct {
	// Listen is the host:port to listen on.
	Listen string
	// MaxRecvBytes bounds one received message (default 1 MiB): requests
	// larger than any valid command are refused before reaching a handler.
	// Over Connect and gRPC-Web it bounds the message as sent too: its
	// JSON text, and its size once decompressed.
	MaxRecvBytes int
	// BodyTimeout bounds how long a call's request may take to arrive
	// after its headers (default 30 s), in every protocol, so that a
	// client trickling it, or never sending it, holds no connection,
	// stream and handler for long.
	BodyTimeout time.Duration
	// MaxSendBytes bounds one sent message (default 8 MiB).
	MaxSendBytes int
	// ShutdownTimeout bounds graceful shutdown before connections are cut
	// (default 10 s).
	ShutdownTimeout time.Duration
	// Pprof serves /debug/pprof/ for profiling a live process.
	Pprof bool
	// CORSOrigins are the origins of web pages allowed to call the
	// services from a browser (Connect and gRPC-Web): "*" for any, or
	// scheme://host[:port] with at most one * in the host. Empty: only
	// pages served from the server's own origin.
	CORSOrigins []string
	// CORSHeaders are request headers those pages may send besides the
	// protocols' own, the credential's and trace context's: an app's own
	// (x-request-id), a monitoring SDK's (sentry-trace). A call with a
	// header not allowed fails its preflight, in the browser, whole.
	CORSHeaders []string
	// MaxConnectionAge is how long one client connection takes new calls
	// (0: for ever). A balancer that spreads connections, not calls (a
	// Kubernetes Service), would otherwise never hand a long-lived client
	// to a replica added after it connected. A native gRPC connection is
	// then sent away (GOAWAY, its age varied by up to 10% so that clients
	// do not all return at once): the client opens a new one for its next
	// call, and the calls under way get MaxConnectionAgeGrace (default
	// 30 s) to finish before the connection is closed. A stream still open
	// then ends UNAVAILABLE and its client resumes it (after_version) on
	// the new connection. That close also frees what a stream whose client
	// reads nothing holds: grpc-go queues up to 64 KiB of messages for it
	// for as long as its connection lives. A connection net/http serves
	// (Connect, gRPC-Web, SharedConnections) closes after the first answer
	// it sends past its age, once its calls have ended; what it holds for
	// an unread stream is bounded by flow control alone.
	MaxConnectionAge, MaxConnectionAgeGrace time.Duration
	// KeepaliveTime is how long a client connection may stay silent before
	// the server pings it, and KeepaliveTimeout how long the answer may
	// take before the connection is closed (defaults 30 s and 10 s). A
	// phone that vanishes without closing its connection (out of coverage,
	// killed) thus has its streams ended, and its seats announced
	// disconnected, within their sum: its heartbeats alone would be taken
	// by the kernel until TCP gives up, about 15 minutes later. HTTP/1.1
	// clients (browsers without TLS in front) cannot be pinged; on Linux
	// their connections are dropped once data sent on them stays
	// unacknowledged for that sum (TCP_USER_TIMEOUT), so the same holds.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// TLSCertFile and TLSKeyFile, when set, have the port serve TLS (PEM
	// files), every protocol alike: gRPC and HTTP/2 through ALPN h2,
	// HTTP/1.1 for browsers that choose it. The files are read again when
	// they change. Empty: plaintext, for a proxy in front that ends TLS.
	TLSCertFile, TLSKeyFile string
	// SharedConnections serves every connection through net/http, native
	// gRPC included, instead of handing HTTP/2 connections whose first
	// request is native gRPC to grpc-go's own transport (several times
	// cheaper per call), which serves nothing else. A proxy in front that
	// sends native gRPC and Connect or gRPC-Web calls over one pooled
	// upstream connection needs it: its later browser calls would be
	// refused there.
	SharedConnections bool
}

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if c.Listen == "" {
		errs = append(errs, errors.New("listen address is empty"))
	} else if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen address %q: %w", c.Listen, err))
	}
	if c.MaxRecvBytes < 0 || c.MaxSendBytes < 0 {
		errs = append(errs, errors.New("message size limits must not be negative"))
	}
	if c.ShutdownTimeout < 0 || c.BodyTimeout < 0 {
		errs = append(errs, errors.New("shutdown and body timeouts must not be negative"))
	}
	if c.KeepaliveTime < 0 || c.KeepaliveTimeout < 0 {
		errs = append(errs, errors.New("keepalive times must not be negative"))
	}
	if c.MaxConnectionAge < 0 || c.MaxConnectionAgeGrace < 0 {
		errs = append(errs, errors.New("connection age and its grace must not be negative"))
	}
	for _, o := range c.CORSOrigins {
		if err := ValidateOrigin(o); err != nil {
			errs = append(errs, err)
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("TLS needs both a certificate file and a key file"))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.MaxRecvBytes == 0 {
		c.MaxRecvBytes = 1 << 20
	}
	if c.MaxSendBytes == 0 {
		c.MaxSendBytes = 8 << 20
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.KeepaliveTime == 0 {
		c.KeepaliveTime = DefaultKeepaliveTime
	}
	if c.KeepaliveTimeout == 0 {
		c.KeepaliveTimeout = DefaultKeepaliveTimeout
	}
	if c.MaxConnectionAgeGrace == 0 {
		c.MaxConnectionAgeGrace = DefaultMaxConnectionAgeGrace
	}
	return c
}

// Server is one gRPC server with its HTTP front (Connect, gRPC-Web,
// /metrics) on a single port.
type Server struct {
	cfg    Config
	log    *slog.Logger
	tel    *telemetry.Telemetry
	grpc   *grpc.Server
	health *health.Server
	mux    *http.ServeMux

	// drain ends the running streams when shutdown begins.
	drain     context.Context
	drainDone context.CancelFunc

	// certs is the port's TLS certificate; nil: plaintext. Loaded by
	// Listen.
	certs *certFiles

	mu       sync.Mutex
	services []string
	// down are the services set not serving (SetServing); serving tells
	// whether Serve has begun, which sets the others SERVING.
	down    map[string]bool
	serving bool
}

// maxHeaderBytes bounds a request's headers (metadata), over every
// protocol alike: credentials are at most a few KiB, and a browser's
// cookies for the origin ride along on Connect and gRPC-Web calls. gRPC's
// own default is 16 MiB.
const maxHeaderBytes = 64 << 10

// maxStreamsPerConn bounds the calls one connection carries at once, in
// every protocol: a call whose answer its client never takes (a flow
// control window of 0) stays open, and holds its memory, for as long as
// the connection lives. A client that needs more opens more connections.
// Event streams are long-lived: a client multiplexing many games over one
// connection needs more than net/http's default of 250.
const maxStreamsPerConn = 4096

// New builds a server; register services on it, then call Serve.
func New(cfg Config, log *slog.Logger, tel *telemetry.Telemetry) *Server {
	cfg = cfg.withDefaults()
	log = log.With("component", "server")
	drain, drainDone := context.WithCancel(context.Background())
	g := grpc.NewServer(
		grpc.StatsHandler(refusalStats{otelgrpc.NewServerHandler(
			otelgrpc.WithTracerProvider(tel.Tracer),
			otelgrpc.WithMeterProvider(tel.Meter),
			otelgrpc.WithPropagators(tel.Propagator),
		)}),
		grpc.StatsHandler(connBirth{}),
		grpc.InTapHandle(awaitBody(cfg.BodyTimeout)),
		grpc.ChainUnaryInterceptor(recoverUnary(log), requestCame, logUnary(log, cfg.MaxConnectionAge), refuseUndecodable),
		// The log line outside the drain: it records the Unavailable that a
		// stop ends a stream with, not what its handler returned.
		grpc.ChainStreamInterceptor(recoverStream(log), requestCameStream, logStream(log, cfg.MaxConnectionAge), drainStream(drain), refusedStream, refuseUndecodableStream),
		grpc.MaxRecvMsgSize(cfg.MaxRecvBytes),
		grpc.MaxHeaderListSize(maxHeaderBytes),
		grpc.MaxConcurrentStreams(maxStreamsPerConn),
		grpc.MaxSendMsgSize(cfg.MaxSendBytes),
		grpc.ForceServerCodecV2(newCodec()),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time: cfg.KeepaliveTime, Timeout: cfg.KeepaliveTimeout,
			// grpc-go reads 0 as for ever.
			MaxConnectionAge: cfg.MaxConnectionAge, MaxConnectionAgeGrace: cfg.MaxConnectionAgeGrace,
		}),
		// Clients may ping as often as every 10 s (gRPC's own floor for
		// clients), even without calls, instead of being sent away for it
		// after 5 minutes' worth.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	)
	h := health.NewServer()
	healthpb.RegisterHealthServer(g, h)
	reflection.Register(g)
	s := &Server{cfg: cfg, log: log, tel: tel, grpc: g, health: h, mux: http.NewServeMux(), drain: drain, drainDone: drainDone}
	s.mux.Handle("GET /metrics", tel.MetricsHandler())
	if cfg.Pprof {
		s.mux.HandleFunc("/debug/pprof/", pprof.Index)
		s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return s
}

// RegisterService registers a gRPC service; its full name becomes a
// health service name that reports SERVING while the server serves.
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	s.grpc.RegisterService(desc, impl)
	s.mu.Lock()
	s.services = append(s.services, desc.ServiceName)
	s.mu.Unlock()
	s.health.SetServingStatus(desc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
}

// SetServing sets a registered service's health to SERVING or
// NOT_SERVING, for a service that finds it cannot do its work: balancers
// and readiness checks then leave it. The whole server's health ("")
// stays SERVING, so a liveness check does not restart a process that is
// waiting for something outside it. Before Serve the status is kept for
// Serve to apply; after shutdown began it changes nothing.
func (s *Server) SetServing(service string, serving bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down == nil {
		s.down = map[string]bool{}
	}
	s.down[service] = !serving
	if s.serving {
		s.health.SetServingStatus(service, servingStatus(serving))
	}
}

func servingStatus(serving bool) healthpb.HealthCheckResponse_ServingStatus {
	if serving {
		return healthpb.HealthCheckResponse_SERVING
	}
	return healthpb.HealthCheckResponse_NOT_SERVING
}

// Handle adds a plain HTTP handler (web pages, debug endpoints) on the
// same port. Patterns follow net/http.ServeMux.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Services lists the registered service names.
func (s *Server) Services() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.services...)
}

// Listen opens the configured address.
func (s *Server) Listen() (net.Listener, error) {
	if err := s.cfg.Validate(); err != nil {
		return nil, fmt.Errorf("server config: %w", err)
	}
	if s.cfg.TLSCertFile != "" {
		certs, err := loadCertFiles(s.cfg.TLSCertFile, s.cfg.TLSKeyFile, s.log)
		if err != nil {
			return nil, err
		}
		s.certs = certs
	}
	lis, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	return lis, nil
}

// SelfTLS is the TLS configuration of calls this process makes to its own
// port, which accepts only the certificate the port serves; nil when the
// port serves plaintext. Valid after Listen.
func (s *Server) SelfTLS() *tls.Config {
	if s.certs == nil {
		return nil
	}
	return s.certs.selfConfig()
}

// rpcHandler serves the calls of the protocols the transcoder translates
// (Connect, gRPC-Web) and their CORS preflights.
func (s *Server) rpcHandler() (http.Handler, error) {
	transcoder, err := newTranscoder(s.grpc, transcoderLimits(s.cfg)...)
	if err != nil {
		return nil, fmt.Errorf("connect transcoder: %w", err)
	}
	// Innermost first: each layer sees the request as the one outside it
	// left it.
	rpc := withLowerTrailers(transcoder)
	rpc = refuseEmptyBody(rpc)
	rpc = withUnaryGzip(rpc)
	streamsIn := methodPaths(s.grpc, true)
	rpc = refuseCutFrames(rpc, s.cfg.MaxRecvBytes, streamsIn)
	rpc = refuseUnknownGRPCWebMethods(rpc, s.grpc)
	rpc = withGRPCWebText(rpc, s.cfg.MaxRecvBytes)
	rpc = withBodyDeadline(rpc, s.cfg.BodyTimeout, s.cfg.MaxRecvBytes, streamsIn)
	rpc = refuseBadConnectTimeout(rpc)
	rpc = refuseBadGRPCTimeout(rpc)
	rpc = refuseUnknownMedia(rpc)
	rpc = withJSONCharset(rpc)
	if len(s.cfg.CORSOrigins) > 0 {
		rpc = withCORS(s.cfg.CORSOrigins, s.cfg.CORSHeaders, rpc)
	}
	return rpc, nil
}

// Serve serves on lis until ctx is cancelled, then drains: health turns
// NOT_SERVING, new calls are refused, running calls get ShutdownTimeout to
// finish. It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	rpc, err := s.rpcHandler()
	if err != nil {
		return err
	}
	// Native gRPC on connections net/http serves (SharedConnections).
	native := withFirstMessageDeadline(s.grpc, s.cfg.BodyTimeout, s.cfg.MaxRecvBytes, methodPaths(s.grpc, true), methodPaths(s.grpc, false))
	root := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pastAge(r.Context(), s.cfg.MaxConnectionAge) {
			// HTTP/1.1 closes the connection after this answer; HTTP/2
			// sends GOAWAY and closes once its streams have ended.
			w.Header().Set("Connection", "close")
		}
		ct := r.Header.Get("Content-Type")
		switch {
		case r.ProtoMajor == 2 && (ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+")):
			native.ServeHTTP(w, r)
		case r.Method == http.MethodPost || r.Header.Get("Connect-Protocol-Version") != "" || isPreflight(r):
			rpc.ServeHTTP(w, r)
		default:
			s.mux.ServeHTTP(w, r)
		}
	})
	handler := withUnreadBodyDeadline(root, s.cfg.BodyTimeout)
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	hs := &http.Server{
		Handler:   handler,
		Protocols: &protocols,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: maxStreamsPerConn,
			SendPingTimeout:      s.cfg.KeepaliveTime,
			PingTimeout:          s.cfg.KeepaliveTimeout,
		},
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		// A browser keeps idle connections open for reuse; a server with
		// many clients closes those it has not heard from in a while. A
		// connection carrying a stream is not idle.
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ConnContext: withConnBorn,
	}
	s.mu.Lock()
	for _, name := range s.services {
		s.health.SetServingStatus(name, servingStatus(!s.down[name]))
	}
	s.serving = true
	s.mu.Unlock()
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.log.Info("serving", "addr", lis.Addr().String(), "tls", s.certs != nil, "services", s.Services())

	sp := &splitter{lis: lis, grpc: newConnListener(lis.Addr()), http: newConnListener(lis.Addr()), log: s.log, sniffTime: hs.ReadHeaderTimeout,
		userTimeout: s.cfg.KeepaliveTime + s.cfg.KeepaliveTimeout, shared: s.cfg.SharedConnections}
	if s.certs != nil {
		// The splitter reads each connection decrypted, so both servers
		// behind it see the plaintext protocol they already serve.
		sp.tls = s.certs.serverConfig()
	}
	errc := make(chan error, 3)
	go func() { errc <- sp.serve(ctx) }()
	go func() { errc <- hs.Serve(sp.http) }()
	go func() { errc <- s.grpc.Serve(sp.grpc) }()
	select {
	case err := <-errc:
		_ = lis.Close()
		sp.grpc.Close()
		sp.http.Close()
		s.grpc.Stop()
		_ = hs.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("shutting down", "addr", lis.Addr().String())
	_ = lis.Close()
	s.drainDone()
	s.health.Shutdown()
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	// net/http drains first, grpc-go after. The calls net/http hands
	// grpc-go (Connect, gRPC-Web) are connections of their own to grpc-go,
	// which its drain closes at once: a unary call would lose its context
	// and its answer, a stream its Unavailable end. Once net/http is done,
	// those calls have ended (streams through the drain above) and grpc-go
	// only drains its native connections, which meanwhile take calls as
	// before: health already reports NOT_SERVING, so balancers send new
	// ones elsewhere.
	begun := time.Now()
	err = hs.Shutdown(sctx)
	cut := errors.Is(err, context.DeadlineExceeded)
	if cut {
		// net/http's connections close before grpc-go stops: a Connect or
		// gRPC-Web client reads a dropped connection as unavailable, and
		// retries, where grpc-go stopping under a call it was handed in
		// process has the transcoder answer "unknown", which none retries.
		_ = hs.Close()
	}
	cut = !s.stopGRPC(sctx) || cut
	if err != nil && !cut {
		return fmt.Errorf("shutdown: %w", err)
	}
	if cut {
		s.log.Warn("calls still running after the shutdown timeout were cut off", "shutdown_timeout", s.cfg.ShutdownTimeout.String())
		return nil
	}
	s.log.Info("stopped", "drain_ms", time.Since(begun).Milliseconds())
	return nil
}

// stopGRPC stops grpc-go gracefully, or at once when ctx ends first; it
// reports whether the stop was graceful.
func (s *Server) stopGRPC(ctx context.Context) bool {
	stopped := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
		return true
	case <-ctx.Done():
		s.grpc.Stop()
		return false
	}
}
