package proxmox_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/proxmox"
)

const goodFile = `
endpoints:
  - id: 1
    name: lab
    urls: [https://pve1.example.net:8006, https://pve2.example.net:8006/api2/json/]
    token_id: proxbus@pve!events
    token_secret_env: PROXBUS_LAB_SECRET
    tls: {ca_file: /etc/proxbus/lab-ca.pem}
    read_only: false
    max_parallel: 8
    ssh: {user: root, key_file: /etc/proxbus/id_ed25519, known_hosts_file: /etc/proxbus/known_hosts}
  - id: 2
    urls: [https://10.0.0.2:8006]
    token_id: audit@pam!ro
    token_secret_file: /run/secrets/two
    tls: {fingerprint: "ab:CD:ef:01:23:45:67:89:ab:cd:ef:01:23:45:67:89:ab:cd:ef:01:23:45:67:89:ab:cd:ef:01:23:45:67:89"}
    read_only: true
    timeout: 5s
`

// TestParseEndpoints pins the strictness of the endpoints file: a good file parses with
// defaults applied, and every malformed entry is refused with an error naming the field.
func TestParseEndpoints(t *testing.T) {
	t.Parallel()
	entry := func(extra string) string {
		return "endpoints:\n  - id: 1\n    urls: [https://pve:8006]\n    token_id: a@pve!t\n    token_secret_env: X\n" + extra
	}
	tests := []struct {
		name    string
		data    string
		wantErr string // substring; "" means success
	}{
		{name: "good", data: goodFile},
		{name: "empty file", data: ""},
		{name: "unknown top-level key", data: "endpoint: []\n", wantErr: "endpoint"},
		{name: "unknown entry key", data: entry("    token_secret: x\n"), wantErr: "token_secret"},
		{name: "unknown tls key", data: entry("    tls: {ca: /x}\n"), wantErr: "ca"},
		{name: "duplicate id", data: entry("") + "  - id: 1\n    urls: [https://b:8006]\n    token_id: a@pve!t\n    token_secret_env: Y\n", wantErr: "id: duplicate"},
		{name: "missing id", data: "endpoints:\n  - urls: [https://pve:8006]\n    token_id: a@pve!t\n    token_secret_env: X\n", wantErr: "id: required"},
		{name: "missing urls", data: "endpoints:\n  - id: 1\n    token_id: a@pve!t\n    token_secret_env: X\n", wantErr: "urls: required"},
		{name: "bad url scheme", data: "endpoints:\n  - id: 1\n    urls: [ftp://pve]\n    token_id: a@pve!t\n    token_secret_env: X\n", wantErr: "urls[0]"},
		{name: "url with path", data: "endpoints:\n  - id: 1\n    urls: [https://pve:8006/x]\n    token_id: a@pve!t\n    token_secret_env: X\n", wantErr: "urls[0]"},
		{name: "missing token id", data: "endpoints:\n  - id: 1\n    urls: [https://pve:8006]\n    token_secret_env: X\n", wantErr: "token_id: required"},
		{name: "malformed token id", data: "endpoints:\n  - id: 1\n    urls: [https://pve:8006]\n    token_id: root\n    token_secret_env: X\n", wantErr: "token_id"},
		{name: "missing token secret", data: "endpoints:\n  - id: 1\n    urls: [https://pve:8006]\n    token_id: a@pve!t\n", wantErr: "token_secret_env or token_secret_file"},
		{name: "both token secrets", data: entry("    token_secret_file: /x\n"), wantErr: "set only one"},
		{name: "two tls modes", data: entry("    tls: {ca_file: /x, insecure_skip_verify: true}\n"), wantErr: "tls"},
		{name: "bad fingerprint", data: entry("    tls: {fingerprint: 'AB:CD'}\n"), wantErr: "fingerprint"},
		{name: "negative max_parallel", data: entry("    max_parallel: -1\n"), wantErr: "max_parallel"},
		{name: "partial ssh", data: entry("    ssh: {user: root}\n"), wantErr: "ssh.key_file"},
		{name: "bad timeout", data: entry("    timeout: soon\n"), wantErr: "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := proxmox.ParseEndpoints([]byte(tt.data))
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseEndpoints succeeded (%+v), want error containing %q", got, tt.wantErr)
				}
				if !errors.Is(err, config.ErrInvalid) {
					t.Errorf("error %v does not wrap config.ErrInvalid", err)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not name %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseEndpoints: %v", err)
			}
			if tt.name == "empty file" {
				if len(got) != 0 {
					t.Fatalf("empty file gave %d endpoints", len(got))
				}
				return
			}
			if len(got) != 2 {
				t.Fatalf("got %d endpoints, want 2", len(got))
			}
			one, two := got[0], got[1]
			if one.ID != 1 || one.Name != "lab" || one.TokenID != "proxbus@pve!events" || one.TokenSecretEnv != "PROXBUS_LAB_SECRET" {
				t.Errorf("endpoint 1 = %+v", one)
			}
			if want := []string{"https://pve1.example.net:8006", "https://pve2.example.net:8006"}; strings.Join(one.URLs, " ") != strings.Join(want, " ") {
				t.Errorf("urls = %v, want %v (normalised)", one.URLs, want)
			}
			if one.MaxParallel != 8 || one.Timeout != proxmox.DefaultTimeout || one.TLS.CAFile != "/etc/proxbus/lab-ca.pem" || one.SSH.User != "root" {
				t.Errorf("endpoint 1 settings = %+v", one)
			}
			if two.Name != "endpoint-2" || two.MaxParallel != proxmox.DefaultMaxParallel || two.Timeout != 5*time.Second || !two.ReadOnly || two.TokenSecretFile != "/run/secrets/two" {
				t.Errorf("endpoint 2 defaults = %+v", two)
			}
		})
	}
}

// TestLoadEndpoints reads the file and names it in errors.
func TestLoadEndpoints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "endpoints.yaml")
	if err := os.WriteFile(good, []byte(goodFile), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgs, err := proxmox.LoadEndpoints(good)
	if err != nil || len(cfgs) != 2 {
		t.Fatalf("LoadEndpoints = %d, %v; want 2 endpoints", len(cfgs), err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("endpoints: [{id: 1}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := proxmox.LoadEndpoints(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("LoadEndpoints(bad) = %v, want an error naming %s", err, bad)
	}
	crash := filepath.Join(dir, "crash.yaml") // panics inside goccy/go-yaml v1.19.2 (#735)
	if err := os.WriteFile(crash, []byte("endpoints: ! {a:\n- b}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := proxmox.LoadEndpoints(crash); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), crash) {
		t.Errorf("LoadEndpoints(crash) = %v, want a configuration error naming %s", err, crash)
	}
	if _, err := proxmox.LoadEndpoints(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadEndpoints(missing) = %v, want os.ErrNotExist", err)
	}
}
