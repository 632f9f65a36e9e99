package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/ingress"
	"github.com/proxbus/proxbus/store"
)

// serveFlags are the flags of `serve`; their defaults are the documented defaults of the
// configuration each one sets.
type serveFlags struct {
	fs                                                            *flagSet
	natsURL, redisURL, netboxURL, endpointsFile, prefix, instance *string
	logFormat, logLevel, redisKeyPrefix, httpAddr                 *string
	webhookRules, webhookVerbs                                    *string
	netboxToken, webhookSecret, proxboxAPIKey                     *secretFlag
	httpTLSCert, httpTLSKey                                       *string
	resultTimeout                                                 *time.Duration
	concurrency, maxAckPending, maxAttempts, streamReplicas       *int
	redisMinReplicas                                              *int
	redisReplicaTimeout                                           *time.Duration
	ackWait, dedupeTTL, idemWindow, leaseTTL, commandMaxAge       *time.Duration
	noProvision                                                   *bool
	security                                                      *securityFlags
	console                                                       *consoleFlags
}

// Ranges of serve's numeric flags, checked by [serveFlags.config]. AckWait's minimum keeps
// the consumer's heartbeat (AckWait/3) well above a network round trip.
const (
	maxConcurrency      = 1024
	maxMaxAckPending    = 1 << 20
	maxMaxAttempts      = 100
	minCommandMaxAge    = 10 * time.Second
	maxStreamReplicas   = 5 // the largest JetStream cluster replica count
	minAckWait          = time.Second
	maxAckWait          = time.Hour
	minDedupeTTL        = time.Minute
	minWindow           = time.Second
	minLeaseTTL         = time.Second
	maxLeaseTTL         = time.Hour
	minResultTimeout    = time.Second
	maxRedisMinReplicas = 16
	minReplicaTimeout   = 10 * time.Millisecond
	maxReplicaTimeout   = 2 * time.Second // below go-redis's read timeout (3s): WAIT blocks the connection
	maxResultTimeout    = time.Hour
)

func addServeFlags(fs *flagSet) *serveFlags {
	logFormat, logLevel := addLogFlags(fs)
	return &serveFlags{
		fs:             fs,
		natsURL:        addNATSURLFlag(fs),
		redisURL:       fs.str("redis-url", app.DefaultRedisURL, "Redis URL (rediss:// for TLS, user:password@ for ACL)"),
		netboxURL:      fs.str("netbox-url", "", "NetBox base URL"),
		netboxToken:    fs.secret("netbox-token", "the NetBox API token (v1 40-hex or v2 nbt_…)"),
		endpointsFile:  fs.str("endpoints-file", "", "YAML file of Proxmox endpoints"),
		prefix:         addSubjectPrefixFlag(fs, "prefix of every subject and stream name"),
		instance:       fs.str("instance", "", "name of this replica (default host-pid)"),
		logFormat:      logFormat,
		logLevel:       logLevel,
		redisKeyPrefix: addRedisKeyPrefixFlag(fs),
		redisMinReplicas: fs.intIn("redis-min-replicas", -1, -1, maxRedisMinReplicas,
			"Redis replicas that must acknowledge each change of the store (WAIT) before a command acts on it; a command waits while they do not (-1: 1 with redis+sentinel:// or redis+cluster://, else 0)"),
		redisReplicaTimeout: fs.durationIn("redis-replica-timeout", store.DefaultReplicaTimeout, minReplicaTimeout, maxReplicaTimeout,
			"how long a change of the store waits for --redis-min-replicas acknowledgements"),
		httpAddr:       fs.str("http-addr", "", "listen address of /metrics, /healthz, /readyz and the web console /ui (e.g. :9090; empty: off)"),
		httpTLSCert:    fs.str("http-tls-cert", "", "PEM certificate chain: serve TLS on --http-addr (needs --http-tls-key)"),
		httpTLSKey:     fs.str("http-tls-key", "", "PEM private key of --http-tls-cert"),
		webhookSecret:  fs.secret("webhook-secret", "the NetBox webhook secret: enables POST /webhooks/netbox (X-Hook-Signature; needs --http-addr)"),
		webhookRules:   fs.str("webhook-rules", "", "YAML rules mapping NetBox webhook bodies to commands (docs/ingress.md)"),
		webhookVerbs:   fs.str("webhook-verbs", "", "comma-separated verbs the webhook may publish, exact or prefix.* (vm.*); empty: all but command.*"),
		proxboxAPIKey:  fs.secret("proxbox-api-key", "the X-Proxbox-API-Key: enables the proxbox-api compatible POST /proxmox/storage/pbs"),
		resultTimeout:  fs.durationIn("http-result-timeout", ingress.DefaultResultTimeout, minResultTimeout, maxResultTimeout, "how long POST /proxmox/storage/pbs waits for the result (then 504)"),
		concurrency:    fs.intIn("concurrency", consumer.DefaultConcurrency, 1, maxConcurrency, "commands processed at once by this replica"),
		maxAckPending:  addMaxAckPendingFlag(fs),
		maxAttempts:    fs.intIn("max-attempts", handlers.DefaultMaxAttempts, 1, maxMaxAttempts, "failed attempts before a command that wrote nothing is answered 503 and dead-lettered (waiting spends none)"),
		commandMaxAge:  fs.durationIn("command-max-age", handlers.DefaultCommandMaxAge, minCommandMaxAge, 0, "a command older than this (from its time, else its arrival) when it would first start is answered 410 command_expired and does nothing"),
		streamReplicas: fs.intIn("stream-replicas", consumer.DefaultReplicas, 1, maxStreamReplicas, "replica count of the provisioned streams (3 on a clustered broker; serve never lowers it, streams apply does when given)"),
		ackWait:        fs.durationIn("ack-wait", consumer.DefaultAckWait, minAckWait, maxAckWait, "JetStream AckWait (kept alive by InProgress every ack-wait/3)"),
		dedupeTTL:      fs.durationIn("dedupe-ttl", store.DefaultDedupeTTL, minDedupeTTL, 0, "how long finished commands are remembered"),
		idemWindow:     fs.durationIn("idempotency-window", store.DefaultWindow, minWindow, 0, "Idempotency-Key window"),
		leaseTTL:       fs.durationIn("lease-ttl", store.DefaultLeaseTTL, minLeaseTTL, maxLeaseTTL, "a running command's lease; a dead replica's work is resumed after it"),
		noProvision:    fs.boolean("no-provision", false, "do not create or update streams and the consumer"),
		security:       addSecurityFlags(fs),
		console:        addConsoleFlags(fs),
	}
}

// addNATSURLFlag adds --nats-url (every subcommand that connects to NATS).
func addNATSURLFlag(fs *flagSet) *string {
	return fs.str("nats-url", app.DefaultNATSURL, "NATS server URL")
}

// addSubjectPrefixFlag adds --subject-prefix (every subcommand that names subjects).
func addSubjectPrefixFlag(fs *flagSet, help string) *string {
	return fs.str("subject-prefix", events.NewSubjects("").Prefix, help)
}

// addRedisKeyPrefixFlag adds --redis-key-prefix (serve and journal pending).
func addRedisKeyPrefixFlag(fs *flagSet) *string {
	return fs.str("redis-key-prefix", store.DefaultPrefix, "prefix of every Redis key")
}

// addMaxAckPendingFlag adds --max-ack-pending (serve and streams apply): 0 means
// --concurrency. serve never lowers the durable's value; streams apply does only when the
// flag is given.
func addMaxAckPendingFlag(fs *flagSet) *int {
	return fs.intIn("max-ack-pending", 0, 0, maxMaxAckPending,
		"commands in flight across all replicas, the durable's MaxAckPending (0: --concurrency; with N replicas use N×concurrency; serve keeps a higher value on the server)")
}

// addLogFlags adds --log-format and --log-level, checked by [flagSet.problems].
func addLogFlags(fs *flagSet) (format, level *string) {
	format = fs.oneOf("log-format", "auto", []string{"auto", "json", "text"}, "auto (tint on a terminal, else JSON), json or text")
	level = fs.str("log-level", "info", "debug, info, warn or error")
	fs.checks = append(fs.checks, func() error {
		var l slog.Level
		if err := l.UnmarshalText([]byte(*level)); err != nil {
			return fmt.Errorf("%s %q: must be debug, info, warn or error", fs.shown("log-level"), *level)
		}
		return nil
	})
	return format, level
}

// config is the configuration the flags hold. Every bad value (a number or duration out of
// range, an unusable secret file, an inline secret and its file both set, an unknown log
// format or level) is reported at once in one error wrapping errUsage.
func (f *serveFlags) config(stderr io.Writer) (app.Config, error) {
	netboxToken, errToken := f.netboxToken.value()
	webhookSecret, errHook := f.webhookSecret.value()
	proxboxAPIKey, errKey := f.proxboxAPIKey.value()
	sentinelPassword, errSentinel := f.security.redisSentinelPassword.value()
	ui, errUI := f.console.config(false)
	minReplicas := *f.redisMinReplicas
	if minReplicas < 0 {
		minReplicas = app.RedisDefaultMinReplicas(*f.redisURL)
	}
	if err := f.fs.problems(errToken, errHook, errKey, errSentinel, errUI); err != nil {
		return app.Config{}, err
	}
	h, err := logHandler(stderr, *f.logFormat, *f.logLevel)
	if err != nil {
		return app.Config{}, err
	}
	sec := f.security.security()
	sec.RedisSentinelPassword = sentinelPassword
	return app.Config{
		NATSURL: *f.natsURL, RedisURL: *f.redisURL, NetBoxURL: *f.netboxURL, NetBoxToken: netboxToken,
		EndpointsFile: *f.endpointsFile, Instance: *f.instance,
		Consumer: consumer.Config{
			Subjects: events.NewSubjects(*f.prefix), Concurrency: *f.concurrency, MaxAckPending: *f.maxAckPending,
			Replicas: *f.streamReplicas, AckWait: *f.ackWait,
		},
		Store: store.Options{Prefix: *f.redisKeyPrefix, DedupeTTL: *f.dedupeTTL, Window: *f.idemWindow, LeaseTTL: *f.leaseTTL,
			MinReplicas: minReplicas, ReplicaTimeout: *f.redisReplicaTimeout},
		Pipeline:    handlers.Settings{MaxAttempts: *f.maxAttempts, CommandMaxAge: *f.commandMaxAge},
		NoProvision: *f.noProvision, LogHandler: h, Security: sec, HTTPAddr: *f.httpAddr,
		Ingress: app.Ingress{
			WebhookSecret: webhookSecret, WebhookRulesFile: *f.webhookRules, WebhookVerbs: verbList(*f.webhookVerbs),
			ProxboxAPIKey: proxboxAPIKey, ResultTimeout: *f.resultTimeout,
		},
		Console: ui,
	}, nil
}

// verbList splits a comma-separated list of verbs, dropping blanks.
func verbList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
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
		return nil, fmt.Errorf("%w: --http-tls-cert and --http-tls-key need --http-addr (PROXBUS_HTTP_ADDR), e.g. :9090", config.ErrInvalid)
	}
	return app.ListenHTTP(*f.httpAddr, tlsCfg)
}
