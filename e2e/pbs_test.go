package e2e_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// TestGateRefusals pins contract §4 step 1: refusals before decoding, 403 with the reason, and
// no journal entry and no Proxmox call.
func TestGateRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	cases := []struct {
		name       string
		mutate     func(*events.Command)
		wantReason string
		// wantDetail is part of the refusal's detail: which gate closed.
		wantDetail string
	}{
		{"no endpointid", func(c *events.Command) { c.HasEndpointID, c.EndpointID = false, 0 }, "endpoint_id_required", ""},
		{"endpoint unknown to NetBox and the endpoints file", func(c *events.Command) { c.EndpointID = 99 }, "endpoint_not_found", ""},
		{"allow_writes false in NetBox", func(c *events.Command) { c.EndpointID = 2 }, "endpoint_writes_disabled", "allow_writes false in NetBox"},
		{"read_only in the endpoints file", func(c *events.Command) { c.EndpointID = 3 }, "endpoint_writes_disabled", "read-only in the endpoints file"},
		{"gate before decoding: garbage data is not looked at", func(c *events.Command) { c.EndpointID = 2; c.Data = json.RawMessage(`[1,2]`) }, "endpoint_writes_disabled", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := e.command(pbs("gate1"))
			tc.mutate(&cmd)
			res := e.send(cmd)
			if res.Status != 403 || res.Reason != tc.wantReason || res.Result != "refused" {
				t.Fatalf("got %d %s %s, want 403 refused %s", res.Status, res.Result, res.Reason, tc.wantReason)
			}
			if !strings.Contains(res.Detail, tc.wantDetail) {
				t.Errorf("detail %q, want it to say %q", res.Detail, tc.wantDetail)
			}
		})
	}
	if n := len(e.netbox.JournalEntries()); n != 0 {
		t.Errorf("gate refusals wrote %d journal entries, want 0", n)
	}
	if n := e.pve.Requests("POST", "/storage"); n != 0 {
		t.Errorf("gate refusals sent %d POSTs", n)
	}
}

// TestGateWaitsWhileNetBoxIsDown: the gate cannot read allow_writes → the command waits,
// redelivered without spending an attempt and saying so once, for as many deliveries as it
// takes (here more than --max-attempts); nothing is written until NetBox answers, then it runs.
func TestGateWaitsWhileNetBoxIsDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.netbox.SetDown(true)
	cmd := e.command(pbs("down1"))
	e.publish(cmd)
	lookups := func() int { return e.netbox.Requests("GET", "/api/plugins/proxbox/endpoints/proxmox/1/") }
	eventually(t, 20*time.Second, "more gate lookups than --max-attempts", func() bool { return lookups() > 2*e.base.Pipeline.MaxAttempts })
	if res := e.resultsOf(cmd); len(res) != 0 {
		t.Fatalf("answered while NetBox was down: %+v", res)
	}
	if n := e.pve.Requests("POST", "/storage"); n != 0 {
		t.Errorf("sent %d POSTs with the gate closed", n)
	}
	e.netbox.SetDown(false)
	if res := e.result(cmd); res.Status != 201 || res.Replayed {
		t.Fatalf("after NetBox came back: %d %s %s", res.Status, res.Result, res.Reason)
	}
	var retrying int
	for i, st := range e.steps(cmd) {
		if st.Seq != i+1 || st.Attempt != 1 {
			t.Errorf("step %d: seq %d attempt %d, want seq %d attempt 1", i, st.Seq, st.Attempt, i+1)
		}
		if st.Step == "gate" && st.Status == events.StepRetrying {
			retrying++
		}
	}
	if retrying != 1 {
		t.Errorf("%d retrying gate steps, want 1 (a wait is said once, not per delivery)", retrying)
	}
	if n := len(e.streamMessages(e.subjects.DLQStream(), "")); n != 0 {
		t.Errorf("%d dead letters", n)
	}
}

// TestInvalidBodies pins contract §4 step 2: 422 invalid_body naming only declared fields
// (sorted), never a value; one terminal warning entry; no Proxmox call.
func TestInvalidBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	cases := []struct {
		name       string
		data       string
		wantFields []string
		wantDetail string
	}{
		{"missing required", pbs("inv1", "server", "<delete>", "datastore", "<delete>"), []string{"datastore", "server"}, ""},
		{"wrong types", pbs("inv2", "port", `"8007"`, "nodes", `"pve1"`), []string{"nodes", "port"}, ""},
		{"rule breaks", pbs("1inv", "port", "70000", "fingerprint", `"AB:CD"`, "datastore", `"x"`, "username", `"root"`), []string{"datastore", "fingerprint", "port", "storage", "username"}, ""},
		{"bad namespace and nodes", pbs("inv4", "namespace", `"a/b/c/d/e/f/g/h"`, "nodes", `["pve 1"]`), []string{"namespace", "nodes"}, ""},
		{"undeclared field named only in detail", pbs("inv5", "secret_sauce", `"`+canary+`"`), nil, "undeclared fields present"},
		{"undeclared and declared failures", pbs("inv6", "bogus", "1", "server", `"bad host!"`), []string{"server"}, "undeclared fields present"},
		{"not an object", `["storage"]`, nil, "data must be a JSON object"},
		{"password missing", pbs("inv8", "password", "<delete>"), []string{"password"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.netbox.JournalEntries())
			cmd := e.command(tc.data)
			res := e.send(cmd)
			if res.Status != 422 || res.Reason != "invalid_body" {
				t.Fatalf("got %d %s, want 422 invalid_body", res.Status, res.Reason)
			}
			if !slices.Equal(res.Fields, tc.wantFields) {
				t.Errorf("fields = %v, want %v", res.Fields, tc.wantFields)
			}
			if res.Detail != tc.wantDetail {
				t.Errorf("detail = %q, want %q", res.Detail, tc.wantDetail)
			}
			raw, _ := json.Marshal(res)
			for _, leak := range []string{canary, "bad host!", "70000", "secret_sauce", "bogus", "pve 1"} {
				if strings.Contains(string(raw), leak) {
					t.Errorf("result echoes %q: %s", leak, raw)
				}
			}
			entries := e.netbox.JournalEntries()
			if len(entries) != before+1 {
				t.Fatalf("journal entries %d → %d, want exactly one more", before, len(entries))
			}
			last := entries[len(entries)-1]
			if last.Kind != "warning" || !strings.Contains(last.Comments, "command_id: "+cmd.ID) || !strings.Contains(last.Comments, "invalid_body") {
				t.Errorf("journal entry kind %q comments %q", last.Kind, last.Comments)
			}
			if !res.Finalized() || res.JournalEntryURL == "" {
				t.Errorf("journal_finalized %v url %q", res.Finalized(), res.JournalEntryURL)
			}
		})
	}
	if n := e.pve.Requests("POST", "/storage") + e.pve.Requests("GET", "/storage"); n != 0 {
		t.Errorf("invalid bodies reached Proxmox %d times", n)
	}
}

// TestCreated pins the happy path: 201 created, the storage exists with the requested fields
// and the fixed pbs settings, one journal entry written ahead and finalized as success, steps
// published in order.
func TestCreated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	cmd := e.command(pbs("pbs-new", "namespace", `"prod/vm"`, "nodes", `["pve1","pve2"]`, "port", "8008"))
	res := e.send(cmd)
	if res.Status != 201 || res.Result != "created" || !res.Finalized() || res.Replayed {
		t.Fatalf("result %+v", res)
	}
	if res.EndpointID == nil || *res.EndpointID != 1 || res.CommandID != cmd.ID || res.CommandSource != cmd.Source {
		t.Errorf("result identity %+v", res)
	}
	got, ok := e.pve.StorageConfig("pbs-new")
	if !ok {
		t.Fatal("storage not created")
	}
	want := map[string]string{"type": "pbs", "server": "pbs.example.net", "port": "8008", "datastore": "store1", "namespace": "prod/vm",
		"username": "backup@pbs!proxbus", "content": "backup", "prune-backups": "keep-all=1", "nodes": "pve1,pve2"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("storage %s = %q, want %q", k, got[k], v)
		}
	}
	if !strings.EqualFold(got["fingerprint"], fingerprint) {
		t.Errorf("fingerprint %q", got["fingerprint"])
	}
	if n := e.pve.Requests("POST", "/storage"); n != 1 {
		t.Errorf("POSTs = %d, want 1", n)
	}
	entries := e.netbox.JournalEntries()
	if len(entries) != 1 {
		t.Fatalf("journal entries = %d, want 1", len(entries))
	}
	je := entries[0]
	if je.Kind != "success" || je.ObjectType != "netbox_proxbox.proxmoxendpoint" || je.ObjectID != 1 || je.Patches != 1 {
		t.Errorf("journal entry %+v", je)
	}
	for _, bullet := range []string{"- verb: storage.pbs.create", "- actor: tester", "- result: created", "- command_id: " + cmd.ID, "- endpoint: 1 (lab)", "- dispatched_at: ", "- storage: pbs-new"} {
		if !strings.Contains(je.Comments, bullet) {
			t.Errorf("journal comments lack %q:\n%s", bullet, je.Comments)
		}
	}
	steps := e.steps(cmd)
	var names []string
	for i, st := range steps {
		if st.Seq != i+1 {
			t.Errorf("step %d has seq %d", i, st.Seq)
		}
		names = append(names, st.Step+":"+string(st.Status))
	}
	wantSteps := []string{"read_storage:started", "read_storage:done", "create_storage:started", "create_storage:done"}
	if !slices.Equal(names, wantSteps) {
		t.Errorf("steps %v, want %v", names, wantSteps)
	}
	var out map[string]any
	if err := json.Unmarshal(res.Output, &out); err != nil || out["storage"] != "pbs-new" {
		t.Errorf("output %s", res.Output)
	}
}

// TestExistingStorage pins create-only semantics: an equal storage is already_present with no
// write; a different one is storage_conflict naming exactly the differing fields.
func TestExistingStorage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.pve.AddStorage(proxmox.StorageConfig{"storage": "pbs-old", "type": "pbs", "server": "pbs.example.net", "port": "8007",
		"datastore": "store1", "username": "backup@pbs!proxbus", "fingerprint": strings.ToLower(fingerprint),
		"content": "backup", "prune-backups": "keep-all=1", "nodes": "pve2,pve1"})
	cases := []struct {
		name       string
		data       string
		wantStatus int
		wantResult string
		wantFields []string
	}{
		{"equal (fingerprint case, node order, password ignored)", pbs("pbs-old", "nodes", `["pve1","pve2"]`, "password", `"other"`), 200, "already_present", nil},
		{"different datastore and port", pbs("pbs-old", "nodes", `["pve1","pve2"]`, "datastore", `"store2"`, "port", "8009"), 409, "refused", []string{"datastore", "port"}},
		{"different nodes and namespace", pbs("pbs-old", "nodes", `["pve1"]`, "namespace", `"ns"`), 409, "refused", []string{"namespace", "nodes"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := e.send(e.command(tc.data))
			if res.Status != tc.wantStatus || res.Result != tc.wantResult || !slices.Equal(res.Fields, tc.wantFields) {
				t.Fatalf("got %d %s %v, want %d %s %v", res.Status, res.Result, res.Fields, tc.wantStatus, tc.wantResult, tc.wantFields)
			}
			if tc.wantStatus == 409 && res.Reason != "storage_conflict" {
				t.Errorf("reason %q", res.Reason)
			}
		})
	}
	if n := e.pve.Requests("POST", "/storage"); n != 0 {
		t.Errorf("POSTs = %d, want 0", n)
	}
}

// TestLostCreateAnswer: the create is applied but its answer lost → exactly one
// GET /storage/{storage} and never a second POST.
func TestLostCreateAnswer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		prepare    func(e *env)
		wantStatus int
		wantReason string
	}{
		{"applied and equal", func(e *env) { e.pve.DropAnswerAfterApply("POST", "/storage", 1) }, 201, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.start()
			tc.prepare(e)
			res := e.send(e.command(pbs("pbs-lost")))
			if res.Status != tc.wantStatus || res.Reason != tc.wantReason {
				t.Fatalf("got %d %s %q, want %d %q", res.Status, res.Result, res.Reason, tc.wantStatus, tc.wantReason)
			}
			if n := e.pve.Requests("POST", "/storage"); n != 1 {
				t.Errorf("POSTs = %d, want exactly 1", n)
			}
			if n := e.pve.Requests("GET", "/storage/pbs-lost"); n != 1 {
				t.Errorf("GET /storage/pbs-lost = %d, want exactly 1", n)
			}
		})
	}
}

// TestLostCreateAnswerAcrossRedeliveries: a replica recorded the dispatch and died; the
// redelivery (after the dead replica's lease expired) confirms with one GET and never POSTs.
func TestLostCreateAnswerAcrossRedeliveries(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		applied    bool
		wantStatus int
		wantReason string
	}{
		{"the dead replica's create was applied", true, 201, ""},
		{"the dead replica's create never arrived", false, 502, "proxmox_create_unconfirmed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			cmd := e.command(pbs("pbs-crash"))
			// The dead replica: claimed, recorded the dispatch, then vanished.
			e.deadReplica(cmd, 300*time.Millisecond, true, "create_storage")
			if tc.applied {
				e.pve.AddStorage(proxmox.StorageConfig{"storage": "pbs-crash", "type": "pbs", "server": "pbs.example.net", "port": "8007",
					"datastore": "store1", "username": "backup@pbs!proxbus", "fingerprint": fingerprint, "content": "backup", "prune-backups": "keep-all=1"})
			}
			time.Sleep(400 * time.Millisecond) // the dead replica's lease runs out
			e.start()
			res := e.send(cmd)
			if res.Status != tc.wantStatus || res.Reason != tc.wantReason {
				t.Fatalf("got %d %s %q, want %d %q", res.Status, res.Result, res.Reason, tc.wantStatus, tc.wantReason)
			}
			if n := e.pve.Requests("POST", "/storage"); n != 0 {
				t.Errorf("POSTs = %d, want 0 (the dead replica may have sent it)", n)
			}
			if n := e.pve.Requests("GET", "/storage/pbs-crash"); n != 1 {
				t.Errorf("confirming GETs = %d, want 1", n)
			}
		})
	}
}

// TestProxmoxRefusals: Proxmox's own refusals are 502 proxmox_refused with Proxmox's status and
// the rejected parameter names, and the journal entry is finalized as a warning.
func TestProxmoxRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfgAudit := func(c *app.Config) {
		c.Endpoints[0].TokenID = app.DemoPVEAuditToken
	}
	e.start(cfgAudit)
	res := e.send(e.command(pbs("pbs-perm")))
	if res.Status != 502 || res.Reason != "proxmox_refused" || res.ProxmoxStatus != 403 {
		t.Fatalf("audit token: got %d %s proxmox_status %d", res.Status, res.Reason, res.ProxmoxStatus)
	}
	entries := e.netbox.JournalEntries()
	if len(entries) != 1 || entries[0].Kind != "warning" || !strings.Contains(entries[0].Comments, "proxmox_refused") {
		t.Errorf("journal %+v", entries)
	}
}

// TestProxmoxParameterRefusal: a 400 with per-parameter errors reports Proxmox's status and
// the rejected parameter names (sorted), never their values.
func TestProxmoxParameterRefusal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.pve.RejectNext("POST", "/storage", 1, map[string]string{"server": "value 'pbs.example.net' rejected", "datastore": "invalid"})
	res := e.send(e.command(pbs("pbs-param")))
	if res.Status != 502 || res.Reason != "proxmox_refused" || res.ProxmoxStatus != 400 || !slices.Equal(res.Fields, []string{"datastore", "server"}) {
		t.Fatalf("got %d %s proxmox_status %d fields %v", res.Status, res.Reason, res.ProxmoxStatus, res.Fields)
	}
	if n := e.pve.Requests("POST", "/storage"); n != 1 {
		t.Errorf("POSTs = %d, want 1 (a refusal is not retried)", n)
	}
}

// TestProxmoxRefusalEchoingTheSecret: an upstream error text that echoes the password is
// scrubbed from the result and the journal.
func TestProxmoxRefusalEchoingTheSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.pve.FailNext("POST", "/storage", 1, 400, "Parameter verification failed. password '"+canary+"' rejected")
	res := e.send(e.command(pbs("pbs-echo")))
	if res.Status != 502 || res.Reason != "proxmox_refused" || res.ProxmoxStatus != 400 {
		t.Fatalf("got %d %s %d", res.Status, res.Reason, res.ProxmoxStatus)
	}
	raw, _ := json.Marshal(res)
	if strings.Contains(string(raw), canary) {
		t.Errorf("result echoes the secret: %s", raw)
	}
	for _, je := range e.netbox.JournalEntries() {
		if strings.Contains(je.Comments, canary) {
			t.Errorf("journal echoes the secret")
		}
	}
}
