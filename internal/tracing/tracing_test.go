package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
)

const (
	incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentID = "00f067aa0ba902b7"
)

func TestEnabled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing set", nil, false},
		{"exporter otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := Options{Getenv: func(k string) string { return tc.env[k] }}
			if got := Enabled(o); got != tc.want {
				t.Errorf("Enabled = %v, want %v", got, tc.want)
			}
		})
	}
}

// setup returns tracing on with an in-memory exporter.
func setup(t *testing.T) (*Tracing, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tr, err := Setup(context.Background(), Options{Exporter: exp, Instance: "test"})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr, exp
}

// handled is what the handler behind the middleware saw of one delivery.
type handled struct {
	ctx context.Context
	cmd events.Command
}

// handle runs one delivery of cmd through tr's middleware to a handler that calls during (when
// set) and answers action, and returns what the handler saw.
func handle(tr *Tracing, cmd events.Command, d events.Delivery, action events.Action, during func(context.Context)) handled {
	var got handled
	h := tr.Middleware(consumer.HandlerFunc(func(ctx context.Context, cmd events.Command, _ events.Delivery) events.Disposition {
		got = handled{ctx, cmd}
		if during != nil {
			during(ctx)
		}
		return events.Disposition{Action: action}
	}))
	h.Handle(context.Background(), cmd, d)
	return got
}

func TestOffMakesNoSpansAndKeepsTheTraceParent(t *testing.T) {
	t.Parallel()
	tr, err := Setup(context.Background(), Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	if tr.On() {
		t.Fatal("tracing on without configuration")
	}
	got := handle(tr, events.Command{Verb: "vm.start", TraceParent: incoming}, events.Delivery{Number: 1}, events.Ack, nil)
	if got.cmd.TraceParent != incoming || trace.SpanContextFromContext(got.ctx).IsValid() {
		t.Errorf("off middleware changed the delivery: traceparent %q, span %v", got.cmd.TraceParent, trace.SpanContextFromContext(got.ctx))
	}
	next := http.DefaultTransport
	if got := tr.Transport("netbox", func(*http.Request) string { return "x" }, next); got != next {
		t.Error("off transport is wrapped")
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

func TestCommandSpanContinuesTheTraceParent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		tp         string
		action     events.Action
		wantStatus codes.Code
		wantParent bool
	}{
		{"with parent, ack", incoming, events.Ack, codes.Unset, true},
		{"with parent, redelivered: a wait, not an error", incoming, events.Redeliver, codes.Unset, true},
		{"no parent, dead letter", "", events.DeadLetter, codes.Error, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr, exp := setup(t)
			cmd := events.Command{ID: "c1", Source: "/t", Verb: "vm.start", TraceParent: tc.tp, Data: []byte(`{"password":"CANARY"}`)}
			got := handle(tr, cmd, events.Delivery{Number: 2}, tc.action, nil)
			sc := trace.SpanContextFromContext(got.ctx)
			if !sc.IsValid() {
				t.Fatal("handler context carries no span")
			}
			if tc.wantParent && sc.TraceID().String() != traceID {
				t.Errorf("trace id %s, want %s", sc.TraceID(), traceID)
			}
			wantTP := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
			if got.cmd.TraceParent != wantTP {
				t.Errorf("traceparent %q, want %q", got.cmd.TraceParent, wantTP)
			}
			spans := exp.GetSpans()
			if len(spans) != 1 {
				t.Fatalf("%d spans, want 1", len(spans))
			}
			s := spans[0]
			if s.SpanKind != trace.SpanKindConsumer || s.Name != "proxbus.command vm.start" {
				t.Errorf("span %q kind %v", s.Name, s.SpanKind)
			}
			if tc.wantParent && s.Parent.SpanID().String() != parentID {
				t.Errorf("parent span %s, want %s", s.Parent.SpanID(), parentID)
			}
			if !tc.wantParent && s.Parent.IsValid() {
				t.Errorf("root span has parent %s", s.Parent.SpanID())
			}
			if s.Status.Code != tc.wantStatus {
				t.Errorf("status %v, want %v", s.Status.Code, tc.wantStatus)
			}
			for _, a := range s.Attributes {
				if strings.Contains(a.Value.String(), "CANARY") {
					t.Errorf("attribute %s carries command data", a.Key)
				}
			}
		})
	}
}

func TestTransportMakesClientSpansAndPropagates(t *testing.T) {
	t.Parallel()
	tr, exp := setup(t)
	var mu sync.Mutex
	var gotHeader string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotHeader = r.Header.Get("traceparent")
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	c := &http.Client{Transport: tr.Transport("proxmox", func(r *http.Request) string { return r.Method + " /nodes/{node}" }, nil)}

	// Without a span in the context: no span, no header.
	resp, err := c.Get(srv.URL + "/api2/json/nodes/pve1?secret=CANARY")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	resp.Body.Close()
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans without a command span", n)
	}

	handle(tr, events.Command{Verb: "vm.start", TraceParent: incoming}, events.Delivery{Number: 1}, events.Ack, func(ctx context.Context) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api2/json/nodes/pve1?secret=CANARY", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Errorf("get: %v", err)
			return
		}
		resp.Body.Close()
	})

	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	client := spans[0]
	if client.Name != "proxmox GET /nodes/{node}" || client.SpanKind != trace.SpanKindClient {
		t.Errorf("client span %q kind %v", client.Name, client.SpanKind)
	}
	if client.SpanContext.TraceID().String() != traceID || client.Parent.SpanID() != spans[1].SpanContext.SpanID() {
		t.Errorf("client span is not the command span's child")
	}
	if client.Status.Code != codes.Error {
		t.Errorf("a 503 left status %v", client.Status.Code)
	}
	var urlFull string
	for _, a := range client.Attributes {
		if v := a.Value.String(); strings.Contains(v, "CANARY") || strings.Contains(v, "secret") {
			t.Errorf("attribute %s = %q leaks the query string", a.Key, v)
		}
		if a.Key == "url.full" {
			urlFull = a.Value.AsString()
		}
	}
	if urlFull != srv.URL+"/api2/json/nodes/pve1" {
		t.Errorf("url.full = %q, want the URL without its query", urlFull)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "00-" + traceID + "-" + client.SpanContext.SpanID().String() + "-01"
	if gotHeader != want {
		t.Errorf("server saw traceparent %q, want %q", gotHeader, want)
	}
}

// TestUnsampledParentKeepsTheTraceParent: under an unsampled parent (the default sampler is
// parent-based) nothing is exported and the command keeps its own traceparent.
func TestUnsampledParentKeepsTheTraceParent(t *testing.T) {
	t.Parallel()
	tr, exp := setup(t)
	unsampled := "00-" + traceID + "-" + parentID + "-00"
	got := handle(tr, events.Command{Verb: "vm.start", TraceParent: unsampled}, events.Delivery{Number: 1}, events.Ack, nil)
	if got.cmd.TraceParent != unsampled {
		t.Errorf("traceparent %q replaced the command's", got.cmd.TraceParent)
	}
	if id := trace.SpanContextFromContext(got.ctx).TraceID().String(); id != traceID {
		t.Errorf("handler context in trace %s, want %s", id, traceID)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans exported under an unsampled parent", n)
	}
}
