// Package tracing sets up OpenTelemetry tracing for proxbus from the standard OTEL_*
// environment variables and provides what the wiring needs: a consumer.Middleware that starts
// one span per delivery as a child of the command's W3C traceparent, and an HTTP transport
// wrapper (otelhttp) that makes a client span per Proxmox or NetBox request and propagates the
// trace context to it. Propagation is W3C tracecontext only. Nothing here touches OpenTelemetry's
// global providers.
//
// Tracing is off unless the environment asks for it: OTEL_TRACES_EXPORTER set to something
// other than "none", or an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set, and OTEL_SDK_DISABLED not "true". Off, no span is
// made and the command's traceparent travels unchanged into its events.
//
// Span names and attributes never carry a command's data, a URL's query string or user
// part: the verb, command id and source, delivery count, bounded HTTP operation names, and
// otelhttp's attributes with url.full scrubbed of its query and user part before export.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every proxbus span.
const ScopeName = "github.com/proxbus/proxbus"

// Options configures [Setup]. The zero value configures from the environment.
type Options struct {
	// Exporter, when set, turns tracing on with this exporter, whatever the environment says;
	// spans are exported synchronously as they end (tests: tracetest.InMemoryExporter).
	Exporter sdktrace.SpanExporter
	// Getenv reads the OTEL_* switches (default os.Getenv). The exporter itself is built by
	// autoexport, which reads the process environment.
	Getenv func(string) string
	// ServiceName is the default service.name (OTEL_SERVICE_NAME overrides it). Default
	// "proxbus".
	ServiceName string
	// Instance becomes service.instance.id when set.
	Instance string
}

// Tracing is the tracing setup of one proxbus process. A nil *Tracing, like one that is
// off, makes no spans. Safe for concurrent use.
type Tracing struct {
	sdk    *sdktrace.TracerProvider // nil when off
	tracer trace.Tracer
}

// Enabled reports whether the environment (or opts) asks for tracing; see the package
// documentation.
func Enabled(o Options) bool {
	if o.Exporter != nil {
		return true
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp != "" {
		return exp != "none"
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup returns the process's tracing: off (no spans, nothing to flush) unless [Enabled],
// else an SDK tracer provider exporting through opts.Exporter or the exporter the OTEL_*
// variables describe (autoexport: OTLP over http/protobuf by default), sampling as
// OTEL_TRACES_SAMPLER says (default parent-based always-on). It fails when the environment
// names an unusable exporter. Call Shutdown to flush.
func Setup(ctx context.Context, o Options) (*Tracing, error) {
	t := &Tracing{tracer: noop.NewTracerProvider().Tracer(ScopeName)}
	if !Enabled(o) {
		return t, nil
	}
	var popts []sdktrace.TracerProviderOption
	if o.Exporter != nil {
		popts = append(popts, sdktrace.WithSyncer(scrubExporter{o.Exporter}))
	} else {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("tracing: exporter: %w", err)
		}
		popts = append(popts, sdktrace.WithBatcher(scrubExporter{exp}))
	}
	name := o.ServiceName
	if name == "" {
		name = "proxbus"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if o.Instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", o.Instance))
	}
	// The environment (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) overrides the defaults.
	res, err := resource.Merge(resource.NewSchemaless(attrs...), resource.Environment())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	popts = append(popts, sdktrace.WithResource(res))
	t.sdk = sdktrace.NewTracerProvider(popts...)
	t.tracer = t.sdk.Tracer(ScopeName)
	return t, nil
}

// On reports whether spans are made and exported.
func (t *Tracing) On() bool { return t != nil && t.sdk != nil }

// Shutdown flushes every ended span to the exporter and stops it; ctx bounds the flush.
// Nothing happens when tracing is off. Calling it twice is harmless.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.On() {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}

// TraceParent returns the W3C traceparent of the span context in ctx, "" when it has none.
func (t *Tracing) TraceParent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c.Get("traceparent")
}

// ContextWithTraceParent returns ctx carrying the remote span context of tp (a W3C
// traceparent), unchanged ctx when tp is empty or malformed.
func ContextWithTraceParent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}
