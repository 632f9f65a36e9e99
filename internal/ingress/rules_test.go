package ingress_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/ingress"
)

// TestParseRulesRefusals: a rules file that cannot work is refused at load, saying why.
func TestParseRulesRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown key", "rules:\n  - {name: a, verb: vm.start, colour: red}\n", "colour"},
		{"no name", "rules:\n  - {verb: vm.start}\n", "name"},
		{"bad name", "rules:\n  - {name: 'a b', verb: vm.start}\n", "name"},
		{"duplicate name", "rules:\n  - {name: a, verb: vm.start}\n  - {name: a, verb: vm.stop}\n", "duplicate"},
		{"no verb", "rules:\n  - {name: a}\n", "verb"},
		{"wildcard verb", "rules:\n  - {name: a, verb: 'vm.*'}\n", "verb"},
		{"bare object type", "rules:\n  - {name: a, verb: vm.start, object_type: virtualmachine}\n", "app_label.model"},
		{"condition without operator", "rules:\n  - {name: a, verb: vm.start, when: [{path: data.x}]}\n", "exactly one"},
		{"condition with two operators", "rules:\n  - {name: a, verb: vm.start, when: [{path: data.x, equals: 1, exists: true}]}\n", "exactly one"},
		{"condition without path", "rules:\n  - {name: a, verb: vm.start, when: [{equals: 1}]}\n", "path"},
		{"empty in", "rules:\n  - {name: a, verb: vm.start, when: [{path: data.x, in: []}]}\n", "in must"},
		{"negative endpoint", "rules:\n  - {name: a, verb: vm.start, endpoint: -1}\n", "endpoint"},
		{"template that does not parse", "rules:\n  - {name: a, verb: vm.start, data: {vm: '{{ .data.x '}}\n", "data.vm"},
		{"data not a mapping", "rules:\n  - {name: a, verb: vm.start, data: [1]}\n", "mapping"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ingress.ParseRules([]byte(tc.yaml))
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want config.ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
}

// TestRuleConditionsAndTemplates pins the matching and rendering rules on one webhook.
func TestRuleConditionsAndTemplates(t *testing.T) {
	t.Parallel()
	wh, err := ingress.ParseWebhook([]byte(`{"event":"object_updated","timestamp":"t","object_type":"virtualization.virtualmachine",
		"data":{"id":7,"name":"web","tags":[{"slug":"prod"}],"custom_fields":{"vmid":"105","none":null,"ep":2}},"request":{"id":"r1","user":"bob"}}`))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	cases := []struct {
		name     string
		rule     string
		wantOK   bool
		wantData string
		wantErr  bool
	}{
		{"event type spelling is normalised", `events: [updated]`, true, "", false},
		{"other event", `events: [created]`, false, "", false},
		{"object type matches case-insensitively", `object_type: Virtualization.VirtualMachine`, true, "", false},
		{"equals a number across YAML and JSON", `when: [{path: data.id, equals: 7}]`, true, "", false},
		{"a string is not a number", `when: [{path: data.custom_fields.vmid, equals: 105}]`, false, "", false},
		{"list index in a path", `when: [{path: data.tags.0.slug, equals: prod}]`, true, "", false},
		{"not_equals on a missing path holds", `when: [{path: data.nope, not_equals: x}]`, true, "", false},
		{"exists false on null", `when: [{path: data.custom_fields.none, exists: false}]`, true, "", false},
		{"in", `when: [{path: data.name, in: [db, web]}]`, true, "", false},
		{"single action keeps its type", `data: {vm: "{{ .data.custom_fields.vmid }}", ep: "{{ .data.custom_fields.ep }}"}`, true, `{"ep":2,"vm":"105"}`, false},
		{"mixed text renders a string", `data: {name: "vm-{{ .data.id }}-{{ upper .data.name }}"}`, true, `{"name":"vm-7-WEB"}`, false},
		{"an object value", `data: {tags: "{{ .data.tags }}"}`, true, `{"tags":[{"slug":"prod"}]}`, false},
		{"literals pass through", `data: {force: true, timeout: 30, note: plain}`, true, `{"force":true,"note":"plain","timeout":30}`, false},
		{"missing key is an error", `data: {vm: "{{ .data.custom_fields.missing }}"}`, true, "", true},
		{"null value is an error", `data: {vm: "{{ .data.custom_fields.none }}"}`, true, "", true},
		{"null inside text is an error", `data: {vm: "x{{ .data.custom_fields.none }}"}`, true, "", true},
		{"endpoint from a string field", `endpoint: "{{ .data.custom_fields.vmid }}"`, true, "", false},
		{"endpoint not a number", `endpoint: "{{ .data.name }}"`, true, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rules, err := ingress.ParseRules([]byte("rules:\n  - name: r\n    verb: vm.start\n    " + tc.rule + "\n"))
			if err != nil {
				t.Fatalf("rules: %v", err)
			}
			m, ok, err := rules.Map(wh)
			if ok != tc.wantOK {
				t.Fatalf("matched = %v, want %v", ok, tc.wantOK)
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				if !errors.Is(err, ingress.ErrRender) || m.Rule != "r" {
					t.Errorf("err = %v (rule %q), want ErrRender for rule r", err, m.Rule)
				}
				return
			}
			if tc.wantData != "" && string(m.Data) != tc.wantData {
				t.Errorf("data %s, want %s", m.Data, tc.wantData)
			}
			if ok && m.Actor != "netbox:bob" {
				t.Errorf("default actor %q, want netbox:bob", m.Actor)
			}
		})
	}
}

// TestParseWebhookShapes pins the normalisation of NetBox 4.2 to 4.7 bodies.
func TestParseWebhookShapes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		version                                              string
		wantObjectType, wantModel, wantRequest, wantUsername string
	}{
		{"4.2", "", "virtualmachine", "9d2b6a4e-1c1e-4c55-9d7e-4c2f1b7e0a11", "alice"},
		{"4.4", "virtualization.virtualmachine", "virtualmachine", "9d2b6a4e-1c1e-4c55-9d7e-4c2f1b7e0a12", "alice"},
		{"4.5", "virtualization.virtualmachine", "virtualmachine", "9d2b6a4e-1c1e-4c55-9d7e-4c2f1b7e0a14", "alice"},
		{"4.7", "virtualization.virtualmachine", "virtualmachine", "9d2b6a4e-1c1e-4c55-9d7e-4c2f1b7e0a13", "alice"},
	}
	for _, tc := range cases {
		t.Run(tc.version, func(t *testing.T) {
			t.Parallel()
			wh, err := ingress.ParseWebhook(vmBody(tc.version, "active", "planned"))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if wh.Event != "updated" || wh.ObjectType != tc.wantObjectType || wh.Model != tc.wantModel ||
				wh.RequestID != tc.wantRequest || wh.Username != tc.wantUsername || wh.ObjectID != "42" {
				t.Errorf("got %+v", wh)
			}
			for _, key := range []string{"event", "object_type", "model", "object_id", "request_id", "username", "timestamp", "data", "snapshots"} {
				if _, ok := wh.Context[key]; !ok {
					t.Errorf("context lacks %s", key)
				}
			}
		})
	}
	for _, bad := range []string{`[]`, `{"data":{}}`, `{"event":"updated"}`, `{"event":"updated","data":[]}`, `{"event":"updated","data":{}} {}`} {
		if _, err := ingress.ParseWebhook([]byte(bad)); !errors.Is(err, ingress.ErrNotWebhook) {
			t.Errorf("ParseWebhook(%s) = %v, want ErrNotWebhook", bad, err)
		}
	}
}

// TestWebhookCommandIDStable: the id depends on the webhook's identity, not on the data.
func TestWebhookCommandIDStable(t *testing.T) {
	t.Parallel()
	a, _ := ingress.ParseWebhook(vmBody("4.7", "active", "planned"))
	b, _ := ingress.ParseWebhook(vmBody("4.7", "active", "planned"))
	if ingress.WebhookCommandID("r", "vm.start", a) != ingress.WebhookCommandID("r", "vm.start", b) {
		t.Error("same webhook, different ids")
	}
	if ingress.WebhookCommandID("r", "vm.start", a) == ingress.WebhookCommandID("r2", "vm.start", a) {
		t.Error("another rule, same id")
	}
	id := ingress.WebhookCommandID("r", "vm.start", a)
	if len(id) != 45 || strings.Trim(id[5:], "0123456789abcdef") != "" {
		t.Errorf("id %q is not nbwh- and 40 hex digits", id)
	}
}
