package e2e_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/ingress"
	"github.com/proxbus/proxbus/internal/testenv"
)

const (
	ingressSecret = "e2e-webhook-secret"
	ingressAPIKey = "e2e-front-key"
)

const ingressRules = `
rules:
  - name: vm-activated-start
    events: [updated]
    object_type: virtualization.virtualmachine
    when:
      - {path: data.status.value, equals: active}
      - {path: snapshots.prechange.status, not_equals: active}
    verb: vm.start
    endpoint: "{{ .data.custom_fields.proxmox_endpoint_id }}"
    data:
      vm: "{{ .data.custom_fields.proxmox_vm_id }}"
`

// ingressFront serves an ingress.Server (webhook and proxbox-api front) beside the env's
// replica, on the env's NATS.
func (e *env) ingressFront(logs io.Writer) string {
	e.t.Helper()
	rules, err := ingress.ParseRules([]byte(ingressRules))
	if err != nil {
		e.t.Fatalf("rules: %v", err)
	}
	srv, err := ingress.New(ingress.Config{
		JetStream: e.nats.JS, Conn: e.nats.Conn, Subjects: e.subjects, WebhookSecret: ingressSecret, Rules: rules,
		FrontAPIKey: ingressAPIKey, ResultTimeout: 30 * time.Second,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		e.t.Fatalf("ingress: %v", err)
	}
	mux := http.NewServeMux()
	srv.Routes(mux)
	hs := httptest.NewServer(mux)
	e.t.Cleanup(hs.Close)
	return hs.URL
}

func httpPost(t *testing.T, url string, body []byte, headers map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// TestIngressProxboxFront drives storage.pbs.create through the proxbox-api compatible front
// and the real pipeline: each outcome's HTTP status and body are the result's, with
// journal_finalized; Idempotency-Key replays through the same wait; X-Proxbox-Actor is the
// journal's actor; the password appears in no answer and no log.
func TestIngressProxboxFront(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	ingressLogs := &testenv.Buffer{}
	base := e.ingressFront(ingressLogs)
	var answers []string
	post := func(endpoint string, data string, headers map[string]string) (int, events.Result) {
		t.Helper()
		h := map[string]string{ingress.APIKeyHeader: ingressAPIKey}
		for k, v := range headers {
			h[k] = v
		}
		status, out := httpPost(t, base+ingress.PBSPath+"?endpoint_id="+endpoint, []byte(data), h)
		answers = append(answers, string(out))
		var res events.Result
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("answer %d not a result: %s", status, out)
		}
		if !strings.Contains(string(out), `"journal_finalized":`) {
			t.Errorf("answer without journal_finalized: %s", out)
		}
		if status != res.Status {
			t.Errorf("HTTP status %d, result status %d", status, res.Status)
		}
		return status, res
	}
	headers := map[string]string{ingress.IdempotencyKeyHeader: "front-k1", ingress.ActorHeader: "alice@netbox"}

	status, res := post("1", pbs("ingpbs"), headers)
	if status != 201 || res.Result != "created" || !res.Finalized() || res.Replayed {
		t.Fatalf("create: %d %+v", status, res)
	}
	var entry string
	for _, je := range e.netbox.JournalEntries() {
		if strings.Contains(je.Comments, res.CommandID) {
			entry = je.Comments
		}
	}
	if !strings.Contains(entry, "- actor: alice@netbox") || !strings.Contains(entry, "- idempotency_key: front-k1") {
		t.Errorf("journal entry lacks the actor or key:\n%s", entry)
	}

	status, res = post("1", pbs("ingpbs"), headers)
	if status != 201 || !res.Replayed {
		t.Errorf("replay: %d %+v", status, res)
	}
	if n := e.pve.Requests("POST", "/storage"); n != 1 {
		t.Errorf("POST /storage sent %d times, want 1", n)
	}

	cases := []struct {
		name, endpoint, data string
		setup                func()
		wantStatus           int
		wantReason           string
		wantFinalized        bool
	}{
		{"already present", "1", pbs("ingpbs"), nil, 200, "", true},
		{"conflict", "1", pbs("ingpbs", "datastore", `"store2"`), nil, 409, "storage_conflict", true},
		{"read-only endpoint", "2", pbs("ingro"), nil, 403, "endpoint_writes_disabled", true}, // no journal: nothing left unfinalized
		{"invalid body", "1", pbs("ingbad", "server", "<delete>"), nil, 422, "invalid_body", true},
		{"Proxmox failure", "1", pbs("ingfail"), func() { e.pve.FailNext("POST", "/storage", 1, 500, "storage backend exploded") }, 502, "", true},
		{"journal not finalized", "1", pbs("ingjournal"), func() { e.netbox.FailPatches(3, 500) }, 502, "netbox_journal_finalization_failed", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup()
			}
			status, res := post(tc.endpoint, tc.data, nil)
			if status != tc.wantStatus || res.Finalized() != tc.wantFinalized || (tc.wantReason != "" && res.Reason != tc.wantReason) {
				t.Errorf("got %d %+v", status, res)
			}
			if tc.name == "conflict" && !slices.Contains(res.Fields, "datastore") {
				t.Errorf("conflict fields %v", res.Fields)
			}
		})
	}

	for _, text := range append(answers, e.logs.String(), ingressLogs.String()) {
		if strings.Contains(text, canary) {
			t.Errorf("the password leaked: %.300s", text)
		}
	}
}

// TestIngressWebhook: a signed NetBox 4.7 webhook for a VM turned active starts it through the
// rule; NetBox delivering it again is the same command and the VM is started once; a webhook
// with a bad signature does nothing.
func TestIngressWebhook(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Through `serve`'s own wiring: the HTTP server with the webhook secret and a rules file.
	rulesFile := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rulesFile, []byte(ingressRules), 0o600); err != nil {
		t.Fatal(err)
	}
	httpOn, base := withHTTP(t)
	e.start(httpOn, func(c *app.Config) {
		c.Ingress = app.Ingress{WebhookSecret: ingressSecret, WebhookRulesFile: rulesFile}
	})
	// A fresh timestamp: a webhook older than the identity window is refused (a replay).
	ts := time.Now().UTC().Format("2006-01-02T15:04:05.000000-07:00")
	body := []byte(`{"event":"updated","timestamp":"` + ts + `","object_type":"virtualization.virtualmachine",` +
		`"data":{"id":42,"name":"db-01","status":{"value":"active","label":"Active"},"custom_fields":{"proxmox_vm_id":101,"proxmox_endpoint_id":1}},` +
		`"request":{"id":"0f6b3c1e-2a4d-4e8f-9b1a-7c5d3e2f1a00","path":"/api/virtualization/virtual-machines/42/","method":"PATCH","user":"alice"},` +
		`"snapshots":{"prechange":{"status":"planned"},"postchange":{"status":"active"}}}`)

	if status, _ := httpPost(t, base+ingress.WebhookPath, body, map[string]string{ingress.SignatureHeader: ingress.Sign("wrong", body)}); status != 401 {
		t.Fatalf("bad signature: status %d", status)
	}
	signed := map[string]string{ingress.SignatureHeader: ingress.Sign(ingressSecret, body)}
	deliver := func() ingress.Accepted {
		t.Helper()
		status, out := httpPost(t, base+ingress.WebhookPath, body, signed)
		var acc ingress.Accepted
		if status != http.StatusAccepted || json.Unmarshal(out, &acc) != nil {
			t.Fatalf("webhook: %d %s", status, out)
		}
		return acc
	}
	first := deliver()
	res := e.resultFor(first.CommandSource, first.CommandID)
	if res.Status != 200 || res.Result != "ok" || res.Verb != "vm.start" {
		t.Fatalf("result %+v", res)
	}
	again := deliver()
	if again.CommandID != first.CommandID || again.ResultSubject != first.ResultSubject {
		t.Errorf("redelivery became %s, want %s", again.CommandID, first.CommandID)
	}
	if g, _ := e.pve.Guest(101); g.Status != "running" {
		t.Errorf("VM 101 is %s", g.Status)
	}
	starts := 0
	for _, task := range e.pve.Tasks() {
		if task.VMID == 101 && strings.Contains(task.Type, "start") {
			starts++
		}
	}
	if starts != 1 {
		t.Errorf("%d start tasks for VM 101, want 1", starts)
	}
	results := e.streamMessages(e.subjects.EventsStream(), first.ResultSubject)
	if len(results) != 1 {
		t.Errorf("%d result events, want 1", len(results))
	}
}
