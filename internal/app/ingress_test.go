package app

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/config"
)

// TestIngressCheck pins when the fronts can start: a front needs the HTTP server and a
// credential of at least 16 characters, a rules file needs the webhook secret, and a bad rules
// file is refused before anything connects.
func TestIngressCheck(t *testing.T) {
	const hookSecret, frontKey = "0123456789abcdef", "fedcba9876543210"
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("rules:\n  - name: r\n    events: [updated]\n    object_type: virtualization.virtualmachine\n    verb: vm.start\n    endpoint: \"1\"\n    data:\n      vm: \"{{ .data.name }}\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("rules: [{name: r}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	crash := filepath.Join(dir, "crash.yaml") // panics inside goccy/go-yaml v1.19.2 (#735)
	if err := os.WriteFile(crash, []byte("rules: ! {a:\n- b}"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		in        Ingress
		httpOn    bool
		wantErr   bool
		wantRules bool
	}{
		{name: "nothing configured", in: Ingress{}},
		{name: "webhook without rules", in: Ingress{WebhookSecret: hookSecret}, httpOn: true},
		{name: "webhook with rules", in: Ingress{WebhookSecret: hookSecret, WebhookRulesFile: good}, httpOn: true, wantRules: true},
		{name: "front only", in: Ingress{ProxboxAPIKey: frontKey}, httpOn: true},
		{name: "webhook without http", in: Ingress{WebhookSecret: hookSecret}, wantErr: true},
		{name: "front without http", in: Ingress{ProxboxAPIKey: frontKey}, wantErr: true},
		{name: "rules without secret", in: Ingress{WebhookRulesFile: good}, httpOn: true, wantErr: true},
		{name: "bad rules", in: Ingress{WebhookSecret: hookSecret, WebhookRulesFile: bad}, httpOn: true, wantErr: true},
		{name: "rules within the verbs", in: Ingress{WebhookSecret: hookSecret, WebhookRulesFile: good, WebhookVerbs: []string{"vm.*"}}, httpOn: true, wantRules: true},
		{name: "rule outside the verbs", in: Ingress{WebhookSecret: hookSecret, WebhookRulesFile: good, WebhookVerbs: []string{"vm.stop"}}, httpOn: true, wantErr: true},
		{name: "approvals in the verbs", in: Ingress{WebhookSecret: hookSecret, WebhookVerbs: []string{"command.approve"}}, httpOn: true, wantErr: true},
		{name: "verbs without secret", in: Ingress{ProxboxAPIKey: frontKey, WebhookVerbs: []string{"vm.*"}}, httpOn: true, wantErr: true},
		{name: "rules crashing the YAML decoder", in: Ingress{WebhookSecret: hookSecret, WebhookRulesFile: crash}, httpOn: true, wantErr: true},
		{name: "short webhook secret", in: Ingress{WebhookSecret: "0123456789abcde"}, httpOn: true, wantErr: true},
		{name: "short proxbox-api key", in: Ingress{ProxboxAPIKey: "abc"}, httpOn: true, wantErr: true},
		{name: "missing rules file", in: Ingress{WebhookSecret: hookSecret, WebhookRulesFile: filepath.Join(dir, "none.yaml")}, httpOn: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rules, err := tt.in.check(tt.httpOn)
			if tt.wantErr {
				if !errors.Is(err, config.ErrInvalid) {
					t.Fatalf("err = %v, want config.ErrInvalid", err)
				}
				if f := tt.in.WebhookRulesFile; f != "" && tt.in.WebhookSecret != "" && !strings.Contains(err.Error(), f) {
					t.Errorf("err = %v, want it to name %s", err, f)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if (rules != nil) != tt.wantRules {
				t.Fatalf("rules loaded = %v, want %v", rules != nil, tt.wantRules)
			}
		})
	}
}
