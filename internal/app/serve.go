// Package app wires proxbus together: it connects NATS, Redis, NetBox and the Proxmox
// endpoints, provisions the streams, and runs the consumer with the verb pipeline and the
// journal repairer. cmd/proxbus and the end-to-end tests both start proxbus through it.
package app

import (
	"context"
	"errors"
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

// Config is everything `proxbus serve` can be told (contract §10). Zero values take the
// documented defaults.
type Config struct {
	NATSURL       string // default nats://127.0.0.1:4222
	RedisURL      string // default redis://127.0.0.1:6379/0
	NetBoxURL     string
	NetBoxToken   string
	EndpointsFile string
	// Endpoints, when set, is used instead of EndpointsFile.
	Endpoints []proxmox.EndpointConfig
	// Getenv resolves token_secret_env (default os.Getenv).
	Getenv func(string) string

	SubjectPrefix string // default "proxbus"
	Concurrency   int    // default 8
	MaxAckPending int    // in flight across all replicas (default Concurrency; N replicas: N×Concurrency)
	// MaxAttempts is how many failed attempts a command may have before it is answered 503
	// attempts_exhausted (default 5; waiting spends none, and a command that may have written
	// is never failed for it).
	MaxAttempts int
	AckWait     time.Duration // default 30s
	// BusyDelay and MaxWait pace a waiting command; ConfirmFor bounds how long an interrupted
	// write's effect is looked for (handlers.Config; defaults 1s, 30s, 30s).
	BusyDelay, MaxWait, ConfirmFor time.Duration
	DedupeTTL                      time.Duration // default 24h
	IdempotencyWindow              time.Duration // default 60s
	LeaseTTL                       time.Duration // default 30s
	EndpointCacheTTL               time.Duration // default 30s, at most 30s
	NetBoxTimeout                  time.Duration // default 10s
	JournalRetryDelay              time.Duration // default 200ms
	RepairInterval                 time.Duration // default 2s
	// TaskPollInterval is how often a Proxmox task's status is polled (default 500ms).
	TaskPollInterval time.Duration
	NoProvision      bool
	// StreamReplicas is the replica count of the streams proxbus provisions (default 1; 3 on
	// a clustered broker).
	StreamReplicas int
	// RedisKeyPrefix namespaces every Redis key (default "proxbus").
	RedisKeyPrefix string
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

// ErrConfig reports an unusable configuration.
var ErrConfig = errors.New("config")

func (c *Config) defaults() error {
	if c.NATSURL == "" {
		c.NATSURL = nats.DefaultURL
	}
	if c.RedisURL == "" {
		c.RedisURL = "redis://127.0.0.1:6379/0"
	}
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	if c.EndpointCacheTTL <= 0 || c.EndpointCacheTTL > 30*time.Second {
		c.EndpointCacheTTL = 30 * time.Second
	}
	if c.Instance == "" {
		host, _ := os.Hostname()
		c.Instance = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if c.LogHandler == nil {
		c.LogHandler = slog.DiscardHandler
	}
	if c.NetBoxURL == "" {
		return fmt.Errorf("%w: the NetBox URL is required (PROXBUS_NETBOX_URL)", ErrConfig)
	}
	if c.Endpoints == nil {
		if c.EndpointsFile == "" {
			return fmt.Errorf("%w: the endpoints file is required (PROXBUS_ENDPOINTS_FILE)", ErrConfig)
		}
		eps, err := proxmox.LoadEndpoints(c.EndpointsFile)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		c.Endpoints = eps
	}
	return nil
}

// Serve runs one proxbus replica until ctx is cancelled, then drains: in-flight commands are
// completed before it returns. It returns an error when a dependency cannot be set up.
func Serve(ctx context.Context, cfg Config) error {
	if cfg.HTTPListener != nil {
		defer cfg.HTTPListener.Close() // closed already when the server ran; harmless then
	}
	if err := cfg.defaults(); err != nil {
		return err
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
		return fmt.Errorf("%w: %w", ErrConfig, err)
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
		return fmt.Errorf("%w: %w", ErrConfig, err)
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
		return fmt.Errorf("%w: netbox: %w", ErrConfig, err)
	}
	rdb, err := RedisClient(cfg.RedisURL, cfg.Security)
	if err != nil {
		return err
	}
	defer rdb.Close()
	rdb.AddHook(m.RedisHook())
	st = store.New(rdb, store.Options{Prefix: cfg.RedisKeyPrefix, DedupeTTL: cfg.DedupeTTL, Window: cfg.IdempotencyWindow, LeaseTTL: cfg.LeaseTTL})

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
	subjects := events.NewSubjects(cfg.SubjectPrefix)
	ccfg := consumer.Config{
		Subjects: subjects, Concurrency: cfg.Concurrency, MaxAckPending: cfg.MaxAckPending, AckWait: cfg.AckWait,
		Replicas: cfg.StreamReplicas, Instance: cfg.Instance, Logger: serveLogger(cfg.LogHandler, secrets),
		Middleware: []consumer.Middleware{tr.Middleware, m.Middleware}, DeadLettered: m.DeadLettered,
	}.WithDefaults()
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
				ccfg.MaxAckPending, ccfg.FetchBatch = n, 0 // the consumer sizes its batch on it
				ccfg = ccfg.WithDefaults()
			}
		}
	}
	pub := consumer.NewPublisher(js, events.NewEmitter(subjects, cfg.Instance), m.Published)
	pipeline, err := handlers.New(handlers.Config{
		Registry:          registry,
		Store:             st,
		Endpoints:         netbox.NewEndpointCache(nb, cfg.EndpointCacheTTL, time.Now),
		Journal:           nb,
		Proxmox:           clients,
		Publisher:         pub,
		History:           NewHistory(js, subjects),
		MaxAttempts:       cfg.MaxAttempts,
		BusyDelay:         cfg.BusyDelay,
		MaxWait:           cfg.MaxWait,
		ConfirmFor:        cfg.ConfirmFor,
		Instance:          cfg.Instance,
		Logger:            log.With("component", "pipeline"),
		JournalRetryDelay: cfg.JournalRetryDelay,
	})
	if err != nil {
		return err
	}
	cons, err := consumer.New(js, ccfg, pipeline, pub)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
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
		_ = repair.Run(repairCtx, st, pipeline, repair.Config{Interval: cfg.RepairInterval, Logger: log})
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
