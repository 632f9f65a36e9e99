package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/internal/health"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// Start-up waits ([Config.StartupMaxWait]): the first retry follows after
// StartupFirstWait, each next one after twice the pause before (with ±20 % jitter), at most
// DefaultStartupMaxWait apart.
const (
	StartupFirstWait      = 500 * time.Millisecond
	DefaultStartupMaxWait = 30 * time.Second
	// startupTryTimeout bounds one try of a start-up check (a host that drops packets).
	startupTryTimeout = 10 * time.Second
)

// ErrStartup is wrapped by the error [Serve] returns when a dependency is misconfigured in a
// way waiting cannot cure (a refused token, a URL that names something else, a certificate
// that does not verify): see [StartupError].
var ErrStartup = errors.New("cannot start")

// StartupError is every such problem found at start, one per dependency, each naming the flag
// (and its PROXBUS_* variable) or the endpoint to fix and what to do. It unwraps to
// [ErrStartup] and to each problem (errors.Is(err, netbox.ErrUnauthorized) works).
type StartupError struct {
	Problems []error
}

// Error lists the problems, one per line after the first.
func (e *StartupError) Error() string {
	if len(e.Problems) == 1 {
		return ErrStartup.Error() + ": " + e.Problems[0].Error()
	}
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = "  " + p.Error()
	}
	return fmt.Sprintf("%s: %d problems:\n%s", ErrStartup, len(e.Problems), strings.Join(lines, "\n"))
}

// Unwrap returns ErrStartup and the problems.
func (e *StartupError) Unwrap() []error { return append([]error{ErrStartup}, e.Problems...) }

// startupCheck is one dependency checked at start. try returns nil when the dependency is
// usable, a *permanentError when it is misconfigured, and anything else (best a *waitError)
// when it may become usable by waiting.
type startupCheck struct {
	name string // the /readyz check name ("redis", "proxmox/1")
	what string // how the log names it ("Redis (--redis-url)")
	try  func(ctx context.Context) error
}

// permanentError is a start-up problem waiting cannot cure; its text is the user's message.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// permanent wraps the message format (and its %w cause) as a *permanentError.
func permanent(format string, args ...any) error {
	return &permanentError{err: fmt.Errorf(format, args...)}
}

// waitError is a failure that may clear by waiting: reason (no host, no secret) is shown on
// /readyz, err is logged.
type waitError struct {
	reason string
	err    error
}

func (e *waitError) Error() string       { return e.err.Error() }
func (e *waitError) Unwrap() error       { return e.err }
func (e *waitError) ReadyReason() string { return e.reason }

// waiting wraps err as a *waitError whose reason is what (e.g. "unreachable") and its cause
// in a few words.
func waiting(what string, err error) error {
	return &waitError{reason: what + ": " + networkCause(err), err: err}
}

// networkCause says in a few words why a connection failed, naming no host.
func networkCause(err error) string {
	var dns *net.DNSError
	var nerr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, nats.ErrNoServers):
		return "connection refused"
	case errors.As(err, &dns):
		return "its host name does not resolve"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.As(err, &nerr) && nerr.Timeout():
		return "timed out"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to the host"
	}
	return "no usable answer"
}

// tlsFailure reports whether err is a TLS failure that waiting does not cure: a certificate
// that does not verify (unknown authority, wrong host name, expired, a pinned fingerprint that
// does not match) or a server that does not speak TLS on a TLS URL.
func tlsFailure(err error) bool {
	if err == nil {
		return false
	}
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
		header   tls.RecordHeaderError
	)
	if errors.Is(err, proxmox.ErrCertificateMismatch) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &verify) || errors.As(err, &header) {
		return true
	}
	// Some layers keep only the text: net/http's answer from a plain HTTP server on https://,
	// or an error whose text was scrubbed of a secret.
	msg := err.Error()
	return strings.Contains(msg, "server gave HTTP response to HTTPS client") || strings.Contains(msg, "x509: ") ||
		strings.Contains(msg, "tls: first record does not look like a TLS handshake") ||
		strings.Contains(msg, proxmox.ErrCertificateMismatch.Error())
}

// Flag names as start-up problems name them.
const (
	flagNATSURL     = "--nats-url (PROXBUS_NATS_URL)"
	flagRedisURL    = "--redis-url (PROXBUS_REDIS_URL)"
	flagNetBoxURL   = "--netbox-url (PROXBUS_NETBOX_URL)"
	flagNetBoxToken = "--netbox-token (PROXBUS_NETBOX_TOKEN, or --netbox-token-file)"
)

// natsCheck connects to NATS with opts (of [NATSOptions]); on success *nc is the connection.
func natsCheck(rawURL string, opts []nats.Option, nc **nats.Conn) startupCheck {
	shown := RedactURL(rawURL)
	return startupCheck{name: "nats", what: "NATS (" + flagNATSURL + ")", try: func(ctx context.Context) error {
		c, err := connectNATS(rawURL, opts)
		if err == nil {
			*nc = c
			return nil
		}
		msg := strings.ToLower(err.Error())
		var uerr *url.Error
		switch {
		case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked),
			errors.Is(err, nats.ErrAccountAuthExpired), strings.Contains(msg, "authorization violation"),
			strings.Contains(msg, "authentication expired"), strings.Contains(msg, "authentication revoked"):
			return permanent("%s %s: the NATS server refused the credentials (%w); fix the user and password or token in the URL, --nats-creds or --nats-nkey", flagNATSURL, shown, err)
		case tlsFailure(err), errors.Is(err, nats.ErrSecureConnRequired), errors.Is(err, nats.ErrSecureConnWanted):
			return permanent("%s %s: TLS with the NATS server failed (%w); trust its CA with --nats-tls-ca (PROXBUS_NATS_TLS_CA), or match the server's TLS settings", flagNATSURL, shown, err)
		case errors.As(err, &uerr) && uerr.Op == "parse":
			return permanent("%s %s: the URL does not parse (%w); give nats://HOST:4222, or several separated by commas", flagNATSURL, shown, err)
		}
		return waiting("unreachable", err)
	}}
}

// redisCheck pings Redis.
func redisCheck(rawURL string, rdb redis.UniversalClient) startupCheck {
	shown := RedactURL(rawURL)
	secrets := URLPasswords(rawURL)
	return startupCheck{name: "redis", what: "Redis (" + flagRedisURL + ")", try: func(ctx context.Context) error {
		err := rdb.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		var rerr redis.Error
		switch {
		case tlsFailure(err):
			return permanent("%w; trust its CA with --redis-tls-ca (PROXBUS_REDIS_TLS_CA), or use redis:// for a server without TLS",
				scrubError(fmt.Sprintf("%s %s: TLS with Redis failed", flagRedisURL, shown), err, secrets))
		case errors.As(err, &rerr) && redisAuthRefused(rerr.Error()):
			return permanent("%w; fix the user and password in the URL (redis://USER:PASSWORD@HOST:6379/DB)",
				scrubError(fmt.Sprintf("%s %s: Redis refused the credentials", flagRedisURL, shown), err, secrets))
		case errors.As(err, &rerr) && !redisBusy(rerr.Error()):
			return permanent("%w; check the URL's database number and the server's settings",
				scrubError(fmt.Sprintf("%s %s: Redis refused the connection", flagRedisURL, shown), err, secrets))
		case errors.As(err, &rerr):
			return &waitError{reason: "busy: " + strings.Fields(rerr.Error())[0], err: err}
		}
		return waiting("unreachable", err)
	}}
}

// redisAuthRefused reports whether a Redis error reply refuses the credentials.
func redisAuthRefused(msg string) bool {
	for _, p := range []string{"NOAUTH", "WRONGPASS", "NOPERM", "ERR AUTH", "ERR invalid password", "ERR Client sent AUTH"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// redisBusy reports whether a Redis error reply is one that clears by waiting.
func redisBusy(msg string) bool {
	for _, p := range []string{"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// netboxCheck reads NetBox's /api/status/ with the token.
func netboxCheck(nb *netbox.Client) startupCheck {
	base := nb.BaseURL()
	return startupCheck{name: "netbox", what: "NetBox (" + flagNetBoxURL + ")", try: func(ctx context.Context) error {
		err := nb.Ping(ctx)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, netbox.ErrUnauthorized):
			return permanent("%s: NetBox at %s refused the token (%w); give a valid API token (v1 40-hex or v2 nbt_…) whose user may read the API",
				flagNetBoxToken, base, err)
		case errors.Is(err, netbox.ErrNotNetBox), errors.Is(err, netbox.ErrRejected):
			return permanent("%s %s: this is not a NetBox API (%w); give NetBox's base URL, e.g. https://netbox.example.net", flagNetBoxURL, base, err)
		case tlsFailure(err):
			return permanent("%s %s: NetBox's TLS certificate does not verify (%w); trust its CA with --netbox-tls-ca (PROXBUS_NETBOX_TLS_CA)", flagNetBoxURL, base, err)
		}
		if st := netbox.StatusOf(err); st != 0 {
			return &waitError{reason: fmt.Sprintf("answers HTTP %d", st), err: err}
		}
		return waiting("unreachable", err)
	}}
}

// endpointName is how start-up problems and logs name an endpoint: "endpoint 1 (lab)".
func endpointName(ep proxmox.EndpointConfig) string {
	if ep.Name == "" {
		return fmt.Sprintf("endpoint %d", ep.ID)
	}
	return fmt.Sprintf("endpoint %d (%s)", ep.ID, ep.Name)
}

// endpointCheckName is the /readyz and health name of endpoint id: "proxmox/1".
func endpointCheckName(id int64) string { return fmt.Sprintf("proxmox/%d", id) }

// endpointCheck reads the endpoint's GET /version with its token.
func endpointCheck(c *proxmox.Client) startupCheck {
	ep := c.Endpoint()
	where := fmt.Sprintf("%s of the endpoints file, urls %s", endpointName(ep), strings.Join(ep.URLs, ", "))
	return startupCheck{name: endpointCheckName(ep.ID), what: "Proxmox " + endpointName(ep), try: func(ctx context.Context) error {
		_, err := c.CheckAPI(ctx)
		var ae *proxmox.APIError
		switch {
		case err == nil:
			return nil
		case errors.Is(err, proxmox.ErrUnauthorized):
			return permanent("%s: Proxmox refused the API token %s (%w); fix token_id, or the secret in %s", where, ep.TokenID, err, secretSource(ep))
		case errors.Is(err, proxmox.ErrNotProxmox):
			return permanent("%s: this is not a Proxmox VE API (%w); each url must be a node's https://HOST:8006", where, err)
		case tlsFailure(err):
			return permanent("%s: the TLS certificate does not verify (%w); set tls.ca_file or tls.fingerprint for the endpoint", where, err)
		case errors.As(err, &ae) && !proxmox.IsTransient(err) && ae.Status < 500 && ae.Status != 429 && ae.Status != 408:
			return permanent("%s: GET /version was refused (%w); check the urls and the token's user", where, err)
		case errors.As(err, &ae):
			return &waitError{reason: fmt.Sprintf("answers HTTP %d", ae.Status), err: err}
		}
		return waiting("unreachable", err)
	}}
}

// secretSource names where the endpoint's token secret comes from.
func secretSource(ep proxmox.EndpointConfig) string {
	if ep.TokenSecretFile != "" {
		return "token_secret_file " + ep.TokenSecretFile
	}
	return "token_secret_env " + ep.TokenSecretEnv
}

// startStatus is what a replica waits for while it starts, for /readyz: check name → the
// reason it is not usable yet; a name absent is usable.
type startStatus struct {
	mu      sync.Mutex
	reasons map[string]string
}

func newStartStatus() *startStatus { return &startStatus{reasons: map[string]string{}} }

// set records name's reason ("" clears it).
func (s *startStatus) set(name, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if reason == "" {
		delete(s.reasons, name)
		return
	}
	s.reasons[name] = reason
}

// check returns name's reason as an error /readyz shows, or nil.
func (s *startStatus) check(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.reasons[name]; ok {
		return &waitError{reason: r, err: errors.New(name + ": " + r)}
	}
	return nil
}

// starter runs start-up checks with backoff.
type starter struct {
	log     *slog.Logger
	maxWait time.Duration
	status  *startStatus
	health  *health.Tracker
}

// newBackOff is the pause schedule between two tries of one check.
func (s *starter) newBackOff() backoff.BackOff {
	return &backoff.ExponentialBackOff{
		InitialInterval:     min(StartupFirstWait, s.maxWait),
		RandomizationFactor: 0.2,
		Multiplier:          2,
		MaxInterval:         s.maxWait,
	}
}

// indexed is a check's outcome: nil (usable), a *permanentError, or ctx's error.
type indexed struct {
	i   int
	err error
}

// retry runs c until it is usable, proves misconfigured, or ctx ends, waiting between tries
// with backoff; first gets the outcome of the first try. Each failed try is logged on log with
// what c waits for (or, when unreachable is set, reported to it instead).
func (s *starter) retry(ctx context.Context, c startupCheck, first func(error), unreachable func(error)) error {
	tries := 0
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		tctx, cancel := context.WithTimeout(ctx, startupTryTimeout)
		defer cancel()
		err := c.try(tctx)
		if tries++; tries == 1 {
			first(err)
		}
		var perm *permanentError
		if errors.As(err, &perm) {
			return struct{}{}, backoff.Permanent(err)
		}
		return struct{}{}, err
	}, backoff.WithBackOff(s.newBackOff()), backoff.WithMaxElapsedTime(0), backoff.WithNotify(func(err error, next time.Duration) {
		if unreachable != nil {
			unreachable(err)
			return
		}
		s.status.set(c.name, readyReason(err))
		s.log.Warn("waiting for "+c.what, "component", "startup", "check", c.name, "reason", readyReason(err),
			"err", err, "retry_in", next.Round(time.Millisecond))
	}))
	return err
}

// run checks required and endpoints at once. A problem waiting cannot cure stops it: all those
// the first tries found are returned together in a *StartupError (and one found later alone).
// It returns nil once every required check passed, while endpoints that could not be reached
// are tried on in goroutines on bg (ending with bgCtx) and reported to s.health meanwhile; it
// returns ctx's error when ctx ends first.
func (s *starter) run(ctx context.Context, required, endpoints []startupCheck, bgCtx context.Context, bg *sync.WaitGroup) error {
	all := slices.Concat(required, endpoints)
	firsts := make(chan indexed, len(all))
	finals := make(chan indexed, len(required))
	for _, c := range required {
		s.status.set(c.name, "connecting")
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for i, c := range required {
		wg.Go(func() {
			err := s.retry(rctx, c, func(err error) { firsts <- indexed{i, err} }, nil)
			if err == nil {
				s.status.set(c.name, "")
				s.log.Info(c.what+" is usable", "component", "startup", "check", c.name)
			}
			finals <- indexed{i, err}
		})
	}
	for j, c := range endpoints {
		bg.Go(func() {
			err := s.retry(bgCtx, c, func(err error) { firsts <- indexed{len(required) + j, err} }, func(err error) {
				s.health.Unreachable(c.name, readyReason(err))
			})
			var perm *permanentError
			switch {
			case err == nil:
				s.health.Reachable(c.name)
			case errors.As(err, &perm):
				// Found after the start: the replica serves on, this endpoint's commands wait.
				s.log.Error(c.what+" is misconfigured; its commands wait", "component", "startup", "check", c.name, "problem", err)
				s.health.Unreachable(c.name, "misconfigured (the log says what to fix)")
			}
		})
	}
	var problems []indexed
	pending := map[int]bool{}
	for range all {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-firsts:
			var perm *permanentError
			switch {
			case errors.As(r.err, &perm):
				problems = append(problems, r)
			case r.err != nil && r.i < len(required):
				pending[r.i] = true
			}
		}
	}
	if len(problems) > 0 {
		slices.SortFunc(problems, func(a, b indexed) int { return a.i - b.i })
		errs := make([]error, len(problems))
		for k, p := range problems {
			errs[k] = p.err
		}
		return &StartupError{Problems: errs}
	}
	for len(pending) > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-finals:
			var perm *permanentError
			switch {
			case errors.As(r.err, &perm):
				return &StartupError{Problems: []error{r.err}}
			case r.err != nil:
				return r.err // ctx ended
			}
			delete(pending, r.i)
		}
	}
	return nil
}

// readyReason is the text /readyz shows for err: its ReadyReason when it has one, else "down".
func readyReason(err error) string {
	var r interface{ ReadyReason() string }
	if errors.As(err, &r) {
		return r.ReadyReason()
	}
	return readyDown
}

// provisionWaits reports whether a provisioning error clears by waiting: JetStream did not
// answer in time (a leader election, a server still starting), is temporarily unavailable
// (503) or lacks the peers to place the replicas yet.
func provisionWaits(err error) bool {
	var ae *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return false
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, jetstream.ErrNoStreamResponse):
		return true
	case errors.As(err, &ae):
		return ae.Code == http.StatusServiceUnavailable || ae.ErrorCode == jsClusterNoPeers
	}
	return false
}

// jsClusterNoPeers is JetStream's "no suitable peers for placement" (too few servers up for
// the stream's replicas).
const jsClusterNoPeers jetstream.ErrorCode = 10005

// provision runs op (the provisioning of the streams and the consumer) until it succeeds,
// fails for a reason waiting does not cure (returned as a *StartupError naming what to fix),
// or ctx ends. While it waits, /readyz names "streams".
func (s *starter) provision(ctx context.Context, op func(ctx context.Context) error) error {
	const name = "streams"
	s.status.set(name, "provisioning")
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		err := op(ctx)
		if err != nil && !provisionWaits(err) {
			return struct{}{}, backoff.Permanent(err)
		}
		return struct{}{}, err
	}, backoff.WithBackOff(s.newBackOff()), backoff.WithMaxElapsedTime(0), backoff.WithNotify(func(err error, next time.Duration) {
		s.status.set(name, "waiting for JetStream: "+provisionCause(err))
		s.log.Warn("waiting for JetStream to provision the streams and the consumer", "component", "startup", "check", name,
			"err", err, "retry_in", next.Round(time.Millisecond))
	}))
	switch {
	case err == nil:
		s.status.set(name, "")
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return &StartupError{Problems: []error{fmt.Errorf("%s: the NATS server has no JetStream for this account (%w); enable JetStream on the server (jetstream {} in its configuration) and for the account", flagNATSURL, err)}}
	case errors.Is(err, nats.ErrPermissionViolation):
		return &StartupError{Problems: []error{fmt.Errorf("%s: the NATS user may not manage the streams (%w); allow it $JS.API.> or provision them with `proxbus streams apply` and start serve with --no-provision", flagNATSURL, err)}}
	}
	return &StartupError{Problems: []error{fmt.Errorf("provision streams: %w; fix the streams on the server (`proxbus streams apply` says what differs) or start with --no-provision", err)}}
}

// provisionCause says in a few words why provisioning waits.
func provisionCause(err error) string {
	var ae *jetstream.APIError
	switch {
	case errors.As(err, &ae):
		return ae.Description
	case errors.Is(err, nats.ErrNoResponders):
		return "no responders"
	}
	return "timed out"
}
