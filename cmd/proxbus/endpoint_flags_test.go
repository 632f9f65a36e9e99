package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEndpointFlags pins --endpoints-from-netbox and its flags: they reach the configuration
// (also from their PROXBUS_* variables), they exclude --endpoints-file, a file that cannot be
// read or a flag of endpoints read from NetBox given without it is an error naming the flag,
// and PROXBUS_ENDPOINT_<ID>_TOKEN_SECRET is not warned about.
func TestEndpointFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secrets := filepath.Join(dir, "endpoint-secrets.env")
	if err := os.WriteFile(secrets, []byte("PROXBUS_ENDPOINT_1_TOKEN_SECRET=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"serve", "--netbox-url", "http://netbox", "--netbox-token", "0123456789abcdef0123456789abcdef01234567"}
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string // "" means no preflight problem
	}{
		{"from NetBox", map[string]string{"PROXBUS_ENDPOINTS_FROM_NETBOX": "true", "PROXBUS_ENDPOINT_SECRETS_FILE": secrets,
			"PROXBUS_ENDPOINT_3_TOKEN_SECRET": "y"}, []string{"--endpoints-reload-interval", "30s"}, ""},
		{"both sources", nil, []string{"--endpoints-from-netbox", "--endpoints-file", "e.yaml"}, "give one"},
		{"neither", nil, nil, "($PROXBUS_ENDPOINTS_FROM_NETBOX) to read them from NetBox"},
		{"secrets file missing", nil, []string{"--endpoints-from-netbox", "--endpoint-secrets-file", filepath.Join(dir, "nope")}, "($PROXBUS_ENDPOINT_SECRETS_FILE): open"},
		{"secrets file without from-netbox", nil, []string{"--endpoints-file", "e.yaml", "--endpoint-secrets-file", secrets},
			"($PROXBUS_ENDPOINT_SECRETS_FILE) applies to endpoints read from NetBox"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, e, err := parseCLI(t, tc.env, append(append([]string{}, base...), tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			e.stderr = &stderr
			_, errs := c.Serve.preflight(e)
			var text []string
			for _, err := range errs {
				if !strings.Contains(err.Error(), "redis") {
					text = append(text, err.Error())
				}
			}
			got := strings.Join(text, "\n")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("preflight: %q, want %q", got, tc.want)
			}
			if tc.want != "" {
				return
			}
			cfg, err := c.Serve.config(e)
			if err != nil {
				t.Fatal(err)
			}
			if !cfg.EndpointsFromNetBox || cfg.EndpointSecretsFile != secrets || cfg.EndpointsReloadInterval != 30*time.Second {
				t.Errorf("config: from NetBox %v, secrets file %q, interval %s", cfg.EndpointsFromNetBox, cfg.EndpointSecretsFile, cfg.EndpointsReloadInterval)
			}
			warnUnknownEnv(e)
			if stderr.Len() != 0 {
				t.Errorf("warned: %s", stderr.String())
			}
		})
	}
}
