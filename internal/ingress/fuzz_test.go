package ingress_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/ingress"
	"github.com/proxbus/proxbus/internal/testenv"
)

// fuzzRules map NetBox bodies to commands the way operators write them, including a rule that
// puts a secret custom field into the command's data and one whose actor is rendered.
const fuzzRules = `
rules:
  - name: pbs
    events: [created, updated]
    object_type: netbox_proxbox.proxmoxendpoint
    when:
      - {path: data.custom_fields.pbs_password, exists: true}
    verb: storage.pbs.create
    endpoint: "{{ .data.id }}"
    actor: "netbox:{{ .username }}"
    idempotency_key: "pbs-{{ .object_id }}-{{ .request_id }}"
    data:
      storage: "{{ .data.name }}"
      server: pbs.example
      datastore: ds
      username: "{{ .data.custom_fields.pbs_user }}"
      password: "{{ .data.custom_fields.pbs_password }}"
  - name: start
    events: [updated]
    object_type: virtualization.virtualmachine
    when:
      - {path: data.status.value, in: [active, staged]}
    verb: vm.start
    endpoint: "{{ .data.custom_fields.proxmox_endpoint_id }}"
    data:
      vm: "{{ .data.custom_fields.proxmox_vm_id }}"
      note: "{{ .data.name }} {{ toJSON .snapshots }}"
`

// fuzzNow is the fuzz server's clock; the seeds' timestamps are a minute before it.
var fuzzNow = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// FuzzWebhook drives POST /webhooks/netbox end to end with a valid signature over whatever
// body the fuzzer makes: NetBox 4.2 to 4.7 bodies, CloudEvent bodies of every verb family,
// bodies the rules render (templates, typed values, a secret custom field). Whatever happens,
// the handler answers (no panic), never with a 5xx other than 503, and the canary password in
// the body appears neither in the answer nor in the log.
func FuzzWebhook(f *testing.F) {
	n, subjects, commands := fuzzNATS(f)
	rules, err := ingress.ParseRules([]byte(fuzzRules))
	if err != nil {
		f.Fatal(err)
	}
	logs := &testenv.Buffer{}
	srv, err := ingress.New(ingress.Config{
		JetStream: n.JS, Conn: n.Conn, Subjects: subjects, WebhookSecret: secret, Rules: rules,
		Now: func() time.Time { return fuzzNow }, Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		f.Fatal(err)
	}
	mux := http.NewServeMux()
	srv.Routes(mux)

	ts := "2026-12-02T09:59:00.123456+00:00"
	pbs := func(ts, version string) string {
		head := `"object_type":"netbox_proxbox.proxmoxendpoint","username":"alice","request_id":"r-1"`
		switch version {
		case "4.2":
			head = `"model":"proxmoxendpoint","username":"alice","request_id":"r-1"`
		case "4.7":
			head = `"object_type":"netbox_proxbox.proxmoxendpoint","request":{"id":"r-1","user":"alice","method":"POST"}`
		}
		return `{"event":"created","timestamp":"` + ts + `",` + head + `,"data":{"id":3,"name":"pbs1",` +
			`"custom_fields":{"pbs_user":"u@pbs","pbs_password":"` + canary + `"}},"snapshots":null}`
	}
	for _, seed := range []string{
		pbs(ts, "4.2"), pbs(ts, "4.4"), pbs(ts, "4.7"),
		pbs(strings.Replace(ts, "T", " ", 1), "4.4"),
		pbs("2026-11-30T09:59:00+00:00", "4.4"), // too old
		strings.Replace(pbs(ts, "4.4"), `"id":3`, `"id":"3x"`, 1),
		strings.Replace(pbs(ts, "4.4"), `"pbs_user":"u@pbs"`, `"pbs_user":{"password":"`+canary+`"}`, 1),
		strings.Replace(pbs(ts, "4.4"), `"alice"`, `"bob\u202e\u001b[2J"`, 1),
		`{"event":"updated","timestamp":"` + ts + `","object_type":"virtualization.virtualmachine","data":{"id":42,"name":"db-01",` +
			`"status":{"value":"active"},"custom_fields":{"proxmox_vm_id":101,"proxmox_endpoint_id":1}},` +
			`"snapshots":{"prechange":{"password":"` + canary + `"},"postchange":{}}}`,
		`{"specversion":"1.0","id":"ce-1","source":"/netbox/webhook/7","type":"proxbus.storage.pbs.create","time":"` + ts +
			`","endpointid":1,"datacontenttype":"application/json","data":{"storage":"s","server":"p","datastore":"d","username":"u","password":"` + canary + `"}}`,
		`{"specversion":"1.0","id":"ce-2","source":"/netbox/webhook","type":"proxbus.command.approve","time":"` + ts +
			`","actor":"alice","data":{"command_id":"x","command_source":"y","note":"` + canary + `"}}`,
		`{"specversion":"1.0","id":"ce-3","source":"urn:proxbus:cli","type":"proxbus.vm.start","time":"` + ts + `","data":{"password":"` + canary + `"}}`,
		`{"specversion":"1.0","id":"ce-4","source":"/netbox/webhook","type":"proxbus.vm.start","time":"` + ts + `","data_base64":"e30="}`,
		`{"event":"updated","data":{}}`, `[]`, `null`, `{"specversion":1}`, "",
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, asCloudEvent bool) {
		before := len(logs.String())
		req := httptest.NewRequest(http.MethodPost, ingress.WebhookPath, bytes.NewReader(body))
		req.Header.Set(ingress.SignatureHeader, ingress.Sign(secret, body))
		req.Header.Set("Content-Type", "application/json")
		if asCloudEvent {
			req.Header.Set("Content-Type", events.ContentTypeCE)
		}
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req.WithContext(rctx))
		if w.Code == http.StatusAccepted { // keep the stream below its limits over millions of runs
			if err := commands.Purge(rctx); err != nil {
				t.Fatalf("purge the commands stream: %v", err)
			}
		}
		if w.Code >= 500 && w.Code != http.StatusServiceUnavailable {
			t.Errorf("status %d: %s", w.Code, w.Body)
		}
		if strings.Contains(w.Body.String(), canary) {
			t.Errorf("the answer holds the canary: %s", w.Body)
		}
		for name, vs := range w.Header() {
			if strings.Contains(name+strings.Join(vs, ""), canary) {
				t.Errorf("the answer's header %s holds the canary", name)
			}
		}
		if logged := logs.String()[before:]; strings.Contains(logged, canary) {
			t.Errorf("the log holds the canary: %s", logged)
		}
	})
}

// fuzzNATS starts NATS with the proxbus streams for a fuzz target and returns the commands
// stream, which the target purges to stay below its limits.
func fuzzNATS(f *testing.F) (*testenv.NATS, events.Subjects, jetstream.Stream) {
	f.Helper()
	n := testenv.StartNATS(f)
	subjects := events.NewSubjects("proxbus")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := consumer.Provision(ctx, n.JS, consumer.Config{Subjects: subjects}.WithDefaults()); err != nil {
		f.Fatal(err)
	}
	commands, err := n.JS.Stream(ctx, subjects.CommandsStream())
	if err != nil {
		f.Fatal(err)
	}
	return n, subjects, commands
}

// FuzzParseRules feeds the rules-file loader whatever the fuzzer makes: it never panics (the
// YAML decoder's own panics included), every refusal wraps config.ErrInvalid, and a file it
// accepts maps a webhook without panicking.
func FuzzParseRules(f *testing.F) {
	for _, seed := range []string{
		fuzzRules, rulesYAML, "rules: ! {a:\n- b}", "rules: [{name: r}]", "rules:\n  - name: x\n    verb: command.approve\n",
		"rules:\n  - name: t\n    verb: vm.start\n    data: {vm: \"{{ .data.id | printf \\\"%d\\\" }}\"}\n",
		"rules:\n  - name: w\n    verb: vm.start\n    when: [{path: a.0.b, in: [1, \"x\", null]}]\n",
		"rules: &a [*a]", "", "rules:\n  - name: e\n    verb: vm.start\n    endpoint: \"{{ .nope }}\"\n",
	} {
		f.Add([]byte(seed))
	}
	wh, err := ingress.ParseWebhook([]byte(`{"event":"updated","timestamp":"t","object_type":"virtualization.virtualmachine",` +
		`"data":{"id":1,"name":"n","status":{"value":"active"},"custom_fields":{"proxmox_vm_id":1,"proxmox_endpoint_id":1}},"snapshots":null}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := ingress.ParseRules(data)
		if err != nil {
			if !errors.Is(err, config.ErrInvalid) {
				t.Errorf("error %v does not wrap config.ErrInvalid", err)
			}
			return
		}
		m, matched, err := rules.Map(wh)
		if err != nil && !errors.Is(err, ingress.ErrRender) {
			t.Errorf("Map: %v does not wrap ErrRender", err)
		}
		if matched && err == nil && strings.HasPrefix(m.Verb, ingress.CommandVerbPrefix) {
			t.Errorf("a rule made %s", m.Verb)
		}
	})
}
