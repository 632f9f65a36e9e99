package tracing

import (
	"context"
	"net/http"
	"net/url"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Transport wraps next with otelhttp so that each request made with a context carrying a span
// gets a client span named "<service> <operation>" (op must return a bounded name such as
// proxmox.APIOperation) and carries the W3C traceparent header. Requests outside a traced
// command make no span. Off, it returns next as is. Exported spans never show a URL's query
// string or user part (see scrubExporter).
func (t *Tracing) Transport(service string, op func(*http.Request) string, next http.RoundTripper) http.RoundTripper {
	if !t.On() {
		return next
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return otelhttp.NewTransport(next,
		otelhttp.WithTracerProvider(t.sdk),
		otelhttp.WithMeterProvider(noop.NewMeterProvider()), // request metrics are internal/metrics' job
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return service + " " + op(r) }),
		otelhttp.WithFilter(func(r *http.Request) bool { return trace.SpanContextFromContext(r.Context()).IsValid() }),
		otelhttp.WithSpanOptions(trace.WithAttributes(attribute.String("proxbus.service", service))),
	)
}

// scrubExporter removes the query string and user part of url.full from every span before
// it leaves the process: otelhttp records the full URL, and a query string may carry what no
// trace backend should keep.
type scrubExporter struct{ sdktrace.SpanExporter }

func (e scrubExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	out := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, s := range spans {
		out[i] = scrubbedSpan{s}
	}
	return e.SpanExporter.ExportSpans(ctx, out)
}

// scrubbedSpan is a span whose url.full attribute has neither query nor user part.
type scrubbedSpan struct{ sdktrace.ReadOnlySpan }

func (s scrubbedSpan) Attributes() []attribute.KeyValue {
	attrs := s.ReadOnlySpan.Attributes()
	for i, a := range attrs {
		if a.Key != semconv.URLFullKey {
			continue
		}
		scrubbed := make([]attribute.KeyValue, len(attrs))
		copy(scrubbed, attrs)
		scrubbed[i] = semconv.URLFull(scrubURL(a.Value.AsString()))
		return scrubbed
	}
	return attrs
}

// scrubURL is raw without query, fragment and user part; "" when raw does not parse.
func scrubURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}
