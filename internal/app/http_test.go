package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/health"
	"github.com/proxbus/proxbus/internal/testenv"
)

func TestReadyHandler(t *testing.T) {
	t.Parallel()
	up := func(context.Context) error { return nil }
	down := func(context.Context) error { return ErrNotReady }
	slow := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	tests := []struct {
		name     string
		checks   []ReadyCheck
		wantCode int
		wantDown []string
	}{
		{"all up", []ReadyCheck{{Name: "nats", Check: up}, {Name: "redis", Check: up}, {Name: "consumer", Check: up}}, http.StatusOK, nil},
		{"redis down", []ReadyCheck{{Name: "nats", Check: up}, {Name: "redis", Check: down}, {Name: "consumer", Check: up}}, http.StatusServiceUnavailable, []string{"redis"}},
		{"two down", []ReadyCheck{{Name: "nats", Check: down}, {Name: "redis", Check: up}, {Name: "consumer", Check: down}}, http.StatusServiceUnavailable, []string{"nats", "consumer"}},
		{"no checks", nil, http.StatusOK, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			ReadyHandler(tc.checks...).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PathReadyz, nil))
			if rec.Code != tc.wantCode {
				t.Errorf("status %d, want %d", rec.Code, tc.wantCode)
			}
			var body readyBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rec.Body.String(), err)
			}
			if body.Ready != (tc.wantCode == http.StatusOK) || !slices.Equal(body.Down, tc.wantDown) {
				t.Errorf("body %+v, want down %v", body, tc.wantDown)
			}
		})
	}
	t.Run("reasons and advisory checks", func(t *testing.T) {
		t.Parallel()
		refused := func(context.Context) error {
			return fmt.Errorf("wrapped: %w", &health.Problem{Dependency: "netbox", Reason: "token refused (HTTP 403) on GET /api/status/"})
		}
		secret := func(context.Context) error { return errors.New("dial tcp 10.1.2.3:6379: secret-host refused") }
		rec := httptest.NewRecorder()
		ReadyHandler(
			ReadyCheck{Name: "nats", Check: up},
			ReadyCheck{Name: "redis", Check: secret},
			ReadyCheck{Name: "netbox", Check: refused},
			ReadyCheck{Name: "proxmox/2", Check: refused, Advisory: true},
		).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PathReadyz, nil))
		var body readyBody
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("body %q: %v", rec.Body.String(), err)
		}
		want := map[string]string{"nats": "ok", "redis": "down", "netbox": "token refused (HTTP 403) on GET /api/status/",
			"proxmox/2": "token refused (HTTP 403) on GET /api/status/"}
		if rec.Code != http.StatusServiceUnavailable || body.Ready || !slices.Equal(body.Down, []string{"redis", "netbox"}) || !maps.Equal(body.Checks, want) {
			t.Errorf("readyz %d %+v, want 503 down [redis netbox] checks %v", rec.Code, body, want)
		}
		if strings.Contains(rec.Body.String(), "secret-host") || strings.Contains(rec.Body.String(), "10.1.2.3") {
			t.Errorf("readyz shows an error text: %s", rec.Body.String())
		}
		rec = httptest.NewRecorder()
		ReadyHandler(ReadyCheck{Name: "nats", Check: up}, ReadyCheck{Name: "proxmox/2", Check: refused, Advisory: true}).
			ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PathReadyz, nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"proxmox/2":"token refused`) {
			t.Errorf("an advisory check failing: %d %s, want 200 naming it", rec.Code, rec.Body.String())
		}
	})
	t.Run("a hanging check is down once the request ends", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, PathReadyz, nil).WithContext(ctx)
		ReadyHandler(ReadyCheck{Name: "redis", Check: slow}).ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("status %d, want 503", rec.Code)
		}
	})
}

func TestHealthHandler(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	HealthHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PathHealthz, nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "ok\n" {
		t.Errorf("healthz %d %q", rec.Code, rec.Body.String())
	}
}

// TestHTTPServesTLS: with a certificate, /healthz answers over TLS (HTTP/1.1 and HTTP/2) and
// a plain HTTP request on the same port is refused with 400 and served nothing.
func TestHTTPServesTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := testenv.SelfSignedCert(t, t.TempDir(), "proxbus test")
	tlsCfg, err := HTTPTLS(certFile, keyFile, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := ListenHTTP("127.0.0.1:0", tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(PathHealthz, HealthHandler())
	hs, err := listenHTTP("", ln, mux, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	go hs.serve()
	t.Cleanup(hs.shutdown)
	addr := ln.Addr().String()

	for _, h2 := range []bool{false, true} {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: h2}
		if !h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // HTTP/1.1 only
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + addr + PathHealthz)
		if err != nil {
			t.Fatalf("https (h2 %v): %v", h2, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		tr.CloseIdleConnections()
		if resp.StatusCode != http.StatusOK || string(body) != "ok\n" || resp.TLS == nil || (resp.ProtoMajor == 2) != h2 {
			t.Fatalf("https (h2 %v): %s %d %q, tls %v", h2, resp.Proto, resp.StatusCode, body, resp.TLS != nil)
		}
	}

	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + PathHealthz)
	if err != nil {
		t.Fatalf("plain http: %v (want Go's 400 answer)", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "ok") {
		t.Fatalf("plain http: %d %q, want 400 and no /healthz body", resp.StatusCode, body)
	}
}

// TestHTTPTLSConfig: both files or neither; one alone, an unreadable file or a pair that does
// not match is an error wrapping config.ErrInvalid naming the flag, never the file's contents.
func TestHTTPTLSConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, _ := testenv.SelfSignedCert(t, dir, "proxbus test")
	otherCert, _, _ := testenv.SelfSignedCert(t, t.TempDir(), "proxbus test")
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a pem secret-canary"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "absent.pem")
	tests := []struct {
		name, cert, key string
		wantNil         bool
		wantErr         []string // substrings of the error; nil: no error
	}{
		{"neither", "", "", true, nil},
		{"both", certFile, keyFile, false, nil},
		{"cert only", certFile, "", false, []string{"--http-tls-cert", "--http-tls-key", "is not"}},
		{"key only", "", keyFile, false, []string{"--http-tls-key (PROXBUS_HTTP_TLS_KEY) is set", "--http-tls-cert"}},
		{"cert unreadable", missing, keyFile, false, []string{"--http-tls-cert", "cannot read", "absent.pem"}},
		{"key unreadable", certFile, missing, false, []string{"--http-tls-key", "cannot read", "absent.pem"}},
		{"key not PEM", certFile, garbage, false, []string{"--http-tls-key", "garbage.pem", "not a PEM certificate and its private key"}},
		{"key of another cert", otherCert, keyFile, false, []string{"--http-tls-cert", "private key does not match"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := HTTPTLS(tc.cert, tc.key, nil)
			if tc.wantErr == nil {
				if err != nil || (cfg == nil) != tc.wantNil {
					t.Fatalf("HTTPTLS = %v, %v; want nil config %v and no error", cfg, err, tc.wantNil)
				}
				return
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("err = %v, want config.ErrInvalid", err)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "canary") || strings.Contains(err.Error(), "BEGIN") {
				t.Errorf("err %q shows file contents", err)
			}
		})
	}
}
