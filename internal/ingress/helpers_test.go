package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/ingress"
	"github.com/proxbus/proxbus/internal/testenv"
)

const (
	secret  = "webhook-s3cret"
	apiKey  = "front-api-key"
	canary  = "CANARY-ingress-pw-91c2"
	fingerp = "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89"
)

// harness is one ingress server on a fresh JetStream with the proxbus streams.
type harness struct {
	t        *testing.T
	nats     *testenv.NATS
	subjects events.Subjects
	url      string
	logs     *testenv.Buffer
}

// newHarness provisions the streams and serves an ingress.Server built from cfg (JetStream,
// Conn, Subjects and Logger are filled in).
func newHarness(t *testing.T, cfg ingress.Config) *harness {
	t.Helper()
	n := testenv.StartNATS(t)
	subjects := events.NewSubjects("proxbus")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := consumer.Provision(ctx, n.JS, consumer.Config{Subjects: subjects}.WithDefaults()); err != nil {
		t.Fatalf("provision: %v", err)
	}
	logs := &testenv.Buffer{}
	cfg.JetStream, cfg.Conn, cfg.Subjects = n.JS, n.Conn, subjects
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := ingress.New(cfg)
	if err != nil {
		t.Fatalf("ingress.New: %v", err)
	}
	mux := http.NewServeMux()
	srv.Routes(mux)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return &harness{t: t, nats: n, subjects: subjects, url: hs.URL, logs: logs}
}

// post sends body to path with headers and returns the status and the answer's body.
func (h *harness) post(path string, body []byte, headers map[string]string) (int, []byte, http.Header) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatalf("request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("read answer: %v", err)
	}
	return resp.StatusCode, out, resp.Header
}

// webhook posts a signed NetBox webhook body.
func (h *harness) webhook(body []byte, extra map[string]string) (int, []byte) {
	h.t.Helper()
	headers := map[string]string{ingress.SignatureHeader: ingress.Sign(secret, body)}
	for k, v := range extra {
		headers[k] = v
	}
	status, out, _ := h.post(ingress.WebhookPath, body, headers)
	return status, out
}

// commands returns every message stored in the commands stream.
func (h *harness) commands() []*jetstream.RawStreamMsg {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := h.nats.JS.Stream(ctx, h.subjects.CommandsStream())
	if err != nil {
		h.t.Fatalf("stream: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		h.t.Fatalf("stream info: %v", err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err == nil {
			out = append(out, m)
		}
	}
	return out
}

// decoded decodes a stored command as the consumer would.
func (h *harness) decoded(m *jetstream.RawStreamMsg) events.Command {
	h.t.Helper()
	cmd, err := events.Decode(m.Subject, m.Header, m.Data, h.subjects)
	if err != nil {
		h.t.Fatalf("stored command does not decode: %v", err)
	}
	return cmd
}

// checkAnswer checks a webhook's answer: wantStatus, and for a refusal (anything but 202)
// wantReason and no command published; for 202 exactly one command published.
func (h *harness) checkAnswer(status int, out []byte, wantStatus int, wantReason string) {
	h.t.Helper()
	if status != wantStatus {
		h.t.Fatalf("status %d, want %d: %s", status, wantStatus, out)
	}
	n := len(h.commands())
	if wantStatus == http.StatusAccepted {
		if n != 1 {
			h.t.Errorf("%d commands published, want 1", n)
		}
		return
	}
	var e struct{ Reason string }
	_ = json.Unmarshal(out, &e)
	if e.Reason != wantReason {
		h.t.Errorf("reason %q, want %q", e.Reason, wantReason)
	}
	if n != 0 {
		h.t.Errorf("%d commands published on a refused webhook", n)
	}
}

// netboxTime is the current minute as NetBox writes a webhook's timestamp (Python's isoformat
// with sep between date and time), so that a test body is within the webhook window.
func netboxTime(sep string) string {
	return time.Now().UTC().Truncate(time.Minute).Format("2006-01-02" + sep + "15:04:05.000000-07:00")
}

// noLeak fails the test when s contains the canary.
func noLeak(t *testing.T, what, s string) {
	t.Helper()
	if strings.Contains(s, canary) {
		t.Errorf("%s contains the canary password: %s", what, s)
	}
}
