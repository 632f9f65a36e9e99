package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// role is what a request may do.
type role int

const (
	roleNone     role = iota
	roleReader        // every page and live stream
	roleOperator      // and replay and purge dead letters
)

func (r role) String() string {
	switch r {
	case roleReader:
		return "reader"
	case roleOperator:
		return "operator"
	}
	return "none"
}

// Access says who may use the console. A request is let in by a session cookie that the
// login form set, by an "Authorization: Bearer <token>" header, or, when AnonymousLoopback is
// set, by coming from a loopback address (the operator role: `proxbus dev` on a developer's
// machine). Everything else is answered 401.
type Access struct {
	// ReadToken lets its holder read every page; OperatorToken also lets them replay and
	// purge dead letters. Either may be empty (no one logs in with it).
	ReadToken, OperatorToken string
	// AnonymousLoopback lets requests from loopback addresses in as operators without a
	// token, when they name a loopback host (localhost, *.localhost, 127.0.0.1, [::1]) in
	// Host: a page of another site whose name an attacker points at 127.0.0.1 (DNS
	// rebinding) sends its own name and is refused. Only `proxbus dev` sets it.
	AnonymousLoopback bool
	// SecureCookie marks the session cookie Secure even on a plain-HTTP request: set it when a
	// reverse proxy terminates TLS in front of proxbus (the cookie is Secure anyway when
	// proxbus serves TLS itself).
	SecureCookie bool
}

// MinTokenLength is the fewest characters a console token may have.
const MinTokenLength = 16

// ErrBadToken is wrapped by the errors of [ReadTokenFile] and of [New] about a token.
var ErrBadToken = errors.New("console: unusable token")

// ReadTokenFile reads a console token from path (surrounding white space removed); flag
// names the flag that gave it, for the error message. An unreadable file, or a token shorter
// than [MinTokenLength] or holding white space, is an error wrapping [ErrBadToken]; the
// token itself is never shown.
func ReadTokenFile(path, flag string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrBadToken, flag, err)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case len(tok) < MinTokenLength:
		return "", fmt.Errorf("%w: %s %s: the token has %d characters; give one of at least %d (e.g. `openssl rand -hex 24 > %s`)",
			ErrBadToken, flag, path, len(tok), MinTokenLength, path)
	case strings.ContainsAny(tok, " \t\r\n"):
		return "", fmt.Errorf("%w: %s %s: the token holds white space; put one token on one line", ErrBadToken, flag, path)
	}
	return tok, nil
}

// Names of the session cookie and the CSRF form field.
const (
	cookieName = "proxbus_ui"
	csrfField  = "csrf"
)

// sessionTTL is how long a login lasts.
const sessionTTL = 12 * time.Hour

// guard decides the role of each request and issues and checks sessions and CSRF tokens.
type guard struct {
	read, operator []byte
	anonymous      bool
	secureCookie   bool
	// key signs the CSRF token of anonymous sessions; it is new in every process.
	key []byte
	now func() time.Time
}

func newGuard(a Access, now func() time.Time) (*guard, error) {
	if a.ReadToken != "" && a.ReadToken == a.OperatorToken {
		return nil, fmt.Errorf("%w: the read token and the operator token are the same; give the operator a token of its own", ErrBadToken)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("console: random key: %w", err)
	}
	return &guard{read: []byte(a.ReadToken), operator: []byte(a.OperatorToken), anonymous: a.AnonymousLoopback, secureCookie: a.SecureCookie, key: key, now: now}, nil
}

// enabled reports whether anyone at all can get in.
func (g *guard) enabled() bool { return g.anonymous || len(g.read) > 0 || len(g.operator) > 0 }

// secretOf is the key of a role's session MACs: its token.
func (g *guard) secretOf(r role) []byte {
	switch r {
	case roleReader:
		return g.read
	case roleOperator:
		return g.operator
	}
	return nil
}

// tokenRole is the role token grants, compared in constant time (over SHA-256 digests, so
// not even the tokens' lengths show).
func (g *guard) tokenRole(token string) role {
	if token == "" {
		return roleNone
	}
	got := sha256.Sum256([]byte(token))
	match := func(want []byte) bool {
		if len(want) == 0 {
			return false
		}
		w := sha256.Sum256(want)
		return subtle.ConstantTimeCompare(got[:], w[:]) == 1
	}
	// Both are compared every time: which one matched does not show in the timing.
	op, rd := match(g.operator), match(g.read)
	switch {
	case op:
		return roleOperator
	case rd:
		return roleReader
	}
	return roleNone
}

// session is who a request is.
type session struct {
	role role
	// via is "cookie", "bearer" or "loopback".
	via    string
	cookie string // the cookie's value, for the CSRF token
}

// identify returns the request's session; role is roleNone when it has none.
func (g *guard) identify(r *http.Request) session {
	if c, err := r.Cookie(cookieName); err == nil {
		if ro := g.checkCookie(c.Value); ro != roleNone {
			return session{role: ro, via: "cookie", cookie: c.Value}
		}
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		if ro := g.tokenRole(strings.TrimSpace(tok)); ro != roleNone {
			return session{role: ro, via: "bearer"}
		}
	}
	if g.anonymous && loopback(r.RemoteAddr) && loopbackHost(r.Host) {
		return session{role: roleOperator, via: "loopback"}
	}
	return session{}
}

// cookieSecure reports whether r's session cookie is to be marked Secure: proxbus serves
// TLS, or the operator said a proxy does ([Access.SecureCookie]).
func (g *guard) cookieSecure(r *http.Request) bool { return g.secureCookie || r.TLS != nil }

// loopbackHost reports whether a Host header names this machine by a loopback name or
// address, with or without a port.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// loopback reports whether addr (host:port) is a loopback address.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// issueCookie returns a session cookie for r: "<role>.<expiry unix>.<MAC>", the MAC an
// HMAC-SHA256 keyed by the role's token, so a replica with the same tokens accepts it and
// a changed token ends every session made with the old one.
func (g *guard) issueCookie(r role, secure bool) *http.Cookie {
	exp := g.now().Add(sessionTTL).Unix()
	payload := r.String() + "." + strconv.FormatInt(exp, 10)
	return &http.Cookie{
		Name: cookieName, Value: payload + "." + mac(g.secretOf(r), payload),
		Path: "/ui", MaxAge: int(sessionTTL / time.Second), HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode,
	}
}

// clearCookie ends the session in the browser.
func clearCookie(secure bool) *http.Cookie {
	return &http.Cookie{Name: cookieName, Value: "", Path: "/ui", MaxAge: -1, HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}
}

// checkCookie returns the role a cookie value proves, roleNone when it proves none.
func (g *guard) checkCookie(v string) role {
	payload, sig, ok := cutLast(v, '.')
	if !ok {
		return roleNone
	}
	name, expText, ok := strings.Cut(payload, ".")
	if !ok {
		return roleNone
	}
	var r role
	switch name {
	case roleReader.String():
		r = roleReader
	case roleOperator.String():
		r = roleOperator
	default:
		return roleNone
	}
	secret := g.secretOf(r)
	exp, err := strconv.ParseInt(expText, 10, 64)
	if len(secret) == 0 || err != nil || g.now().Unix() >= exp {
		return roleNone
	}
	if !hmac.Equal([]byte(sig), []byte(mac(secret, payload))) {
		return roleNone
	}
	return r
}

// csrfToken is the token a session's forms carry: bound to its cookie, or, for a loopback
// session, to this process's key. Bearer sessions need none (a browser never sends the
// header by itself) and get "".
func (g *guard) csrfToken(s session) string {
	switch s.via {
	case "cookie":
		return mac(g.secretOf(s.role), "csrf."+s.cookie)
	case "loopback":
		return mac(g.key, "csrf.loopback")
	}
	return ""
}

// checkCSRF reports whether a state-changing request r of session s is genuine: not sent
// from another site, and, unless made with a bearer token, carrying the session's CSRF token.
func (g *guard) checkCSRF(r *http.Request, s session) bool {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return false
	}
	if s.via == "bearer" {
		return true
	}
	want := g.csrfToken(s)
	return want != "" && hmac.Equal([]byte(r.PostFormValue(csrfField)), []byte(want))
}

// mac is the base64url HMAC-SHA256 of msg under key.
func mac(key []byte, msg string) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

func cutLast(s string, sep byte) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}
