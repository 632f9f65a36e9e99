package ingress_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/ingress"
)

const rulesYAML = `
rules:
  - name: vm-activated-start
    events: [updated]
    object_type: virtualization.virtualmachine
    when:
      - {path: data.status.value, equals: active}
      - {path: snapshots.prechange.status, not_equals: active}
      - {path: data.custom_fields.proxmox_vm_id, exists: true}
    verb: vm.start
    endpoint: "{{ .data.custom_fields.proxmox_endpoint_id }}"
    data:
      vm: "{{ .data.custom_fields.proxmox_vm_id }}"
  - name: vm-decommissioned-stop
    events: [updated]
    object_type: virtualization.virtualmachine
    when:
      - {path: data.status.value, in: [decommissioning, offline]}
    verb: vm.stop
    endpoint: 1
    actor: "netbox-rule:{{ .username }}"
    idempotency_key: "stop-{{ .object_id }}"
    data:
      vm: "{{ .data.custom_fields.proxmox_vm_id }}"
      force: true
`

// vmBody renders a VirtualMachine update webhook in the shape NetBox version sends it.
func vmBody(version, status, prechange string) []byte {
	data := `{"id":42,"name":"db-01","status":{"value":"` + status + `","label":"x"},` +
		`"custom_fields":{"proxmox_vm_id":101,"proxmox_endpoint_id":1}}`
	snaps := `{"prechange":{"status":"` + prechange + `"},"postchange":{"status":"` + status + `"}}`
	switch version {
	case "4.2": // model, username, request_id
		return []byte(`{"event":"updated","timestamp":"` + netboxTime(" ") + `","model":"virtualmachine",` +
			`"username":"alice","request_id":"9d2b6a4e-1c1e-4c55-9d7e-4c2f1b7e0a11","data":` + data + `,"snapshots":` + snaps + `}`)
	case "4.4": // object_type beside model
		return []byte(`{"event":"updated","timestamp":"` + netboxTime("T") + `","object_type":"virtualization.virtualmachine",` +
			`"model":"virtualmachine","username":"alice","request_id":"9d2b6a4e-1c1e-4c55-9d7e-4c2f1b7e0a12","data":` + data + `,"snapshots":` + snaps + `}`)
	case "4.5": // model removed; request added beside the deprecated username and request_id
		return []byte(`{"event":"updated","timestamp":"` + netboxTime("T") + `","object_type":"virtualization.virtualmachine",` +
			`"username":"alice","request_id":"9d2b6a4e-1c1e-4c55-9d7e-4c2f1b7e0a14","data":` + data +
			`,"request":{"id":"9d2b6a4e-1c1e-4c55-9d7e-4c2f1b7e0a14","user":"alice"},"snapshots":` + snaps + `}`)
	case "4.7": // object_type and request, no model/username/request_id
		return []byte(`{"event":"updated","timestamp":"` + netboxTime("T") + `","object_type":"virtualization.virtualmachine",` +
			`"data":` + data + `,"request":{"id":"9d2b6a4e-1c1e-4c55-9d7e-4c2f1b7e0a13","path":"/api/virtualization/virtual-machines/42/",` +
			`"path_info":"/api/virtualization/virtual-machines/42/","method":"PATCH","GET":{},"user":"alice"},"snapshots":` + snaps + `}`)
	}
	panic("unknown version " + version)
}

func webhookHarness(t *testing.T) *harness {
	t.Helper()
	rules, err := ingress.ParseRules([]byte(rulesYAML))
	if err != nil {
		t.Fatalf("rules: %v", err)
	}
	return newHarness(t, ingress.Config{WebhookSecret: secret, Rules: rules})
}

// TestWebhookSignature pins the signature check: only the exact lowercase hex HMAC-SHA512 of
// the body is accepted; anything else is 401 and nothing reaches the commands stream.
func TestWebhookSignature(t *testing.T) {
	t.Parallel()
	body := vmBody("4.7", "active", "planned")
	valid := ingress.Sign(secret, body)
	cases := []struct {
		name       string
		headers    map[string]string
		wantStatus int
		wantReason string
	}{
		{"missing", nil, 401, "signature_missing"},
		{"wrong secret", map[string]string{ingress.SignatureHeader: ingress.Sign("other", body)}, 401, "invalid_signature"},
		{"signature of another body", map[string]string{ingress.SignatureHeader: ingress.Sign(secret, append(body, ' '))}, 401, "invalid_signature"},
		{"uppercase hex", map[string]string{ingress.SignatureHeader: strings.ToUpper(valid)}, 401, "invalid_signature"},
		{"truncated", map[string]string{ingress.SignatureHeader: valid[:64]}, 401, "invalid_signature"},
		{"valid", map[string]string{ingress.SignatureHeader: valid}, 202, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := webhookHarness(t)
			status, out, _ := h.post(ingress.WebhookPath, body, tc.headers)
			h.checkAnswer(status, out, tc.wantStatus, tc.wantReason)
		})
	}
}

// TestWebhookShapes: a NetBox 4.2, 4.4, 4.5 and 4.7 body of the same change map through the same
// rule to the same command data, endpoint and actor.
func TestWebhookShapes(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"4.2", "4.4", "4.5", "4.7"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			h := webhookHarness(t)
			status, out := h.webhook(vmBody(version, "active", "planned"), nil)
			if status != http.StatusAccepted {
				t.Fatalf("status %d: %s", status, out)
			}
			var acc ingress.Accepted
			if err := json.Unmarshal(out, &acc); err != nil {
				t.Fatalf("answer: %v", err)
			}
			if acc.Verb != "vm.start" || acc.Rule != "vm-activated-start" || !strings.HasPrefix(acc.CommandID, "nbwh-") ||
				acc.Subject != h.subjects.Follow(acc.CommandID) || acc.ResultSubject != h.subjects.Result(acc.CommandID) || acc.Duplicate {
				t.Errorf("answer %+v", acc)
			}
			msgs := h.commands()
			if len(msgs) != 1 {
				t.Fatalf("%d commands, want 1", len(msgs))
			}
			cmd := h.decoded(msgs[0])
			if cmd.ID != acc.CommandID || cmd.Source != ingress.DefaultSource || cmd.Verb != "vm.start" ||
				!cmd.HasEndpointID || cmd.EndpointID != 1 || cmd.Actor != "netbox:alice" || cmd.Mode != events.ModeBinary {
				t.Errorf("command %+v", cmd)
			}
			if string(cmd.Data) != `{"vm":101}` {
				t.Errorf("data %s, want {\"vm\":101} (the number kept its type)", cmd.Data)
			}
			if !strings.HasSuffix(cmd.Subject, "virtualmachine/42") {
				t.Errorf("CloudEvents subject %q", cmd.Subject)
			}
		})
	}
}

// TestWebhookRuleOutcomes: unmatched → 204 and nothing published; the second rule renders
// actor and Idempotency-Key templates; a template on a missing key → 422 naming the rule.
func TestWebhookRuleOutcomes(t *testing.T) {
	t.Parallel()
	h := webhookHarness(t)

	t.Run("no rule matches", func(t *testing.T) {
		for _, body := range [][]byte{
			vmBody("4.7", "active", "active"), // already active: the not_equals condition fails
			bytes.Replace(vmBody("4.7", "active", "planned"), []byte(`"event":"updated"`), []byte(`"event":"deleted"`), 1),
			bytes.Replace(vmBody("4.7", "active", "planned"), []byte(`virtualization.virtualmachine`), []byte(`dcim.device`), 1),
			bytes.Replace(vmBody("4.2", "active", "planned"), []byte(`"model":"virtualmachine"`), []byte(`"model":"device"`), 1),
		} {
			before := len(h.commands())
			status, out := h.webhook(body, nil)
			if status != http.StatusNoContent || len(out) != 0 {
				t.Errorf("status %d body %q, want 204 and no body", status, out)
			}
			if n := len(h.commands()); n != before {
				t.Errorf("unmatched webhook published %d commands", n-before)
			}
		}
	})
	t.Run("second rule with actor and idempotency key", func(t *testing.T) {
		status, out := h.webhook(vmBody("4.2", "offline", "active"), nil)
		if status != http.StatusAccepted {
			t.Fatalf("status %d: %s", status, out)
		}
		var acc ingress.Accepted
		_ = json.Unmarshal(out, &acc)
		var cmd events.Command
		for _, m := range h.commands() {
			if c := h.decoded(m); c.ID == acc.CommandID {
				cmd = c
			}
		}
		if cmd.Verb != "vm.stop" || cmd.Actor != "netbox-rule:alice" || cmd.IdempotencyKey != "stop-42" || cmd.EndpointID != 1 {
			t.Errorf("command %+v", cmd)
		}
		var data map[string]any
		if err := json.Unmarshal(cmd.Data, &data); err != nil || data["force"] != true || data["vm"] != float64(101) {
			t.Errorf("data %s", cmd.Data)
		}
	})
	t.Run("template on a missing key", func(t *testing.T) {
		body := bytes.Replace(vmBody("4.7", "active", "planned"), []byte(`"proxmox_endpoint_id":1`), []byte(`"other":1`), 1)
		before := len(h.commands())
		status, out := h.webhook(body, nil)
		var e struct{ Reason, Rule string }
		_ = json.Unmarshal(out, &e)
		if status != http.StatusUnprocessableEntity || e.Reason != "rule_render_failed" || e.Rule != "vm-activated-start" {
			t.Errorf("got %d %s", status, out)
		}
		if n := len(h.commands()); n != before {
			t.Errorf("published %d commands", n-before)
		}
	})
	t.Run("not a webhook body", func(t *testing.T) {
		status, out := h.webhook([]byte(`[1,2]`), nil)
		if status != http.StatusBadRequest || !strings.Contains(string(out), "invalid_webhook") {
			t.Errorf("got %d %s", status, out)
		}
	})
}

// TestWebhookRedelivery: NetBox delivering the same webhook again makes the same command id;
// JetStream stores it once and the answer says duplicate.
func TestWebhookRedelivery(t *testing.T) {
	t.Parallel()
	h := webhookHarness(t)
	body := vmBody("4.7", "active", "planned")
	var ids []string
	for i := range 2 {
		status, out := h.webhook(body, nil)
		var acc ingress.Accepted
		if status != http.StatusAccepted || json.Unmarshal(out, &acc) != nil {
			t.Fatalf("delivery %d: %d %s", i, status, out)
		}
		if acc.Duplicate != (i == 1) {
			t.Errorf("delivery %d: duplicate = %v", i, acc.Duplicate)
		}
		ids = append(ids, acc.CommandID)
	}
	if ids[0] != ids[1] {
		t.Errorf("ids differ: %v", ids)
	}
	if n := len(h.commands()); n != 1 {
		t.Errorf("%d commands stored, want 1", n)
	}
	// A different change (another request) is another command.
	other := bytes.Replace(body, []byte("0a13"), []byte("0a99"), 1)
	_, out := h.webhook(other, nil)
	var acc ingress.Accepted
	_ = json.Unmarshal(out, &acc)
	if acc.CommandID == ids[0] {
		t.Errorf("another request got the same id %s", acc.CommandID)
	}
}

// TestWebhookCloudEvent: a structured CloudEvent body is validated by the events decoder and
// published byte for byte; one the decoder refuses is 422 with the decoder's reason.
func TestWebhookCloudEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, ingress.Config{WebhookSecret: secret}) // no rules needed
	at := netboxTime("T")
	ce := []byte(`{"specversion":"1.0","id":"nb-ce-1","source":"/netbox/webhook/7","type":"proxbus.vm.start","time":"` + at + `",` +
		`"endpointid":1,"actor":"alice","datacontenttype":"application/json","data":{"vm":"101"}}`)
	cases := []struct {
		name        string
		body        []byte
		contentType string
		wantStatus  int
		wantDetail  string
	}{
		{"by content type", ce, events.ContentTypeCE, 202, ""},
		{"by specversion attribute", ce, "application/json", 202, ""},
		{"type not proxbus", bytes.Replace(ce, []byte(`proxbus.vm.start`), []byte(`com.example.x`), 1), "application/json", 422, "type is not proxbus.<verb>"},
		{"endpointid not an integer", bytes.Replace(ce, []byte(`"endpointid":1`), []byte(`"endpointid":"one"`), 1), "application/json", 422, "endpointid"},
		{"no id", bytes.Replace(ce, []byte(`"id":"nb-ce-1",`), nil, 1), "application/json", 422, "id"},
		{"no time", bytes.Replace(ce, []byte(`"time":"`+at+`",`), nil, 1), "application/json", 422, "needs its time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.commands())
			status, out := h.webhook(tc.body, map[string]string{"Content-Type": tc.contentType})
			if status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", status, tc.wantStatus, out)
			}
			msgs := h.commands()
			if tc.wantStatus != 202 {
				if !strings.Contains(string(out), tc.wantDetail) || len(msgs) != before {
					t.Errorf("answer %s, %d new commands", out, len(msgs)-before)
				}
				return
			}
			last := msgs[len(msgs)-1]
			if !bytes.Equal(last.Data, tc.body) || last.Header.Get("Nats-Msg-Id") != "nb-ce-1" {
				t.Errorf("stored %s with msg id %q, want the body as is", last.Data, last.Header.Get("Nats-Msg-Id"))
			}
			cmd := h.decoded(last)
			if cmd.Mode != events.ModeStructured || cmd.Verb != "vm.start" || cmd.Source != "/netbox/webhook/7" || cmd.Actor != "alice" {
				t.Errorf("command %+v", cmd)
			}
		})
	}
}

// TestBodyLimit: a body over 1 MiB is 413, announced or not, and nothing is published.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	h := webhookHarness(t)
	big := []byte(fmt.Sprintf(`{"event":"updated","data":{"pad":"%s"}}`, strings.Repeat("x", ingress.MaxBodyBytes)))
	status, out := h.webhook(big, nil)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(string(out), "body_too_large") {
		t.Errorf("announced: got %d %s", status, out)
	}
	// Not announced (chunked): refused once the limit is crossed.
	req, err := http.NewRequest(http.MethodPost, h.url+ingress.WebhookPath, io.MultiReader(bytes.NewReader(big)))
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	req.Header.Set(ingress.SignatureHeader, ingress.Sign(secret, big))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	resp.Body.Close()
	if req.ContentLength != 0 || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked: content length %d, status %d", req.ContentLength, resp.StatusCode)
	}
	if n := len(h.commands()); n != 0 {
		t.Errorf("%d commands published", n)
	}
}
