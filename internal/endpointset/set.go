package endpointset

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// DefaultInterval is how often a [Set] reads the endpoints again when nothing asks sooner.
const DefaultInterval = time.Minute

// retryFirst is the first pause before a failed read of the endpoints is tried again; it
// doubles up to the interval.
const retryFirst = time.Second

// maxAsked bounds how many unknown endpoint ids wait for a read of the endpoints at once;
// beyond it an unknown id is refused at once.
const maxAsked = 1024

// ErrNoSource is wrapped by [New] when no Source is configured.
var ErrNoSource = errors.New("endpointset: a source is required")

// Source lists the ProxmoxEndpoints (*netbox.Client does).
type Source interface {
	ProxmoxEndpoints(ctx context.Context) ([]netbox.ProxmoxEndpoint, error)
}

// Config configures a [Set]. Only Source is required.
type Config struct {
	Source Source
	// SecretsFile holds the PROXBUS_ENDPOINT_<ID>_TOKEN_SECRET=… lines; "" means the
	// environment only. It is read again at every read of the endpoints.
	SecretsFile string
	// Getenv looks the variables up in the environment (default os.Getenv).
	Getenv func(string) string
	// CAFile, when set, is the PEM file of the CAs trusted for the endpoints whose verify_ssl
	// is true (instead of the system roots).
	CAFile string
	// Interval is how often the endpoints are read again (default DefaultInterval).
	Interval time.Duration
	// Defaults are the settings NetBox does not hold, applied to every endpoint: Timeout,
	// MaxParallel, ReadOnly, Approval, SSH (zero: the endpoints file's defaults).
	Defaults proxmox.EndpointConfig
	// ClientOptions are passed to proxmox.NewClient for every endpoint.
	ClientOptions []proxmox.ClientOption
	// OnChange is called (outside the set's lock) with the id of every endpoint added,
	// changed or removed by a read; nil: nothing.
	OnChange func(id int64)
	// Logger receives a line per endpoint added, changed, removed or unusable (never a
	// secret); default discard.
	Logger *slog.Logger
}

// Set is the current set of endpoints read from NetBox. It is safe for concurrent use.
type Set struct {
	cfg  Config
	kick chan struct{}

	reload   sync.Mutex // one read at a time
	badLines []int      // the secrets file's malformed lines at the last read (under reload)

	mu      sync.Mutex
	entries map[int64]*entry
	reads   uint64              // completed reads
	readAt  time.Time           // when the last completed read began
	lastErr error               // the last read's error, nil when it succeeded
	asked   map[int64]time.Time // unknown ids asked about (Why), and when first
}

// entry is one endpoint of the set.
type entry struct {
	ep      netbox.ProxmoxEndpoint
	cfg     proxmox.EndpointConfig
	sum     [32]byte // the secret's digest: a changed secret makes a new client
	secret  string
	client  *proxmox.Client // nil when unusable
	problem string          // why it is unusable (names no secret)
}

// New returns an empty set; [Set.Run] or [Set.Reload] fills it.
func New(cfg Config) (*Set, error) {
	if cfg.Source == nil {
		return nil, fmt.Errorf("%w: %w", config.ErrInvalid, ErrNoSource)
	}
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("endpointset: %w: Interval %s is negative", config.ErrInvalid, cfg.Interval)
	}
	config.Default(&cfg.Interval, DefaultInterval)
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Set{cfg: cfg, kick: make(chan struct{}, 1), entries: map[int64]*entry{}, asked: map[int64]time.Time{}}, nil
}

// Get returns the client of endpoint id, and whether it has one (it is known and usable).
func (s *Set) Get(id int64) (*proxmox.Client, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[id]; ok && e.client != nil {
		return e.client, true
	}
	return nil, false
}

// Why says why endpoint id has no client. An endpoint NetBox has that cannot be used (no
// secret, no address, no token id) is transient: its commands wait until it is fixed. An id
// not read yet is transient until a read of the endpoints that began after it was first asked
// about completes (Why asks for one); then an id NetBox does not have is not transient. The
// text names the endpoint and what to do, never a secret.
func (s *Set) Why(id int64) (detail string, transient bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[id]; ok {
		if e.client != nil {
			return "", false
		}
		return endpointName(e.cfg) + " in NetBox cannot be used: " + e.problem, true
	}
	first, asked := s.asked[id]
	if !asked && len(s.asked) < maxAsked {
		first, asked = time.Now(), true
		s.asked[id] = first
	}
	if asked && (s.reads == 0 || s.readAt.Before(first)) {
		s.Kick()
		if s.lastErr != nil {
			return fmt.Sprintf("endpoint %d is not among the ProxmoxEndpoints read from NetBox; reading them again (the last read failed: %v)", id, s.lastErr), true
		}
		return fmt.Sprintf("endpoint %d is not among the ProxmoxEndpoints read from NetBox; reading them again", id), true
	}
	delete(s.asked, id)
	return fmt.Sprintf("NetBox has no ProxmoxEndpoint %d (read at %s)", id, s.readAt.UTC().Format(time.RFC3339)), false
}

// Kick asks [Set.Run] to read the endpoints again soon; asks made while a read is pending are
// merged into it.
func (s *Set) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run reads the endpoints at once, then every Interval and whenever [Set.Kick] asks (at most
// once a second), until ctx ends. A failed read is tried again after a second, doubling up to
// the interval; the set read last stays meanwhile.
func (s *Set) Run(ctx context.Context) {
	wait := time.Duration(0)
	retry := retryFirst
	var last time.Time // when the last read began
	for {
		if !sleep(ctx, wait, s.kick) {
			return
		}
		if gap := retryFirst - time.Since(last); gap > 0 && !sleep(ctx, gap, nil) { // kicks merge meanwhile
			return
		}
		last = time.Now()
		if err := s.Reload(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.cfg.Logger.Warn("the ProxmoxEndpoints cannot be read from NetBox; the endpoints read last stay", "err", err, "retry_in", retry)
			wait, retry = retry, min(retry*2, s.cfg.Interval)
			continue
		}
		wait, retry = s.cfg.Interval, retryFirst
	}
}

// sleep waits d, or until wake receives; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-wake:
	}
	return true
}

// Reload reads the endpoints and the secrets now and swaps the set. An endpoint whose
// address, token id and secret are unchanged keeps its client. On error the set is kept.
func (s *Set) Reload(ctx context.Context) error {
	s.reload.Lock()
	defer s.reload.Unlock()
	began := time.Now()
	eps, err := s.cfg.Source.ProxmoxEndpoints(ctx)
	if err != nil {
		s.mu.Lock()
		s.lastErr = err
		s.mu.Unlock()
		return fmt.Errorf("endpointset: read the ProxmoxEndpoints: %w", err)
	}
	secrets := readSecrets(s.cfg.SecretsFile)
	if !slices.Equal(secrets.bad, s.badLines) { // said once, not at every read
		for _, n := range secrets.bad {
			s.cfg.Logger.Warn("secrets file: a line is not KEY=VALUE; it is ignored", "file", s.cfg.SecretsFile, "line", n)
		}
		s.badLines = secrets.bad
	}
	s.mu.Lock()
	old := s.entries
	s.mu.Unlock()

	next := make(map[int64]*entry, len(eps))
	var changed []int64
	for _, ep := range eps {
		if _, dup := next[ep.ID]; dup {
			continue
		}
		e := s.build(ep, secrets, old[ep.ID])
		next[ep.ID] = e
		if prev, ok := old[ep.ID]; !ok || prev != e {
			changed = append(changed, ep.ID)
			s.logChange(prev, e)
		}
	}
	for id, prev := range old {
		if _, ok := next[id]; !ok {
			changed = append(changed, id)
			s.cfg.Logger.Info("endpoint removed from NetBox; its commands are refused endpoint_not_found", "endpoint_id", id, "endpoint", prev.cfg.Name)
		}
	}
	s.mu.Lock()
	s.entries, s.readAt, s.lastErr = next, began, nil
	s.reads++
	for id := range s.asked {
		if _, known := next[id]; known {
			delete(s.asked, id)
		}
	}
	s.mu.Unlock()
	if s.cfg.OnChange != nil {
		slices.Sort(changed)
		for _, id := range changed {
			s.cfg.OnChange(id)
		}
	}
	return nil
}

// build is ep's entry: prev itself when nothing it is built from changed.
func (s *Set) build(ep netbox.ProxmoxEndpoint, secrets secretsFile, prev *entry) *entry {
	cfg := s.cfg.Defaults
	cfg.ID, cfg.Name, cfg.TokenID = ep.ID, cmp.Or(ep.Name, "endpoint-"+strconv.FormatInt(ep.ID, 10)), ep.TokenID()
	cfg.TokenSecretEnv, cfg.TokenSecretFile = SecretVar(ep.ID), ""
	cfg.URLs = nil
	cfg.TLS = proxmox.TLSConfig{InsecureSkipVerify: !ep.VerifySSL}
	if ep.VerifySSL {
		cfg.TLS.CAFile = s.cfg.CAFile
	}
	if host := ep.Host(); host != "" {
		cfg.URLs = []string{"https://" + net.JoinHostPort(host, strconv.Itoa(ep.Port))}
	}
	e := &entry{ep: ep, cfg: cfg}
	secret, missing := secrets.secret(ep.ID, s.cfg.Getenv)
	e.secret, e.sum = secret, sha256.Sum256([]byte(secret))
	switch {
	case len(cfg.URLs) == 0:
		e.problem = "neither domain nor ip_address is set; set one in NetBox"
	case !isHost(ep.Host()):
		e.problem = fmt.Sprintf("%q is not a host name or IP address; write the bare host in NetBox's domain (no scheme, port or path)", ep.Host())
	case ep.Port <= 0 || ep.Port > 65535:
		e.problem = fmt.Sprintf("port %d is not a TCP port; fix it in NetBox", ep.Port)
	case cfg.TokenID == "":
		e.problem = "username or token_name is empty; set the API token's user (USER@REALM) and name in NetBox"
	case !validTokenID(ep.Username, ep.TokenName):
		e.problem = fmt.Sprintf("the API token id %s is not USER@REALM!TOKENNAME; fix username or token_name in NetBox", cfg.TokenID)
	case missing != "":
		e.problem = missing
	}
	if prev != nil && prev.sum == e.sum && prev.problem == e.problem && reflect.DeepEqual(prev.cfg, e.cfg) {
		return prev
	}
	if e.problem != "" {
		return e
	}
	c, err := proxmox.NewClient(cfg, proxmox.Secret(secret), s.cfg.ClientOptions...)
	if err != nil {
		// Its errors name the field (urls, tls: the CA file) and never the secret; "field: "
		// becomes "field " so that the text is not taken for a secret assignment.
		text := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "proxmox: "), "endpoints file: ")
		e.problem = "its client cannot be built (" + strings.ReplaceAll(text, "token_id: ", "token_id ") + ")"
		return e
	}
	e.client = c
	return e
}

// logChange logs that e replaced prev (nil: e is new).
func (s *Set) logChange(prev, e *entry) {
	attrs := []any{"endpoint_id", e.cfg.ID, "endpoint", e.cfg.Name, "urls", e.cfg.URLs, "token_id", e.cfg.TokenID, "verify_ssl", e.ep.VerifySSL}
	switch {
	case e.problem != "":
		s.cfg.Logger.Warn("endpoint in NetBox cannot be used; its commands wait", append(attrs, "problem", e.problem)...)
	case prev == nil:
		s.cfg.Logger.Info("endpoint added from NetBox", attrs...)
	default:
		s.cfg.Logger.Info("endpoint changed in NetBox; new commands use the new settings", attrs...)
	}
}

// Secrets returns every token secret of the set (a fresh slice), for log redaction. Never
// log or store the result.
func (s *Set) Secrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.entries))
	for _, e := range s.entries {
		if e.secret != "" {
			out = append(out, e.secret)
		}
	}
	return out
}

// Endpoints returns the configuration of every endpoint of the set, usable or not, by id.
func (s *Set) Endpoints() []proxmox.EndpointConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]proxmox.EndpointConfig, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, e.cfg)
	}
	slices.SortFunc(out, func(a, b proxmox.EndpointConfig) int { return int(a.ID - b.ID) })
	return out
}

// Check reports the set's problems for /readyz: nil when the endpoints were read and every one
// is usable; else a *Problem naming each unusable endpoint (or that they were never read).
func (s *Set) Check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reads == 0 {
		if s.lastErr != nil {
			return &Problem{Reason: "not read from NetBox yet (the read failed)"}
		}
		return &Problem{Reason: "not read from NetBox yet"}
	}
	var bad []string
	for _, e := range s.entries {
		if e.client == nil {
			bad = append(bad, endpointName(e.cfg)+": "+e.problem)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return &Problem{Reason: "unusable: " + strings.Join(bad, "; ")}
}

// Problem is what [Set.Check] reports.
type Problem struct{ Reason string }

// Error returns "endpoints: " and the reason.
func (p *Problem) Error() string { return "endpoints: " + p.Reason }

// ReadyReason is the reason, for /readyz.
func (p *Problem) ReadyReason() string { return p.Reason }

// endpointName is `endpoint ID (NAME)`.
func endpointName(cfg proxmox.EndpointConfig) string {
	return fmt.Sprintf("endpoint %d (%s)", cfg.ID, cfg.Name)
}

// validTokenID reports whether USERNAME!TOKENNAME has Proxmox's form USER@REALM!TOKENID: a
// user without white space, "@", ":" or "!", a realm and a token name that start with a letter
// and hold letters, digits, ".", "-" and "_".
func validTokenID(username, tokenName string) bool {
	user, realm, ok := strings.Cut(username, "@")
	if !ok || user == "" || strings.ContainsAny(user, " \t@:!") {
		return false
	}
	return pveName(realm) && pveName(tokenName)
}

// pveName reports whether s starts with a letter and holds only letters, digits, ".", "-"
// and "_".
func pveName(s string) bool {
	for i, r := range s {
		letter := r < 128 && unicode.IsLetter(r)
		if !letter && (i == 0 || !(r < 128 && unicode.IsDigit(r)) && !strings.ContainsRune(".-_", r)) {
			return false
		}
	}
	return s != ""
}

// isHost reports whether h is a bare host: an IP address, or a name of letters, digits, "-"
// and "." (no scheme, port, path or white space).
func isHost(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	if h == "" || strings.HasPrefix(h, ".") || strings.HasPrefix(h, "-") {
		return false
	}
	for _, r := range h {
		if r >= 128 || !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '.') {
			return false
		}
	}
	return true
}
