package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/redact"
	"github.com/proxbus/proxbus/store"
)

// Path is where the console is mounted; every route is under it.
const Path = "/ui"

// Defaults of [Config].
const (
	DefaultHistory      = 10_000
	DefaultListLimit    = 500
	DefaultLiveInterval = 500 * time.Millisecond
)

// Store is what the console reads from the store: the pending journal repairs, the
// commands awaiting approval and the schedules. *store.Store implements it.
type Store interface {
	PendingRepairs(ctx context.Context) ([]store.Repair, error)
	PendingApprovals(ctx context.Context) ([]store.Approval, error)
	// Schedules lists the scheduled commands schedule.add made (contract §11).
	Schedules(ctx context.Context) ([]store.Schedule, error)
}

// Config is what a [Console] needs. JetStream and Subjects are required.
type Config struct {
	// JetStream reads the events and dead-letter streams and replays dead letters.
	JetStream jetstream.JetStream
	Subjects  events.Subjects
	// Store lists pending repairs and approvals; nil shows those pages as unavailable.
	Store Store
	// Access says who may get in; with no token and no AnonymousLoopback nobody can.
	Access Access
	// Verbs are offered by the list's verb filter.
	Verbs []string
	// History is how many commands the console keeps (default DefaultHistory), the newest;
	// HistoryEvents how many events of the events stream it reads at start (default 20 per
	// command of History).
	History, HistoryEvents int
	// ListLimit is how many rows the commands list shows unless ?limit= asks for more, up to
	// History (default DefaultListLimit).
	ListLimit int
	// LiveInterval is the shortest time between two updates of a live page (default
	// DefaultLiveInterval): at 200 commands a second a page redraws twice a second, not a
	// thousand times.
	LiveInterval time.Duration
	// Actor is who an operator's decisions in the console (approve, reject, cancel) are made
	// as: the actor of the command.approve, command.reject and command.cancel it publishes
	// (default DefaultActor).
	Actor string
	// Secrets are literal values never to be shown (token secrets, passwords): every page
	// and live update is scrubbed of them last, whatever put them there.
	Secrets []string
	Logger  *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Console is the web console (contract §10): live commands and their step timelines, dead
// letters, pending journal repairs, approvals and replicas, read from the events and
// dead-letter streams and the store. It never sends a Proxmox or NetBox request and never
// shows a secret; the only commands it publishes are an operator's decisions (approve,
// reject, cancel) on the commands stream. Call [Console.Run] to feed it and mount [Console.Handler] at [Path].
type Console struct {
	cfg   Config
	ix    *index
	guard *guard
	pages map[string]*template.Template
	log   *slog.Logger
	// done is closed when Run returns: live streams end with it.
	done     chan struct{}
	doneOnce sync.Once
	// publishWait bounds a decision's publish (publishWait when zero; tests shorten it).
	publishWait time.Duration
}

//go:embed templates static
var assets embed.FS

// New returns a console for cfg, or an error when cfg cannot work: no JetStream, or tokens
// that cannot be told apart (wrapping [ErrBadToken]).
func New(cfg Config) (*Console, error) {
	if cfg.JetStream == nil {
		return nil, errors.New("console: Config.JetStream is required")
	}
	if cfg.History <= 0 {
		cfg.History = DefaultHistory
	}
	if cfg.HistoryEvents <= 0 {
		cfg.HistoryEvents = 20 * cfg.History
	}
	if cfg.ListLimit <= 0 {
		cfg.ListLimit = DefaultListLimit
	}
	if cfg.LiveInterval <= 0 {
		cfg.LiveInterval = DefaultLiveInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g, err := newGuard(cfg.Access, cfg.Now)
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, ix: newIndex(cfg.History), guard: g, log: cfg.Logger, done: make(chan struct{})}
	if c.pages, err = parsePages(c.funcs()); err != nil {
		return nil, err
	}
	return c, nil
}

// Run feeds the console from the events stream until ctx ends, then ends every live stream.
// A console nobody can get into reads nothing: Run then only waits for ctx.
func (c *Console) Run(ctx context.Context) {
	defer c.doneOnce.Do(func() { close(c.done) })
	if !c.guard.enabled() {
		<-ctx.Done()
		return
	}
	feed(ctx, c.cfg.JetStream, c.cfg.Subjects, c.cfg.HistoryEvents, c.ix, func(err error) {
		c.log.Warn("console: events stream unreadable; retrying", "err", err, "retry_in", feedRetry)
	})
}

// Handler serves the console's routes, all under [Path].
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	mux.Handle("GET "+Path+"/static/", http.StripPrefix(Path+"/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+Path+"/login", c.loginPage)
	mux.HandleFunc("POST "+Path+"/login", c.login)
	mux.HandleFunc("POST "+Path+"/logout", c.logout)

	read := func(pattern string, h func(http.ResponseWriter, *http.Request, session)) {
		mux.HandleFunc(pattern, c.require(roleReader, h))
	}
	operate := func(pattern string, h func(http.ResponseWriter, *http.Request, session)) {
		mux.HandleFunc(pattern, c.require(roleOperator, h))
	}
	mux.HandleFunc("GET "+Path, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Path+"/commands", http.StatusSeeOther)
	})
	read("GET "+Path+"/{$}", func(w http.ResponseWriter, r *http.Request, _ session) {
		http.Redirect(w, r, Path+"/commands", http.StatusSeeOther)
	})
	read("GET "+Path+"/commands", c.commandsPage)
	read("GET "+Path+"/commands/{ref}", c.commandPage)
	read("GET "+Path+"/live/commands", c.liveCommands)
	read("GET "+Path+"/live/commands/{ref}", c.liveCommand)
	read("GET "+Path+"/live/replicas", c.liveReplicas)
	read("GET "+Path+"/deadletters", c.deadLettersPage)
	read("GET "+Path+"/deadletters/{seq}", c.deadLetterPage)
	operate("GET "+Path+"/commands/{ref}/{action}", c.decideConfirm)
	operate("POST "+Path+"/commands/{ref}/{action}", c.decide)
	operate("GET "+Path+"/deadletters/{seq}/replay", c.replayConfirm)
	operate("POST "+Path+"/deadletters/{seq}/replay", c.replay)
	operate("GET "+Path+"/deadletters/purge", c.purgeConfirm)
	operate("POST "+Path+"/deadletters/purge", c.purge)
	read("GET "+Path+"/repairs", c.repairsPage)
	read("GET "+Path+"/approvals", c.approvalsPage)
	read("GET "+Path+"/schedules", c.schedulesPage)
	read("GET "+Path+"/replicas", c.replicasPage)
	read("GET "+Path+"/proxmox", c.proxmoxPage)
	read(Path+"/", func(w http.ResponseWriter, r *http.Request, s session) {
		c.problem(w, r, s, http.StatusNotFound, "No such page", "There is no console page at "+r.URL.Path+".")
	})
	return securityHeaders(mux)
}

// contentSecurityPolicy lets a page load only the console's own script, style sheet and
// images, talk only to its own origin, submit forms only to it, and never be framed.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders sets the headers every console response carries.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// require lets a request through to h when its session has at least role want. Without a
// session it is answered 401 with the login form and nothing else; a reader asking for an
// operator's page is answered 403.
func (c *Console) require(want role, h func(http.ResponseWriter, *http.Request, session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.guard.identify(r)
		switch {
		case s.role == roleNone:
			c.unauthorized(w, r, "")
			return
		case s.role < want:
			c.problem(w, r, s, http.StatusForbidden, "Operators only",
				"Approving, rejecting and cancelling commands and replaying and purging dead letters need the operator token (--ui-operator-token-file): log out and log in with it.")
			return
		case r.Method == http.MethodPost && !c.guard.checkCSRF(r, s):
			c.problem(w, r, s, http.StatusForbidden, "Request refused",
				"The form was stale or came from another site (its CSRF token did not match). Reload the page and try again.")
			return
		}
		h(w, r, s)
	}
}

// render executes page name with data into a buffer, scrubs it of every configured secret,
// and writes it with status.
func (c *Console) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "page", data); err != nil {
		c.log.Error("console: page not rendered", "page", name, "err", err)
		http.Error(w, "the page could not be rendered; see the replica's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(c.scrub(buf.Bytes()))
}

// fragment executes one named template of page name into a string, scrubbed.
func (c *Console) fragment(page, name string, data any) (string, error) {
	var buf bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&buf, name, data); err != nil {
		return "", fmt.Errorf("console: fragment %s of %s: %w", name, page, err)
	}
	return string(c.scrub(buf.Bytes())), nil
}

// scrub replaces every configured secret in b.
func (c *Console) scrub(b []byte) []byte {
	if len(c.cfg.Secrets) == 0 {
		return b
	}
	return []byte(redact.Values(string(b), c.cfg.Secrets...))
}
