package ingress_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/ingress"
)

// fakePipeline answers storage.pbs.create commands with scripted results, the way the verb
// pipeline publishes them (result events on the command's result subject), and replays the
// first answer for a reused Idempotency-Key. Storage "slow" is never answered.
type fakePipeline struct {
	mu       sync.Mutex
	commands []events.Command
	byKey    map[string]events.Result
	// stopped and inflight let the test's cleanup wait for answers being published: the front
	// may see a result (and the test end) before its publisher has the stream's ack.
	stopped  bool
	inflight sync.WaitGroup
}

// begin reports whether a command may still be answered, counting it in flight if so.
func (f *fakePipeline) begin() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return false
	}
	f.inflight.Add(1)
	return true
}

func (f *fakePipeline) received() []events.Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.commands)
}

func startFakePipeline(t *testing.T, h *harness) *fakePipeline {
	t.Helper()
	f := &fakePipeline{byKey: map[string]events.Result{}}
	emitter := events.NewEmitter(h.subjects, "fake")
	sub, err := h.nats.Conn.Subscribe(h.subjects.CommandsFilter(), func(m *nats.Msg) {
		if !f.begin() {
			return
		}
		defer f.inflight.Done()
		cmd, err := events.Decode(m.Subject, m.Header, m.Data, h.subjects)
		if err != nil {
			t.Errorf("fake pipeline: command does not decode: %v", err)
			return
		}
		var data struct{ Storage string }
		_ = json.Unmarshal(cmd.Data, &data)
		f.mu.Lock()
		f.commands = append(f.commands, cmd)
		res, replay := f.byKey[cmd.IdempotencyKey]
		if !replay {
			res = scripted(cmd, data.Storage)
			if cmd.IdempotencyKey != "" {
				f.byKey[cmd.IdempotencyKey] = res
			}
		}
		f.mu.Unlock()
		res.Replayed = replay
		if data.Storage == "slow" {
			return
		}
		_, msg, err := emitter.Event(events.OriginOf(cmd), res)
		if err != nil {
			t.Errorf("fake pipeline: %v", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := h.nats.JS.PublishMsg(ctx, msg); err != nil {
			t.Errorf("fake pipeline: publish: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("fake pipeline: %v", err)
	}
	t.Cleanup(func() {
		f.mu.Lock()
		f.stopped = true
		f.mu.Unlock()
		_ = sub.Unsubscribe()
		f.inflight.Wait() // before the harness closes the connection
	})
	return f
}

// scripted is the result the real pipeline gives for each storage name of the tests.
func scripted(cmd events.Command, storage string) events.Result {
	ep := cmd.EndpointID
	r := events.Result{EndpointID: &ep, JournalEntryURL: "/api/extras/journal-entries/1/", JournalFinalized: new(true), IdempotencyKey: cmd.IdempotencyKey}
	switch {
	case !cmd.HasEndpointID:
		r = events.Result{Status: 403, Result: "refused", Reason: "endpoint_id_required"} // no journal entry: no journal_finalized
	case cmd.EndpointID == 2:
		r = events.Result{EndpointID: &ep, Status: 403, Result: "refused", Reason: "endpoint_writes_disabled"}
	case storage == "new":
		r.Status, r.Result = 201, "created"
	case storage == "same":
		r.Status, r.Result = 200, "already_present"
	case storage == "differs":
		r.Status, r.Result, r.Reason, r.Fields = 409, "refused", "storage_conflict", []string{"datastore"}
	case storage == "bad":
		r.Status, r.Result, r.Reason, r.Fields = 422, "refused", "invalid_body", []string{"server"}
	case storage == "down":
		r.Status, r.Result, r.Reason = 502, "failed", "proxmox_unreachable"
	case storage == "journal":
		r.Status, r.Result, r.Reason, r.JournalFinalized = 502, "created", "netbox_journal_finalization_failed", new(false)
	}
	return r
}

func pbsBody(storage string) []byte {
	b, _ := json.Marshal(map[string]any{"storage": storage, "server": "pbs.example.net", "datastore": "store1",
		"username": "backup@pbs!proxbus", "password": canary, "fingerprint": fingerp})
	return b
}

func frontHarness(t *testing.T, timeout time.Duration) (*harness, *fakePipeline) {
	t.Helper()
	h := newHarness(t, ingress.Config{FrontAPIKey: apiKey, ResultTimeout: timeout})
	return h, startFakePipeline(t, h)
}

// TestFrontStatuses: the front answers with the result's HTTP status and the result as body
// (journal_finalized always present, as proxbox-api answers: true for a result without a
// journal entry), and the headers reach the command.
func TestFrontStatuses(t *testing.T) {
	t.Parallel()
	h, fake := frontHarness(t, 20*time.Second)
	cases := []struct {
		name, storage, query string
		wantStatus           int
		wantResult           string
		wantReason           string
		wantFinalized        bool
	}{
		{"created", "new", "?endpoint_id=1", 201, "created", "", true},
		{"already present", "same", "?endpoint_id=1", 200, "already_present", "", true},
		{"read-only endpoint", "new", "?endpoint_id=2", 403, "refused", "endpoint_writes_disabled", true},
		{"no endpoint id", "new", "", 403, "refused", "endpoint_id_required", true},
		{"conflict", "differs", "?endpoint_id=1", 409, "refused", "storage_conflict", true},
		{"invalid body", "bad", "?endpoint_id=1", 422, "refused", "invalid_body", true},
		{"proxmox failure", "down", "?endpoint_id=1", 502, "failed", "proxmox_unreachable", true},
		{"journal not finalized", "journal", "?endpoint_id=1", 502, "created", "netbox_journal_finalization_failed", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := "key-" + strings.ReplaceAll(tc.name, " ", "-")
			status, out, hdr := h.post(ingress.PBSPath+tc.query, pbsBody(tc.storage), map[string]string{
				ingress.APIKeyHeader: apiKey, ingress.IdempotencyKeyHeader: key, ingress.ActorHeader: "alice@netbox",
			})
			noLeak(t, "answer", string(out))
			if status != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", status, tc.wantStatus, out)
			}
			var res events.Result
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("answer: %v", err)
			}
			if res.Status != tc.wantStatus || res.Result != tc.wantResult || res.Reason != tc.wantReason ||
				res.Finalized() != tc.wantFinalized || res.Verb != ingress.PBSVerb || res.Replayed {
				t.Errorf("result %+v", res)
			}
			if !strings.Contains(string(out), `"journal_finalized":`) {
				t.Errorf("journal_finalized missing: %s", out)
			}
			if hdr.Get(ingress.CommandIDHeader) != res.CommandID || res.CommandSource != ingress.DefaultFrontSource {
				t.Errorf("command id header %q, result %s from %s", hdr.Get(ingress.CommandIDHeader), res.CommandID, res.CommandSource)
			}
			for _, cmd := range fake.received() {
				if cmd.ID == res.CommandID && (cmd.Actor != "alice@netbox" || cmd.IdempotencyKey != key || cmd.Verb != ingress.PBSVerb) {
					t.Errorf("command %+v lost the headers", cmd)
				}
			}
		})
	}
	noLeak(t, "logs", h.logs.String())
}

// TestFrontReplay: a second request with the same Idempotency-Key gets the replayed result
// through the same wait (replayed: true, same status).
func TestFrontReplay(t *testing.T) {
	t.Parallel()
	h, _ := frontHarness(t, 20*time.Second)
	headers := map[string]string{ingress.APIKeyHeader: apiKey, ingress.IdempotencyKeyHeader: "replay-1"}
	var got []events.Result
	for range 2 {
		status, out, _ := h.post(ingress.PBSPath+"?endpoint_id=1", pbsBody("new"), headers)
		var res events.Result
		if status != 201 || json.Unmarshal(out, &res) != nil {
			t.Fatalf("got %d %s", status, out)
		}
		got = append(got, res)
	}
	if got[0].Replayed || !got[1].Replayed || got[0].CommandID == got[1].CommandID {
		t.Errorf("results %+v", got)
	}
}

// TestFrontRefusals: requests refused by the front itself name the field, never a value, and
// publish nothing.
func TestFrontRefusals(t *testing.T) {
	t.Parallel()
	h, fake := frontHarness(t, 20*time.Second)
	ok := map[string]string{ingress.APIKeyHeader: apiKey}
	with := func(k, v string) map[string]string {
		m := map[string]string{ingress.APIKeyHeader: apiKey}
		m[k] = v
		return m
	}
	cases := []struct {
		name       string
		query      string
		body       []byte
		headers    map[string]string
		wantStatus int
		wantReason string
		wantFields []string
	}{
		{"no API key", "?endpoint_id=1", pbsBody("new"), nil, 401, "unauthorized", nil},
		{"wrong API key", "?endpoint_id=1", pbsBody("new"), map[string]string{ingress.APIKeyHeader: "nope"}, 401, "unauthorized", nil},
		{"endpoint id not a number", "?endpoint_id=" + canary, pbsBody("new"), ok, 422, "invalid_body", []string{"endpoint_id"}},
		{"endpoint id zero", "?endpoint_id=0", pbsBody("new"), ok, 422, "invalid_body", []string{"endpoint_id"}},
		{"idempotency key not ASCII", "?endpoint_id=1", pbsBody("new"), with(ingress.IdempotencyKeyHeader, "clé"), 422, "invalid_body", []string{"Idempotency-Key"}},
		{"actor too long", "?endpoint_id=1", pbsBody("new"), with(ingress.ActorHeader, strings.Repeat("a", 256)), 422, "invalid_body", []string{"X-Proxbox-Actor"}},
		{"body not JSON", "?endpoint_id=1", []byte(`password=` + canary), ok, 422, "invalid_body", nil},
		{"body not an object", "?endpoint_id=1", []byte(`["` + canary + `"]`), ok, 422, "invalid_body", nil},
		{"body over 1 MiB", "?endpoint_id=1", []byte(`{"password":"` + strings.Repeat("x", ingress.MaxBodyBytes) + `"}`), ok, 413, "body_too_large", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, out, _ := h.post(ingress.PBSPath+tc.query, tc.body, tc.headers)
			noLeak(t, "answer", string(out))
			var e struct {
				Reason string
				Fields []string
			}
			_ = json.Unmarshal(out, &e)
			if status != tc.wantStatus || e.Reason != tc.wantReason || !slices.Equal(e.Fields, tc.wantFields) {
				t.Errorf("got %d %s", status, out)
			}
		})
	}
	if n := len(h.commands()); n != 0 || len(fake.received()) != 0 {
		t.Errorf("%d commands published by refused requests", n)
	}
	noLeak(t, "logs", h.logs.String())
}

// TestFrontTimeout: no result in time → 504 with the command id and the subject to follow; the
// command was published and may still finish.
func TestFrontTimeout(t *testing.T) {
	t.Parallel()
	h, fake := frontHarness(t, 300*time.Millisecond)
	status, out, _ := h.post(ingress.PBSPath+"?endpoint_id=1", pbsBody("slow"), map[string]string{ingress.APIKeyHeader: apiKey})
	var p ingress.Pending
	if status != http.StatusGatewayTimeout || json.Unmarshal(out, &p) != nil {
		t.Fatalf("got %d %s", status, out)
	}
	if p.Result != "pending" || p.Reason != "result_timeout" || p.CommandID == "" ||
		p.Subject != h.subjects.Follow(p.CommandID) || p.ResultSubject != h.subjects.Result(p.CommandID) {
		t.Errorf("pending %+v", p)
	}
	if cmds := fake.received(); len(cmds) != 1 || cmds[0].ID != p.CommandID {
		t.Errorf("commands %+v", cmds)
	}
	noLeak(t, "answer", string(out))
}

// TestRoutesMountOnlyConfiguredFronts: without a secret or API key a front is absent (404),
// never open.
func TestRoutesMountOnlyConfiguredFronts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, ingress.Config{})
	for _, path := range []string{ingress.WebhookPath, ingress.PBSPath} {
		if status, _, _ := h.post(path, []byte(`{}`), nil); status != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", path, status)
		}
	}
}
