package ingress_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/ingress"
	"github.com/proxbus/proxbus/internal/testenv"
)

// ceBody is a structured CloudEvent webhook body of type proxbus.<verb> from source.
func ceBody(id, verb, source, data string) []byte {
	return []byte(`{"specversion":"1.0","id":"` + id + `","source":"` + source + `","type":"proxbus.` + verb +
		`","time":"` + netboxTime("T") + `","actor":"alice","datacontenttype":"application/json","data":` + data + `}`)
}

// TestWebhookCloudEventRefusals reproduces the review's approval forgery and its neighbours:
// a signed CloudEvent body of a command.* type (an approval naming actor alice), one whose
// source is outside the front's own, one whose verb the operator did not list, and a
// schedule.add scheduling a verb the operator did not list or an approval are each answered
// 403 with the field at fault, and nothing reaches the commands stream.
func TestWebhookCloudEventRefusals(t *testing.T) {
	t.Parallel()
	approve := `{"command_id":"c-1","command_source":"urn:proxbus:cli"}`
	cases := []struct {
		name       string
		verbs      []string
		body       []byte
		wantStatus int
		wantReason string
	}{
		{"approval", nil, ceBody("a-1", "command.approve", "/netbox/webhook", approve), 403, "verb_not_allowed"},
		{"rejection", nil, ceBody("a-2", "command.reject", "/netbox/webhook", approve), 403, "verb_not_allowed"},
		{"approval with every verb listed", []string{"vm.*", "storage.*"}, ceBody("a-3", "command.approve", "/netbox/webhook", approve), 403, "verb_not_allowed"},
		{"source of the cli", nil, ceBody("s-1", "vm.start", "urn:proxbus:cli", `{"vm":1}`), 403, "source_not_allowed"},
		{"source beside the front's", nil, ceBody("s-2", "vm.start", "/netbox/webhookx", `{"vm":1}`), 403, "source_not_allowed"},
		{"verb not listed", []string{"vm.start"}, ceBody("v-1", "vm.delete", "/netbox/webhook", `{"vm":1}`), 403, "verb_not_allowed"},
		{"verb listed", []string{"vm.start"}, ceBody("v-2", "vm.start", "/netbox/webhook", `{"vm":1}`), 202, ""},
		{"verb under a listed prefix", []string{"vm.*"}, ceBody("v-3", "vm.start", "/netbox/webhook/7", `{"vm":1}`), 202, ""},
		{"a schedule of a listed verb", []string{"schedule.add", "vm.backup"},
			ceBody("sc-1", "schedule.add", "/netbox/webhook", `{"name":"n","every":"24h","verb":"vm.backup","endpoint_id":1,"data":{"vm":1,"storage":"pbs1"}}`), 202, ""},
		{"a schedule of a verb not listed", []string{"schedule.add", "vm.backup"},
			ceBody("sc-2", "schedule.add", "/netbox/webhook", `{"name":"n","every":"24h","verb":"vm.delete","endpoint_id":1,"data":{"vm":1}}`), 403, "verb_not_allowed"},
		{"a scheduled approval", nil,
			ceBody("sc-3", "schedule.add", "/netbox/webhook", `{"name":"n","every":"1h","verb":"command.approve","endpoint_id":1,"data":`+approve+`}`), 403, "verb_not_allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, ingress.Config{WebhookSecret: secret, WebhookVerbs: tc.verbs})
			status, out := h.webhook(tc.body, map[string]string{"Content-Type": "application/cloudevents+json"})
			h.checkAnswer(status, out, tc.wantStatus, tc.wantReason)
		})
	}
}

// TestWebhookVerbConfiguration: a rules file naming a command.* verb does not load, a verb
// list naming one is refused, and a rule whose verb is not in the list stops the server from
// starting; each error names the rule or the entry.
func TestWebhookVerbConfiguration(t *testing.T) {
	t.Parallel()
	for _, verb := range []string{"command.approve", "command.reject", "command.cancel"} {
		_, err := ingress.ParseRules([]byte("rules:\n  - name: forge\n    verb: " + verb + "\n"))
		if !errors.Is(err, config.ErrInvalid) || !errors.Is(err, ingress.ErrVerbNotAllowed) {
			t.Errorf("rule with verb %s: %v, want config.ErrInvalid and ErrVerbNotAllowed", verb, err)
		}
	}
	rules, err := ingress.ParseRules([]byte("rules:\n  - name: start\n    verb: vm.start\n"))
	if err != nil {
		t.Fatal(err)
	}
	n := testenv.StartNATS(t).JS
	cases := []struct {
		name  string
		verbs []string
		ok    bool
	}{
		{"no list", nil, true},
		{"listed", []string{"vm.start"}, true},
		{"listed by prefix", []string{"vm.*"}, true},
		{"not listed", []string{"vm.stop"}, false},
		{"command prefix listed", []string{"command.*"}, false},
		{"approval listed", []string{"vm.start", "command.approve"}, false},
		{"not a verb", []string{"vm start"}, false},
	}
	for _, tc := range cases {
		_, err := ingress.New(ingress.Config{JetStream: n, WebhookSecret: secret, Rules: rules, WebhookVerbs: tc.verbs})
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%s: %v, want config.ErrInvalid", tc.name, err)
		}
	}
}

// TestWebhookReplayWindow reproduces the review's replay: a signed webhook captured and sent
// again once its command's identity is forgotten (a day later) must be refused, not run again.
// The command takes its time from the signed timestamp, so its expiry counts from when NetBox
// made it; a body without a usable timestamp, or dated beyond the clock skew, is refused.
func TestWebhookReplayWindow(t *testing.T) {
	t.Parallel()
	rules, err := ingress.ParseRules([]byte(rulesYAML))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	body := func(ts string) []byte {
		return []byte(`{"event":"updated","timestamp":"` + ts + `","object_type":"virtualization.virtualmachine","username":"alice",` +
			`"request_id":"r-1","data":{"id":42,"status":{"value":"active"},"custom_fields":{"proxmox_vm_id":101,"proxmox_endpoint_id":1}},` +
			`"snapshots":{"prechange":{"status":"planned"}}}`)
	}
	cases := []struct {
		name       string
		body       []byte
		wantStatus int
		wantReason string
	}{
		{"fresh", body("2026-12-02 09:59:00.123456+00:00"), 202, ""},
		{"a day and a minute old (replayed)", body("2026-12-01T09:59:00+00:00"), 422, "webhook_too_old"},
		{"an hour in the future", body("2026-12-02T11:00:00+00:00"), 422, "webhook_from_the_future"},
		{"no timestamp", body(""), 422, "invalid_webhook"},
		{"timestamp without a zone", body("2026-12-02T09:59:00"), 422, "invalid_webhook"},
		{"CloudEvent a day old", ceBodyAt("old-1", "2026-12-01T09:00:00Z"), 422, "webhook_too_old"},
		{"CloudEvent fresh", ceBodyAt("new-1", "2026-12-02T09:59:00Z"), 202, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, ingress.Config{WebhookSecret: secret, Rules: rules, Now: func() time.Time { return now }})
			status, out := h.webhook(tc.body, nil)
			h.checkAnswer(status, out, tc.wantStatus, tc.wantReason)
			if status != 202 {
				return
			}
			if cmd := h.decoded(h.commands()[0]); !cmd.Time.Truncate(time.Second).Equal(now.Add(-time.Minute)) {
				t.Errorf("command time %v, want the webhook's signed time", cmd.Time)
			}
		})
	}
}

// ceBodyAt is a CloudEvent webhook body of vm.start with time at.
func ceBodyAt(id, at string) []byte {
	return []byte(`{"specversion":"1.0","id":"` + id + `","source":"/netbox/webhook","type":"proxbus.vm.start","time":"` + at +
		`","datacontenttype":"application/json","data":{"vm":1}}`)
}

// TestWebhookActorValidated: an actor carrying control or bidi characters, or longer than
// 255 bytes, is refused on the webhook (from a NetBox username or a CloudEvent body) as on
// NATS, and nothing is published.
func TestWebhookActorValidated(t *testing.T) {
	t.Parallel()
	rules, err := ingress.ParseRules([]byte(rulesYAML))
	if err != nil {
		t.Fatal(err)
	}
	nb := func(user string) []byte {
		return []byte(`{"event":"updated","timestamp":"` + netboxTime("T") + `","object_type":"virtualization.virtualmachine",` +
			`"request":{"id":"r-9","user":` + user + `},"data":{"id":42,"status":{"value":"active"},` +
			`"custom_fields":{"proxmox_vm_id":101,"proxmox_endpoint_id":1}},"snapshots":{"prechange":{"status":"planned"}}}`)
	}
	ce := func(actor string) []byte {
		return []byte(`{"specversion":"1.0","id":"act-1","source":"/netbox/webhook","type":"proxbus.vm.start","time":"` + netboxTime("T") +
			`","actor":` + actor + `,"datacontenttype":"application/json","data":{"vm":1}}`)
	}
	cases := []struct {
		name       string
		body       []byte
		wantStatus int
		wantReason string
	}{
		{"plain username", nb(`"alice"`), 202, ""},
		{"username with an escape sequence", nb(`"bob\u001b[2J"`), 422, "invalid_command"},
		{"username with a bidi override", nb(`"bob\u202egnp"`), 422, "invalid_command"},
		{"username too long", nb(`"` + strings.Repeat("a", 300) + `"`), 422, "invalid_command"},
		{"CloudEvent actor with a newline", ce(`"bob\nalice"`), 422, "invalid_cloudevent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, ingress.Config{WebhookSecret: secret, Rules: rules})
			status, out := h.webhook(tc.body, nil)
			h.checkAnswer(status, out, tc.wantStatus, tc.wantReason)
		})
	}
}
