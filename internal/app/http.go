package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/config"
)

// RouteDeps is what [Config.Routes] gets to build extra HTTP handlers (a webhook ingress, an
// HTTP front): the replica's NATS connection and JetStream context, the subjects, its
// instance name and a logger that redacts the configured secrets.
type RouteDeps struct {
	NATS      *nats.Conn
	JetStream jetstream.JetStream
	Subjects  events.Subjects
	Instance  string
	Logger    *slog.Logger
}

// Paths of the built-in HTTP endpoints.
const (
	PathMetrics = "/metrics"
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
)

// readyCheckTimeout bounds each dependency check of /readyz.
const readyCheckTimeout = 2 * time.Second

// httpShutdownTimeout bounds the graceful shutdown of the HTTP server after the drain.
const httpShutdownTimeout = 5 * time.Second

// ReadyCheck is one dependency /readyz checks: Check returns nil when it is up.
type ReadyCheck struct {
	Name  string
	Check func(ctx context.Context) error
	// Advisory checks are reported under "checks" but do not make the replica unready: one
	// Proxmox endpoint that is down or refuses its token stops only its own commands.
	Advisory bool
}

// Texts of a check's entry in readyBody.Checks.
const (
	readyOK   = "ok"
	readyDown = "down"
)

// readyBody is the JSON body of /readyz.
type readyBody struct {
	Ready bool `json:"ready"`
	// Down names the failing checks that make the replica unready.
	Down []string `json:"down,omitempty"`
	// Checks says of every check "ok" or why it is not: the reason of an error with a
	// ReadyReason method (texts without hosts or secrets, such as "token refused (HTTP 403) on
	// …"), else "down".
	Checks map[string]string `json:"checks,omitempty"`
}

// ReadyHandler serves /readyz: 200 {"ready":true,"checks":{…}} when every check that is not
// advisory passes, else 503 with {"ready":false,"down":[names…],"checks":{…}}. Checks run
// concurrently, each bounded by a short timeout; error texts are never shown (they may name
// hosts or users), only the ReadyReason of an error that has one.
func ReadyHandler(checks ...ReadyCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		errs := make([]error, len(checks))
		var wg sync.WaitGroup
		for i, c := range checks {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(r.Context(), readyCheckTimeout)
				defer cancel()
				errs[i] = c.Check(ctx)
			})
		}
		wg.Wait()
		body := readyBody{Ready: true}
		if len(checks) > 0 {
			body.Checks = make(map[string]string, len(checks))
		}
		for i, err := range errs {
			c := checks[i]
			if err == nil {
				body.Checks[c.Name] = readyOK
				continue
			}
			body.Checks[c.Name] = readyReason(err)
			if !c.Advisory {
				body.Ready = false
				body.Down = append(body.Down, c.Name)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if !body.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(body)
	})
}

// HealthHandler serves /healthz: 200 "ok" while the process serves HTTP at all.
func HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte("ok\n"))
	})
}

// ErrNotReady is what a failing readiness check returns when it has no better error.
var ErrNotReady = errors.New("not ready")

// httpServer is the replica's HTTP server: /metrics, /healthz, /readyz and the routes of
// Config.Routes.
type httpServer struct {
	srv  *http.Server
	ln   net.Listener
	log  *slog.Logger
	done chan struct{}
}

// switchHandler serves the handler stored last: the start-up handler while the replica
// starts, then the full mux. The zero value answers 503.
type switchHandler struct{ h atomic.Pointer[http.Handler] }

// set makes h serve every request from now on.
func (s *switchHandler) set(h http.Handler) { s.h.Store(&h) }

// ServeHTTP serves r with the current handler.
func (s *switchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	startingHandler().ServeHTTP(w, r)
}

// startingHandler answers every request 503 {"error":"proxbus is starting"} with Retry-After:
// the routes of a replica that is not connected yet (the webhook ingress retries).
func startingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"proxbus is starting"}` + "\n"))
	})
}

// listenHTTP binds addr (or takes ln when given) for a server of h. It returns nil, nil when
// neither is set (HTTP off).
func listenHTTP(addr string, ln net.Listener, h http.Handler, log *slog.Logger) (*httpServer, error) {
	if ln == nil {
		if addr == "" {
			return nil, nil
		}
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("%w: http listen %s: %w", config.ErrInvalid, addr, err)
		}
	}
	return &httpServer{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		ln:   ln,
		log:  log,
		done: make(chan struct{}),
	}, nil
}

// serve runs the server until shutdown; call it in a goroutine the caller waits for.
func (h *httpServer) serve() {
	defer close(h.done)
	_, secure := h.ln.(httpsListener)
	h.log.Info("http serving", "addr", h.ln.Addr().String(), "tls", secure)
	if err := h.srv.Serve(h.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		h.log.Error("http server failed", "err", err)
	}
}

// shutdown stops accepting, lets running requests finish (up to httpShutdownTimeout), then
// closes what remains, and waits for serve to return.
func (h *httpServer) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), httpShutdownTimeout)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		_ = h.srv.Close()
	}
	<-h.done
}

// Flag names of the HTTP server's certificate, as errors name them.
const (
	flagHTTPTLSCert = "--http-tls-cert (PROXBUS_HTTP_TLS_CERT)"
	flagHTTPTLSKey  = "--http-tls-key (PROXBUS_HTTP_TLS_KEY)"
)

// HTTPTLS loads the certificate the HTTP server presents: certFile (--http-tls-cert) is a
// PEM chain, leaf first, keyFile (--http-tls-key) its PEM private key. Both or neither:
// neither returns nil, nil (plain HTTP). One without the other, a file that cannot be read,
// or a pair that does not parse or match is an error wrapping [config.ErrInvalid] naming the
// flag; file contents are never shown. A key file readable by group or others is logged as a warning (log may be
// nil). The files are read once: rotate the certificate by restarting the replica.
// The config serves TLS 1.2 and later, HTTP/2 and HTTP/1.1, and asks for no client certificate.
func HTTPTLS(certFile, keyFile string, log *slog.Logger) (*tls.Config, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case keyFile == "":
		return nil, fmt.Errorf("%w: %s is set but %s is not: give the certificate's key file too, or neither", config.ErrInvalid, flagHTTPTLSCert, flagHTTPTLSKey)
	case certFile == "":
		return nil, fmt.Errorf("%w: %s is set but %s is not: give the certificate file too, or neither", config.ErrInvalid, flagHTTPTLSKey, flagHTTPTLSCert)
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: cannot read the certificate file: %w", config.ErrInvalid, flagHTTPTLSCert, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: cannot read the key file: %w", config.ErrInvalid, flagHTTPTLSKey, err)
	}
	if log != nil {
		warnIfShared(log, "http tls key", keyFile)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s and %s %s are not a PEM certificate and its private key: %w",
			config.ErrInvalid, flagHTTPTLSCert, certFile, flagHTTPTLSKey, keyFile, err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}, nil
}

// httpsListener marks a listener whose connections are TLS (for the "http serving" log line).
type httpsListener struct{ net.Listener }

// ListenHTTP binds addr for [Config.HTTPListener]. With cfg non-nil every connection is TLS:
// a client speaking plain HTTP gets "400 Bad Request" (Go's net/http answer to an HTTP request
// on an HTTPS port) and is served nothing. With cfg nil it is a plain TCP listener.
func ListenHTTP(addr string, cfg *tls.Config) (net.Listener, error) {
	if addr == "" {
		return nil, fmt.Errorf("%w: the HTTP server needs --http-addr (PROXBUS_HTTP_ADDR), e.g. :9090", config.ErrInvalid)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: --http-addr %s: %w", config.ErrInvalid, addr, err)
	}
	if cfg == nil {
		return ln, nil
	}
	return httpsListener{tls.NewListener(ln, cfg)}, nil
}
