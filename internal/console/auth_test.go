package console

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	testReadToken     = "read-token-0123456789abcdef"
	testOperatorToken = "operator-token-0123456789abcdef"
)

func newTestGuard(t *testing.T, a Access, now *time.Time) *guard {
	t.Helper()
	g, err := newGuard(a, func() time.Time { return *now })
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestSessionCookie: the cookie a login sets proves its role until it expires, to any guard
// with the same tokens; a tampered, foreign or expired cookie proves nothing.
func TestSessionCookie(t *testing.T) {
	t.Parallel()
	now := t0
	g := newTestGuard(t, Access{ReadToken: testReadToken, OperatorToken: testOperatorToken}, &now)
	read, op := g.issueCookie(roleReader, false), g.issueCookie(roleOperator, true)
	if !read.HttpOnly || read.SameSite != http.SameSiteStrictMode || read.Path != "/ui" || read.Secure || !op.Secure {
		t.Errorf("cookie attributes: %+v", read)
	}
	if strings.Contains(read.Value, testReadToken) || strings.Contains(op.Value, testOperatorToken) {
		t.Fatal("a cookie holds its token")
	}
	other := newTestGuard(t, Access{ReadToken: testReadToken, OperatorToken: testOperatorToken}, &now)
	rotated := newTestGuard(t, Access{ReadToken: testReadToken + "x", OperatorToken: testOperatorToken}, &now)
	forged := strings.Replace(read.Value, "reader.", "operator.", 1)
	tests := []struct {
		name  string
		g     *guard
		value string
		want  role
	}{
		{"reader", g, read.Value, roleReader},
		{"operator", g, op.Value, roleOperator},
		{"another replica with the same tokens", other, op.Value, roleOperator},
		{"the read token rotated", rotated, read.Value, roleNone},
		{"role changed in the cookie", g, forged, roleNone},
		{"MAC cut", g, read.Value[:len(read.Value)-2], roleNone},
		{"garbage", g, "operator", roleNone},
		{"empty", g, "", roleNone},
	}
	for _, tt := range tests {
		if got := tt.g.checkCookie(tt.value); got != tt.want {
			t.Errorf("%s: role %v, want %v", tt.name, got, tt.want)
		}
	}
	now = now.Add(sessionTTL)
	if got := g.checkCookie(read.Value); got != roleNone {
		t.Errorf("an expired cookie still proves %v", got)
	}
}

// TestTokenRole: each token grants its own role; nothing else grants any, and an unset
// token cannot be matched by an empty one.
func TestTokenRole(t *testing.T) {
	t.Parallel()
	now := t0
	g := newTestGuard(t, Access{ReadToken: testReadToken}, &now)
	for tok, want := range map[string]role{testReadToken: roleReader, testOperatorToken: roleNone, "": roleNone, testReadToken + " ": roleNone} {
		if got := g.tokenRole(tok); got != want {
			t.Errorf("tokenRole(%q) = %v, want %v", tok, got, want)
		}
	}
	if _, err := newGuard(Access{ReadToken: testReadToken, OperatorToken: testReadToken}, time.Now); !errors.Is(err, ErrBadToken) {
		t.Errorf("equal read and operator tokens: err %v, want ErrBadToken", err)
	}
}

// TestIdentify: a request is let in by its cookie, a bearer token, or, only where anonymous
// loopback access is on, by coming from loopback.
func TestIdentify(t *testing.T) {
	t.Parallel()
	now := t0
	tokens := Access{ReadToken: testReadToken, OperatorToken: testOperatorToken}
	g := newTestGuard(t, tokens, &now)
	anon := newTestGuard(t, Access{AnonymousLoopback: true}, &now)
	req := func(remote string, mod func(*http.Request)) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/ui/commands", nil)
		r.RemoteAddr = remote
		if mod != nil {
			mod(r)
		}
		return r
	}
	host := func(h string) func(*http.Request) { return func(r *http.Request) { r.Host = h } }
	bearer := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}
	tests := []struct {
		name string
		g    *guard
		r    *http.Request
		want role
	}{
		{"nothing", g, req("192.0.2.1:5000", nil), roleNone},
		{"loopback without anonymous access", g, req("127.0.0.1:5000", nil), roleNone},
		{"bearer read", g, req("192.0.2.1:5000", bearer(testReadToken)), roleReader},
		{"bearer operator", g, req("192.0.2.1:5000", bearer(testOperatorToken)), roleOperator},
		{"bearer wrong", g, req("192.0.2.1:5000", bearer("wrong-token-0123456789")), roleNone},
		{"cookie", g, req("192.0.2.1:5000", func(r *http.Request) { r.AddCookie(g.issueCookie(roleReader, false)) }), roleReader},
		{"anonymous from IPv4 loopback", anon, req("127.0.0.1:5000", host("localhost:8080")), roleOperator},
		{"anonymous from IPv6 loopback", anon, req("[::1]:5000", host("[::1]:8080")), roleOperator},
		{"anonymous to 127.0.0.1", anon, req("127.0.0.1:5000", host("127.0.0.1:8080")), roleOperator},
		{"anonymous to a .localhost name", anon, req("127.0.0.1:5000", host("proxbus.localhost")), roleOperator},
		{"anonymous from elsewhere", anon, req("10.1.2.3:5000", host("localhost:8080")), roleNone},
		// DNS rebinding: a foreign page whose name now resolves to 127.0.0.1 sends its own name.
		{"anonymous from loopback to a foreign name", anon, req("127.0.0.1:5000", host("evil.example:8080")), roleNone},
		{"anonymous from loopback to a name ending in localhost", anon, req("127.0.0.1:5000", host("evillocalhost:8080")), roleNone},
		{"anonymous from loopback without Host", anon, req("127.0.0.1:5000", host("")), roleNone},
	}
	for _, tt := range tests {
		if got := tt.g.identify(tt.r).role; got != tt.want {
			t.Errorf("%s: role %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestCSRF: a state-changing request of a cookie or loopback session needs the session's
// CSRF token; one from another site is refused whatever it carries.
func TestCSRF(t *testing.T) {
	t.Parallel()
	now := t0
	g := newTestGuard(t, Access{OperatorToken: testOperatorToken}, &now)
	cookie := g.issueCookie(roleOperator, false)
	s := session{role: roleOperator, via: "cookie", cookie: cookie.Value}
	other := session{role: roleOperator, via: "cookie", cookie: g.issueCookie(roleOperator, false).Value + "x"}
	post := func(csrf, site string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/ui/deadletters/1/replay", strings.NewReader(url.Values{csrfField: {csrf}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if site != "" {
			r.Header.Set("Sec-Fetch-Site", site)
		}
		return r
	}
	if !g.checkCSRF(post(g.csrfToken(s), "same-origin"), s) {
		t.Error("the session's own token was refused")
	}
	if g.checkCSRF(post("", ""), s) {
		t.Error("a request without a CSRF token passed")
	}
	if g.checkCSRF(post(g.csrfToken(other), ""), s) {
		t.Error("another session's CSRF token passed")
	}
	if g.checkCSRF(post(g.csrfToken(s), "cross-site"), s) {
		t.Error("a cross-site request passed")
	}
	if g.csrfToken(session{role: roleOperator, via: "loopback"}) == "" {
		t.Error("a loopback session has no CSRF token: a foreign page could post to a developer's console")
	}
}

// TestReadTokenFile: a usable token is read trimmed; a short one, one with spaces inside or
// a missing file is an error naming the flag and never showing the token.
func TestReadTokenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if tok, err := ReadTokenFile(write("ok", testReadToken+"\n"), "--ui-token-file"); err != nil || tok != testReadToken {
		t.Fatalf("ReadTokenFile = %q, %v", tok, err)
	}
	for name, path := range map[string]string{
		"short":   write("short", "abc123"),
		"spaces":  write("spaces", "abcdefgh ijklmnopqrst"),
		"missing": filepath.Join(dir, "missing"),
	} {
		_, err := ReadTokenFile(path, "--ui-token-file")
		if !errors.Is(err, ErrBadToken) || !strings.Contains(err.Error(), "--ui-token-file") {
			t.Errorf("%s: err %v, want ErrBadToken naming the flag", name, err)
		}
		if err != nil && (strings.Contains(err.Error(), "abc123") || strings.Contains(err.Error(), "ijklmnop")) {
			t.Errorf("%s: the error shows the token: %v", name, err)
		}
	}
}

func TestSafeNext(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/ui/commands/x?y=1": "/ui/commands/x?y=1", "": "/ui/commands", "https://evil.example/": "/ui/commands",
		"//evil.example/ui/": "/ui/commands", "/ui/login": "/ui/commands", "/uix": "/ui/commands", "/ui/\\evil": "/ui/commands",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}
