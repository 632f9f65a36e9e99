// Package app wires proxbus together: it connects NATS, Redis, NetBox and the Proxmox
// endpoints, provisions the streams, and runs the consumer with the verb pipeline and the
// journal repairer. cmd/proxbus and the end-to-end tests both start proxbus through it.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/consumer"
	"github.com/proxbus/proxbus/internal/handlers"
	"github.com/proxbus/proxbus/internal/metrics"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/internal/redact"
	"github.com/proxbus/proxbus/internal/repair"
	"github.com/proxbus/proxbus/internal/store"
	"github.com/proxbus/proxbus/internal/tracing"
)

// Defaults of [Config].
const (
	DefaultNATSURL  = nats.DefaultURL
	DefaultRedisURL = "redis://127.0.0.1:6379/0"
	// DefaultEndpointCacheTTL is also the longest EndpointCacheTTL allowed: a ProxmoxEndpoint
	// changed in NetBox takes effect within it.
	DefaultEndpointCacheTTL = 30 * time.Second
)

// Config is everything `proxbus serve` can be told (contract §10). The zero value of every
// field means its documented default: a Default… constant of this package, or of the package
// a nested configuration belongs to. A value out of range is an error of [Serve] wrapping
// config.ErrInvalid that names the field or its flag, never replaced by the default.
type Config struct {
	NATSURL     string // default DefaultNATSURL
	RedisURL    string // default DefaultRedisURL
	NetBoxURL   string // required
	NetBoxToken string
	// NetBoxTimeout bounds each NetBox request (default netbox.DefaultTimeout).
	NetBoxTimeout time.Duration
	// EndpointsFile is the YAML file of Proxmox endpoints, required unless Endpoints is set.
	EndpointsFile string
	// Endpoints, when set, is used instead of EndpointsFile.
	Endpoints []proxmox.EndpointConfig
	// Getenv resolves token_secret_env (default os.Getenv).
	Getenv func(string) string
	// EndpointCacheTTL is how long a ProxmoxEndpoint read from NetBox is used (default, and at
	// most, DefaultEndpointCacheTTL).
	EndpointCacheTTL time.Duration
	// TaskPollInterval is how often a Proxmox task's status is polled (default: the proxmox
	// client's).
	TaskPollInterval time.Duration

	// Consumer configures the streams and the durable consumer (concurrency, MaxAckPending,
	// AckWait, replicas); its Subjects name every subject and stream proxbus uses (zero: the
	// default prefix). Serve sets its Instance, Logger, Middleware and DeadLettered.
	Consumer consumer.Config
	// Store configures the Redis store: the key prefix, how long commands are remembered, the
	// Idempotency-Key window and the lease of a running command.
	Store store.Options
	// Pipeline tunes the verb pipeline: attempts, the pacing of waits, how long an
	// interrupted write is confirmed, journal retries.
	Pipeline handlers.Settings
	// Repair tunes the journal repairer; Serve sets its Logger.
	Repair repair.Config
	// NoProvision leaves the streams and the consumer as they are on the server.
	NoProvision bool

	// Instance names this replica (default hostname-pid).
	Instance string
	// LogHandler is the terminal slog handler; Serve wraps it with secret redaction.
	LogHandler slog.Handler
	// OnReady is called once the consumer is fetching.
	OnReady func()
	// Security holds the NATS, Redis and NetBox credentials/TLS settings (docs/security.md).
	Security Security
	// HTTPAddr is the listen address of the HTTP server serving /metrics, /healthz, /readyz
	// and Routes (e.g. ":9090"); "" means no HTTP server.
	HTTPAddr string
	// HTTPListener, when set, is used instead of HTTPAddr (tests listen on 127.0.0.1:0);
	// Serve closes it.
	HTTPListener net.Listener
	// Routes, when set, mounts more handlers on the HTTP server's mux before it starts.
	Routes func(mux *http.ServeMux, deps RouteDeps)
	// Tracing configures OpenTelemetry tracing; the zero value reads the OTEL_* environment
	// (off unless it asks for an exporter).
	Tracing tracing.Options
	// Ingress enables the NetBox webhook ingress and the proxbox-api front on the HTTP server.
	Ingress Ingress
}

// withDefaults returns c with every zero field of its own set to its default; the nested
// configurations are defaulted by their packages.
func (c Config) withDefaults() Config {
	if c.NATSURL == "" {
		c.NATSURL = DefaultNATSURL
	}
	if c.RedisURL == "" {
		c.RedisURL = DefaultRedisURL
	}
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	if c.EndpointCacheTTL == 0 {
		c.EndpointCacheTTL = DefaultEndpointCacheTTL
	}
	if c.Instance == "" {
		host, _ := os.Hostname()
		c.Instance = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if c.LogHandler == nil {
		c.LogHandler = slog.DiscardHandler
	}
	c.Consumer.Subjects = events.NewSubjects(c.Consumer.Subjects.Prefix)
	return c
}

// validate reports a configuration of c's own fields that cannot work; c has defaults
// applied.
func (c Config) validate() error {
	if c.NetBoxURL == "" {
		return fmt.Errorf("%w: the NetBox URL is required (PROXBUS_NETBOX_URL)", config.ErrInvalid)
	}
	if c.Endpoints == nil && c.EndpointsFile == "" {
		return fmt.Errorf("%w: the endpoints file is required (PROXBUS_ENDPOINTS_FILE)", config.ErrInvalid)
	}
	if c.EndpointCacheTTL < 0 || c.EndpointCacheTTL > DefaultEndpointCacheTTL {
		return fmt.Errorf("%w: EndpointCacheTTL %s: must be at most %s", config.ErrInvalid, c.EndpointCacheTTL, DefaultEndpointCacheTTL)
	}
	if c.TaskPollInterval < 0 {
		return fmt.Errorf("%w: TaskPollInterval %s is negative", config.ErrInvalid, c.TaskPollInterval)
	}
	return c.Repair.Validate()
}

// Serve runs one proxbus replica until ctx is cancelled, then drains: in-flight commands are
// completed before it returns. It returns an error when a dependency cannot be set up.
func Serve(ctx context.Context, cfg Config) error {
	if cfg.HTTPListener != nil {
		defer cfg.HTTPListener.Close() // closed already when the server ran; harmless then
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.Endpoints == nil {
		eps, err := proxmox.LoadEndpoints(cfg.EndpointsFile)
		if err != nil {
			return fmt.Errorf("%w: %w", config.ErrInvalid, err)
		}
		cfg.Endpoints = eps
	}
	rules, err := cfg.Ingress.check(cfg.HTTPAddr != "" || cfg.HTTPListener != nil)
	if err != nil {
		return err
	}
	registry := handlers.NewRegistry(handlers.Builtin()...)
	if cfg.Tracing.Instance == "" {
		cfg.Tracing.Instance = cfg.Instance
	}
	tr, err := tracing.Setup(ctx, cfg.Tracing)
	if err != nil {
		return fmt.Errorf("%w: %w", config.ErrInvalid, err)
	}
	defer func() { // flush the last spans, also after ctx was cancelled
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownTimeout)
		defer cancel()
		_ = tr.Shutdown(sctx)
	}()
	var st *store.Store // set below; read only at scrape time
	m := metrics.New(metrics.Options{Verbs: registry.Names(), PendingRepairs: func(ctx context.Context) (int, error) {
		reps, err := st.PendingRepairs(ctx)
		return len(reps), err
	}})
	popts := []proxmox.ClientOption{proxmox.WithTransportWrapper(func(ep proxmox.EndpointConfig, next http.RoundTripper) http.RoundTripper {
		id := strconv.FormatInt(ep.ID, 10)
		return tr.Transport("proxmox", proxmox.APIOperation, m.ProxmoxTransport(id, proxmox.APIOperation, next))
	})}
	if cfg.TaskPollInterval > 0 {
		popts = append(popts, proxmox.WithTaskPollInterval(cfg.TaskPollInterval))
	}
	clients, err := proxmox.NewClients(cfg.Endpoints, cfg.Getenv, popts...)
	if err != nil {
		return fmt.Errorf("%w: %w", config.ErrInvalid, err)
	}
	secrets := append(clients.Secrets(), cfg.NetBoxToken)
	secrets = append(secrets, URLPasswords(cfg.NATSURL)...)
	secrets = append(secrets, URLPasswords(cfg.RedisURL)...)
	secrets = append(secrets, cfg.Ingress.secrets()...)
	log := serveLogger(cfg.LogHandler, secrets).With("instance", cfg.Instance)
	defer RouteRedisLogs(log.With("component", "redis"))()

	hc, err := NetBoxHTTPClient(cfg.Security)
	if err != nil {
		return err
	}
	hc.Transport = tr.Transport("netbox", metrics.NetBoxOperation, m.NetBoxTransport(metrics.NetBoxOperation, hc.Transport))
	nb, err := netbox.New(netbox.Config{URL: cfg.NetBoxURL, Token: cfg.NetBoxToken, Timeout: cfg.NetBoxTimeout, HTTPClient: hc})
	if err != nil {
		return err
	}
	rdb, err := RedisClient(cfg.RedisURL, cfg.Security)
	if err != nil {
		return err
	}
	defer rdb.Close()
	rdb.AddHook(m.RedisHook())
	if st, err = store.New(rdb, cfg.Store); err != nil {
		return err
	}

	nc, err := ConnectNATS(cfg.NATSURL, cfg.Security, "proxbus "+cfg.Instance, log)
	if err != nil {
		return err
	}
	defer func() { // no callback may log after Serve has returned
		ClearNATSHandlers(nc)
		nc.Close()
	}()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	subjects := cfg.Consumer.Subjects
	ccfg := cfg.Consumer
	ccfg.Instance, ccfg.Logger = cfg.Instance, serveLogger(cfg.LogHandler, secrets)
	ccfg.Middleware, ccfg.DeadLettered = []consumer.Middleware{tr.Middleware, m.Middleware}, m.DeadLettered
	ccfg = ccfg.WithDefaults()
	if !cfg.NoProvision {
		// Provisioning never lowers the durable's MaxAckPending or a stream's replica count
		// (replicas sized for N×concurrency, an R3 stream): `proxbus streams apply` does that.
		changes, err := consumer.ProvisionWith(ctx, js, ccfg, consumer.ProvisionOptions{})
		if err != nil {
			return fmt.Errorf("provision streams: %w", err)
		}
		for _, c := range changes {
			if c.Old != "unchanged" {
				log.Info("provisioned", "component", "provision", "change", c.String())
			}
			if n, err := strconv.Atoi(c.Old); err == nil && c.Kept && c.Setting == "MaxAckPending" {
				ccfg.MaxAckPending, ccfg.FetchBatch = n, cfg.Consumer.FetchBatch // the default batch depends on it
				ccfg = ccfg.WithDefaults()
			}
		}
	}
	pub := consumer.NewPublisher(js, events.NewEmitter(subjects, cfg.Instance), m.Published)
	pipeline, err := handlers.New(handlers.Config{
		Settings:  cfg.Pipeline,
		Registry:  registry,
		Store:     st,
		Endpoints: netbox.NewEndpointCache(nb, cfg.EndpointCacheTTL, time.Now),
		Journal:   nb,
		Proxmox:   clients,
		Publisher: pub,
		History:   NewHistory(js, subjects),
		Instance:  cfg.Instance,
		Logger:    log.With("component", "pipeline"),
	})
	if err != nil {
		return err
	}
	cons, err := consumer.New(js, ccfg, pipeline, pub)
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("GET "+PathMetrics, m.Handler())
	mux.Handle("GET "+PathHealthz, HealthHandler())
	mux.Handle("GET "+PathReadyz, ReadyHandler(
		ReadyCheck{Name: "nats", Check: func(context.Context) error {
			if !nc.IsConnected() {
				return ErrNotReady
			}
			return nil
		}},
		ReadyCheck{Name: "redis", Check: st.Ping},
		ReadyCheck{Name: "consumer", Check: func(context.Context) error {
			if !cons.Ready() {
				return ErrNotReady
			}
			return nil
		}},
	))
	deps := RouteDeps{NATS: nc, JetStream: js, Subjects: subjects, Instance: cfg.Instance, Logger: log.With("component", "http")}
	if cfg.Ingress.enabled() {
		if err := cfg.Ingress.mount(mux, rules, deps); err != nil {
			return err
		}
	}
	if cfg.Routes != nil {
		cfg.Routes(mux, deps)
	}
	hs, err := listenHTTP(cfg.HTTPAddr, cfg.HTTPListener, mux, log.With("component", "http"))
	if err != nil {
		return err
	}

	log.Info("proxbus serving", "nats", nc.ConnectedUrlRedacted(), "verbs", registry.Names(),
		"concurrency", ccfg.Concurrency, "endpoints", len(cfg.Endpoints), "tracing", tr.On())
	repairCtx, stopRepair := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	if hs != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hs.serve()
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rcfg := cfg.Repair
		rcfg.Logger = log
		_ = repair.Run(repairCtx, st, pipeline, rcfg)
	}()
	if cfg.OnReady != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			waitReady(ctx, cons)
			if ctx.Err() == nil {
				cfg.OnReady()
			}
		}()
	}
	runErr := cons.Run(ctx)
	stopRepair()
	if hs != nil {
		hs.shutdown() // after the drain: /readyz answered 503 while it lasted
	}
	wg.Wait()
	log.Info("proxbus stopped")
	return runErr
}

func waitReady(ctx context.Context, c *consumer.Consumer) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !c.Ready() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// serveLogger is Serve's logger on h: secrets redacted, and every key once per line (a
// sub-component's With("component", …) replaces its parent's, see [uniqueKeys]).
func serveLogger(h slog.Handler, secrets []string) *slog.Logger {
	return slog.New(newUniqueKeys(redact.NewHandler(h, secrets...)))
}
