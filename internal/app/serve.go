// Package app wires proxbus together: it connects NATS, Redis, NetBox and the Proxmox
// endpoints, provisions the streams, and runs the consumer with the verb pipeline and the
// journal repairer. cmd/proxbus and the end-to-end tests both start proxbus through it.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/buildinfo"
	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/console"
	"github.com/proxbus/proxbus/internal/endpointset"
	"github.com/proxbus/proxbus/internal/health"
	"github.com/proxbus/proxbus/internal/metrics"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/presence"
	"github.com/proxbus/proxbus/internal/producers"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/internal/pvewatch"
	"github.com/proxbus/proxbus/internal/redact"
	"github.com/proxbus/proxbus/internal/repair"
	"github.com/proxbus/proxbus/internal/tracing"
	"github.com/proxbus/proxbus/seal"
	"github.com/proxbus/proxbus/store"
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
	// EndpointsFile is the YAML file of Proxmox endpoints, required unless Endpoints is set
	// or EndpointsFromNetBox is true.
	EndpointsFile string
	// EndpointsFromNetBox reads the endpoints from NetBox's netbox-proxbox ProxmoxEndpoints
	// instead of an endpoints file, and reads them again (endpointset) every
	// EndpointsReloadInterval and when a NetBox webhook says one changed, without a restart.
	EndpointsFromNetBox bool
	// EndpointSecretsFile holds the token secrets of the endpoints read from NetBox, as
	// PROXBUS_ENDPOINT_<ID>_TOKEN_SECRET=… lines, read again with the endpoints; the same
	// variables in the environment (Getenv) are read when the file lacks them.
	EndpointSecretsFile string
	// EndpointCAFile is the PEM file of the CAs trusted for endpoints read from NetBox whose
	// verify_ssl is true (default: the system roots).
	EndpointCAFile string
	// EndpointsReloadInterval is how often the endpoints are read from NetBox again (default
	// endpointset.DefaultInterval).
	EndpointsReloadInterval time.Duration
	// Endpoints, when set, is used instead of EndpointsFile.
	Endpoints []proxmox.EndpointConfig
	// Getenv resolves token_secret_env (default os.Getenv).
	Getenv func(string) string
	// EndpointCacheTTL is how long a ProxmoxEndpoint read from NetBox is used (default, and at
	// most, DefaultEndpointCacheTTL).
	EndpointCacheTTL time.Duration
	// TaskPollInterval, when set, is a fixed interval between a Proxmox task's status polls
	// (its log is then read at every poll); zero: the adaptive curve (proxmox.WaitTask).
	TaskPollInterval time.Duration
	// TaskWatch tunes the watch of each endpoint (contract §3a): its intervals and how often
	// guests are read; zero fields take proxmox.WatchConfig's defaults.
	TaskWatch proxmox.WatchConfig
	// NoTaskWatch turns the watch off: no Proxmox events are published and every command
	// polls its own task's status (the behaviour before the watch; benchmarks compare both).
	NoTaskWatch bool
	// PVEWebhookSecret, when set, mounts POST /webhooks/proxmox on the HTTP server for PVE's
	// webhook notification target, which must send it in the X-Proxbus-Secret header.
	PVEWebhookSecret string

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
	// StartupMaxWait is the longest pause between two tries of a start-up check (NATS, Redis,
	// NetBox, an endpoint, the provisioning) that found its dependency unreachable (default
	// DefaultStartupMaxWait); the first pause is StartupFirstWait or this, whichever is less.
	StartupMaxWait time.Duration

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
	// Trust holds the sealing keys and what producers must do (sealed secrets, signed
	// commands; contract §8, §8a).
	Trust Trust
	// Console configures the web console at /ui on the HTTP server (contract §10): who may
	// get in and how many commands it keeps. With no token and no anonymous access it is
	// mounted but lets nobody in (and reads no events).
	Console Console
}

// Console is the web console's part of the [Config].
type Console struct {
	Access console.Access
	// History is how many commands the console keeps (default console.DefaultHistory).
	History int
	// Actor is who an operator's approvals, rejections and cancellations in the console are
	// made as (default console.DefaultActor).
	Actor string
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
	if c.StartupMaxWait == 0 {
		c.StartupMaxWait = DefaultStartupMaxWait
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
	fromFile := c.Endpoints != nil || c.EndpointsFile != ""
	switch {
	case c.EndpointsFromNetBox && fromFile:
		return fmt.Errorf("%w: the endpoints come either from the endpoints file (PROXBUS_ENDPOINTS_FILE) or from NetBox (PROXBUS_ENDPOINTS_FROM_NETBOX); give one", config.ErrInvalid)
	case !c.EndpointsFromNetBox && !fromFile:
		return fmt.Errorf("%w: the endpoints file is required (PROXBUS_ENDPOINTS_FILE), or read the endpoints from NetBox (PROXBUS_ENDPOINTS_FROM_NETBOX)", config.ErrInvalid)
	case !c.EndpointsFromNetBox && (c.EndpointSecretsFile != "" || c.EndpointCAFile != "" || c.EndpointsReloadInterval != 0):
		return fmt.Errorf("%w: PROXBUS_ENDPOINT_SECRETS_FILE, PROXBUS_ENDPOINT_CA_FILE and PROXBUS_ENDPOINTS_RELOAD_INTERVAL apply to endpoints read from NetBox (PROXBUS_ENDPOINTS_FROM_NETBOX)", config.ErrInvalid)
	case c.EndpointsReloadInterval < 0:
		return fmt.Errorf("%w: EndpointsReloadInterval %s is negative", config.ErrInvalid, c.EndpointsReloadInterval)
	}
	if c.EndpointCacheTTL < 0 || c.EndpointCacheTTL > DefaultEndpointCacheTTL {
		return fmt.Errorf("%w: EndpointCacheTTL %s: must be at most %s", config.ErrInvalid, c.EndpointCacheTTL, DefaultEndpointCacheTTL)
	}
	if c.TaskPollInterval < 0 {
		return fmt.Errorf("%w: TaskPollInterval %s is negative", config.ErrInvalid, c.TaskPollInterval)
	}
	if c.StartupMaxWait < 0 {
		return fmt.Errorf("%w: StartupMaxWait %s is negative", config.ErrInvalid, c.StartupMaxWait)
	}
	return c.Repair.Validate()
}

// Serve runs one proxbus replica until ctx is cancelled, then drains: in-flight commands are
// completed before it returns.
//
// At start it connects NATS, pings Redis, reads NetBox's /api/status/ with the token and each
// endpoint's GET /version with its token, all at once. A dependency that cannot be reached
// yet is waited for with backoff (each try logged, /readyz naming it) until ctx ends, then
// Serve returns nil; an endpoint that cannot be reached does not hold up the start (its
// commands wait; /readyz names it). A misconfiguration waiting cannot cure (a refused token or
// credentials, a URL that is not NetBox or Proxmox, a certificate that does not verify) is
// returned as a *[StartupError] listing every such problem, each naming the flag or the
// endpoint to fix. Provisioning the streams is retried the same way while JetStream does not
// answer. Any other error means the configuration cannot be used (config.ErrInvalid).
func Serve(ctx context.Context, cfg Config) error {
	if cfg.HTTPListener != nil {
		defer cfg.HTTPListener.Close() // closed already when the server ran; harmless then
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.Endpoints == nil && !cfg.EndpointsFromNetBox {
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
	opener, err := cfg.Trust.opener()
	if err != nil {
		return err
	}
	gate, err := producers.New(cfg.Trust.ProducersFile, cfg.Trust.RequireSignedCommands)
	if err != nil {
		return err
	}
	registry := handlers.NewRegistry(handlers.Builtin()...)
	var approvalErrs []error
	for _, ep := range cfg.Endpoints {
		if err := registry.CheckApprovalVerbs(ep.Approval.Verbs); err != nil {
			approvalErrs = append(approvalErrs, fmt.Errorf("endpoint %d: approval.verbs: %w", ep.ID, err))
		}
	}
	if err := errors.Join(approvalErrs...); err != nil {
		return fmt.Errorf("%w: endpoints file: %w", config.ErrInvalid, err)
	}
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
	// The tracker's lines carry dependency names, operation templates, statuses and fixed
	// texts only (never an error text or a header), so the secrets known before the Proxmox
	// clients exist are all it needs redacted.
	tracker := health.New(serveLogger(cfg.LogHandler, cfg.baseSecrets()).With("instance", cfg.Instance), time.Now)
	var st *store.Store                             // set below; read only at scrape time
	var consuming atomic.Pointer[consumer.Consumer] // set once the consumer exists
	m := metrics.New(metrics.Options{Verbs: registry.Names(), Build: buildinfo.Read(), Dependencies: tracker.Usable,
		PendingRepairs: func(ctx context.Context) (int, error) {
			reps, err := st.PendingRepairs(ctx)
			return len(reps), err
		},
		PendingApprovals: func(ctx context.Context) (int, time.Time, error) {
			aps, err := st.PendingApprovals(ctx)
			if err != nil || len(aps) == 0 {
				return 0, time.Time{}, err
			}
			return len(aps), aps[0].RequestedAt, nil // oldest first
		},
		ConsumerReady: func() bool { c := consuming.Load(); return c != nil && c.Ready() },
	})
	tracker.Register(health.Dependency{Name: "netbox", What: "NetBox", Fix: "fix " + flagNetBoxToken + " or the token's permissions in NetBox"})
	for _, ep := range cfg.Endpoints {
		tracker.Register(health.Dependency{Name: endpointCheckName(ep.ID), What: "Proxmox " + endpointName(ep),
			Fix: "fix token_id or its secret for " + endpointName(ep) + " in the endpoints file"})
	}
	popts := []proxmox.ClientOption{proxmox.WithTransportWrapper(func(ep proxmox.EndpointConfig, next http.RoundTripper) http.RoundTripper {
		id := strconv.FormatInt(ep.ID, 10)
		next = tracker.Transport(endpointCheckName(ep.ID), proxmox.APIOperation, health.ProxmoxRefusal, next)
		return tr.Transport("proxmox", proxmox.APIOperation, m.ProxmoxTransport(id, proxmox.APIOperation, next))
	})}
	if cfg.TaskPollInterval > 0 {
		popts = append(popts, proxmox.WithTaskPollInterval(cfg.TaskPollInterval))
	}
	clients, err := proxmox.NewClients(cfg.Endpoints, cfg.Getenv, popts...)
	if err != nil {
		return fmt.Errorf("%w: %w", config.ErrInvalid, err)
	}
	secrets := append(clients.Secrets(), cfg.baseSecrets()...)
	var set *endpointset.Set // the endpoints read from NetBox, set below
	var learntFrom atomic.Pointer[endpointset.Set]
	learnt := func() []string { // the log redactor asks it for every record, from any goroutine
		if s := learntFrom.Load(); s != nil {
			return s.Secrets()
		}
		return nil
	}
	log := serveLoggerFunc(cfg.LogHandler, learnt, secrets).With("instance", cfg.Instance)
	defer RouteRedisLogs(log.With("component", "redis"))()

	hc, err := NetBoxHTTPClient(cfg.Security)
	if err != nil {
		return err
	}
	hc.Transport = tracker.Transport("netbox", metrics.NetBoxOperation, health.NetBoxRefusal, hc.Transport)
	hc.Transport = tr.Transport("netbox", metrics.NetBoxOperation, m.NetBoxTransport(metrics.NetBoxOperation, hc.Transport))
	nb, err := netbox.New(netbox.Config{URL: cfg.NetBoxURL, Token: cfg.NetBoxToken, Timeout: cfg.NetBoxTimeout, HTTPClient: hc})
	switch {
	case errors.Is(err, netbox.ErrBadURL):
		return fmt.Errorf("%s %s: %w", flagNetBoxURL, RedactURL(cfg.NetBoxURL), err)
	case errors.Is(err, netbox.ErrBadToken):
		return fmt.Errorf("%s: %w", flagNetBoxToken, err)
	case err != nil:
		return err
	}
	endpointCache := netbox.NewEndpointCache(nb, cfg.EndpointCacheTTL, time.Now)
	var pveClients handlers.ProxmoxClients = clients
	if cfg.EndpointsFromNetBox {
		if set, err = newEndpointSet(cfg, nb, popts, endpointCache, tracker, log); err != nil {
			return err
		}
		pveClients = set
		learntFrom.Store(set)
		setCtx, stopSet := context.WithCancel(context.WithoutCancel(ctx))
		setDone := make(chan struct{})
		go func() {
			defer close(setDone)
			set.Run(setCtx)
		}()
		defer func() {
			stopSet()
			<-setDone
		}()
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
	natsOpts, err := NATSOptions(cfg.Security, "proxbus "+cfg.Instance, log) // unusable files: before any wait
	if err != nil {
		return err
	}

	// The HTTP server answers from now on: /readyz names what the replica waits for.
	starting := newStartStatus()
	var handler switchHandler
	handler.set(startMux(m, starting, tracker, cfg.Endpoints))
	hs, err := listenHTTP(cfg.HTTPAddr, cfg.HTTPListener, &handler, log.With("component", "http"))
	if err != nil {
		return err
	}
	stopHTTP := func() {}
	if hs != nil {
		go hs.serve() // hs.shutdown waits for it
		stopHTTP = sync.OnceFunc(hs.shutdown)
	}
	defer stopHTTP()

	// Probes of endpoints unreachable at start go on in the background until they answer.
	probeCtx, stopProbes := context.WithCancel(ctx)
	var probes sync.WaitGroup
	defer func() {
		stopProbes()
		probes.Wait()
	}()
	start := &starter{log: log, maxWait: cfg.StartupMaxWait, status: starting, health: tracker}
	if !cfg.NoProvision {
		starting.set("streams", "not provisioned yet")
	}
	var nc *nats.Conn
	endpointChecks := make([]startupCheck, 0, len(cfg.Endpoints))
	for _, id := range clients.IDs() {
		c, _ := clients.Get(id)
		endpointChecks = append(endpointChecks, endpointCheck(c))
	}
	err = start.run(ctx, []startupCheck{natsCheck(cfg.NATSURL, natsOpts, &nc), redisCheck(cfg.RedisURL, rdb), netboxCheck(nb)},
		endpointChecks, probeCtx, &probes)
	if nc != nil {
		defer func() { // no callback may log after Serve has returned
			ClearNATSHandlers(nc)
			nc.Close()
		}()
	}
	if err != nil {
		if ctx.Err() != nil {
			log.Info("proxbus stopped while starting")
			return nil
		}
		return err
	}
	if err := consumer.CheckServerVersion(nc.ConnectedServerVersion()); err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	subjects := cfg.Consumer.Subjects
	ccfg := cfg.Consumer
	ccfg.Instance, ccfg.Logger = cfg.Instance, serveLoggerFunc(cfg.LogHandler, learnt, secrets)
	ccfg.Middleware, ccfg.DeadLettered = []consumer.Middleware{tr.Middleware, m.Middleware}, m.DeadLettered
	ccfg = ccfg.WithDefaults()
	if !cfg.NoProvision {
		// Provisioning never lowers the durable's MaxAckPending or a stream's replica count
		// (replicas sized for N×concurrency, an R3 stream): `proxbus streams apply` does that.
		var changes []consumer.Change
		err := start.provision(ctx, func(ctx context.Context) error {
			var err error
			changes, err = consumer.ProvisionWith(ctx, js, ccfg, consumer.ProvisionOptions{})
			return err
		})
		if err == nil && opener != nil { // producers find the current key there
			if perr := seal.PublishPublicKeys(ctx, js, subjects, opener.Public()); perr != nil {
				log.Warn("the sealing public key could not be published; producers need it from a file (proxbus keys create)", "err", perr)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				log.Info("proxbus stopped while starting")
				return nil
			}
			return err
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
		Settings:  pipelineSettings(cfg.Pipeline, ccfg.Concurrency),
		Registry:  registry,
		Store:     st,
		Endpoints: endpointCache,
		Journal:   nb,
		Proxmox:   pveClients,
		Publisher: pub,
		History:   NewHistory(js, subjects),
		Schedules: consumer.Schedules{JS: js, Subjects: subjects},
		Instance:  cfg.Instance,
		Logger:    log.With("component", "pipeline"),
		// A nil *seal.Opener must stay a nil interface: the pipeline tells "no key" by it.
		Opener:               secretOpener(opener),
		RequireSealedSecrets: cfg.Trust.RequireSealedSecrets,
	})
	if err != nil {
		return err
	}
	ccfg.Middleware = append(ccfg.Middleware, admission(gate, st, pub, log.With("component", "producers")))
	cons, err := consumer.New(js, ccfg, pipeline, pub)
	if err != nil {
		return err
	}
	consuming.Store(cons)

	mux := http.NewServeMux()
	mux.Handle("GET "+PathMetrics, m.Handler())
	mux.Handle("GET "+PathHealthz, HealthHandler())
	checks := []ReadyCheck{
		{Name: "nats", Check: func(context.Context) error {
			if !nc.IsConnected() {
				return ErrNotReady
			}
			return nil
		}},
		{Name: "redis", Check: st.Ping},
		{Name: "consumer", Check: func(context.Context) error {
			if !cons.Ready() {
				return ErrNotReady
			}
			return nil
		}},
	}
	tracked := trackedChecks(tracker, cfg.Endpoints)
	if set != nil {
		tracked = append(tracked, ReadyCheck{Name: "endpoints", Advisory: true, Check: func(context.Context) error { return endpointsReady(set, tracker) }})
	}
	tracked[0].Check = (&netboxProbe{nb: nb, tracker: tracker, now: time.Now}).Check // NetBox itself, not only what commands saw
	mux.Handle("GET "+PathReadyz, ReadyHandler(append(checks, tracked...)...))
	deps := RouteDeps{NATS: nc, JetStream: js, Subjects: subjects, Instance: cfg.Instance, Logger: log.With("component", "http")}
	if cfg.Ingress.enabled() {
		var changed func(int64)
		if set != nil {
			changed = func(int64) { set.Kick() }
		}
		prepare, err := cfg.Trust.frontPrepare(opener, time.Now)
		if err != nil {
			return err
		}
		if err := cfg.Ingress.mount(mux, rules, deps, cfg.Store.DedupeTTL, changed, prepare); err != nil {
			return err
		}
	}
	publishPVE := func(ctx context.Context, m *nats.Msg) error { _, err := js.PublishMsg(ctx, m); return err }
	if cfg.PVEWebhookSecret != "" {
		mux.Handle("POST "+pvewatch.WebhookPath, &pvewatch.Webhook{Secret: cfg.PVEWebhookSecret, Endpoints: clients.IDs(),
			Emitter: events.NewEmitter(subjects, cfg.Instance), Publish: publishPVE, Logger: log.With("component", "pve-webhook")})
	}
	if cfg.Routes != nil {
		cfg.Routes(mux, deps)
	}
	var ui *console.Console
	if hs != nil {
		ui, err = console.New(console.Config{
			JetStream: js, Subjects: subjects, Store: st, Access: cfg.Console.Access, Verbs: registry.Names(),
			History: cfg.Console.History, Actor: cfg.Console.Actor, Secrets: append(secrets, cfg.Console.secrets()...), Logger: log.With("component", "console"),
		})
		if err != nil {
			return fmt.Errorf("%w: %w", config.ErrInvalid, err)
		}
		mux.Handle(console.Path, ui.Handler())
		mux.Handle(console.Path+"/", ui.Handler())
	}
	handler.set(mux)

	endpointsFrom := any(len(cfg.Endpoints))
	if set != nil {
		endpointsFrom = "from NetBox"
	}
	log.Info("proxbus serving", "nats", nc.ConnectedUrlRedacted(), "verbs", registry.Names(),
		"concurrency", ccfg.Concurrency, "endpoints", endpointsFrom, "tracing", tr.On())
	repairCtx, stopRepair := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
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
	wg.Go(func() { pipeline.WatchGuards(repairCtx) })
	if !cfg.NoTaskWatch { // until the drain is over: commands still in flight wait on it
		pcfg := pvewatchConfig(cfg, clients, subjects, publishPVE, log)
		pcfg.Subscribe = func(subject string, fn func(*nats.Msg)) (func(), error) {
			sub, err := nc.Subscribe(subject, fn)
			if err != nil {
				return nil, err
			}
			return func() { _ = sub.Unsubscribe() }, nil
		}
		pcfg.Notify = nc.Publish
		prefix := cmp.Or(cfg.Store.Prefix, store.DefaultPrefix)
		pcfg.Replicas = func(ctx context.Context) ([]string, error) { return liveReplicas(ctx, rdb, prefix) }
		pcfg.Instance = cfg.Instance
		wg.Go(func() { pvewatch.Run(repairCtx, pcfg) })
	}
	wg.Go(func() { // the clients that work on the store check that a replica serves its prefix
		presence.Run(repairCtx, rdb, cmp.Or(cfg.Store.Prefix, store.DefaultPrefix), cfg.Instance, func(err error) {
			log.Warn("could not announce this replica in Redis", "err", err)
		})
	})
	uiCtx, stopUI := context.WithCancel(context.WithoutCancel(ctx))
	if ui != nil {
		wg.Go(func() { ui.Run(uiCtx) })
	}
	runErr := cons.Run(ctx)
	stopRepair()
	stopUI()   // its live streams end, so the HTTP server's shutdown does not wait for them
	stopHTTP() // after the drain: /readyz answered 503 while it lasted
	wg.Wait()
	log.Info("proxbus stopped")
	return runErr
}

// pvewatchConfig is the configuration of the watch of every endpoint.
func pvewatchConfig(cfg Config, clients *proxmox.Clients, subjects events.Subjects, publish pvewatch.Publish, log *slog.Logger) pvewatch.Config {
	out := pvewatch.Config{Emitter: events.NewEmitter(subjects, cfg.Instance), Publish: publish, Watch: cfg.TaskWatch,
		Logger: log.With("component", "pve-watch")}
	for _, id := range clients.IDs() {
		c, _ := clients.Get(id)
		out.Clients = append(out.Clients, c)
	}
	return out
}

// liveReplicas are the instances of the replicas that announced prefix within presence.Live.
func liveReplicas(ctx context.Context, rdb redis.Cmdable, prefix string) ([]string, error) {
	rs, err := presence.Replicas(ctx, rdb, prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rs {
		if time.Since(r.LastSeen) <= presence.Live {
			out = append(out, r.Instance)
		}
	}
	return out, nil
}

// pipelineSettings are s with what serve derives from the consumer's concurrency: unless set, a
// quarter of the workers (at least one) may wait in the replica for busy guests.
func pipelineSettings(s handlers.Settings, concurrency int) handlers.Settings {
	if s.GuestWaiters == 0 {
		s.GuestWaiters = max(1, concurrency/4)
	}
	return s
}

// baseSecrets are the configured secrets other than the Proxmox token secrets, for the log
// redactor.
func (c Config) baseSecrets() []string {
	secrets := []string{c.NetBoxToken}
	secrets = append(secrets, URLPasswords(c.NATSURL)...)
	secrets = append(secrets, URLPasswords(c.RedisURL)...)
	secrets = append(secrets, c.Security.RedisSentinelPassword)
	secrets = append(secrets, c.Console.secrets()...)
	secrets = append(secrets, c.PVEWebhookSecret)
	return append(secrets, c.Ingress.secrets()...)
}

// secrets are the console's tokens, for the redactors.
func (c Console) secrets() []string { return []string{c.Access.ReadToken, c.Access.OperatorToken} }

// trackedChecks are the /readyz checks the health tracker answers: NetBox (its token refused
// makes the replica unready: every write command needs it) and each endpoint (advisory: it
// stops only its own commands).
func trackedChecks(t *health.Tracker, eps []proxmox.EndpointConfig) []ReadyCheck {
	checks := []ReadyCheck{{Name: "netbox", Check: func(context.Context) error { return t.Check("netbox") }}}
	for _, ep := range eps {
		name := endpointCheckName(ep.ID)
		checks = append(checks, ReadyCheck{Name: name, Advisory: true, Check: func(context.Context) error { return t.Check(name) }})
	}
	return checks
}

// startMux is the HTTP handler while the replica starts: /metrics, /healthz, and /readyz
// answering 503 naming what it waits for; every other route answers 503 "starting".
func startMux(m *metrics.Metrics, starting *startStatus, t *health.Tracker, eps []proxmox.EndpointConfig) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+PathMetrics, m.Handler())
	mux.Handle("GET "+PathHealthz, HealthHandler())
	checks := []ReadyCheck{}
	for _, name := range []string{"nats", "redis", "streams"} {
		checks = append(checks, ReadyCheck{Name: name, Check: func(context.Context) error { return starting.check(name) }})
	}
	checks = append(checks, ReadyCheck{Name: "consumer", Check: func(context.Context) error {
		return &waitError{reason: "not started", err: ErrNotReady}
	}})
	checks = append(checks, ReadyCheck{Name: "netbox", Check: func(ctx context.Context) error {
		if err := starting.check("netbox"); err != nil {
			return err
		}
		return t.Check("netbox")
	}})
	checks = append(checks, trackedChecks(t, eps)[1:]...)
	mux.Handle("GET "+PathReadyz, ReadyHandler(checks...))
	mux.Handle("/", startingHandler())
	return mux
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
	return serveLoggerFunc(h, nil, secrets)
}

// serveLoggerFunc is serveLogger also redacting the secrets learnt returns at each record
// (nil: none), those of endpoints read from NetBox.
func serveLoggerFunc(h slog.Handler, learnt func() []string, secrets []string) *slog.Logger {
	return slog.New(newUniqueKeys(redact.NewHandlerFunc(h, learnt, secrets...)))
}
