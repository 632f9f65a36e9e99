package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/testenv"
)

// TestServeFlagsReachTheConfig pins that serve's scaling, HTTP and ingress flags (and their
// PROXBUS_* variables) end up in the configuration Serve gets.
func TestServeFlagsReachTheConfig(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PROXBUS_MAX_ACK_PENDING": "24", "PROXBUS_WEBHOOK_SECRET": "hook-secret"}
	c, e, err := parseCLI(t, env, "serve",
		"--stream-replicas", "3", "--http-addr", ":9090", "--webhook-rules", "/etc/proxbus/rules.yaml",
		"--proxbox-api-key", "front-key", "--http-result-timeout", "15s")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.Serve.config(e)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"MaxAckPending (env)", cfg.Consumer.MaxAckPending, 24},
		{"StreamReplicas", cfg.Consumer.Replicas, 3},
		{"HTTPAddr", cfg.HTTPAddr, ":9090"},
		{"Ingress.WebhookSecret (env)", cfg.Ingress.WebhookSecret, "hook-secret"},
		{"Ingress.WebhookRulesFile", cfg.Ingress.WebhookRulesFile, "/etc/proxbus/rules.yaml"},
		{"Ingress.ProxboxAPIKey", cfg.Ingress.ProxboxAPIKey, "front-key"},
		{"Ingress.ResultTimeout", cfg.Ingress.ResultTimeout, 15 * time.Second},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestServeHTTPTLSFlags pins --http-tls-cert and --http-tls-key: neither leaves the listener
// to Serve (plain HTTP), both bind --http-addr with TLS, and one alone, an unreadable file or
// a missing --http-addr is a config error naming the flag.
func TestServeHTTPTLSFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := testCert(t, dir)
	missing := filepath.Join(dir, "absent.pem")
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantTLS bool
		wantErr string // substring; "" for none
	}{
		{"neither", []string{"--http-addr", "127.0.0.1:0"}, nil, false, ""},
		{"both", []string{"--http-addr", "127.0.0.1:0", "--http-tls-cert", cert, "--http-tls-key", key}, nil, true, ""},
		{"both from env", []string{"--http-addr", "127.0.0.1:0"}, map[string]string{"PROXBUS_HTTP_TLS_CERT": cert, "PROXBUS_HTTP_TLS_KEY": key}, true, ""},
		{"cert only", []string{"--http-addr", "127.0.0.1:0", "--http-tls-cert", cert}, nil, false, "--http-tls-key (PROXBUS_HTTP_TLS_KEY) is not"},
		{"key only", []string{"--http-addr", "127.0.0.1:0", "--http-tls-key", key}, nil, false, "--http-tls-cert (PROXBUS_HTTP_TLS_CERT) is not"},
		{"cert unreadable", []string{"--http-addr", "127.0.0.1:0", "--http-tls-cert", missing, "--http-tls-key", key}, nil, false, "--http-tls-cert (PROXBUS_HTTP_TLS_CERT): cannot read"},
		{"no --http-addr", []string{"--http-tls-cert", cert, "--http-tls-key", key}, nil, false, "need --http-addr"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			parsed, _, err := parseCLI(t, tc.env, append([]string{"serve"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			ln, err := parsed.Serve.httpListener(slog.DiscardHandler)
			if tc.wantErr != "" {
				if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a config error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (ln != nil) != tc.wantTLS {
				t.Fatalf("listener = %v, want one only with TLS (%v)", ln, tc.wantTLS)
			}
			if ln == nil {
				return
			}
			defer ln.Close()
			go func() { // one TLS handshake proves the listener serves the certificate
				if c, err := ln.Accept(); err == nil {
					_ = c.(*tls.Conn).Handshake()
					_ = c.Close()
				}
			}()
			c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // checking the served certificate below
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if cn := c.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "proxbus flag test" {
				t.Fatalf("served certificate %q, want the one of --http-tls-cert", cn)
			}
		})
	}
}

// testCert writes a self-signed certificate named "proxbus flag test" and its key to dir.
func testCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile, _ = testenv.SelfSignedCert(t, dir, "proxbus flag test")
	return certFile, keyFile
}

// TestServeRefusesAWrongNetBoxToken runs `serve` against the dev infrastructure with a token
// NetBox refuses: it stops at once, the message naming --netbox-token, never showing the
// token, and the exit code is 1.
func TestServeRefusesAWrongNetBoxToken(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)
	env, err := app.StartDev(app.DevOptions{RedisURL: r.URL, NATSPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	dir := t.TempDir()
	secret := filepath.Join(dir, "lab-secret")
	if err := os.WriteFile(secret, []byte(app.DemoPVESecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	endpoints := filepath.Join(dir, "endpoints.yaml")
	yaml := fmt.Sprintf("endpoints:\n  - id: 1\n    name: lab\n    urls: [%s]\n    token_id: %q\n    token_secret_file: %s\n", env.PVEURL, app.DemoPVETokenID, secret)
	if err := os.WriteFile(endpoints, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	const wrong = "ffffffffffffffffffffffffffffffffffffffff"
	var stderr testenv.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = cmdServe(ctx, []string{"--nats-url", env.NATSURL, "--redis-url", r.URL, "--redis-key-prefix", r.Prefix,
		"--netbox-url", env.NetBoxURL, "--netbox-token", wrong, "--endpoints-file", endpoints, "--log-format", "json"}, &stderr)
	if !errors.Is(err, app.ErrStartup) || !strings.Contains(err.Error(), "--netbox-token (PROXBUS_NETBOX_TOKEN") {
		t.Fatalf("serve = %v, want a start-up error naming --netbox-token", err)
	}
	if strings.Contains(err.Error(), wrong) || strings.Contains(stderr.String(), wrong) {
		t.Error("the token is shown")
	}
	if ctx.Err() != nil {
		t.Error("serve waited instead of stopping")
	}
}
