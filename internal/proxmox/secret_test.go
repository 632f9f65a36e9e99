package proxmox_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/proxbus/proxbus/internal/proxmox"
)

const topSecret = "9f1c2d3e-aaaa-bbbb-cccc-0123456789ab"

// TestSecretNeverPrinted pins that every way of rendering a Secret (fmt verbs, JSON, YAML,
// text, slog) yields the placeholder, also when nested in a struct.
func TestSecretNeverPrinted(t *testing.T) {
	t.Parallel()
	s := proxmox.Secret(topSecret)
	p := proxmox.PBSStorage{Storage: "pbs1", Password: s}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("msg", "secret", s, "pbs", p)
	jsonOut, _ := json.Marshal(map[string]any{"s": s, "p": p})
	yamlOut, _ := yaml.Marshal(map[string]any{"s": s})
	textOut, _ := s.MarshalText()
	outputs := map[string]string{
		"%v": fmt.Sprintf("%v", s), "%s": fmt.Sprintf("%s", s), "%q": fmt.Sprintf("%q", s),
		"%x": fmt.Sprintf("%x", s), "%#v": fmt.Sprintf("%#v", s), "%+v struct": fmt.Sprintf("%+v", p),
		"%#v struct": fmt.Sprintf("%#v", p), "String": s.String(), "json": string(jsonOut),
		"yaml": string(yamlOut), "text": string(textOut), "slog": logged.String(),
	}
	for name, out := range outputs {
		if strings.Contains(out, topSecret) || strings.Contains(out, "9f1c2d3e") {
			t.Errorf("%s leaks the secret: %s", name, out)
		}
		if !strings.Contains(out, "[redacted]") {
			t.Errorf("%s = %q, want the placeholder", name, out)
		}
	}
	if s.Reveal() != topSecret {
		t.Errorf("Reveal() = %q", s.Reveal())
	}
}

// TestTokenSecret pins where the token secret comes from and that failures never contain it.
func TestTokenSecret(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	if err := os.WriteFile(file, []byte("  "+topSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PVE_SECRET": " " + topSecret + " ", "EMPTY": ""}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name    string
		cfg     proxmox.EndpointConfig
		want    string
		wantErr string
	}{
		{name: "env", cfg: proxmox.EndpointConfig{ID: 1, TokenSecretEnv: "PVE_SECRET"}, want: topSecret},
		{name: "file", cfg: proxmox.EndpointConfig{ID: 1, TokenSecretFile: file}, want: topSecret},
		{name: "unset env", cfg: proxmox.EndpointConfig{ID: 1, TokenSecretEnv: "NOPE"}, wantErr: "NOPE"},
		{name: "empty env", cfg: proxmox.EndpointConfig{ID: 1, TokenSecretEnv: "EMPTY"}, wantErr: "EMPTY"},
		{name: "missing file", cfg: proxmox.EndpointConfig{ID: 1, TokenSecretFile: filepath.Join(dir, "nope")}, wantErr: "nope"},
		{name: "empty file", cfg: proxmox.EndpointConfig{ID: 1, TokenSecretFile: empty}, wantErr: "empty"},
		{name: "no source", cfg: proxmox.EndpointConfig{ID: 1}, wantErr: "neither"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.cfg.TokenSecret(getenv)
			if tt.wantErr != "" {
				if !errors.Is(err, proxmox.ErrNoSecret) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("TokenSecret error = %v, want ErrNoSecret naming %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), topSecret) {
					t.Errorf("error leaks the secret: %v", err)
				}
				return
			}
			if err != nil || got.Reveal() != tt.want {
				t.Fatalf("TokenSecret = %q, %v; want the trimmed secret", got.Reveal(), err)
			}
			if got.String() != "[redacted]" {
				t.Errorf("String() = %q", got.String())
			}
		})
	}
}
