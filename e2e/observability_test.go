package e2e_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/tracing"
)

// incomingTP is the traceparent the tests' commands carry.
const (
	incomingTP      = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	incomingTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	incomingSpanID  = "00f067aa0ba902b7"
)

// tracingOff keeps the process environment's OTEL_* variables out of a test.
func tracingOff(c *app.Config) {
	c.Tracing = tracing.Options{Getenv: func(string) string { return "" }}
}

// withHTTP gives the replica an HTTP server on a free port and returns its base URL.
func withHTTP(t *testing.T) (tune, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return func(c *app.Config) { c.HTTPListener = ln }, "http://" + ln.Addr().String()
}

// httpGet returns the status and body of GET url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$`)

// metricValue finds the sample of name whose labels include every "key=value" of labels.
func metricValue(text, name string, labels ...string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		ok := true
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			if !strings.Contains(m[2], k+`="`+v+`"`) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(m[3], 64)
		return f, err == nil
	}
	return 0, false
}

// TestMetricsAfterACommand: a command through the real pipeline shows up in /metrics by
// verb, result and status, with its steps timed and its Proxmox and NetBox requests
// measured; /healthz and /readyz answer 200; the command's password appears nowhere.
func TestMetricsAfterACommand(t *testing.T) {
	e := newEnv(t)
	withH, base := withHTTP(t)
	e.start(withH, tracingOff)

	if code, body := httpGet(t, base+app.PathHealthz); code != http.StatusOK {
		t.Errorf("healthz %d %s", code, body)
	}
	eventually(t, 10*time.Second, "readyz 200", func() bool {
		code, _ := httpGet(t, base+app.PathReadyz)
		return code == http.StatusOK
	})

	cmd := e.command(pbs("pbs-metrics"))
	res := e.send(cmd)
	if res.Status != 201 && res.Status != 200 {
		t.Fatalf("result %d %s %s", res.Status, res.Result, res.Reason)
	}
	const verb = "storage.pbs.create"
	var text string
	eventually(t, 10*time.Second, "the result counted", func() bool {
		_, text = httpGet(t, base+app.PathMetrics)
		v, ok := metricValue(text, "proxbus_commands_total", "verb="+verb, "result="+res.Result, "status="+strconv.Itoa(res.Status))
		return ok && v == 1
	})
	checks := []struct {
		name   string
		labels []string
		min    float64
	}{
		{"proxbus_step_duration_seconds_count", []string{"verb=" + verb, "status=done"}, 1},
		{"proxbus_command_duration_seconds_count", []string{"verb=" + verb, "disposition=ack"}, 1},
		{"proxbus_proxmox_request_duration_seconds_count", []string{"endpoint=1", "operation=POST /storage", "code=2xx"}, 1},
		{"proxbus_netbox_request_duration_seconds_count", []string{"code=2xx"}, 1},
		{"proxbus_events_published_total", []string{"kind=result", "duplicate=false"}, 1},
		{"proxbus_commands_in_flight", nil, 0},
		{"proxbus_journal_repairs_pending", nil, 0},
		{"proxbus_build_info", nil, 1},
		{"proxbus_consumer_ready", nil, 1},
		{"proxbus_dependency_up", []string{"dependency=netbox"}, 1},
		{"proxbus_dependency_up", []string{"dependency=proxmox/1"}, 1},
		{"proxbus_approvals_pending", nil, 0},
		{"proxbus_commands_waiting", nil, 0},
	}
	for _, c := range checks {
		v, ok := metricValue(text, c.name, c.labels...)
		if !ok {
			t.Errorf("no sample %s%v", c.name, c.labels)
			continue
		}
		if v < c.min || (c.min == 0 && v != 0) {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.min)
		}
	}
	if strings.Contains(text, canary) {
		t.Error("/metrics contains the command's password")
	}

	msg, err := events.EncodeBinary(e.subjects, e.command(pbs("pbs-poison")))
	if err != nil {
		t.Fatal(err)
	}
	msg.Header.Del("ce-source")
	e.publishMsg(msg)
	eventually(t, 10*time.Second, "the poison message counted", func() bool {
		_, text = httpGet(t, base+app.PathMetrics)
		v, ok := metricValue(text, "proxbus_dead_letters_total", "verb="+verb, "reason=invalid_command")
		return ok && v == 1
	})
	if strings.Contains(text, canary) {
		t.Error("/metrics contains the poison message's password")
	}
	if strings.Contains(text, cmd.ID) {
		t.Error("/metrics contains a command id")
	}
}

// commandEvents returns the traceparent of every step and result event of cmd.
func (e *env) commandTraceParents(cmd events.Command) []string {
	e.t.Helper()
	var out []string
	for _, subject := range []string{e.subjects.Step(cmd.Ref()), e.subjects.Result(cmd.Ref())} {
		for _, raw := range e.streamMessages(e.subjects.EventsStream(), subject) {
			ev, err := events.ParseEvent(raw.Data)
			if err != nil {
				e.t.Fatalf("event not parseable: %v", err)
			}
			out = append(out, ev.TraceParent)
		}
	}
	return out
}

// TestTracingContinuesTheCommandsTrace: with tracing on, the consumer span is a child of the
// command's traceparent, the Proxmox and NetBox requests are its children, and every step
// and result event carries a traceparent of the same trace pointing at the consumer span.
func TestTracingContinuesTheCommandsTrace(t *testing.T) {
	e := newEnv(t)
	exp := tracetest.NewInMemoryExporter()
	e.start(func(c *app.Config) { c.Tracing = tracing.Options{Exporter: exp} })

	cmd := e.command(pbs("pbs-traced"))
	cmd.TraceParent = incomingTP
	e.send(cmd)

	var consumerSpan tracetest.SpanStub
	eventually(t, 10*time.Second, "the consumer span", func() bool {
		for _, s := range exp.GetSpans() {
			if s.SpanKind == trace.SpanKindConsumer && s.SpanContext.TraceID().String() == incomingTraceID {
				consumerSpan = s
				return true
			}
		}
		return false
	})
	if consumerSpan.Parent.SpanID().String() != incomingSpanID {
		t.Errorf("consumer span's parent %s, want %s", consumerSpan.Parent.SpanID(), incomingSpanID)
	}
	var proxmoxSpans, netboxSpans int
	for _, s := range exp.GetSpans() {
		if s.SpanKind != trace.SpanKindClient {
			continue
		}
		if s.SpanContext.TraceID().String() != incomingTraceID {
			t.Errorf("client span %q in trace %s", s.Name, s.SpanContext.TraceID())
			continue
		}
		switch {
		case strings.HasPrefix(s.Name, "proxmox "):
			proxmoxSpans++
		case strings.HasPrefix(s.Name, "netbox "):
			netboxSpans++
		}
		for _, a := range s.Attributes {
			if strings.Contains(a.Value.String(), canary) {
				t.Errorf("span %q attribute %s carries the password", s.Name, a.Key)
			}
		}
	}
	if proxmoxSpans == 0 || netboxSpans == 0 {
		t.Errorf("%d proxmox and %d netbox client spans, want both", proxmoxSpans, netboxSpans)
	}

	want := "00-" + incomingTraceID + "-" + consumerSpan.SpanContext.SpanID().String() + "-01"
	tps := e.commandTraceParents(cmd)
	if len(tps) < 2 {
		t.Fatalf("%d events", len(tps))
	}
	for i, tp := range tps {
		if tp != want {
			t.Errorf("event %d traceparent %q, want %q", i, tp, want)
		}
	}
}

// TestTracingOffCarriesTheTraceParentUnchanged: with tracing off, every step and result
// event carries the command's traceparent as it came.
func TestTracingOffCarriesTheTraceParentUnchanged(t *testing.T) {
	e := newEnv(t)
	e.start(tracingOff)
	cmd := e.command(pbs("pbs-untraced"))
	cmd.TraceParent = incomingTP
	e.send(cmd)
	tps := e.commandTraceParents(cmd)
	if len(tps) < 2 {
		t.Fatalf("%d events", len(tps))
	}
	for i, tp := range tps {
		if tp != incomingTP {
			t.Errorf("event %d traceparent %q, want %q", i, tp, incomingTP)
		}
	}
}
