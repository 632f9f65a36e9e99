package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/redact"
)

// Security holds the transport-security settings of the connections to NATS, Redis and
// NetBox (Proxmox endpoints carry their own TLS settings in the endpoints file). The zero
// value means: no client credentials beyond those in the URLs, and TLS, where a URL asks for
// it, verified against the system roots. Nothing here ever falls back to a weaker check: a
// verification failure is a refused connection.
type Security struct {
	// NATSCreds is a NATS credentials file (user JWT and NKey seed, `nsc` format).
	NATSCreds string
	// NATSNKey is a file holding a NATS user NKey seed (SU…). Exclusive with NATSCreds.
	NATSNKey string
	// NATSTLSCA is a PEM file of the CAs trusted for the NATS server; setting it requires TLS.
	NATSTLSCA string
	// NATSTLSCert and NATSTLSKey are a PEM client certificate and its key (mutual TLS); both or
	// neither.
	NATSTLSCert string
	NATSTLSKey  string
	// NATSTLSFirst performs the TLS handshake before the server's INFO (the server must be
	// configured with handshake_first); it requires TLS.
	NATSTLSFirst bool
	// RedisTLSCA is a PEM file of the CAs trusted for Redis; it requires a rediss:// URL.
	RedisTLSCA string
	// RedisTLSInsecure disables verification of the Redis server's certificate; it requires
	// a rediss:// URL and excludes RedisTLSCA.
	RedisTLSInsecure bool
	// RedisSentinelUsername and RedisSentinelPassword authenticate to the Sentinels of a
	// redis+sentinel:// URL (the URL's own user and password are the data nodes').
	RedisSentinelUsername, RedisSentinelPassword string
	// NetBoxTLSCA is a PEM file of the CAs trusted for NetBox (only these are trusted).
	NetBoxTLSCA string
	// NetBoxTLSInsecure disables verification of NetBox's certificate; excludes NetBoxTLSCA.
	NetBoxTLSInsecure bool
	// NATSInboxPrefix is the subject prefix of the connection's reply inboxes (request
	// replies, publish acks, pulled messages); empty means nats.go's "_INBOX". Each role of
	// deploy/nats/accounts.conf may subscribe only under its own prefix (see the Inbox…
	// constants), so that no user reads another's replies.
	NATSInboxPrefix string
}

// Inbox prefixes of the roles of deploy/nats/accounts.conf: each user may subscribe only to
// "<prefix>.>", so the commands the service pulls (delivered to its inbox, secrets and all)
// and the answers a client receives are read by no other user.
const (
	InboxService    = "_INBOX_proxbus"    // proxbus serve, proxbus streams
	InboxProducer   = "_INBOX_producer"   // services that only publish commands
	InboxSubscriber = "_INBOX_subscriber" // readers of events
	InboxCLI        = "_INBOX_cli"        // proxbus send, proxbus events
	InboxApprover   = "_INBOX_approver"   // proxbus approve, proxbus reject
	InboxAdmin      = "_INBOX_admin"      // proxbus dlq, proxbus cancel
)

// Reconnection of the NATS connection built by [NATSOptions]: forever, nats.go's own
// schedule — every server of the list at once, then NATSReconnectWait plus up to
// NATSReconnectJitter before the next pass, so that replicas do not reconnect in lockstep.
const (
	NATSReconnectWait    = time.Second
	NATSReconnectJitter  = 250 * time.Millisecond
	NATSReconnectBufSize = 8 << 20 // publishes buffered while reconnecting (nats.go's default)
	NATSPingInterval     = 20 * time.Second
)

// NATSOptions returns the nats.Connect options of a proxbus connection named name: the
// credentials and TLS settings of s, reconnection forever (see [NATSReconnectWait]), and
// handlers that log disconnects, reconnects and asynchronous errors on log (nil: discard).
// Every file named in s is read and checked now, so a bad setting fails here, wrapping
// [config.ErrInvalid], rather than at the first (re)connect. Errors name files, never their
// content.
// User and password (or a token) in the NATS URL keep working and may be combined with TLS.
func NATSOptions(s Security, name string, log *slog.Logger) ([]nats.Option, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(NATSReconnectWait),
		nats.ReconnectJitter(NATSReconnectJitter, NATSReconnectJitter),
		nats.ReconnectBufSize(NATSReconnectBufSize),
		nats.PingInterval(NATSPingInterval),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				log.Warn("nats disconnected")
				return
			}
			log.Warn("nats disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("nats reconnected", "url", c.ConnectedUrlRedacted()) }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Error("nats error", "subject", sub.Subject, "err", err)
				return
			}
			log.Error("nats error", "err", err)
		}),
	}
	sec, err := natsSecurityOptions(s, log)
	if err != nil {
		return nil, err
	}
	opts = append(opts, sec...)
	if err := checkNATSOptions(opts, s.NATSCreds != ""); err != nil {
		return nil, err
	}
	return opts, nil
}

// ClearNATSHandlers removes the handlers [NATSOptions] installed, so that nothing is logged
// after the caller has stopped (call it before nc.Close).
func ClearNATSHandlers(nc *nats.Conn) {
	nc.SetDisconnectErrHandler(nil)
	nc.SetReconnectHandler(nil)
	nc.SetErrorHandler(nil)
}

// ConnectNATS connects to url (one URL or a comma-separated list) with [NATSOptions]. Its
// errors never contain a password or token from url.
func ConnectNATS(url string, s Security, name string, log *slog.Logger) (*nats.Conn, error) {
	opts, err := NATSOptions(s, name, log)
	if err != nil {
		return nil, err
	}
	return connectNATS(url, opts)
}

// connectNATS connects to url with opts; its errors never contain a password or token from
// url.
func connectNATS(url string, opts []nats.Option) (*nats.Conn, error) {
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, scrubError(fmt.Sprintf("nats %s", RedactURL(url)), err, URLPasswords(url))
	}
	return nc, nil
}

// ConnectClient is [Connect] with the security settings of s, for the CLI's client
// commands: a connection named "proxbus-cli" and its JetStream context. Errors never contain
// a password or token from url.
func ConnectClient(url string, s Security) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := ConnectNATS(url, s, "proxbus-cli", nil)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}

func natsSecurityOptions(s Security, log *slog.Logger) ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case s.NATSCreds != "" && s.NATSNKey != "":
		return nil, fmt.Errorf("%w: set only one of the NATS creds file and the NATS NKey seed file", config.ErrInvalid)
	case s.NATSCreds != "":
		warnIfShared(log, "nats creds", s.NATSCreds)
		opts = append(opts, nats.UserCredentials(s.NATSCreds))
	case s.NATSNKey != "":
		warnIfShared(log, "nats nkey seed", s.NATSNKey)
		o, err := nats.NkeyOptionFromSeed(s.NATSNKey)
		if err != nil {
			return nil, fmt.Errorf("%w: nats nkey seed file %s: %w", config.ErrInvalid, s.NATSNKey, err)
		}
		opts = append(opts, o)
	}
	if (s.NATSTLSCert == "") != (s.NATSTLSKey == "") {
		return nil, fmt.Errorf("%w: the NATS TLS client certificate and key go together", config.ErrInvalid)
	}
	if s.NATSTLSCA != "" {
		opts = append(opts, nats.RootCAs(s.NATSTLSCA))
	}
	if s.NATSTLSCert != "" {
		warnIfShared(log, "nats tls key", s.NATSTLSKey)
		opts = append(opts, nats.ClientCert(s.NATSTLSCert, s.NATSTLSKey))
	}
	if s.NATSTLSFirst {
		opts = append(opts, nats.TLSHandshakeFirst())
	}
	if s.NATSInboxPrefix != "" {
		if !validInboxPrefix(s.NATSInboxPrefix) {
			return nil, fmt.Errorf("%w: the NATS inbox prefix %q must be subject tokens without wildcards or spaces, e.g. %s", config.ErrInvalid, s.NATSInboxPrefix, InboxCLI)
		}
		opts = append(opts, nats.CustomInboxPrefix(s.NATSInboxPrefix))
	}
	return opts, nil
}

// validInboxPrefix reports whether p is one or more non-empty subject tokens without
// wildcards, spaces or control characters (nats.go refuses the rest at connect).
func validInboxPrefix(p string) bool {
	for _, tok := range strings.Split(p, ".") {
		if tok == "" || strings.ContainsAny(tok, "*>") || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return false
		}
	}
	return true
}

// checkNATSOptions applies opts to scratch options, which loads TLS files, and, with creds,
// reads the JWT and signs a probe nonce, so that unusable files fail before connecting.
func checkNATSOptions(opts []nats.Option, creds bool) error {
	o := nats.GetDefaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return fmt.Errorf("%w: nats: %w", config.ErrInvalid, err)
		}
	}
	if !creds {
		return nil
	}
	jwt, err := o.UserJWT()
	if err != nil {
		return fmt.Errorf("%w: nats creds: %w", config.ErrInvalid, err)
	}
	// nats.go sends an undecorated file whole as the JWT: refuse anything that is not one,
	// lest a bare seed be sent to the server.
	if strings.Count(jwt, ".") != 2 || strings.ContainsAny(jwt, " \t\r\n") {
		return fmt.Errorf("%w: nats creds file holds no user JWT", config.ErrInvalid)
	}
	if _, err := o.SignatureCB([]byte("proxbus-probe")); err != nil {
		return fmt.Errorf("%w: nats creds: %w", config.ErrInvalid, err)
	}
	return nil
}

// warnIfShared warns when a secret file is readable by group or others.
func warnIfShared(log *slog.Logger, what, path string) {
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		log.Warn("secret file is readable by group or others", "what", what, "file", path, "mode", st.Mode().Perm().String())
	}
}

// Schemes of a Redis URL that name several servers: a Sentinel-managed primary and a Redis
// Cluster (with "s" after "redis" for TLS).
const (
	schemeSentinel = "+sentinel"
	schemeCluster  = "+cluster"
)

// Failover settings of the go-redis clients of [RedisClient] unless the URL sets them: a
// failover client tries each Sentinel once before it asks the next (go-redis tries a dead one
// five times), and a cluster client reloads its slot map every second (go-redis reloads it on
// MOVED/ASK only, else every 60 s, so it would go on dialling a dead primary that long).
const (
	redisFailoverDialerRetries = 1
	redisClusterReload         = time.Second
)

// RedisDefaultMinReplicas is how many replicas must acknowledge a change of the store unless
// told otherwise: 1 for a Sentinel-managed primary or a Redis Cluster (so that a failover
// does not forget a claim or a result a command acted on), 0 for a single Redis.
func RedisDefaultMinReplicas(rawURL string) int {
	scheme, _, _ := strings.Cut(rawURL, "://")
	if strings.HasSuffix(scheme, schemeSentinel) || strings.HasSuffix(scheme, schemeCluster) {
		return 1
	}
	return 0
}

// RedisClient returns a client for rawURL with the TLS and Sentinel settings of s. It does
// not connect. rawURL is one of
//
//	redis://[user:password@]host:port[/db][?go-redis options]           one server (rediss:// for TLS)
//	redis+sentinel://[user:password@]host:port,host:port,…/master[/db]  the primary Sentinel names master
//	redis+cluster://[user:password@]host:port,host:port,…               a Redis Cluster from its seed nodes
//
// (rediss+sentinel:// and rediss+cluster:// for TLS to every node). The user and password are
// those of the data nodes; a Sentinel's own are s.RedisSentinelUsername and
// s.RedisSentinelPassword. A CA file or insecure mode without TLS, both together, skip_verify in
// the URL, a Sentinel URL without its master name or a Sentinel setting without a Sentinel URL
// are refused with [config.ErrInvalid]. Errors show the URL with its password replaced, never
// the password.
func RedisClient(rawURL string, s Security) (redis.UniversalClient, error) {
	shown := RedactURL(rawURL)
	if s.RedisTLSCA != "" && s.RedisTLSInsecure {
		return nil, fmt.Errorf("%w: set only one of the Redis TLS CA file and Redis TLS insecure", config.ErrInvalid)
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, fmt.Errorf("%w: redis URL %s does not parse: it needs a scheme, e.g. redis://host:6379", config.ErrInvalid, shown)
	}
	base, topology := scheme, ""
	for _, t := range []string{schemeSentinel, schemeCluster} {
		if b, ok := strings.CutSuffix(scheme, t); ok {
			base, topology = b, t
		}
	}
	if base != "redis" && base != "rediss" {
		return nil, fmt.Errorf("%w: redis URL %s: the scheme must be redis, rediss, redis+sentinel, rediss+sentinel, redis+cluster or rediss+cluster", config.ErrInvalid, shown)
	}
	if topology != schemeSentinel && (s.RedisSentinelUsername != "" || s.RedisSentinelPassword != "") {
		return nil, fmt.Errorf("%w: the Redis Sentinel credentials need a redis+sentinel:// URL (got %s)", config.ErrInvalid, shown)
	}
	// The hosts of a list go to go-redis's own parser as its addr options.
	userinfo, hostsAndPath, hasUser := strings.Cut(rest, "@")
	if !hasUser {
		userinfo, hostsAndPath = "", rest
	}
	hostList, tail, _ := strings.Cut(hostsAndPath, "/")
	if topology == "" && strings.Contains(hostList, ",") {
		return nil, fmt.Errorf("%w: redis URL %s names several servers: use redis+sentinel:// for a Sentinel-managed primary or redis+cluster:// for a Redis Cluster", config.ErrInvalid, shown)
	}
	if q := strings.Index(hostList, "?"); q >= 0 { // no path: the query follows the hosts
		hostList, tail = hostList[:q], tail+hostList[q:]
	}
	hosts := strings.Split(hostList, ",")
	master := ""
	if topology == schemeSentinel {
		path, query, _ := strings.Cut(tail, "?")
		master, path, _ = strings.Cut(path, "/")
		if master == "" {
			return nil, fmt.Errorf("%w: redis URL %s names no master: redis+sentinel://host:26379,host:26379/<master name>", config.ErrInvalid, shown)
		}
		tail = path
		if query != "" {
			tail += "?" + query
		}
	}
	if path, _, _ := strings.Cut(tail, "?"); topology == schemeCluster && path != "" {
		return nil, fmt.Errorf("%w: redis URL %s: a Redis Cluster has only database 0; remove /%s", config.ErrInvalid, shown, path)
	}
	goURL := base + "://" + hosts[0] + "/" + tail
	if topology == "" {
		goURL = rawURL // go-redis parses a single server's URL as it is
	}
	if len(hosts) > 1 {
		sep := "?"
		if strings.Contains(goURL, "?") {
			sep = "&"
		}
		for _, h := range hosts[1:] {
			goURL += sep + "addr=" + url.QueryEscape(h)
			sep = "&"
		}
	}
	if u, err := url.Parse(goURL); err != nil {
		return nil, fmt.Errorf("%w: redis URL %s does not parse", config.ErrInvalid, shown)
	} else if u.Query().Has("skip_verify") {
		return nil, fmt.Errorf("%w: redis URL %s: use the explicit Redis TLS insecure setting, not skip_verify", config.ErrInvalid, shown)
	}
	user, password := "", ""
	if userinfo != "" {
		ui, err := url.Parse("redis://" + userinfo + "@h")
		if err != nil || ui.User == nil {
			return nil, fmt.Errorf("%w: redis URL %s: its user and password do not parse", config.ErrInvalid, shown)
		}
		user = ui.User.Username()
		password, _ = ui.User.Password()
		if _, hasPass := ui.User.Password(); !hasPass {
			user, password = "", user // redis://password@host: the password alone (AUTH password)
		}
	}
	bad := func(err error) error {
		return fmt.Errorf("%w: %w", config.ErrInvalid, scrubError("redis URL "+shown, err, URLPasswords(rawURL)))
	}
	var (
		tlsConfig **tls.Config
		client    func() redis.UniversalClient
	)
	switch topology {
	case "":
		ropts, err := redis.ParseURL(goURL)
		if err != nil {
			return nil, bad(err)
		}
		tlsConfig, client = &ropts.TLSConfig, func() redis.UniversalClient { return redis.NewClient(ropts) }
	case schemeSentinel:
		fopts, err := redis.ParseFailoverURL(goURL)
		if err != nil {
			return nil, bad(err)
		}
		fopts.MasterName = master
		fopts.Username, fopts.Password = user, password
		fopts.SentinelUsername, fopts.SentinelPassword = s.RedisSentinelUsername, s.RedisSentinelPassword
		if fopts.DialerRetries == 0 { // go-redis's 5 tries of a dead Sentinel delay a failover by seconds
			fopts.DialerRetries = redisFailoverDialerRetries
		}
		tlsConfig, client = &fopts.TLSConfig, func() redis.UniversalClient { return redis.NewFailoverClient(fopts) }
	case schemeCluster:
		copts, err := redis.ParseClusterURL(goURL)
		if err != nil {
			return nil, bad(err)
		}
		copts.Username, copts.Password = user, password
		if copts.ClusterStateReloadInterval == 0 { // a dead primary's slots are learnt only by a reload
			copts.ClusterStateReloadInterval = redisClusterReload
		}
		tlsConfig, client = &copts.TLSConfig, func() redis.UniversalClient { return redis.NewClusterClient(copts) }
	}
	if s.RedisTLSCA != "" || s.RedisTLSInsecure {
		if *tlsConfig == nil {
			return nil, fmt.Errorf("%w: redis URL %s: Redis TLS settings need a rediss:// URL", config.ErrInvalid, shown)
		}
		if s.RedisTLSCA != "" {
			pool, err := loadCAPool(s.RedisTLSCA)
			if err != nil {
				return nil, fmt.Errorf("%w: redis tls ca: %w", config.ErrInvalid, err)
			}
			(*tlsConfig).RootCAs = pool
		}
		(*tlsConfig).InsecureSkipVerify = s.RedisTLSInsecure
	}
	return client(), nil
}

// go-redis logs through one process-global logger (redis.SetLogger replaces it for every
// client in the process), by default as raw "redis: 2006/01/02 …" lines on stderr. proxbus
// installs redisLogger once, and it forwards to the logger of the running [Serve] (the
// redacting JSON or text handler), so those lines become log records like every other.
var (
	redisLogTarget  atomic.Pointer[slog.Logger]
	redisLogInstall sync.Once
)

// redisLogger is go-redis's logger: each line a warning on redisLogTarget, or nothing when
// no Serve is running.
type redisLogger struct{}

func (redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if log := redisLogTarget.Load(); log != nil {
		log.WarnContext(ctx, strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
	}
}

// RouteRedisLogs sends go-redis's log lines to log as warnings until the returned function
// is called (then they are dropped). It installs the process-global go-redis logger on its
// first call; a later call redirects it (the last Serve started wins).
func RouteRedisLogs(log *slog.Logger) (stop func()) {
	redisLogInstall.Do(func() { redis.SetLogger(redisLogger{}) })
	redisLogTarget.Store(log)
	return func() { redisLogTarget.CompareAndSwap(log, nil) }
}

// NetBoxIdleConnsPerHost is how many idle connections to NetBox are kept for reuse.
const NetBoxIdleConnsPerHost = 64

// NetBoxHTTPClient returns the HTTP client for NetBox (netbox.Config.HTTPClient): only the
// CAs of NetBoxTLSCA are trusted when it is set, no verification with NetBoxTLSInsecure, the
// system roots otherwise. Both set, or an unusable CA file, is an error wrapping
// [config.ErrInvalid]. It has no Timeout of its own: the netbox client bounds each request
// (netbox.Config.Timeout).
func NetBoxHTTPClient(s Security) (*http.Client, error) {
	if s.NetBoxTLSCA != "" && s.NetBoxTLSInsecure {
		return nil, fmt.Errorf("%w: set only one of the NetBox TLS CA file and NetBox TLS insecure", config.ErrInvalid)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: s.NetBoxTLSInsecure}
	if s.NetBoxTLSCA != "" {
		pool, err := loadCAPool(s.NetBoxTLSCA)
		if err != nil {
			return nil, fmt.Errorf("%w: netbox tls ca: %w", config.ErrInvalid, err)
		}
		cfg.RootCAs = pool
	}
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, errors.New("netbox: http.DefaultTransport is not an *http.Transport")
	}
	tr := base.Clone()
	tr.TLSClientConfig = cfg
	// Keep a connection per concurrent request alive: with the default of 2 idle connections
	// per host every request beyond the second opens (and closes) a new one.
	tr.MaxIdleConnsPerHost = NetBoxIdleConnsPerHost
	// No Client.Timeout: the netbox client's context deadline already bounds each request, and
	// over the wrapped transport serve.go builds a Client.Timeout would add two goroutines and
	// a timer per request.
	return &http.Client{Transport: tr}, nil
}

// ErrNoCertificate is wrapped when a CA file holds no PEM certificate.
var ErrNoCertificate = errors.New("no PEM certificate")

func loadCAPool(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s: %w", path, ErrNoCertificate)
	}
	return pool, nil
}

// redactedUser replaces a URL's password, or its whole user part when it has no password
// (a NATS token or a Redis password-only URL).
const redactedUser = "xxxxx"

// RedactURL returns raw (one URL or a comma-separated list, as NATS takes) with every
// password, every user part that has no password (a token) and every secret-named query
// value (password=, token=…) replaced by "xxxxx". It works on text, so it also hides the
// credentials of a URL that does not parse.
func RedactURL(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		for _, q := range secretQuery(p) {
			p = p[:q[0]] + redactedUser + p[q[1]:]
		}
		if start, at, ok := userinfo(p); ok {
			repl := redactedUser
			if user, _, hasPass := strings.Cut(p[start:at], ":"); hasPass {
				repl = user + ":" + redactedUser
			}
			p = p[:start] + repl + p[at:]
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}

// secretQuery returns the [start, end) offsets of the secret-named query values of one URL,
// last first (so that they can be replaced in order without shifting the others).
func secretQuery(p string) [][2]int {
	qs := strings.Index(p, "?")
	if qs < 0 {
		return nil
	}
	end := len(p)
	if h := strings.Index(p[qs:], "#"); h >= 0 {
		end = qs + h
	}
	var out [][2]int
	pos := qs + 1
	for _, kv := range strings.Split(p[qs+1:end], "&") {
		if k, v, ok := strings.Cut(kv, "="); ok && v != "" && redact.IsSecretName(k) {
			out = append([][2]int{{pos + len(k) + 1, pos + len(kv)}}, out...)
		}
		pos += len(kv) + 1
	}
	return out
}

// URLPasswords returns the secrets in raw (one URL or a comma-separated list): each password,
// user part without a password (a token) and secret-named query value, as written and
// percent-decoded. Add them to the log redactor's secrets.
func URLPasswords(raw string) []string {
	var out []string
	add := func(secret string) {
		if secret == "" {
			return
		}
		out = append(out, secret)
		if dec, err := url.PathUnescape(secret); err == nil && dec != secret {
			out = append(out, dec)
		}
	}
	for _, p := range strings.Split(raw, ",") {
		if start, at, ok := userinfo(p); ok {
			secret := p[start:at]
			if _, pass, hasPass := strings.Cut(secret, ":"); hasPass {
				secret = pass
			}
			add(secret)
		}
		q := secretQuery(p)
		for i := len(q) - 1; i >= 0; i-- {
			add(p[q[i][0]:q[i][1]])
		}
	}
	return out
}

// userinfo locates the user part of one URL by text (a missing scheme is allowed, as NATS
// allows it): it is p[start:at], and p[at] is the '@' that ends it.
func userinfo(p string) (start, at int, ok bool) {
	if i := strings.Index(p, "://"); i >= 0 {
		start = i + 3
	}
	end := len(p)
	if j := strings.IndexAny(p[start:], "/?#"); j >= 0 {
		end = start + j
	}
	k := strings.LastIndex(p[start:end], "@")
	if k < 0 {
		return 0, 0, false
	}
	return start, start + k, true
}

// scrubError wraps err under prefix, unless its text contains one of secrets (or a
// secret-named assignment): then it returns a new error carrying only the scrubbed text, so
// no secret can be reached through the returned error.
func scrubError(prefix string, err error, secrets []string) error {
	msg := err.Error()
	clean := msg
	for _, sec := range secrets {
		if sec != "" {
			clean = strings.ReplaceAll(clean, sec, redact.Placeholder)
		}
	}
	clean = redact.Text(clean)
	if clean != msg {
		return fmt.Errorf("%s: %s", prefix, clean)
	}
	return fmt.Errorf("%s: %w", prefix, err)
}
