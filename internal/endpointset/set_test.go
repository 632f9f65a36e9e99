package endpointset_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/endpointset"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/internal/redact"
	"github.com/proxbus/proxbus/internal/testenv"
)

// source is a NetBox stand-in whose endpoint list the test changes.
type source struct {
	mu    sync.Mutex
	eps   []netbox.ProxmoxEndpoint
	err   error
	reads int
}

func (s *source) ProxmoxEndpoints(context.Context) ([]netbox.ProxmoxEndpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	return slices.Clone(s.eps), s.err
}

func (s *source) set(eps ...netbox.ProxmoxEndpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eps, s.err = eps, nil
}

func (s *source) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

const (
	fileSecret = "file-secret-0123456789"
	envSecret  = "env-secret-9876543210"
)

// fixture is a set on a source, a secrets file and an environment, logging to logs.
type fixture struct {
	src     *source
	set     *endpointset.Set
	secrets string
	logs    *testenv.Buffer
	changed func() []int64
}

func newFixture(t *testing.T, interval time.Duration, eps ...netbox.ProxmoxEndpoint) *fixture {
	t.Helper()
	fx := &fixture{src: &source{eps: eps}, secrets: filepath.Join(t.TempDir(), "secrets.env"), logs: &testenv.Buffer{}}
	writeFile(t, fx.secrets, "# proxbus endpoint secrets\nPROXBUS_ENDPOINT_1_TOKEN_SECRET=\""+fileSecret+"\"\nnot a pair\nOTHER=x\n")
	var mu sync.Mutex
	var changed []int64
	fx.changed = func() []int64 {
		mu.Lock()
		defer mu.Unlock()
		out := changed
		changed = nil
		return out
	}
	set, err := endpointset.New(endpointset.Config{
		Source: fx.src, SecretsFile: fx.secrets, Interval: interval,
		Getenv: func(name string) string {
			if name == "PROXBUS_ENDPOINT_2_TOKEN_SECRET" {
				return envSecret
			}
			return ""
		},
		OnChange: func(id int64) {
			mu.Lock()
			changed = append(changed, id)
			mu.Unlock()
		},
		Logger: slog.New(slog.NewJSONHandler(fx.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	fx.set = set
	t.Cleanup(func() {
		for _, s := range []string{fileSecret, envSecret} {
			if strings.Contains(fx.logs.String(), s) {
				t.Errorf("a token secret is in the logs:\n%s", fx.logs.String())
			}
		}
	})
	return fx
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (fx *fixture) reload(t *testing.T) {
	t.Helper()
	if err := fx.set.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
}

var (
	lab  = netbox.ProxmoxEndpoint{ID: 1, Name: "lab", Domain: "pve.example.net", Port: 8006, VerifySSL: true, Username: "proxbus@pve", TokenName: "bus"}
	lab2 = netbox.ProxmoxEndpoint{ID: 2, Name: "lab2", IPAddress: "2001:db8::10", Port: 443, Username: "proxbus@pve", TokenName: "bus"}
	lab3 = netbox.ProxmoxEndpoint{ID: 3, Name: "lab3", Domain: "pve3.example.net", Port: 8006, Username: "proxbus@pve", TokenName: "bus"}
)

// TestSetServesNetBoxEndpoints: each endpoint gets a client at https://DOMAIN:PORT (the IP
// address without a domain), verifying TLS as verify_ssl says, with the token id
// USERNAME!TOKEN_NAME and its secret from the secrets file or the environment.
func TestSetServesNetBoxEndpoints(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, 0, lab, lab2)
	fx.reload(t)
	cases := []struct {
		id       int64
		url      string
		insecure bool
	}{
		{1, "https://pve.example.net:8006", false},
		{2, "https://[2001:db8::10]:443", true},
	}
	for _, tc := range cases {
		c, ok := fx.set.Get(tc.id)
		if !ok {
			why, _ := fx.set.Why(tc.id)
			t.Fatalf("endpoint %d has no client: %s", tc.id, why)
		}
		cfg := c.Endpoint()
		if !slices.Equal(cfg.URLs, []string{tc.url}) || cfg.TLS.InsecureSkipVerify != tc.insecure || cfg.TokenID != "proxbus@pve!bus" ||
			cfg.MaxParallel != proxmox.DefaultMaxParallel {
			t.Errorf("endpoint %d: %+v", tc.id, cfg)
		}
	}
	if got := fx.set.Secrets(); len(got) != 2 || !slices.Contains(got, fileSecret) || !slices.Contains(got, envSecret) {
		t.Errorf("secrets: %d values", len(got))
	}
	if err := fx.set.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	if !strings.Contains(fx.logs.String(), `"line":3`) {
		t.Errorf("the malformed line of the secrets file is not named by its number:\n%s", fx.logs.String())
	}
}

// TestSetEndpointWithoutSecret: an endpoint without a secret has no client; Why names it and
// the variable to set, and its commands wait (transient) while the others are served; once the
// secret is in the secrets file, the next read serves it.
func TestSetEndpointWithoutSecret(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, 0, lab, lab3)
	fx.reload(t)
	if _, ok := fx.set.Get(1); !ok {
		t.Fatal("endpoint 1 is not served")
	}
	if _, ok := fx.set.Get(3); ok {
		t.Fatal("endpoint 3 is served without a secret")
	}
	why, transient := fx.set.Why(3)
	if !transient || !strings.Contains(why, "endpoint 3 (lab3)") || !strings.Contains(why, "PROXBUS_ENDPOINT_3_TOKEN_SECRET") || !strings.Contains(why, fx.secrets) {
		t.Errorf("Why(3) = %q, %v", why, transient)
	}
	if redact.Text(why) != why { // the pipeline redacts step details
		t.Errorf("Why = %q is cut by the redactor to %q", why, redact.Text(why))
	}
	if err := fx.set.Check(); err == nil || !strings.Contains(err.Error(), "endpoint 3 (lab3)") {
		t.Errorf("Check = %v", err)
	}
	writeFile(t, fx.secrets, "PROXBUS_ENDPOINT_1_TOKEN_SECRET="+fileSecret+"\nexport PROXBUS_ENDPOINT_3_TOKEN_SECRET='"+fileSecret+"'\n")
	fx.reload(t)
	if _, ok := fx.set.Get(3); !ok {
		why, _ := fx.set.Why(3)
		t.Fatalf("endpoint 3 is not served after its secret was added: %s", why)
	}
}

// TestSetUnusableEndpoints: what NetBox may hold that cannot be used is named.
func TestSetUnusableEndpoints(t *testing.T) {
	t.Parallel()
	noHost := lab
	noHost.Domain = ""
	noToken := lab
	noToken.TokenName = ""
	badPort := lab
	badPort.Port = 70000
	badUser := lab
	badUser.Username = "no-realm"
	badDomain := lab
	badDomain.Domain = "https://pve.example.net"
	cases := []struct {
		name string
		ep   netbox.ProxmoxEndpoint
		want string
	}{
		{"no address", noHost, "neither domain nor ip_address"},
		{"no token name", noToken, "token_name"},
		{"bad port", badPort, "port 70000"},
		{"domain with a scheme", badDomain, `"https://pve.example.net" is not a host name`},
		{"bad token id", badUser, "no-realm!bus is not USER@REALM!TOKENNAME"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, 0, tc.ep)
			fx.reload(t)
			why, transient := fx.set.Why(1)
			if _, ok := fx.set.Get(1); ok || !transient || !strings.Contains(why, "endpoint 1 (lab)") || !strings.Contains(why, tc.want) {
				t.Errorf("Why = %q, %v; want it naming endpoint 1 (lab) and %q", why, transient, tc.want)
			}
			if redact.Text(why) != why { // the pipeline redacts step details
				t.Errorf("Why = %q is cut by the redactor to %q", why, redact.Text(why))
			}
		})
	}
}

// TestSetUnknownEndpoint: an id not read yet waits for a read that began after it was asked
// about; then an id NetBox does not have is refused (not transient).
func TestSetUnknownEndpoint(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, 0, lab)
	if why, transient := fx.set.Why(1); !transient || !strings.Contains(why, "reading them again") {
		t.Errorf("before any read: Why(1) = %q, %v", why, transient)
	}
	fx.reload(t)
	if _, ok := fx.set.Get(1); !ok {
		t.Fatal("endpoint 1 not served")
	}
	if _, transient := fx.set.Why(9); !transient {
		t.Error("an id first asked about after the last read is refused without reading again")
	}
	fx.reload(t)
	if why, transient := fx.set.Why(9); transient || !strings.Contains(why, "NetBox has no ProxmoxEndpoint 9") {
		t.Errorf("after a read: Why(9) = %q, %v", why, transient)
	}
}

// TestSetReloadSwapsOnlyWhatChanged: a read that changes nothing keeps every client; a changed
// endpoint gets a new one, a removed one none, and OnChange names both; a failed read keeps
// the set.
func TestSetReloadSwapsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, 0, lab, lab2)
	fx.reload(t)
	if got := fx.changed(); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("changed on first read: %v", got)
	}
	c1, _ := fx.set.Get(1)
	c2, _ := fx.set.Get(2)
	fx.reload(t)
	if n1, _ := fx.set.Get(1); n1 != c1 {
		t.Error("an unchanged endpoint got a new client")
	}
	if got := fx.changed(); len(got) != 0 {
		t.Errorf("changed on an unchanged read: %v", got)
	}
	moved := lab
	moved.Port = 8443
	fx.src.set(moved)
	fx.reload(t)
	n1, ok := fx.set.Get(1)
	if !ok || n1 == c1 || n1.Endpoint().URLs[0] != "https://pve.example.net:8443" {
		t.Errorf("endpoint 1 after its port changed: %v", ok)
	}
	if _, ok := fx.set.Get(2); ok {
		t.Error("a removed endpoint is still served")
	}
	if got := fx.changed(); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("changed: %v, want [1 2]", got)
	}
	_ = c2
	fx.src.mu.Lock()
	fx.src.err = errors.New("netbox down")
	fx.src.mu.Unlock()
	if err := fx.set.Reload(context.Background()); err == nil {
		t.Fatal("a failed read reported no error")
	}
	if n, ok := fx.set.Get(1); !ok || n != n1 {
		t.Error("a failed read changed the set")
	}
}

// TestSetRunRereads: Run reads at once, again after Interval, and at once when kicked.
func TestSetRunRereads(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		interval time.Duration
		kick     bool
	}{
		{"periodic", 10 * time.Millisecond, false},
		{"kicked", time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, tc.interval)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				fx.set.Run(ctx)
			}()
			t.Cleanup(func() {
				cancel()
				<-done
			})
			eventually(t, "the first read", func() bool { return fx.src.count() >= 1 })
			fx.src.set(lab3)
			if tc.kick {
				fx.set.Kick()
			}
			eventually(t, "endpoint 3 read", func() bool { return len(fx.set.Endpoints()) == 1 })
		})
	}
}

// eventually polls cond until it holds, failing the test after 30s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("never: %s", what)
}

// TestIsSecretVar: only PROXBUS_ENDPOINT_<positive id>_TOKEN_SECRET is a secret variable.
func TestIsSecretVar(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"PROXBUS_ENDPOINT_1_TOKEN_SECRET": true, "PROXBUS_ENDPOINT_42_TOKEN_SECRET": true,
		endpointset.SecretVar(7): true, "PROXBUS_ENDPOINT_0_TOKEN_SECRET": false,
		"PROXBUS_ENDPOINT_01_TOKEN_SECRET": false, "PROXBUS_ENDPOINT_X_TOKEN_SECRET": false,
		"PROXBUS_ENDPOINT_1_TOKEN": false, "PROXBUS_ENDPOINTS_FILE": false,
	} {
		if got := endpointset.IsSecretVar(name); got != want {
			t.Errorf("IsSecretVar(%q) = %v, want %v", name, got, want)
		}
	}
}
