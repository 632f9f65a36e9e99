package netbox_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/netbox"
	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
)

// recorded is one request as the server saw it.
type recorded struct {
	Method, Path, Auth, UserAgent string
	Body                          []byte
}

// recorder wraps a handler and keeps every request it sees.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	reqs []recorded
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, recorded{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("User-Agent"), body})
	rc.mu.Unlock()
	rc.next.ServeHTTP(w, r)
}

func (rc *recorder) requests() []recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]recorded(nil), rc.reqs...)
}

// fixture is a demo simulator behind a recorder and a client for it.
type fixture struct {
	sim    *simnetbox.Server
	rec    *recorder
	url    string
	client *netbox.Client
}

// newFixture starts a demo simulator and a client using token (TokenV1 when empty).
func newFixture(t *testing.T, token string) *fixture {
	t.Helper()
	if token == "" {
		token = simnetbox.TokenV1
	}
	sim := simnetbox.New(simnetbox.Options{Scenario: simnetbox.ScenarioDemo})
	rec := &recorder{next: sim.Handler()}
	ts := httptest.NewServer(rec)
	t.Cleanup(ts.Close)
	c, err := netbox.New(netbox.Config{URL: ts.URL, Token: token, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &fixture{sim: sim, rec: rec, url: ts.URL, client: c}
}

// newClient returns a client for url with a short timeout.
func newClient(t *testing.T, url, token string, timeout time.Duration) *netbox.Client {
	t.Helper()
	c, err := netbox.New(netbox.Config{URL: url, Token: token, Timeout: timeout})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// stub serves a fixed answer for every request.
func stub(t *testing.T, status int, contentType, body string) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, strings.ReplaceAll(body, "{auth}", r.Header.Get("Authorization")))
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// recordingAnswers keeps the bodies of the 2xx answers to journal writes.
type recordingAnswers struct {
	next   http.Handler
	mu     sync.Mutex
	bodies [][]byte
}

func (ra *recordingAnswers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	ra.next.ServeHTTP(rec, r)
	if (r.Method == "POST" || r.Method == "PATCH") && rec.Code < 300 {
		ra.mu.Lock()
		ra.bodies = append(ra.bodies, rec.Body.Bytes())
		ra.mu.Unlock()
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (ra *recordingAnswers) all() [][]byte {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	return append([][]byte(nil), ra.bodies...)
}

// newHTTPTest serves h and returns its URL.
func newHTTPTest(t *testing.T, h http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}
