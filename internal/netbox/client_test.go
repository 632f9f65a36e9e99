package netbox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/netbox"
	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
)

// TestNew pins config validation: bad URLs and tokens are refused without echoing the token.
func TestNew(t *testing.T) {
	t.Parallel()
	const canary = "canary0123456789abcdef0123456789abcdef01"
	tests := []struct {
		name, url, token string
		wantErr          bool
		wantBase         string
	}{
		{"plain", "https://netbox.example.net", canary, false, "https://netbox.example.net"},
		{"trailing slash and /api", "https://netbox.example.net/api/", canary, false, "https://netbox.example.net"},
		{"sub path", "https://example.net/netbox/", canary, false, "https://example.net/netbox"},
		{"no scheme", "netbox.example.net", canary, true, ""},
		{"ftp", "ftp://netbox.example.net", canary, true, ""},
		{"credentials in URL", "https://user:" + canary + "@netbox.example.net", canary, true, ""},
		{"query", "https://netbox.example.net/?token=" + canary, canary, true, ""},
		{"no token", "https://netbox.example.net", "", true, ""},
		{"token with newline", "https://netbox.example.net", canary + "\nX-Evil: 1", true, ""},
	}
	// Which setting each refusal names: callers name their flag for it.
	sentinel := map[string]error{"no token": netbox.ErrBadToken, "token with newline": netbox.ErrBadToken}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := netbox.New(netbox.Config{URL: tc.url, Token: tc.token})
			if tc.wantErr {
				want := netbox.ErrBadURL
				if e, ok := sentinel[tc.name]; ok {
					want = e
				}
				if !errors.Is(err, config.ErrInvalid) || !errors.Is(err, want) {
					t.Fatalf("err = %v, want config.ErrInvalid and %v", err, want)
				}
				if strings.Contains(err.Error(), canary) {
					t.Fatalf("error text contains the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.BaseURL() != tc.wantBase {
				t.Fatalf("BaseURL = %q, want %q", c.BaseURL(), tc.wantBase)
			}
		})
	}
}

// TestEndpoint pins the endpoint lookup against the simulator and each failure's sentinel.
func TestEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		id      int64
		token   string
		prepare func(*simnetbox.Server)
		timeout time.Duration
		want    netbox.Endpoint
		wantErr error
		status  int
	}{
		{name: "writable", id: 1, want: netbox.Endpoint{ID: 1, Name: "lab", AllowWrites: true}},
		{name: "read-only", id: 2, want: netbox.Endpoint{ID: 2, Name: "lab-readonly", WritesClosedReason: netbox.ReasonAllowWritesFalse}},
		{name: "v2 token", id: 1, token: simnetbox.TokenV2, want: netbox.Endpoint{ID: 1, Name: "lab", AllowWrites: true}},
		{name: "unknown", id: 99, wantErr: netbox.ErrNotFound, status: 404},
		{name: "not positive", id: 0, wantErr: netbox.ErrNotFound},
		{name: "503", id: 1, prepare: func(s *simnetbox.Server) { s.FailRequests(1, 503) }, wantErr: netbox.ErrUnavailable, status: 503},
		{name: "429", id: 1, prepare: func(s *simnetbox.Server) { s.FailRequests(1, 429) }, wantErr: netbox.ErrUnavailable, status: 429},
		{name: "down", id: 1, prepare: func(s *simnetbox.Server) { s.SetDown(true) }, wantErr: netbox.ErrUnavailable, status: 503},
		{name: "bad token", id: 1, token: "ffffffffffffffffffffffffffffffffffffffff", wantErr: netbox.ErrUnauthorized, status: 403},
		{name: "bad v2 token", id: 1, token: "nbt_demo00000000.wrong", wantErr: netbox.ErrUnauthorized, status: 403},
		{name: "timeout", id: 1, prepare: func(s *simnetbox.Server) { s.SetLatency(time.Minute) }, timeout: 50 * time.Millisecond, wantErr: netbox.ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, simnetbox.TokenV1)
			if tc.prepare != nil {
				tc.prepare(f.sim)
			}
			token := tc.token
			if token == "" {
				token = simnetbox.TokenV1
			}
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 2 * time.Second
			}
			c := newClient(t, f.url, token, timeout)
			got, err := c.Endpoint(context.Background(), tc.id)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if netbox.IsTransient(err) != (tc.wantErr == netbox.ErrUnavailable) {
					t.Fatalf("IsTransient(%v) wrong", err)
				}
				var ne *netbox.Error
				if !errors.As(err, &ne) || ne.Status != tc.status {
					t.Fatalf("status of %v = %+v, want %d", err, ne, tc.status)
				}
				if got != (netbox.Endpoint{}) {
					t.Fatalf("endpoint on error = %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestAuthSchemes checks the header each token kind puts on the wire, and the User-Agent, for
// both the plain requests and go-netbox's.
func TestAuthSchemes(t *testing.T) {
	t.Parallel()
	tests := []struct{ token, header string }{
		{simnetbox.TokenV1, "Token " + simnetbox.TokenV1},
		{simnetbox.TokenV2, "Bearer " + simnetbox.TokenV2},
	}
	for _, tc := range tests {
		t.Run(tc.header[:5], func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tc.token)
			ctx := context.Background()
			if err := f.client.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := f.client.Endpoint(ctx, 1); err != nil {
				t.Fatal(err)
			}
			ref, err := f.client.CreateJournalEntry(ctx, netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 1, Kind: netbox.KindInfo, Comments: "x"})
			if err != nil {
				t.Fatal(err)
			}
			if err := f.client.UpdateJournalEntry(ctx, ref.ID, netbox.KindSuccess, "y"); err != nil {
				t.Fatal(err)
			}
			if _, err := f.client.FindJournalEntry(ctx, netbox.ObjectTypeEndpoint, 1, "c-1"); !errors.Is(err, netbox.ErrNotFound) {
				t.Fatal(err)
			}
			if _, err := f.client.VMsByProxmoxID(ctx, 100); err != nil {
				t.Fatal(err)
			}
			reqs := f.rec.requests()
			if len(reqs) != 6 {
				t.Fatalf("%d requests, want 6", len(reqs))
			}
			for _, r := range reqs {
				if r.Auth != tc.header {
					t.Fatalf("%s %s sent Authorization %q, want %q", r.Method, r.Path, r.Auth, tc.header)
				}
				if r.UserAgent != "proxbus" {
					t.Fatalf("%s %s sent User-Agent %q, want proxbus", r.Method, r.Path, r.UserAgent)
				}
			}
		})
	}
}

// TestPingNotNetBox: a URL that answers, but not as NetBox's API, is ErrNotNetBox (the URL is
// wrong), never transient; a refused token is ErrUnauthorized; ShouldWait is true only for
// what a command waits out (unavailable or a refused token).
func TestPingNotNetBox(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, contentType, body string
		status                  int
		want                    error
	}{
		{"404", "text/html", "<h1>Not Found</h1>", 404, netbox.ErrNotNetBox},
		{"an HTML page", "text/html", "<html>welcome</html>", 200, netbox.ErrNotNetBox},
		{"JSON without netbox-version", "application/json", `{"status":"ok"}`, 200, netbox.ErrNotNetBox},
		{"refused token", "application/json", `{"detail":"Invalid v1 token"}`, 403, netbox.ErrUnauthorized},
		{"401", "application/json", `{"detail":"Authentication credentials were not provided."}`, 401, netbox.ErrUnauthorized},
		{"busy", "application/json", `{}`, 503, netbox.ErrUnavailable},
		{"NetBox", "application/json", `{"netbox-version":"4.5.0","django-version":"5.2"}`, 200, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, stub(t, tt.status, tt.contentType, tt.body), simnetbox.TokenV1, time.Second)
			err := c.Ping(context.Background())
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Ping = %v, want %v", err, tt.want)
			}
			wait := tt.want == netbox.ErrUnauthorized || tt.want == netbox.ErrUnavailable
			if err != nil && netbox.ShouldWait(err) != wait {
				t.Errorf("ShouldWait(%v) = %v, want %v", err, !wait, wait)
			}
			if err != nil && tt.status != 200 && netbox.StatusOf(err) != tt.status {
				t.Errorf("StatusOf = %d, want %d", netbox.StatusOf(err), tt.status)
			}
		})
	}
	if netbox.ShouldWait(fmt.Errorf("x: %w", netbox.ErrRejected)) || netbox.ShouldWait(netbox.ErrNotFound) || netbox.StatusOf(errors.New("x")) != 0 {
		t.Error("ShouldWait or StatusOf of a rejection, a not-found or a foreign error")
	}
}

// TestPing pins the readiness probe's answers.
func TestPing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	if err := f.client.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := f.sim.Requests("GET", "/api/status/"); n != 1 {
		t.Fatalf("status requests = %d", n)
	}
	f.sim.SetDown(true)
	if err := f.client.Ping(context.Background()); !netbox.IsTransient(err) {
		t.Fatalf("ping of a down NetBox = %v", err)
	}
	// Nothing listens on a closed port: a network error is transient too.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newClient(t, "http://"+addr, simnetbox.TokenV1, time.Second)
	if err := c.Ping(context.Background()); !netbox.IsTransient(err) {
		t.Fatalf("ping of a closed port = %v", err)
	}
}

// TestCallerCancellation checks that a request abandoned by its caller is transient and still
// says why (context.Canceled), so a shutting-down caller can tell it apart from an outage.
func TestCallerCancellation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.client.Endpoint(ctx, 1)
	if !netbox.IsTransient(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrUnavailable wrapping context.Canceled", err)
	}
	_, err = f.client.CreateJournalEntry(ctx, netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 1, Comments: "c"})
	if !netbox.IsTransient(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("create: err = %v", err)
	}
	if n := len(f.sim.JournalEntries()); n != 0 {
		t.Fatalf("%d entries created by a cancelled call", n)
	}
}

// seenRequest is what deadlineRecorder saw of one request.
type seenRequest struct {
	path         string
	legacyCancel bool
	deadline     time.Duration // from the moment the request reached the transport; 0 when none
}

// deadlineRecorder is a transport wrapper like proxbus's metrics and tracing wrappers: net/http
// does not know it, so a Client.Timeout over it would be enforced with the deprecated
// Request.Cancel channel.
type deadlineRecorder struct {
	mu   sync.Mutex
	seen []seenRequest
}

func (d *deadlineRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	//lint:ignore SA1019 reading the deprecated field is the point: net/http sets it only to enforce a Client.Timeout
	s := seenRequest{path: r.URL.Path, legacyCancel: r.Cancel != nil}
	if dl, ok := r.Context().Deadline(); ok {
		s.deadline = time.Until(dl)
	}
	d.mu.Lock()
	d.seen = append(d.seen, s)
	d.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// TestRequestsBoundedByTheirContext pins how Config.Timeout bounds a request: by a deadline on
// the request's context, not by http.Client.Timeout. Every kind of request the client makes is
// checked.
func TestRequestsBoundedByTheirContext(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	rec := &deadlineRecorder{}
	const timeout = 3 * time.Second
	c, err := netbox.New(netbox.Config{URL: f.url, Token: simnetbox.TokenV1, Timeout: timeout,
		HTTPClient: &http.Client{Transport: rec}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Endpoint(ctx, 1); err != nil {
		t.Fatal(err)
	}
	ref, err := c.CreateJournalEntry(ctx, netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 1,
		Kind: netbox.KindInfo, Comments: "- command_id: c-1\n"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateJournalEntry(ctx, ref.ID, netbox.KindSuccess, "- command_id: c-1\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FindJournalEntry(ctx, netbox.ObjectTypeEndpoint, 1, "c-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.VMsByProxmoxID(ctx, 100); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.seen) != 6 {
		t.Fatalf("transport saw %d requests, want 6: %+v", len(rec.seen), rec.seen)
	}
	for _, s := range rec.seen {
		if s.legacyCancel {
			t.Errorf("%s: net/http enforced a Client.Timeout (Request.Cancel set)", s.path)
		}
		if s.deadline <= 0 || s.deadline > timeout {
			t.Errorf("%s: context deadline in %v, want within the %v timeout", s.path, s.deadline, timeout)
		}
	}
}
