package ingress_test

import (
	"errors"
	"testing"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/ingress"
	"github.com/proxbus/proxbus/internal/testenv"
)

// ceBody is a structured CloudEvent webhook body of type proxbus.<verb> from source.
func ceBody(id, verb, source, data string) []byte {
	return []byte(`{"specversion":"1.0","id":"` + id + `","source":"` + source + `","type":"proxbus.` + verb +
		`","actor":"alice","datacontenttype":"application/json","data":` + data + `}`)
}

// TestWebhookCloudEventRefusals reproduces the review's approval forgery and its neighbours:
// a signed CloudEvent body of a command.* type (an approval naming actor alice), one whose
// source is outside the front's own, and one whose verb the operator did not list are each
// answered 403 with the field at fault, and nothing reaches the commands stream.
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
