package main

import (
	"io"
	"testing"
	"time"
)

// TestServeFlagsReachTheConfig pins that serve's scaling, HTTP and ingress flags (and their
// PROXBUS_* variables) end up in the configuration Serve gets.
func TestServeFlagsReachTheConfig(t *testing.T) {
	t.Parallel()
	env := map[string]string{"PROXBUS_MAX_ACK_PENDING": "24", "PROXBUS_WEBHOOK_SECRET": "hook-secret"}
	fs := newFlagSet("serve", io.Discard)
	fs.getenv = func(k string) string { return env[k] }
	sf := addServeFlags(fs)
	if err := fs.Parse([]string{
		"--stream-replicas", "3", "--http-addr", ":9090", "--webhook-rules", "/etc/proxbus/rules.yaml",
		"--proxbox-api-key", "front-key", "--http-result-timeout", "15s",
	}); err != nil {
		t.Fatal(err)
	}
	cfg, err := sf.config(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"MaxAckPending (env)", cfg.MaxAckPending, 24},
		{"StreamReplicas", cfg.StreamReplicas, 3},
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
