package app_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/redis/go-redis/v9"

	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/netbox"
	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
)

// canary is the password used wherever a secret is needed; no error or log may contain it.
const canary = "CANARY-s3cr3t-Zq7x"

// pki is a throwaway CA with a server certificate for 127.0.0.1/localhost and a client
// certificate, all written as PEM files.
type pki struct {
	caFile, certFile, keyFile, clientCert, clientKey string
	serverTLS                                        tls.Certificate
	pool                                             *x509.CertPool
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "proxbus test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(serial int64, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	srvDER, srvKey := issue(2, x509.ExtKeyUsageServerAuth)
	cliDER, cliKey := issue(3, x509.ExtKeyUsageClientAuth)
	p := &pki{
		caFile:     writeFile(t, dir, "ca.pem", certPEM(caDER), 0o644),
		certFile:   writeFile(t, dir, "server.pem", certPEM(srvDER), 0o644),
		keyFile:    writeFile(t, dir, "server-key.pem", keyPEM(t, srvKey), 0o600),
		clientCert: writeFile(t, dir, "client.pem", certPEM(cliDER), 0o644),
		clientKey:  writeFile(t, dir, "client-key.pem", keyPEM(t, cliKey), 0o600),
		pool:       x509.NewCertPool(),
	}
	p.pool.AddCert(ca)
	p.serverTLS, err = tls.LoadX509KeyPair(p.certFile, p.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// serverConfig is the server side: this PKI's certificate, and client certificates from
// this CA required when mutual.
func (p *pki) serverConfig(mutual bool) *tls.Config {
	cfg := &tls.Config{Certificates: []tls.Certificate{p.serverTLS}, MinVersion: tls.VersionTLS12}
	if mutual {
		cfg.ClientCAs, cfg.ClientAuth = p.pool, tls.RequireAndVerifyClientCert
	}
	return cfg
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

func writeFile(t *testing.T, dir, name string, data []byte, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// logBuffer collects log output written from any goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// wait returns once the log contains s, failing the test if it never does.
func (b *logBuffer) wait(t *testing.T, s string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(b.String(), s) {
			return
		}
	}
	t.Fatalf("log never contained %q:\n%s", s, b.String())
}

// newLog returns a logger into a buffer that, when the test ends, must not hold a secret.
func newLog(t *testing.T, secrets ...string) (*slog.Logger, *logBuffer) {
	t.Helper()
	b := &logBuffer{}
	t.Cleanup(func() { assertNoSecret(t, "log", b.String(), secrets...) })
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

func assertNoSecret(t *testing.T, what, text string, secrets ...string) {
	t.Helper()
	for _, s := range append([]string{canary}, secrets...) {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("%s contains a secret (%.6s…): %s", what, s, text)
		}
	}
}

// natsCreds is an operator-mode setup: the operator and account for the server, and a user
// creds file.
type natsCreds struct {
	operator  *jwt.OperatorClaims
	resolver  *server.MemAccResolver
	credsFile string
	seed      string
}

func newNATSCreds(t *testing.T) *natsCreds {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	okp, err := nkeys.CreateOperator()
	must(err)
	opub, err := okp.PublicKey()
	must(err)
	ojwt, err := jwt.NewOperatorClaims(opub).Encode(okp)
	must(err)
	oc, err := jwt.DecodeOperatorClaims(ojwt)
	must(err)
	akp, err := nkeys.CreateAccount()
	must(err)
	apub, err := akp.PublicKey()
	must(err)
	ajwt, err := jwt.NewAccountClaims(apub).Encode(okp)
	must(err)
	ukp, err := nkeys.CreateUser()
	must(err)
	upub, err := ukp.PublicKey()
	must(err)
	useed, err := ukp.Seed()
	must(err)
	ujwt, err := jwt.NewUserClaims(upub).Encode(akp)
	must(err)
	creds, err := jwt.FormatUserConfig(ujwt, useed)
	must(err)
	res := &server.MemAccResolver{}
	must(res.Store(apub, ajwt))
	return &natsCreds{operator: oc, resolver: res, seed: string(useed),
		credsFile: writeFile(t, t.TempDir(), "user.creds", creds, 0o600)}
}

// newNKey returns a user NKey's public key and a file holding its seed.
func newNKey(t *testing.T) (pub, seedFile, seed string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	p, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	return p, writeFile(t, t.TempDir(), "user.nk", s, 0o600), string(s)
}

// startNATS runs a plain NATS server (no JetStream) with opts on a free loopback port.
func startNATS(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.NoLog, opts.NoSigs = "127.0.0.1", true, true
	if opts.Port == 0 {
		opts.Port = -1
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start() // owned by srv: Shutdown stops it and WaitForShutdown waits for it
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	return srv
}

func withTLS(p *pki, mutual, first bool) func(*server.Options) {
	return func(o *server.Options) {
		o.TLSConfig, o.TLS, o.TLSVerify, o.TLSTimeout, o.TLSHandshakeFirst = p.serverConfig(mutual), true, mutual, 2, first
	}
}

// TestNATSOptionsConnect connects to servers that demand TLS, mutual TLS, TLS first, an
// NKey, a creds file or a URL password: the right options succeed, and without them (or with
// the wrong CA) the connection is refused; no error or log line contains a secret.
func TestNATSOptionsConnect(t *testing.T) {
	t.Parallel()
	p, other := newPKI(t), newPKI(t)
	nkPub, nkFile, nkSeed := newNKey(t)
	creds := newNATSCreds(t)
	tests := []struct {
		name     string
		server   func(*server.Options)
		userinfo string // prepended to the host in the URL
		sec      app.Security
		ok       bool
		// refusal is in the error of a refused connection ("a|b": either). A rejected client
		// certificate surfaces as the server's alert or as the connection closing after the
		// handshake; an unanswered handshake as the client's timeout or the server's close.
		refusal string
	}{
		{name: "tls with ca", server: withTLS(p, false, false), sec: app.Security{NATSTLSCA: p.caFile}, ok: true},
		{name: "tls system roots", server: withTLS(p, false, false), refusal: "x509: certificate signed by unknown authority"},
		{name: "tls other ca", server: withTLS(p, false, false), sec: app.Security{NATSTLSCA: other.caFile}, refusal: "unknown authority"},
		{name: "mtls with client cert", server: withTLS(p, true, false),
			sec: app.Security{NATSTLSCA: p.caFile, NATSTLSCert: p.clientCert, NATSTLSKey: p.clientKey}, ok: true},
		{name: "mtls without client cert", server: withTLS(p, true, false), sec: app.Security{NATSTLSCA: p.caFile}, refusal: "certificate required|tls error"},
		{name: "mtls other ca's client cert", server: withTLS(p, true, false),
			sec: app.Security{NATSTLSCA: p.caFile, NATSTLSCert: other.clientCert, NATSTLSKey: other.clientKey}, refusal: "unknown certificate authority|tls error"},
		{name: "tls first", server: withTLS(p, false, true), sec: app.Security{NATSTLSCA: p.caFile, NATSTLSFirst: true}, ok: true},
		{name: "tls first not requested", server: withTLS(p, false, true), sec: app.Security{NATSTLSCA: p.caFile}, refusal: "timeout|eof"},
		{name: "plain server, tls required", server: func(*server.Options) {}, sec: app.Security{NATSTLSCA: p.caFile}, refusal: "secure connection not available"},
		{name: "nkey", server: func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: nkPub}} },
			sec: app.Security{NATSNKey: nkFile}, ok: true},
		{name: "nkey missing", server: func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: nkPub}} }, refusal: "authorization violation"},
		{name: "creds", server: func(o *server.Options) {
			o.TrustedOperators, o.AccountResolver = []*jwt.OperatorClaims{creds.operator}, creds.resolver
		}, sec: app.Security{NATSCreds: creds.credsFile}, ok: true},
		{name: "creds missing", server: func(o *server.Options) {
			o.TrustedOperators, o.AccountResolver = []*jwt.OperatorClaims{creds.operator}, creds.resolver
		}, refusal: "authorization violation"},
		{name: "url password over tls", server: func(o *server.Options) {
			withTLS(p, false, false)(o)
			o.Users = []*server.User{{Username: "proxbus", Password: canary}}
		}, userinfo: "proxbus:" + canary + "@", sec: app.Security{NATSTLSCA: p.caFile}, ok: true},
		{name: "url wrong password", server: func(o *server.Options) {
			o.Users = []*server.User{{Username: "proxbus", Password: canary}}
		}, userinfo: "proxbus:" + canary + "x@", refusal: "authorization violation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := &server.Options{}
			tt.server(opts)
			srv := startNATS(t, opts)
			log, _ := newLog(t, nkSeed, creds.seed)
			url := "nats://" + tt.userinfo + srv.Addr().String()
			nc, err := app.ConnectNATS(url, tt.sec, "proxbus test", log)
			if err != nil {
				assertNoSecret(t, "error", err.Error(), nkSeed, creds.seed)
			}
			if !tt.ok {
				if err == nil {
					nc.Close()
					t.Fatal("connected; want a refusal")
				}
				if errors.Is(err, config.ErrInvalid) || !containsOneOf(strings.ToLower(err.Error()), tt.refusal) {
					t.Fatalf("error %v; want a refused connection (%q)", err, tt.refusal)
				}
				return
			}
			if err != nil {
				t.Fatalf("ConnectNATS: %v", err)
			}
			t.Cleanup(nc.Close)
			if err := nc.Publish("proxbus.test", []byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatalf("flush: %v", err)
			}
			if opts.TLS {
				if cs, err := nc.TLSConnectionState(); err != nil || !cs.HandshakeComplete || len(cs.VerifiedChains) == 0 {
					t.Errorf("TLS state %+v, %v; want a verified TLS connection", cs, err)
				}
			}
		})
	}
}

// TestNATSOptionsReconnects restarts the server under a TLS+NKey connection: the connection
// logs the disconnect and comes back on its own, still authenticated, with no secret logged.
func TestNATSOptionsReconnects(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	nkPub, nkFile, nkSeed := newNKey(t)
	opts := &server.Options{Nkeys: []*server.NkeyUser{{Nkey: nkPub}}}
	withTLS(p, false, false)(opts)
	srv := startNATS(t, opts)
	port := srv.Addr().(*net.TCPAddr).Port
	log, buf := newLog(t, nkSeed)
	nc, err := app.ConnectNATS("tls://"+srv.Addr().String(), app.Security{NATSNKey: nkFile, NATSTLSCA: p.caFile}, "proxbus test", log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		app.ClearNATSHandlers(nc)
		nc.Close()
	})
	srv.Shutdown()
	srv.WaitForShutdown()
	buf.wait(t, "nats disconnected")
	restart := &server.Options{Port: port, Nkeys: []*server.NkeyUser{{Nkey: nkPub}}}
	withTLS(p, false, false)(restart)
	startNATS(t, restart)
	buf.wait(t, "nats reconnected")
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush after reconnect: %v", err)
	}
	if !nc.IsConnected() {
		t.Fatalf("status %v after reconnect", nc.Status())
	}
}

// TestNATSOptionsConfigErrors pins the settings refused before any connection: an error
// wrapping config.ErrInvalid that names the file, never its content.
func TestNATSOptionsConfigErrors(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	_, nkFile, nkSeed := newNKey(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	garbage := writeFile(t, dir, "garbage", []byte("password="+canary+"\n"), 0o600)
	bareSeed := writeFile(t, dir, "bare.creds", []byte(nkSeed+"\n"), 0o600)
	tests := []struct {
		name     string
		sec      app.Security
		notExist bool
	}{
		{name: "creds and nkey", sec: app.Security{NATSCreds: nkFile, NATSNKey: nkFile}},
		{name: "cert without key", sec: app.Security{NATSTLSCert: p.clientCert}},
		{name: "key without cert", sec: app.Security{NATSTLSKey: p.clientKey}},
		{name: "missing ca", sec: app.Security{NATSTLSCA: missing}, notExist: true},
		{name: "ca without certificate", sec: app.Security{NATSTLSCA: garbage}},
		{name: "missing client cert", sec: app.Security{NATSTLSCert: missing, NATSTLSKey: p.clientKey}, notExist: true},
		{name: "missing nkey", sec: app.Security{NATSNKey: missing}, notExist: true},
		{name: "nkey file without seed", sec: app.Security{NATSNKey: garbage}},
		{name: "missing creds", sec: app.Security{NATSCreds: missing}, notExist: true},
		{name: "creds without jwt", sec: app.Security{NATSCreds: bareSeed}},
		{name: "creds garbage", sec: app.Security{NATSCreds: garbage}},
		{name: "inbox prefix wildcard", sec: app.Security{NATSInboxPrefix: "_INBOX.>"}},
		{name: "inbox prefix star", sec: app.Security{NATSInboxPrefix: "_INBOX_*"}},
		{name: "inbox prefix trailing dot", sec: app.Security{NATSInboxPrefix: "_INBOX_cli."}},
		{name: "inbox prefix space", sec: app.Security{NATSInboxPrefix: "_INBOX cli"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			log, _ := newLog(t, nkSeed)
			opts, err := app.NATSOptions(tt.sec, "proxbus test", log)
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("NATSOptions = %d options, %v; want config.ErrInvalid", len(opts), err)
			}
			if tt.notExist && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%v does not match os.ErrNotExist", err)
			}
			assertNoSecret(t, "error", err.Error(), nkSeed)
		})
	}
}

// TestNATSOptionsWarnsSharedSecretFile logs a warning, naming the file, when the seed file
// is readable by others.
func TestNATSOptionsWarnsSharedSecretFile(t *testing.T) {
	t.Parallel()
	_, nkFile, nkSeed := newNKey(t)
	if err := os.Chmod(nkFile, 0o644); err != nil {
		t.Fatal(err)
	}
	log, buf := newLog(t, nkSeed)
	if _, err := app.NATSOptions(app.Security{NATSNKey: nkFile}, "proxbus test", log); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "readable by group or others") || !strings.Contains(out, nkFile) {
		t.Errorf("no warning naming %s: %s", nkFile, out)
	}
}

// startRedisTLS runs miniredis over TLS with an ACL user whose password is the canary.
func startRedisTLS(t *testing.T, p *pki) *miniredis.Miniredis {
	t.Helper()
	m := miniredis.NewMiniRedis()
	m.RequireUserAuth("proxbus", canary)
	if err := m.StartTLS(p.serverConfig(false)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// TestRedisClientTLS connects over rediss:// with the ACL user from the URL: the CA file or
// the explicit insecure mode succeed; the system roots, another CA, a wrong password or a
// plain connection are refused, and no error contains the password.
func TestRedisClientTLS(t *testing.T) {
	t.Parallel()
	p, other := newPKI(t), newPKI(t)
	m := startRedisTLS(t, p)
	good := "rediss://proxbus:" + canary + "@" + m.Addr() + "/0"
	tests := []struct {
		name string
		url  string
		sec  app.Security
		ok   bool
	}{
		{name: "ca", url: good, sec: app.Security{RedisTLSCA: p.caFile}, ok: true},
		{name: "insecure", url: good, sec: app.Security{RedisTLSInsecure: true}, ok: true},
		{name: "system roots", url: good},
		{name: "other ca", url: good, sec: app.Security{RedisTLSCA: other.caFile}},
		{name: "wrong password", url: "rediss://proxbus:" + canary + "x@" + m.Addr(), sec: app.Security{RedisTLSCA: p.caFile}},
		{name: "no user", url: "rediss://" + m.Addr(), sec: app.Security{RedisTLSCA: p.caFile}},
		{name: "plain against tls", url: "redis://proxbus:" + canary + "@" + m.Addr() + "/0?dial_timeout=1s&read_timeout=1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rdb, err := app.RedisClient(tt.url, tt.sec)
			if err != nil {
				t.Fatalf("RedisClient: %v", err)
			}
			t.Cleanup(func() { _ = rdb.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err = rdb.Set(ctx, "proxbus-connect-test", tt.name, 0).Err()
			if tt.ok {
				if err != nil {
					t.Fatalf("SET: %v", err)
				}
				if got, err := m.DB(0).Get("proxbus-connect-test"); err != nil || got != tt.name {
					t.Errorf("the server holds %q, %v; want %q", got, err, tt.name)
				}
				return
			}
			if err == nil {
				t.Fatal("SET succeeded; want a refusal")
			}
			assertNoSecret(t, "error", err.Error())
		})
	}
}

// TestRedisClientURL pins what RedisClient takes from the URL (ACL user, password, DB, TLS)
// and the settings it refuses with config.ErrInvalid, whose text never holds the password.
func TestRedisClientURL(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	dir := t.TempDir()
	noPEM := writeFile(t, dir, "empty.pem", []byte("nothing here"), 0o644)
	t.Run("acl user", func(t *testing.T) {
		t.Parallel()
		rdb, err := app.RedisClient("redis://proxbus:"+canary+"@127.0.0.1:6390/3", app.Security{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		o := rdb.(*redis.Client).Options()
		if o.Username != "proxbus" || o.Password != canary || o.DB != 3 || o.Addr != "127.0.0.1:6390" || o.TLSConfig != nil {
			t.Errorf("options user=%q addr=%q db=%d tls=%v; want proxbus, 127.0.0.1:6390, 3, no TLS", o.Username, o.Addr, o.DB, o.TLSConfig != nil)
		}
	})
	t.Run("rediss verifies by default", func(t *testing.T) {
		t.Parallel()
		rdb, err := app.RedisClient("rediss://redis.example.net:6380", app.Security{RedisTLSCA: p.caFile})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		c := rdb.(*redis.Client).Options().TLSConfig
		if c == nil || c.InsecureSkipVerify || c.RootCAs == nil || c.ServerName != "redis.example.net" {
			t.Errorf("TLS config %+v; want verification against the CA for redis.example.net", c)
		}
	})
	t.Run("sentinel", func(t *testing.T) {
		t.Parallel()
		rdb, err := app.RedisClient("rediss+sentinel://proxbus:"+canary+"@10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379/mymaster/2?dial_timeout=3s",
			app.Security{RedisTLSCA: p.caFile, RedisSentinelUsername: "sentinel-user", RedisSentinelPassword: canary + "s"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		if _, ok := rdb.(*redis.Client); !ok {
			t.Fatalf("client %T, want the failover *redis.Client", rdb)
		}
		// go-redis keeps the failover options inside; what it dials shows in its options.
		o := rdb.(*redis.Client).Options()
		if o.Username != "proxbus" || o.Password != canary || o.DB != 2 || o.TLSConfig == nil || o.TLSConfig.RootCAs == nil || o.DialTimeout != 3*time.Second {
			t.Errorf("options user=%q db=%d tls=%v dial=%v", o.Username, o.DB, o.TLSConfig != nil, o.DialTimeout)
		}
		if !strings.HasPrefix(o.Addr, "FailoverClient:") && o.Addr != "" {
			t.Logf("addr %q", o.Addr)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		rdb, err := app.RedisClient("redis+cluster://proxbus:"+canary+"@10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000", app.Security{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		cc, ok := rdb.(*redis.ClusterClient)
		if !ok {
			t.Fatalf("client %T, want *redis.ClusterClient", rdb)
		}
		o := cc.Options()
		if strings.Join(o.Addrs, ",") != "10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000" || o.Username != "proxbus" || o.Password != canary || o.TLSConfig != nil ||
			o.ClusterStateReloadInterval != time.Second {
			t.Errorf("cluster options addrs=%v user=%q tls=%v", o.Addrs, o.Username, o.TLSConfig != nil)
		}
	})
	tests := []struct {
		name     string
		url      string
		sec      app.Security
		notExist bool
		noCert   bool
	}{
		{name: "sentinel without master", url: "redis+sentinel://u:" + canary + "@10.0.0.1:26379,10.0.0.2:26379"},
		{name: "sentinel password without sentinel", url: "redis://127.0.0.1:6379", sec: app.Security{RedisSentinelPassword: canary}},
		{name: "several servers without a topology", url: "redis://u:" + canary + "@10.0.0.1:6379,10.0.0.2:6379"},
		{name: "cluster tls settings without rediss", url: "redis+cluster://10.0.0.1:7000,10.0.0.2:7000", sec: app.Security{RedisTLSInsecure: true}},
		{name: "cluster with a db", url: "redis+cluster://u:" + canary + "@10.0.0.1:7000/3"},
		{name: "ca without rediss", url: "redis://127.0.0.1:6379", sec: app.Security{RedisTLSCA: p.caFile}},
		{name: "insecure without rediss", url: "redis://127.0.0.1:6379", sec: app.Security{RedisTLSInsecure: true}},
		{name: "ca and insecure", url: "rediss://127.0.0.1:6379", sec: app.Security{RedisTLSCA: p.caFile, RedisTLSInsecure: true}},
		{name: "skip_verify in url", url: "rediss://u:" + canary + "@127.0.0.1:6379?skip_verify=true"},
		{name: "missing ca", url: "rediss://127.0.0.1:6379", sec: app.Security{RedisTLSCA: filepath.Join(dir, "missing")}, notExist: true},
		{name: "ca without certificate", url: "rediss://127.0.0.1:6379", sec: app.Security{RedisTLSCA: noPEM}, noCert: true},
		{name: "unparsable url", url: "rediss://u:" + canary + "@127.0.0.1:port"},
		{name: "bad scheme", url: "http://u:" + canary + "@127.0.0.1:6379"},
		{name: "bad db", url: "redis://u:" + canary + "@127.0.0.1:6379/x"},
		{name: "bad option", url: "redis://u:" + canary + "@127.0.0.1:6379?password=" + canary},
		{name: "token-only url", url: "redis://" + canary + "@127.0.0.1:6379/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rdb, err := app.RedisClient(tt.url, tt.sec)
			if rdb != nil {
				_ = rdb.Close()
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("RedisClient: %v; want config.ErrInvalid", err)
			}
			if tt.notExist && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%v does not match os.ErrNotExist", err)
			}
			if tt.noCert && !errors.Is(err, app.ErrNoCertificate) {
				t.Errorf("%v does not match ErrNoCertificate", err)
			}
			assertNoSecret(t, "error", err.Error())
		})
	}
}

// TestNetBoxHTTPClient: the CA file or explicit insecure mode reach the TLS server; the
// system roots or another CA are refused before the request reaches the handler.
func TestNetBoxHTTPClient(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	ca := writeFile(t, t.TempDir(), "netbox-ca.pem", certPEM(srv.Certificate().Raw), 0o644)
	other := newPKI(t)
	tests := []struct {
		name string
		sec  app.Security
		ok   bool
	}{
		{name: "ca", sec: app.Security{NetBoxTLSCA: ca}, ok: true},
		{name: "insecure", sec: app.Security{NetBoxTLSInsecure: true}, ok: true},
		{name: "system roots", sec: app.Security{}},
		{name: "other ca", sec: app.Security{NetBoxTLSCA: other.caFile}},
	}
	var wantHits int64
	for _, tt := range tests {
		if tt.ok {
			wantHits++
		}
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hc, err := app.NetBoxHTTPClient(tt.sec)
			if err != nil {
				t.Fatal(err)
			}
			if hc.Timeout != 0 { // the netbox client bounds each request through its context
				t.Errorf("Timeout = %v, want none", hc.Timeout)
			}
			resp, err := hc.Get(srv.URL + "/api/status/")
			if !tt.ok {
				if err == nil {
					_ = resp.Body.Close()
					t.Fatal("request succeeded; want a TLS refusal")
				}
				var uerr x509.UnknownAuthorityError
				if !errors.As(err, &uerr) {
					t.Errorf("error %v; want an unknown-authority refusal", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	t.Cleanup(func() { // after the parallel subtests: refused handshakes never reached the handler
		if got := hits.Load(); got != wantHits {
			t.Errorf("handler saw %d requests, want %d", got, wantHits)
		}
	})
}

// TestNetBoxHTTPClientRejects pins the refused settings.
func TestNetBoxHTTPClientRejects(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	noPEM := writeFile(t, t.TempDir(), "empty.pem", []byte("nothing"), 0o644)
	tests := []struct {
		name string
		sec  app.Security
		is   error
	}{
		{name: "ca and insecure", sec: app.Security{NetBoxTLSCA: p.caFile, NetBoxTLSInsecure: true}, is: config.ErrInvalid},
		{name: "missing ca", sec: app.Security{NetBoxTLSCA: filepath.Join(t.TempDir(), "missing")}, is: os.ErrNotExist},
		{name: "ca without certificate", sec: app.Security{NetBoxTLSCA: noPEM}, is: app.ErrNoCertificate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hc, err := app.NetBoxHTTPClient(tt.sec)
			if !errors.Is(err, config.ErrInvalid) || !errors.Is(err, tt.is) {
				t.Fatalf("NetBoxHTTPClient = %v, %v; want config.ErrInvalid and %v", hc, err, tt.is)
			}
		})
	}
}

// TestRedactURL pins the redaction of URL credentials, parsable or not, and the secrets
// URLPasswords reports for the log redactor.
func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw, want string
		secrets   []string
	}{
		{raw: "redis://127.0.0.1:6379/0", want: "redis://127.0.0.1:6379/0"},
		{raw: "redis://proxbus:pa%40ss@h:6379/0", want: "redis://proxbus:xxxxx@h:6379/0", secrets: []string{"pa%40ss", "pa@ss"}},
		{raw: "rediss://:pw1234@h", want: "rediss://:xxxxx@h", secrets: []string{"pw1234"}},
		{raw: "nats://tok3n@h:4222", want: "nats://xxxxx@h:4222", secrets: []string{"tok3n"}},
		{raw: "nats://a:p1@h1:4222,nats://b:p2@h2:4222", want: "nats://a:xxxxx@h1:4222,nats://b:xxxxx@h2:4222", secrets: []string{"p1", "p2"}},
		{raw: "u:pw@h:4222", want: "u:xxxxx@h:4222", secrets: []string{"pw"}},
		{raw: "redis://u:p@ss@h:port/x?y=@", want: "redis://u:xxxxx@h:port/x?y=@", secrets: []string{"p@ss"}},
		{raw: "redis://h/path@x", want: "redis://h/path@x"},
		{raw: "redis://h?password=s1&db=2&auth_token=s2#frag", want: "redis://h?password=xxxxx&db=2&auth_token=xxxxx#frag", secrets: []string{"s1", "s2"}},
		{raw: "redis://h?password=&token", want: "redis://h?password=&token"},
	}
	for _, tt := range tests {
		if got := app.RedactURL(tt.raw); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.raw, got, tt.want)
		}
		got := app.URLPasswords(tt.raw)
		if strings.Join(got, "|") != strings.Join(tt.secrets, "|") {
			t.Errorf("URLPasswords(%q) = %q, want %q", tt.raw, got, tt.secrets)
		}
	}
}

// TestNetBoxHTTPClientWithNetBox drives the netbox client over TLS to the NetBox simulator:
// with the CA it is ready; with the system roots the ping fails as unavailable, the request
// never reached NetBox, and the error does not carry the token.
func TestNetBoxHTTPClientWithNetBox(t *testing.T) {
	t.Parallel()
	sim := simnetbox.New(simnetbox.Options{Scenario: simnetbox.ScenarioDemo})
	h := sim.Handler()
	var hits atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ca := writeFile(t, t.TempDir(), "netbox-ca.pem", certPEM(srv.Certificate().Raw), 0o644)
	tests := []struct {
		name string
		sec  app.Security
		ok   bool
	}{
		{name: "ca", sec: app.Security{NetBoxTLSCA: ca}, ok: true},
		{name: "system roots", sec: app.Security{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hc, err := app.NetBoxHTTPClient(tt.sec)
			if err != nil {
				t.Fatal(err)
			}
			nb, err := netbox.New(netbox.Config{URL: srv.URL, Token: simnetbox.TokenV2, HTTPClient: hc})
			if err != nil {
				t.Fatal(err)
			}
			before := hits.Load()
			err = nb.Ping(context.Background())
			if tt.ok {
				if err != nil {
					t.Fatalf("Ping: %v", err)
				}
				return
			}
			if !errors.Is(err, netbox.ErrUnavailable) {
				t.Fatalf("Ping = %v; want ErrUnavailable", err)
			}
			if hits.Load() != before {
				t.Error("the refused request reached NetBox")
			}
			assertNoSecret(t, "error", err.Error(), simnetbox.TokenV2, "demo-secret")
		})
	}
}

// TestConnectClient connects the CLI's way to a TLS+NKey server with JetStream and reaches
// the JetStream API; without the NKey it is refused.
func TestConnectClient(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	nkPub, nkFile, nkSeed := newNKey(t)
	opts := &server.Options{JetStream: true, StoreDir: t.TempDir(), Nkeys: []*server.NkeyUser{{Nkey: nkPub}}}
	withTLS(p, false, false)(opts)
	srv := startNATS(t, opts)
	url := "nats://" + srv.Addr().String()
	nc, js, err := app.ConnectClient(url, app.Security{NATSNKey: nkFile, NATSTLSCA: p.caFile, NATSInboxPrefix: app.InboxCLI})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if inbox := nc.NewInbox(); !strings.HasPrefix(inbox, app.InboxCLI+".") {
		t.Errorf("inbox %q, want one under %s (the cli role's prefix)", inbox, app.InboxCLI)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := js.AccountInfo(ctx)
	if err != nil || info == nil {
		t.Fatalf("AccountInfo = %v, %v; want the account's JetStream info", info, err)
	}
	if nc.Opts.Name != "proxbus-cli" {
		t.Errorf("connection name %q, want proxbus-cli", nc.Opts.Name)
	}
	_, _, err = app.ConnectClient(url, app.Security{NATSTLSCA: p.caFile})
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("without the NKey: %v; want an authorization violation", err)
	}
	assertNoSecret(t, "error", err.Error(), nkSeed)
}

// containsOneOf reports whether s contains one of the "|"-separated alternatives.
func containsOneOf(s, alternatives string) bool {
	for _, a := range strings.Split(alternatives, "|") {
		if strings.Contains(s, a) {
			return true
		}
	}
	return false
}

// TestNetBoxHTTPClientKeepsConnections pins the NetBox pool: every concurrent command's
// journal request keeps its connection for the next one (net/http's default keeps two idle per
// host and closes the rest after each burst).
func TestNetBoxHTTPClientKeepsConnections(t *testing.T) {
	t.Parallel()
	hc, err := app.NetBoxHTTPClient(app.Security{})
	if err != nil {
		t.Fatal(err)
	}
	tr, ok := hc.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport %T, want *http.Transport", hc.Transport)
	}
	if tr.MaxIdleConnsPerHost < app.NetBoxIdleConnsPerHost {
		t.Errorf("MaxIdleConnsPerHost = %d, want at least %d", tr.MaxIdleConnsPerHost, app.NetBoxIdleConnsPerHost)
	}
}

// TestRedisDefaultMinReplicas: a Sentinel-managed primary or a Cluster waits for one replica
// by default; a single Redis for none.
func TestRedisDefaultMinReplicas(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]int{
		"redis://127.0.0.1:6379": 0, "rediss://r.example:6380/1": 0,
		"redis+sentinel://s1:26379,s2:26379/m": 1, "rediss+sentinel://s1:26379/m": 1,
		"redis+cluster://n1:7000,n2:7000": 1, "rediss+cluster://n1:7000": 1,
	} {
		if got := app.RedisDefaultMinReplicas(url); got != want {
			t.Errorf("RedisDefaultMinReplicas(%q) = %d, want %d", url, got, want)
		}
	}
}
