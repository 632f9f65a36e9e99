package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

// serveCmd is `proxbus serve`; its defaults are the documented defaults of the configuration
// each flag sets.
type serveCmd struct {
	natsFlags
	RedisURL        string `name:"redis-url" default:"${redis_url}" help:"Redis URL (rediss:// for TLS, user:password@ for ACL)."`
	NetBoxURL       string `name:"netbox-url" help:"NetBox base URL (http:// or https://)."`
	NetBoxToken     string `name:"netbox-token" help:"The NetBox API token (v1 40-hex or v2 nbt_…)."`
	NetBoxTokenFile string `name:"netbox-token-file" help:"File holding the NetBox API token, trailing newline trimmed (instead of --netbox-token)."`
	EndpointsFile   string `name:"endpoints-file" help:"YAML file of Proxmox endpoints."`
	Instance        string `name:"instance" help:"Name of this replica (default host-pid)."`
	endpointFlags
	logFlags
	RedisKeyPrefix            string        `name:"redis-key-prefix" default:"${redis_key_prefix}" help:"Prefix of every Redis key."`
	RedisMinReplicas          int           `name:"redis-min-replicas" default:"-1" help:"Redis replicas that must acknowledge each change of the store (WAIT) before a command acts on it; a command waits while they do not (-1: 1 with redis+sentinel:// or redis+cluster://, else 0)."`
	RedisReplicaTimeout       time.Duration `name:"redis-replica-timeout" default:"${redis_replica_timeout}" help:"How long a change of the store waits for --redis-min-replicas acknowledgements."`
	HTTPAddr                  string        `name:"http-addr" help:"Listen address of /metrics, /healthz, /readyz and the web console /ui (e.g. :9090; empty: off)."`
	HTTPTLSCert               string        `name:"http-tls-cert" help:"PEM certificate chain: serve TLS on --http-addr (needs --http-tls-key)."`
	HTTPTLSKey                string        `name:"http-tls-key" help:"PEM private key of --http-tls-cert."`
	WebhookSecret             string        `name:"webhook-secret" help:"The NetBox webhook secret: enables POST /webhooks/netbox (X-Hook-Signature; needs --http-addr)."`
	WebhookSecretFile         string        `name:"webhook-secret-file" help:"File holding the NetBox webhook secret (instead of --webhook-secret)."`
	WebhookRules              string        `name:"webhook-rules" help:"YAML rules mapping NetBox webhook bodies to commands (docs/ingress.md)."`
	WebhookVerbs              []string      `name:"webhook-verbs" help:"Verbs the webhook may publish, exact or prefix.* (vm.*), comma-separated; empty: all but command.*."`
	ProxboxAPIKey             string        `name:"proxbox-api-key" help:"The X-Proxbox-API-Key: enables the proxbox-api compatible POST /proxmox/storage/pbs."`
	ProxboxAPIKeyFile         string        `name:"proxbox-api-key-file" help:"File holding the X-Proxbox-API-Key (instead of --proxbox-api-key)."`
	ResultTimeout             time.Duration `name:"http-result-timeout" default:"${result_timeout}" help:"How long POST /proxmox/storage/pbs waits for the result (then 504)."`
	Concurrency               int           `name:"concurrency" default:"${concurrency}" help:"Commands processed at once by this replica."`
	MaxAckPending             int           `name:"max-ack-pending" default:"0" help:"Commands in flight across all replicas, the durable's MaxAckPending (0: --concurrency; with N replicas use N×concurrency; serve keeps a higher value on the server)."`
	MaxAttempts               int           `name:"max-attempts" default:"${max_attempts}" help:"Failed attempts before a command that wrote nothing is answered 503 and dead-lettered (waiting spends none)."`
	CommandMaxAge             time.Duration `name:"command-max-age" default:"${command_max_age}" help:"A command older than this (from its time, else its arrival) when it would first start is answered 410 command_expired and does nothing."`
	StreamReplicas            int           `name:"stream-replicas" default:"${stream_replicas}" help:"Replica count of the provisioned streams (3 on a clustered broker; serve never lowers it, streams apply does when given)."`
	AckWait                   time.Duration `name:"ack-wait" default:"${ack_wait}" help:"JetStream AckWait (kept alive by InProgress every ack-wait/3)."`
	DedupeTTL                 time.Duration `name:"dedupe-ttl" default:"${dedupe_ttl}" help:"How long finished commands are remembered."`
	IdempotencyWindow         time.Duration `name:"idempotency-window" default:"${idempotency_window}" help:"Idempotency-Key window."`
	LeaseTTL                  time.Duration `name:"lease-ttl" default:"${lease_ttl}" help:"A running command's lease; a dead replica's work is resumed after it."`
	NoProvision               bool          `name:"no-provision" help:"Do not create or update streams and the consumer."`
	RedisTLSCA                string        `name:"redis-tls-ca" help:"PEM file of the CAs trusted for Redis (needs a rediss:// URL)."`
	RedisTLSInsecure          bool          `name:"redis-tls-insecure" help:"Do not verify the Redis server's certificate (rediss:// only; unsafe)."`
	RedisSentinelUsername     string        `name:"redis-sentinel-username" help:"ACL user of the Redis Sentinels (redis+sentinel:// only; the URL's user is the data nodes')."`
	RedisSentinelPassword     string        `name:"redis-sentinel-password" help:"Password of the Redis Sentinels (redis+sentinel:// only)."`
	RedisSentinelPasswordFile string        `name:"redis-sentinel-password-file" help:"File holding the password of the Redis Sentinels (instead of --redis-sentinel-password)."`
	NetBoxTLSCA               string        `name:"netbox-tls-ca" help:"PEM file of the CAs trusted for NetBox (only these)."`
	NetBoxTLSInsecure         bool          `name:"netbox-tls-insecure" help:"Do not verify NetBox's certificate (unsafe)."`
	PVEWebhookSecret          string        `name:"pve-webhook-secret" help:"Secret of PVE's webhook notification target: enables POST /webhooks/proxmox?endpoint_id=N (X-Proxbus-Secret header; needs --http-addr; docs/operations.md)."`
	NoTaskWatch               bool          `name:"no-task-watch" help:"Do not watch the endpoints: no Proxmox events (task, guest) are published and each command polls its own task's status."`
	TaskWatchInterval         time.Duration `name:"task-watch-interval" default:"150ms" help:"How often the replicas together look at an endpoint's tasks while one runs or is waited for (each replica N times less often with N replicas); a task's end is seen about half of it late on average."`
	consoleFlags
	trustFlags
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
	minWatchInterval    = 50 * time.Millisecond
	maxWatchInterval    = time.Minute
)

// checks reports every bad value of the flags that needs no file but the secrets' (a number
// or duration out of range, an unusable secret file, an inline secret and its file both set,
// an unknown log format or level), each naming its flag and, when it came from there, its
// variable.
func (c *serveCmd) checks(e *cliEnv) (secrets [4]string, errs []error) {
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	secrets[0], err = e.secretValue("netbox-token", c.NetBoxToken, c.NetBoxTokenFile)
	add(err)
	secrets[1], err = e.secretValue("webhook-secret", c.WebhookSecret, c.WebhookSecretFile)
	add(err)
	secrets[2], err = e.secretValue("proxbox-api-key", c.ProxboxAPIKey, c.ProxboxAPIKeyFile)
	add(err)
	secrets[3], err = e.secretValue("redis-sentinel-password", c.RedisSentinelPassword, c.RedisSentinelPasswordFile)
	add(err)
	errs = append(errs, c.logFlags.check(e)...)
	add(e.intIn("redis-min-replicas", c.RedisMinReplicas, -1, maxRedisMinReplicas))
	add(e.durationIn("redis-replica-timeout", c.RedisReplicaTimeout, minReplicaTimeout, maxReplicaTimeout))
	add(e.durationIn("http-result-timeout", c.ResultTimeout, minResultTimeout, maxResultTimeout))
	add(e.intIn("concurrency", c.Concurrency, 1, maxConcurrency))
	add(e.intIn("max-ack-pending", c.MaxAckPending, 0, maxMaxAckPending))
	add(e.intIn("max-attempts", c.MaxAttempts, 1, maxMaxAttempts))
	add(e.durationIn("command-max-age", c.CommandMaxAge, minCommandMaxAge, 0))
	add(e.intIn("stream-replicas", c.StreamReplicas, 1, maxStreamReplicas))
	add(e.durationIn("ack-wait", c.AckWait, minAckWait, maxAckWait))
	add(e.durationIn("dedupe-ttl", c.DedupeTTL, minDedupeTTL, 0))
	add(e.durationIn("idempotency-window", c.IdempotencyWindow, minWindow, 0))
	add(e.durationIn("lease-ttl", c.LeaseTTL, minLeaseTTL, maxLeaseTTL))
	add(e.intIn("ui-history", c.UIHistory, 100, maxConsoleHistory))
	add(e.durationIn("endpoints-reload-interval", c.EndpointsReloadInterval, minEndpointsReload, maxEndpointsReload))
	add(e.durationIn("task-watch-interval", c.TaskWatchInterval, minWatchInterval, maxWatchInterval))
	return secrets, errs
}

// config is the configuration the flags hold; every problem [serveCmd.checks] finds is
// reported at once in one error wrapping errUsage.
func (c *serveCmd) config(e *cliEnv) (app.Config, error) {
	secrets, errs := c.checks(e)
	ui, errUI := c.consoleFlags.config(e, false)
	if err := e.problems(append(errs, errUI)...); err != nil {
		return app.Config{}, err
	}
	return c.build(e, secrets, ui)
}

// build is the configuration of flags already checked.
func (c *serveCmd) build(e *cliEnv, secrets [4]string, ui app.Console) (app.Config, error) {
	h, err := c.logFlags.handler(e)
	if err != nil {
		return app.Config{}, err
	}
	minReplicas := c.RedisMinReplicas
	if minReplicas < 0 {
		minReplicas = app.RedisDefaultMinReplicas(c.RedisURL)
	}
	sec := c.natsFlags.security(app.InboxService)
	sec.RedisTLSCA, sec.RedisTLSInsecure, sec.RedisSentinelUsername = c.RedisTLSCA, c.RedisTLSInsecure, c.RedisSentinelUsername
	sec.RedisSentinelPassword = secrets[3]
	sec.NetBoxTLSCA, sec.NetBoxTLSInsecure = c.NetBoxTLSCA, c.NetBoxTLSInsecure
	return app.Config{
		NATSURL: c.NATSURL, RedisURL: c.RedisURL, NetBoxURL: c.NetBoxURL, NetBoxToken: secrets[0],
		EndpointsFile: c.EndpointsFile, Instance: c.Instance,
		EndpointsFromNetBox: c.EndpointsFromNetBox, EndpointSecretsFile: c.EndpointSecretsFile, EndpointCAFile: c.EndpointCAFile,
		EndpointsReloadInterval: c.reloadInterval(),
		Consumer: consumer.Config{
			Subjects: events.NewSubjects(c.SubjectPrefix), Concurrency: c.Concurrency, MaxAckPending: c.MaxAckPending,
			Replicas: c.StreamReplicas, AckWait: c.AckWait,
		},
		Store: store.Options{Prefix: c.RedisKeyPrefix, DedupeTTL: c.DedupeTTL, Window: c.IdempotencyWindow, LeaseTTL: c.LeaseTTL,
			MinReplicas: minReplicas, ReplicaTimeout: c.RedisReplicaTimeout},
		Pipeline:    handlers.Settings{MaxAttempts: c.MaxAttempts, CommandMaxAge: c.CommandMaxAge},
		NoProvision: c.NoProvision, LogHandler: h, Security: sec, HTTPAddr: c.HTTPAddr,
		PVEWebhookSecret: c.PVEWebhookSecret, NoTaskWatch: c.NoTaskWatch, TaskWatch: proxmox.WatchConfig{Busy: c.TaskWatchInterval},
		Ingress: app.Ingress{
			WebhookSecret: secrets[1], WebhookRulesFile: c.WebhookRules, WebhookVerbs: verbList(c.WebhookVerbs),
			ProxboxAPIKey: secrets[2], ResultTimeout: c.ResultTimeout,
		},
		Console: ui,
		Trust:   c.trust(),
	}, nil
}

// preflight reports what serve would otherwise only find at start, one at a time: a missing
// or unusable NetBox URL (with the hint of a missing scheme), a missing or unusable endpoints
// file, an unusable Redis URL. It returns the endpoints it read.
func (c *serveCmd) preflight(e *cliEnv) ([]proxmox.EndpointConfig, []error) {
	var errs []error
	switch u, err := url.Parse(strings.TrimSpace(c.NetBoxURL)); {
	case c.NetBoxURL == "":
		errs = append(errs, fmt.Errorf("%s is required: the NetBox base URL, e.g. https://netbox.example.net", e.named("netbox-url")))
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		hint := "it must be an http:// or https:// URL with a host, e.g. https://netbox.example.net"
		if !strings.Contains(c.NetBoxURL, "://") {
			hint = "it has no scheme: write http://" + c.NetBoxURL + " (or https://)"
		}
		errs = append(errs, fmt.Errorf("%s %q: %s", e.named("netbox-url"), app.RedactURL(c.NetBoxURL), hint))
	}
	var eps []proxmox.EndpointConfig
	switch {
	case c.EndpointsFromNetBox:
		errs = append(errs, c.endpointFlags.preflight(e, c.EndpointsFile)...)
	case c.EndpointsFile == "":
		errs = append(errs, fmt.Errorf("%s is required: the YAML file of Proxmox endpoints, or %s to read them from NetBox (docs/operations.md)",
			e.named("endpoints-file"), e.named("endpoints-from-netbox")))
	default:
		errs = append(errs, c.endpointFlags.preflight(e, c.EndpointsFile)...)
		var err error
		if eps, err = proxmox.LoadEndpoints(c.EndpointsFile); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", e.named("endpoints-file"), c.EndpointsFile, err))
		}
	}
	if rdb, err := app.RedisClient(c.RedisURL, app.Security{}); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", e.named("redis-url"), err))
	} else {
		_ = rdb.Close()
	}
	return eps, errs
}

// Run runs the processor until interrupted. Every configuration problem, of the flags and of
// the files they name, is reported at once (exit 2), each naming its flag and variable.
func (c *serveCmd) Run(e *cliEnv) error {
	secrets, errs := c.checks(e)
	ui, errUI := c.consoleFlags.config(e, false)
	eps, pre := c.preflight(e)
	warnUnknownEnv(e, secretEnvs(eps)...)
	if err := e.problems(append(append(errs, errUI), pre...)...); err != nil {
		return err
	}
	cfg, err := c.build(e, secrets, ui)
	if err != nil {
		return err
	}
	cfg.Endpoints = eps
	if cfg.HTTPListener, err = c.httpListener(cfg.LogHandler); err != nil {
		return err
	}
	return app.Serve(e.ctx, cfg)
}

// cmdServe runs `proxbus serve args`, returning the error Run returned.
func cmdServe(ctx context.Context, args []string, stderr io.Writer) error {
	return runSub(ctx, []string{"serve"}, args, nil, io.Discard, stderr)
}

// httpListener binds --http-addr with TLS when --http-tls-cert and --http-tls-key are set
// (both or neither; they need --http-addr). It returns nil when they are not set: Serve then
// binds --http-addr itself, in plain HTTP.
func (c *serveCmd) httpListener(h slog.Handler) (net.Listener, error) {
	tlsCfg, err := app.HTTPTLS(c.HTTPTLSCert, c.HTTPTLSKey, slog.New(h))
	if err != nil || tlsCfg == nil {
		return nil, err
	}
	if c.HTTPAddr == "" {
		return nil, fmt.Errorf("%w: --http-tls-cert and --http-tls-key need --http-addr (PROXBUS_HTTP_ADDR), e.g. :9090", config.ErrInvalid)
	}
	return app.ListenHTTP(c.HTTPAddr, tlsCfg)
}

// secretEnvs are the variables the endpoints read their token secrets from.
func secretEnvs(eps []proxmox.EndpointConfig) []string {
	var names []string
	for _, ep := range eps {
		if ep.TokenSecretEnv != "" {
			names = append(names, ep.TokenSecretEnv)
		}
	}
	return names
}

// verbList is the verbs of --webhook-verbs, trimmed, blanks dropped.
func verbList(verbs []string) []string {
	var out []string
	for _, v := range verbs {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
