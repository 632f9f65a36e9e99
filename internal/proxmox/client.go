package proxmox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	gp "github.com/luthermonson/go-proxmox"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/redact"
)

// UserAgent is sent with every request.
const UserAgent = "proxbus"

// Client talks to one Proxmox VE cluster (one [EndpointConfig]) with its API token.
// It is safe for concurrent use. It never retries a request; with several URLs it moves to
// the next one only when the request provably was not delivered (any method) or, for reads,
// when a gateway error (502/503/504/595/596) came back.
type Client struct {
	gp      *gp.Client
	cfg     EndpointConfig
	secrets []string // values scrubbed from every error text
	log     *slog.Logger

	taskPoll time.Duration // interval between task status polls (WaitTask)

	resources *resourceReads // concurrent /cluster/resources reads, shared (ClusterResources)

	watch *watchSlot // the running Watch (WaitTask waits on it); shared by Planning's copies

	plan *Plan // non-nil: writes are recorded here, not sent (Planning)
}

type clientOptions struct {
	httpClient *http.Client
	logger     *slog.Logger
	taskPoll   time.Duration // see WithTaskPollInterval
	wrap       TransportWrapper
}

// ClientOption customises [NewClient] and [NewClients].
type ClientOption func(*clientOptions)

// MinIdleConnsPerHost is the least number of idle connections to a Proxmox host kept for
// reuse (at least the endpoint's max_parallel are kept).
const MinIdleConnsPerHost = 64

// WithHTTPClient makes the client use hc as is (tests: an httptest server's client). The
// endpoint's TLS settings are then not applied; hc's transport decides. hc.Timeout should be
// zero: the endpoint's Timeout is applied per request through the context.
func WithHTTPClient(hc *http.Client) ClientOption {
	return func(o *clientOptions) { o.httpClient = hc }
}

// WithLogger sets the logger for request diagnostics (debug level: method, path, outcome;
// never bodies or headers). Default: slog.Default().
func WithLogger(l *slog.Logger) ClientOption {
	return func(o *clientOptions) { o.logger = l }
}

// NewClient builds a client for cfg authenticating with secret. cfg is validated and
// normalised as [ParseEndpoints] does (a cfg straight from ParseEndpoints is unchanged),
// except that no token secret source is required: the secret is given. It fails when cfg
// is invalid or its TLS settings cannot be loaded (unreadable CA file); the error wraps
// [config.ErrInvalid] or the file error and never contains the secret. No request is made.
func NewClient(cfg EndpointConfig, secret Secret, opts ...ClientOption) (*Client, error) {
	cfg.URLs = append([]string(nil), cfg.URLs...)
	if err := normalise(&cfg, false); err != nil {
		return nil, fmt.Errorf("proxmox: endpoints file: %w: endpoint %d: %w", config.ErrInvalid, cfg.ID, err)
	}
	if secret == "" {
		return nil, fmt.Errorf("%w: endpoint %d: empty token secret", ErrNoSecret, cfg.ID)
	}
	o := clientOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	if o.taskPoll <= 0 {
		o.taskPoll = DefaultTaskPollInterval
	}
	var hc *http.Client
	if o.httpClient != nil {
		cp := *o.httpClient // go-proxmox wraps the transport for failover: keep the caller's client intact
		hc = &cp
	} else {
		tlsCfg, err := buildTLSConfig(cfg.TLS)
		if err != nil {
			return nil, fmt.Errorf("proxmox: endpoint %d: tls: %w", cfg.ID, err)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tlsCfg
		tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		tr.TLSHandshakeTimeout = 10 * time.Second
		// Keep a connection per concurrent request alive: with the default of 2 idle
		// connections per host every request beyond the second opens (and closes) a new one.
		tr.MaxIdleConnsPerHost = max(cfg.MaxParallel, MinIdleConnsPerHost)
		hc = &http.Client{Transport: tr}
	}
	if hc.Transport == nil {
		hc.Transport = http.DefaultTransport
	}
	if o.wrap != nil {
		hc.Transport = o.wrap(cfg, hc.Transport)
	}
	log := o.logger.With("endpoint_id", cfg.ID, "endpoint", cfg.Name)
	gpOpts := []gp.Option{
		gp.WithHTTPClient(hc),
		gp.WithAPIToken(cfg.TokenID, secret.Reveal()),
		gp.WithUserAgent(UserAgent),
		gp.WithLogger(gpLogger{log: log, secrets: []string{secret.Reveal()}}),
		gp.WithRequestInterceptor(formContentType),
	}
	if len(cfg.URLs) > 1 {
		extra := make([]string, 0, len(cfg.URLs)-1)
		for _, u := range cfg.URLs[1:] {
			extra = append(extra, u+"/api2/json")
		}
		gpOpts = append(gpOpts, gp.WithAdditionalEndpoints(extra...))
	}
	return &Client{
		gp:        gp.NewClient(cfg.URLs[0]+"/api2/json", gpOpts...),
		cfg:       cfg,
		secrets:   []string{secret.Reveal()},
		log:       log,
		taskPoll:  o.taskPoll,
		resources: &resourceReads{},
		watch:     &watchSlot{},
	}, nil
}

// Endpoint returns a copy of the client's (normalised) endpoint configuration.
func (c *Client) Endpoint() EndpointConfig {
	cfg := c.cfg
	cfg.URLs = append([]string(nil), c.cfg.URLs...)
	return cfg
}

// formContentType marks request bodies as form-encoded: this package only ever sends
// url.Values-encoded bodies (as PVE's own clients do), while go-proxmox labels every body
// application/json.
func formContentType(req *http.Request) error {
	if req.Body != nil && req.Body != http.NoBody {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return nil
}

// request is one API call.
type request struct {
	method  string
	path    string     // API path below /api2/json, already escaped
	query   url.Values // GET parameters
	form    url.Values // POST/PUT body parameters
	secrets []string   // extra values to scrub from errors (passwords sent in form)
}

// do sends r through go-proxmox's [gp.Client.Req], which decodes the "data" of a 2xx answer
// (the whole body when it has none) into out with encoding/json; out nil decodes nothing.
// Every failure is returned as *APIError or *TransportError; a 2xx answer that is not JSON,
// whose data is null ("empty answer") or whose data cannot be decoded into out is a sent
// *TransportError whose cause matches [ErrUndecodable] and reads "unreadable answer: …".
func (c *Client) do(ctx context.Context, r request, out any) error {
	if ctx.Value(provisionalKey{}) != nil {
		return errProvisional
	}
	if c.plan != nil && r.method != http.MethodGet {
		c.plan.record(r, c.secrets)
		if upid, ok := out.(*string); ok {
			*upid = plannedUPID(r)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()

	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		// GetConn starts every attempt: when net/http transparently re-sends on a fresh
		// connection (it does so only when the server provably did not read the first
		// attempt), the earlier write no longer counts.
		GetConn: func(string) { wrote.Store(false) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			}
		},
	})

	target := r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body []byte
	if r.form != nil {
		body = []byte(r.form.Encode())
	}
	var ans *answer
	var into any // nil: go-proxmox reads the answer and decodes nothing
	if out != nil {
		ans = &answer{out: out}
		into = ans
	}
	secrets := append(append([]string(nil), c.secrets...), r.secrets...)

	start := time.Now()
	err := c.gp.Req(ctx, r.method, target, body, into)
	if err == nil && ans != nil && !ans.got {
		err = errEmptyAnswer
	}
	if err == nil {
		c.log.LogAttrs(ctx, slog.LevelDebug, "proxmox request", slog.String("method", r.method),
			slog.String("path", r.path), slog.String("outcome", "ok"), slog.Duration("took", time.Since(start)))
		return nil
	}
	var gae *gp.APIError
	if errors.As(err, &gae) {
		ae := &APIError{
			Method:   r.method,
			Path:     r.path,
			Status:   gae.StatusCode,
			Message:  scrub(strings.TrimSpace(gae.Message), secrets),
			notFound: errors.Is(gae, gp.ErrNotFound),
		}
		if len(gae.Errors) > 0 {
			ae.Params = make(map[string]string, len(gae.Errors))
			for k, v := range gae.Errors {
				if redact.IsSecretName(k) {
					v = redact.Placeholder
				}
				ae.Params[k] = scrub(strings.TrimSpace(v), secrets)
			}
		}
		c.log.LogAttrs(ctx, slog.LevelDebug, "proxmox request", slog.String("method", r.method),
			slog.String("path", r.path), slog.String("outcome", statusText(ae.Status, ae.Message)))
		return ae
	}
	te := &TransportError{Method: r.method, Path: r.path, Sent: wrote.Load(), Err: scrubbedError{err: err, secrets: secrets}}
	if undecodable(err, ans) {
		// A 2xx answer came back, so the request was delivered (and a write may have been
		// applied).
		te.Sent = true
		te.Err = scrubbedError{err: fmt.Errorf("%w: %w", ErrUndecodable, err), secrets: secrets}
	}
	c.log.LogAttrs(ctx, slog.LevelDebug, "proxmox request", slog.String("method", r.method),
		slog.String("path", r.path), slog.String("outcome", te.Error()))
	return te
}

// answer is do's decode target: go-proxmox hands it the answer's non-null data and it decodes
// that into out with encoding/json. A null data leaves it untouched (got false), as
// encoding/json leaves any pointer target.
type answer struct {
	out any
	got bool  // data arrived
	err error // decoding it into out failed
}

// UnmarshalJSON decodes data into a.out.
func (a *answer) UnmarshalJSON(data []byte) error {
	a.got = true
	a.err = json.Unmarshal(data, a.out)
	return a.err
}

// errEmptyAnswer is the cause of a 2xx answer whose data is null.
var errEmptyAnswer = errors.New("empty answer")

// undecodable reports whether err, returned by go-proxmox for a request with decode target
// ans, means that a 2xx answer came but could not be decoded: go-proxmox's own decode of the
// body failed (not JSON, not an object), its data was null, or decoding the data into the
// target failed. Only a 2xx answer's body is ever decoded.
func undecodable(err error, ans *answer) bool {
	if ans == nil {
		return false
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return ans.err != nil || errors.Is(err, errEmptyAnswer) || errors.As(err, &syn) || errors.As(err, &typ)
}

// scrub removes known secret values and secret-named assignments from s.
func scrub(s string, secrets []string) string { return redact.Values(s, secrets...) }

// scrubbedError keeps the cause's identity (errors.Is/As reach it) while its text is
// scrubbed of secrets.
type scrubbedError struct {
	err     error
	secrets []string
}

func (e scrubbedError) Error() string { return scrub(e.err.Error(), e.secrets) }
func (e scrubbedError) Unwrap() error { return e.err }

// gpLogger adapts go-proxmox's leveled logger to slog. Debug output is dropped entirely:
// go-proxmox logs request bodies (passwords) at debug level.
type gpLogger struct {
	log     *slog.Logger
	secrets []string
}

func (l gpLogger) Debugf(string, ...any) {}
func (l gpLogger) Infof(format string, v ...any) {
	l.log.Info(scrub(fmt.Sprintf(format, v...), l.secrets), "component", "go-proxmox")
}
func (l gpLogger) Warnf(format string, v ...any) {
	l.log.Warn(scrub(fmt.Sprintf(format, v...), l.secrets), "component", "go-proxmox")
}
func (l gpLogger) Errorf(format string, v ...any) {
	l.log.Error(scrub(fmt.Sprintf(format, v...), l.secrets), "component", "go-proxmox")
}
