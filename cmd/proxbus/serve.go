package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/app"
)

// serveFlags are the flags of `serve`, shared by `dev` for the processor's tuning.
type serveFlags struct {
	natsURL, redisURL, netboxURL, netboxToken, endpointsFile, prefix, instance *string
	logFormat, logLevel, redisKeyPrefix, httpAddr                              *string
	webhookSecret, webhookRules, proxboxAPIKey                                 *string
	httpTLSCert, httpTLSKey                                                    *string
	resultTimeout                                                              *time.Duration
	concurrency, maxAckPending, maxAttempts, streamReplicas                    *int
	ackWait, dedupeTTL, idemWindow, leaseTTL                                   *time.Duration
	noProvision                                                                *bool
	security                                                                   *securityFlags
}

func addServeFlags(fs *flagSet) *serveFlags {
	return &serveFlags{
		natsURL:        fs.str("nats-url", "nats://127.0.0.1:4222", "NATS server URL"),
		redisURL:       fs.str("redis-url", "redis://127.0.0.1:6379/0", "Redis URL (rediss:// for TLS, user:password@ for ACL)"),
		netboxURL:      fs.str("netbox-url", "", "NetBox base URL"),
		netboxToken:    fs.str("netbox-token", "", "NetBox API token (v1 40-hex or v2 nbt_…)"),
		endpointsFile:  fs.str("endpoints-file", "", "YAML file of Proxmox endpoints"),
		prefix:         fs.str("subject-prefix", "proxbus", "prefix of every subject and stream name"),
		instance:       fs.str("instance", "", "name of this replica (default host-pid)"),
		logFormat:      fs.str("log-format", "auto", "auto (tint on a terminal, else JSON), json or text"),
		logLevel:       fs.str("log-level", "info", "debug, info, warn or error"),
		redisKeyPrefix: fs.str("redis-key-prefix", "proxbus", "prefix of every Redis key"),
		httpAddr:       fs.str("http-addr", "", "listen address of /metrics, /healthz and /readyz (e.g. :9090; empty: off)"),
		httpTLSCert:    fs.str("http-tls-cert", "", "PEM certificate chain: serve TLS on --http-addr (needs --http-tls-key)"),
		httpTLSKey:     fs.str("http-tls-key", "", "PEM private key of --http-tls-cert"),
		webhookSecret:  fs.str("webhook-secret", "", "NetBox webhook secret: enables POST /webhooks/netbox (X-Hook-Signature; needs --http-addr)"),
		webhookRules:   fs.str("webhook-rules", "", "YAML rules mapping NetBox webhook bodies to commands (docs/ingress.md)"),
		proxboxAPIKey:  fs.str("proxbox-api-key", "", "X-Proxbox-API-Key: enables the proxbox-api compatible POST /proxmox/storage/pbs"),
		resultTimeout:  fs.duration("http-result-timeout", 60*time.Second, "how long POST /proxmox/storage/pbs waits for the result (then 504)"),
		concurrency:    fs.integer("concurrency", 8, "commands processed at once (MaxAckPending)"),
		maxAckPending:  fs.integer("max-ack-pending", 0, "commands in flight across all replicas (default --concurrency; with N replicas use N×concurrency)"),
		maxAttempts:    fs.integer("max-attempts", 5, "failed attempts before a command that wrote nothing is answered 503 and dead-lettered (waiting spends none)"),
		streamReplicas: fs.integer("stream-replicas", 1, "replica count of the provisioned streams (3 on a clustered broker)"),
		ackWait:        fs.duration("ack-wait", 30*time.Second, "JetStream AckWait (kept alive by InProgress)"),
		dedupeTTL:      fs.duration("dedupe-ttl", 24*time.Hour, "how long finished commands are remembered"),
		idemWindow:     fs.duration("idempotency-window", 60*time.Second, "Idempotency-Key window"),
		leaseTTL:       fs.duration("lease-ttl", 30*time.Second, "a running command's lease; a dead replica's work is resumed after it"),
		noProvision:    fs.boolean("no-provision", false, "do not create or update streams and the consumer"),
		security:       addSecurityFlags(fs),
	}
}

func (f *serveFlags) config(stderr io.Writer) (app.Config, error) {
	h, err := logHandler(stderr, *f.logFormat, *f.logLevel)
	if err != nil {
		return app.Config{}, err
	}
	return app.Config{
		NATSURL: *f.natsURL, RedisURL: *f.redisURL, NetBoxURL: *f.netboxURL, NetBoxToken: *f.netboxToken,
		EndpointsFile: *f.endpointsFile, SubjectPrefix: *f.prefix, Instance: *f.instance, RedisKeyPrefix: *f.redisKeyPrefix,
		Concurrency: *f.concurrency, MaxAckPending: *f.maxAckPending, MaxAttempts: *f.maxAttempts, StreamReplicas: *f.streamReplicas, AckWait: *f.ackWait, DedupeTTL: *f.dedupeTTL,
		IdempotencyWindow: *f.idemWindow, LeaseTTL: *f.leaseTTL, NoProvision: *f.noProvision, LogHandler: h,
		Security: f.security.security(), HTTPAddr: *f.httpAddr,
		Ingress: app.Ingress{
			WebhookSecret: *f.webhookSecret, WebhookRulesFile: *f.webhookRules,
			ProxboxAPIKey: *f.proxboxAPIKey, ResultTimeout: *f.resultTimeout,
		},
	}, nil
}

func cmdServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("serve", stderr)
	sf := addServeFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: serve takes no arguments (got %s)", errUsage, strings.Join(fs.Args(), " "))
	}
	cfg, err := sf.config(stderr)
	if err != nil {
		return err
	}
	if cfg.HTTPListener, err = sf.httpListener(cfg.LogHandler); err != nil {
		return err
	}
	return app.Serve(ctx, cfg)
}

// httpListener binds --http-addr with TLS when --http-tls-cert and --http-tls-key are set
// (both or neither; they need --http-addr). It returns nil when they are not set: Serve then
// binds --http-addr itself, in plain HTTP.
func (f *serveFlags) httpListener(h slog.Handler) (net.Listener, error) {
	tlsCfg, err := app.HTTPTLS(*f.httpTLSCert, *f.httpTLSKey, slog.New(h))
	if err != nil || tlsCfg == nil {
		return nil, err
	}
	if *f.httpAddr == "" {
		return nil, fmt.Errorf("%w: --http-tls-cert and --http-tls-key need --http-addr (PROXBUS_HTTP_ADDR), e.g. :9090", app.ErrConfig)
	}
	return app.ListenHTTP(*f.httpAddr, tlsCfg)
}
