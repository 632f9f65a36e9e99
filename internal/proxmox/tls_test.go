package proxmox_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// tlsSim serves a demo simulator over TLS with httptest's self-signed certificate.
func tlsSim(t *testing.T) (*simpve.Server, *httptest.Server) {
	t.Helper()
	sim := simpve.New(simpve.Options{Scenario: simpve.ScenarioDemo})
	srv := httptest.NewTLSServer(sim.Handler())
	t.Cleanup(srv.Close)
	return sim, srv
}

// selfSigned is a fresh self-signed certificate for 127.0.0.1, unlike httptest's shared one.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "other"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// writePEM writes der as a PEM certificate file.
func writePEM(t *testing.T, der []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTLS pins certificate verification: the pinned fingerprint (any case) or the CA file
// is accepted; a wrong fingerprint, another CA or the system roots refuse the server before
// anything is sent — never a fallback to another check.
func TestTLS(t *testing.T) {
	t.Parallel()
	sim, srv := tlsSim(t)
	other := selfSigned(t) // a different self-signed certificate
	right := proxmox.CertificateFingerprint(srv.Certificate().Raw)
	wrong := proxmox.CertificateFingerprint(other.Certificate[0])
	if right == wrong {
		t.Fatal("test servers share a certificate")
	}
	tests := []struct {
		name     string
		tls      proxmox.TLSConfig
		ok       bool
		mismatch bool
	}{
		{name: "fingerprint", tls: proxmox.TLSConfig{Fingerprint: right}, ok: true},
		{name: "fingerprint lower case", tls: proxmox.TLSConfig{Fingerprint: strings.ToLower(right)}, ok: true},
		{name: "wrong fingerprint", tls: proxmox.TLSConfig{Fingerprint: wrong}, mismatch: true},
		{name: "ca file", tls: proxmox.TLSConfig{CAFile: writePEM(t, srv.Certificate().Raw)}, ok: true},
		{name: "other ca file", tls: proxmox.TLSConfig{CAFile: writePEM(t, other.Certificate[0])}},
		{name: "system roots", tls: proxmox.TLSConfig{}},
		{name: "insecure", tls: proxmox.TLSConfig{InsecureSkipVerify: true}, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := endpoint(simpve.DemoTokenID, srv.URL)
			cfg.TLS = tt.tls
			v, err := newClient(t, cfg, simpve.DemoSecret).Version(testCtx(t))
			if tt.ok {
				if err != nil || v.Release != simpve.SimRelease {
					t.Fatalf("Version = %+v, %v; want the simulator's", v, err)
				}
				return
			}
			if !errors.Is(err, proxmox.ErrUnreachable) {
				t.Fatalf("Version = %v, want ErrUnreachable (TLS refusal)", err)
			}
			if tt.mismatch && !errors.Is(err, proxmox.ErrCertificateMismatch) {
				t.Errorf("error %v does not match ErrCertificateMismatch", err)
			}
		})
	}
	t.Cleanup(func() {
		// Runs after the parallel subtests: refused handshakes never reached the API.
		if n := sim.Requests("GET", "/version"); n != 4 {
			t.Errorf("the API saw %d requests, want 4 (only the accepted handshakes)", n)
		}
	})
}

// TestNewClientRejects pins NewClient's own checks: an empty secret, an unreadable CA file.
func TestNewClientRejects(t *testing.T) {
	t.Parallel()
	cfg := endpoint(simpve.DemoTokenID, "https://127.0.0.1:1")
	if _, err := proxmox.NewClient(cfg, ""); !errors.Is(err, proxmox.ErrNoSecret) {
		t.Errorf("empty secret: %v, want ErrNoSecret", err)
	}
	cfg.TLS.CAFile = filepath.Join(t.TempDir(), "missing.pem")
	if _, err := proxmox.NewClient(cfg, "s3cr3t-value"); !errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "s3cr3t-value") {
		t.Errorf("missing CA file: %v, want os.ErrNotExist without the secret", err)
	}
	cfg.TLS = proxmox.TLSConfig{Fingerprint: "zz"}
	if _, err := proxmox.NewClient(cfg, "s3cr3t-value"); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("bad fingerprint: %v, want config.ErrInvalid", err)
	}
}
