// Package telemetry sets up OpenTelemetry tracing and metrics for one
// process. Nothing is installed globally: providers are handed to whoever
// needs them, so several services in one process (palace serve) and
// parallel tests never share hidden state.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/credentials/insecure"
)

// Config says where traces go. Metrics are always served on /metrics.
type Config struct {
	// ServiceName is the OpenTelemetry service.name resource attribute.
	ServiceName string
	// OTLPEndpoint is a host:port of an OTLP/gRPC collector, or its URL
	// (http://host:port without TLS, https://host:port with it); empty
	// turns trace export and recording off (spans still get trace ids,
	// which reach the logs).
	OTLPEndpoint string
	// OTLPInsecure sends traces to a host:port endpoint without TLS.
	OTLPInsecure bool
}

// Telemetry holds the providers of one process.
type Telemetry struct {
	Tracer     trace.TracerProvider
	Meter      metric.MeterProvider
	Propagator propagation.TextMapPropagator
	// Registry is the Prometheus registry behind /metrics; services may
	// register their own collectors on it.
	Registry *prometheus.Registry

	shutdown []func(context.Context) error
}

// New builds the providers. Call Shutdown when the process stops.
func New(ctx context.Context, cfg Config) (*Telemetry, error) {
	res := resource.NewSchemaless(semconv.ServiceName(cfg.ServiceName))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
	t := &Telemetry{
		Meter:      mp,
		Registry:   reg,
		Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		shutdown:   []func(context.Context) error{mp.Shutdown},
	}

	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if cfg.OTLPEndpoint != "" {
		if err := CheckEndpoint(cfg.OTLPEndpoint); err != nil {
			return nil, errors.Join(fmt.Errorf("otlp endpoint %w", err), t.Shutdown(ctx))
		}
		texp, err := otlptracegrpc.New(ctx, exporterOptions(cfg)...)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("otlp trace exporter: %w", err), t.Shutdown(ctx))
		}
		topts = append(topts, sdktrace.WithBatcher(texp))
	} else {
		// Nothing exports spans, so none is recorded; unsampled spans
		// still carry trace ids to the logs and to downstream calls, and
		// a caller's sampled trace is still followed.
		topts = append(topts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	}
	tp := sdktrace.NewTracerProvider(topts...)
	t.Tracer = tp
	t.shutdown = append(t.shutdown, tp.Shutdown)
	return t, nil
}

// exporterOptions sets the exporter's target and transport as the flags
// say, whatever the OTEL_EXPORTER_OTLP_* variables say: the exporter reads
// them first, and an insecure flag or an http:// endpoint left there, or a
// certificate (whose credentials outrank the insecure option), would
// otherwise send an https:// endpoint's spans and headers in plaintext, or
// TLS to a plaintext collector. A URL's scheme decides; a host:port,
// --otlp-insecure.
func exporterOptions(cfg Config) []otlptracegrpc.Option {
	plain := cfg.OTLPInsecure
	if scheme, _, isURL := splitScheme(cfg.OTLPEndpoint); isURL {
		plain = strings.EqualFold(scheme, "http")
	}
	var transport otlptracegrpc.Option
	if plain {
		transport = otlptracegrpc.WithTLSCredentials(insecure.NewCredentials())
	} else {
		// Unsets the insecure option and keeps the credentials of a CA
		// the environment names; its address is replaced below.
		transport = otlptracegrpc.WithEndpointURL("https://localhost")
	}
	return []otlptracegrpc.Option{transport, otlptracegrpc.WithEndpoint(grpcTarget(cfg.OTLPEndpoint))}
}

// MetricsHandler serves the registry in the Prometheus text format.
func (t *Telemetry) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(t.Registry, promhttp.HandlerOpts{Registry: t.Registry})
}

// Shutdown flushes and stops the providers, newest first.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for i := len(t.shutdown) - 1; i >= 0; i-- {
		errs = append(errs, t.shutdown[i](ctx))
	}
	t.shutdown = nil
	return errors.Join(errs...)
}
