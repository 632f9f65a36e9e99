package health_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/health"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logLines is a JSON slog sink whose records can be read back.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// msgs returns the msg of every record so far.
func (l *logLines) msgs(t *testing.T) []string {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var rec struct{ Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, rec.Msg)
	}
	return out
}

func newTracker(t *testing.T) (*health.Tracker, *clock, *logLines) {
	t.Helper()
	c := &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	lines := &logLines{}
	tr := health.New(slog.New(slog.NewJSONHandler(lines, nil)), c.now)
	tr.Register(health.Dependency{Name: "netbox", What: "NetBox", Fix: "fix --netbox-token"})
	return tr, c, lines
}

// TestRefusalLoggedOnceAMinute: a refusal is logged when it starts, then at most once per
// LogEvery however often it repeats, and once more when the token is accepted again; Check
// names it (status, operation, fix) until then.
func TestRefusalLoggedOnceAMinute(t *testing.T) {
	t.Parallel()
	tr, c, lines := newTracker(t)
	const op = "POST /api/extras/journal-entries/"
	for range 5 {
		tr.Refused("netbox", op, http.StatusForbidden)
		c.advance(10 * time.Second)
	}
	if got := lines.msgs(t); len(got) != 1 || got[0] != "netbox refuses the token; commands wait" {
		t.Fatalf("after 5 refusals in 50s: %q, want one line", got)
	}
	c.advance(health.LogEvery)
	tr.Refused("netbox", op, http.StatusForbidden)
	tr.Refused("netbox", op, http.StatusForbidden)
	if got := lines.msgs(t); len(got) != 2 {
		t.Fatalf("after a minute more: %q, want a second line", got)
	}
	err := tr.Check("netbox")
	var p *health.Problem
	if !errors.As(err, &p) || p.Reason != "token refused (HTTP 403) on "+op+"; fix --netbox-token; commands wait" {
		t.Fatalf("Check = %v", err)
	}
	tr.Accepted("netbox", op)
	tr.Accepted("netbox", op)
	if err := tr.Check("netbox"); err != nil {
		t.Errorf("Check after acceptance = %v", err)
	}
	if got := lines.msgs(t); len(got) != 3 || got[2] != "netbox accepts the token again" {
		t.Errorf("lines %q, want one recovery line", got)
	}
	tr.Refused("netbox", op, http.StatusForbidden)
	if got := lines.msgs(t); len(got) != 4 {
		t.Errorf("a new refusal after recovery: %q, want it logged at once", got)
	}
}

// TestAcceptanceClears pins what a 2xx clears: after a 401 (the token itself refused) any
// accepted operation clears every refusal; after a 403 (a permission) only the same
// operation does.
func TestAcceptanceClears(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		status    int
		acceptOp  string
		wantClear bool
	}{
		{"401 cleared by another operation", http.StatusUnauthorized, "GET /api/status/", true},
		{"403 kept by another operation", http.StatusForbidden, "GET /api/status/", false},
		{"403 cleared by the same operation", http.StatusForbidden, "POST /api/extras/journal-entries/", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr, _, _ := newTracker(t)
			tr.Refused("netbox", "POST /api/extras/journal-entries/", tt.status)
			tr.Accepted("netbox", tt.acceptOp)
			if cleared := tr.Check("netbox") == nil; cleared != tt.wantClear {
				t.Errorf("cleared = %v, want %v", cleared, tt.wantClear)
			}
		})
	}
}

// TestUnreachable: an unreachable dependency is named with its reason, logged at most once a
// minute, and cleared (one line) once reachable; a refusal is reported before it; Usable says
// it is unusable meanwhile.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	tr, c, lines := newTracker(t)
	tr.Register(health.Dependency{Name: "proxmox/2", What: "Proxmox endpoint 2 (lab2)"})
	for range 3 {
		tr.Unreachable("proxmox/2", "unreachable: connection refused")
		c.advance(20 * time.Second)
	}
	if got := lines.msgs(t); len(got) != 1 {
		t.Fatalf("lines %q, want one", got)
	}
	var p *health.Problem
	if err := tr.Check("proxmox/2"); !errors.As(err, &p) || p.ReadyReason() != "unreachable: connection refused; its commands wait" {
		t.Fatalf("Check = %v", err)
	}
	if got := tr.Usable(); got["proxmox/2"] || !got["netbox"] {
		t.Errorf("Usable = %v, want proxmox/2 unusable, netbox usable", got)
	}
	tr.Refused("proxmox/2", "GET /version", http.StatusUnauthorized)
	if err := tr.Check("proxmox/2"); !errors.As(err, &p) || !strings.HasPrefix(p.Reason, "token refused (HTTP 401)") {
		t.Errorf("Check with both = %v, want the refusal", err)
	}
	tr.Accepted("proxmox/2", "GET /version")
	tr.Reachable("proxmox/2")
	tr.Reachable("proxmox/2")
	if err := tr.Check("proxmox/2"); err != nil {
		t.Errorf("Check = %v after recovery", err)
	}
	if got := tr.Usable(); !got["proxmox/2"] {
		t.Errorf("Usable = %v after recovery", got)
	}
	if got := lines.msgs(t); got[len(got)-1] != "proxmox/2 is reachable again" || strings.Count(strings.Join(got, "|"), "reachable again") != 1 {
		t.Errorf("lines %q", got)
	}
	if err := tr.Check("unknown"); err != nil {
		t.Errorf("Check of an unknown dependency = %v", err)
	}
}

// TestTransport: the transport records a refusal status as a refusal and a 2xx as an
// acceptance, ignores other answers, and passes every answer through.
func TestTransport(t *testing.T) {
	t.Parallel()
	var status atomic.Int64
	status.Store(http.StatusForbidden)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(int(status.Load())) }))
	t.Cleanup(srv.Close)
	tr, _, _ := newTracker(t)
	op := func(r *http.Request) string { return r.Method + " " + r.URL.Path }
	hc := &http.Client{Transport: tr.Transport("netbox", op, health.NetBoxRefusal, nil)}
	get := func() int {
		t.Helper()
		resp, err := hc.Get(srv.URL + "/api/status/")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(); code != http.StatusForbidden || tr.Check("netbox") == nil {
		t.Fatalf("a 403: %d, check %v", code, tr.Check("netbox"))
	}
	status.Store(http.StatusServiceUnavailable)
	if get(); tr.Check("netbox") == nil {
		t.Fatal("a 503 cleared the refusal")
	}
	status.Store(http.StatusOK)
	if get(); tr.Check("netbox") != nil {
		t.Fatalf("a 200 did not clear it: %v", tr.Check("netbox"))
	}
	if health.ProxmoxRefusal(http.StatusForbidden) || !health.ProxmoxRefusal(http.StatusUnauthorized) {
		t.Error("ProxmoxRefusal: 403 is a missing privilege, 401 a refused token")
	}
}
