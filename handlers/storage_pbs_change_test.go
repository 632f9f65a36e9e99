package handlers

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

// rotatedFingerprint is a second PBS certificate fingerprint, in lower case as a producer may
// send it.
const rotatedFingerprint = "aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77:88:99"

// rotatedSecret is the token secret the rotation tests set: it must appear in no event,
// journal comment or plan.
const rotatedSecret = "CANARY-rotated-s3cret-71f3"

// TestStoragePBSUpdateDecode pins storage.pbs.update's data: at least one of username,
// password and fingerprint (a body with none names all three, no value); the fingerprint is
// upper-cased; the password is not part of the request fingerprint.
func TestStoragePBSUpdateDecode(t *testing.T) {
	t.Parallel()
	for data, fields := range map[string][]string{
		`{"storage":"pbs1"}`:                                               {"fingerprint", "password", "username"},
		`{"storage":"pbs1","username":"no-realm"}`:                         {"username"},
		`{"storage":"pbs1","fingerprint":"AB:CD"}`:                         {"fingerprint"},
		`{"storage":"pbs1","password":""}`:                                 {"password"},
		`{"storage":"pbs1","password":"` + strings.Repeat("x", 257) + `"}`: {"password"},
		`{"storage":"-bad","password":"x"}`:                                {"storage"},
		`{"password":"x"}`:                                                 {"storage"},
	} {
		_, out := StoragePBSUpdate().prepare(json.RawMessage(data))
		if out == nil || out.Status != 422 || !slices.Equal(out.Fields, fields) {
			t.Errorf("prepare(%.60s) = %+v, want 422 naming %v", data, out, fields)
		}
	}
	a, out := StoragePBSUpdate().prepare(json.RawMessage(`{"storage":"pbs1","password":"one","fingerprint":"` + rotatedFingerprint + `"}`))
	b, out2 := StoragePBSUpdate().prepare(json.RawMessage(`{"storage":"pbs1","password":"two","fingerprint":"` + strings.ToUpper(rotatedFingerprint) + `"}`))
	if out != nil || out2 != nil {
		t.Fatalf("valid bodies refused: %+v %+v", out, out2)
	}
	if a.fingerprint != b.fingerprint {
		t.Error("the request fingerprint depends on the password or on the fingerprint's case")
	}
	if !slices.Equal(a.secrets, []string{"one"}) {
		t.Errorf("secrets %v, want the password", a.secrets)
	}
	for _, bl := range a.bullets {
		if strings.Contains(bl.Value, "one") {
			t.Errorf("bullet %s carries the password", bl.Name)
		}
	}
	for data, field := range map[string]string{`{}`: "storage", `{"storage":"a b"}`: "storage"} {
		if _, out := StoragePBSDelete().prepare(json.RawMessage(data)); out == nil || !slices.Equal(out.Fields, []string{field}) {
			t.Errorf("delete prepare(%s) = %+v, want 422 naming %s", data, out, field)
		}
	}
}

// pbsEnv is an rtEnv with the PBS storage pbs1 created by storage.pbs.create.
func pbsEnv(t *testing.T) *rtEnv {
	t.Helper()
	e := newRTEnv(t)
	e.run(t, "storage.pbs.create", "setup-pbs1", pbsData("pbs1"), 201, ResultCreated)
	return e
}

// storageWrites are the simulator's PUT and DELETE requests on /storage paths.
func storageWrites(e *rtEnv) []string {
	var out []string
	for _, w := range pveWrites(e.pve) {
		if strings.HasPrefix(w, "PUT /storage/") || strings.HasPrefix(w, "DELETE /storage/") {
			out = append(out, w)
		}
	}
	return out
}

// TestStoragePBSUpdateOutcomes pins storage.pbs.update through the pipeline against the
// simulator: what is sent (only what changes; the secret always), what PVE keeps, equal →
// already_present with no write, a missing or non-PBS storage → 404 storage_not_found, and
// the secret in no event and no journal comment.
func TestStoragePBSUpdateOutcomes(t *testing.T) {
	t.Parallel()
	upper := strings.ToUpper(rotatedFingerprint)
	tests := []struct {
		name     string
		data     string
		status   int
		result   string
		reason   string
		writes   []string // PUT/DELETE /storage requests
		username string   // the storage's username afterwards
		secret   string   // the secret PVE keeps afterwards
	}{
		{name: "equal fingerprint, other case", data: `{"storage":"pbs1","fingerprint":"` + strings.ToLower(testPBSFingerprint) + `"}`,
			status: 200, result: ResultAlreadyPresent, username: "backup@pbs!proxbus", secret: "s3cret"},
		{name: "equal token id", data: `{"storage":"pbs1","username":"backup@pbs!proxbus"}`,
			status: 200, result: ResultAlreadyPresent, username: "backup@pbs!proxbus", secret: "s3cret"},
		{name: "new token id and secret", data: `{"storage":"pbs1","username":"backup@pbs!rotated","password":"` + rotatedSecret + `"}`,
			status: 200, result: ResultOK, writes: []string{"PUT /storage/pbs1?password=%5Bredacted%5D&username=backup%40pbs%21rotated"},
			username: "backup@pbs!rotated", secret: rotatedSecret},
		{name: "the secret alone is always sent", data: `{"storage":"pbs1","username":"backup@pbs!proxbus","password":"` + rotatedSecret + `"}`,
			status: 200, result: ResultOK, writes: []string{"PUT /storage/pbs1?password=%5Bredacted%5D"},
			username: "backup@pbs!proxbus", secret: rotatedSecret},
		{name: "new fingerprint", data: `{"storage":"pbs1","fingerprint":"` + rotatedFingerprint + `"}`,
			status: 200, result: ResultOK, writes: []string{"PUT /storage/pbs1?fingerprint=" + strings.ReplaceAll(upper, ":", "%3A")},
			username: "backup@pbs!proxbus", secret: "s3cret"},
		{name: "absent", data: `{"storage":"pbs9","password":"` + rotatedSecret + `"}`,
			status: 404, result: ResultRefused, reason: ReasonStorageNotFound, username: "backup@pbs!proxbus", secret: "s3cret"},
		{name: "not a PBS storage", data: `{"storage":"local-lvm","username":"backup@pbs!x"}`,
			status: 404, result: ResultRefused, reason: ReasonStorageNotFound, username: "backup@pbs!proxbus", secret: "s3cret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := pbsEnv(t)
			res := e.resultOf(t, "storage.pbs.update", "upd", tt.data)
			if res.Status != tt.status || res.Result != tt.result || res.Reason != tt.reason || !res.Finalized() {
				t.Fatalf("result %d %s %q (%s), want %d %s %q", res.Status, res.Result, res.Reason, res.Detail, tt.status, tt.result, tt.reason)
			}
			writes := storageWrites(e) // the simulator's log redacts the password
			if !slices.Equal(writes, tt.writes) {
				t.Errorf("writes %q, want %q", writes, tt.writes)
			}
			cfg, _ := e.pve.StorageConfig("pbs1")
			if cfg["username"] != tt.username || !e.pve.CheckStoragePassword("pbs1", tt.secret) {
				t.Errorf("storage afterwards: username %q (want %q), secret as asked %v", cfg["username"], tt.username, e.pve.CheckStoragePassword("pbs1", tt.secret))
			}
			assertSecretNowhere(t, e, rotatedSecret)
		})
	}
}

// assertSecretNowhere fails when secret is in any event or journal comment of e.
func assertSecretNowhere(t *testing.T, e *rtEnv, secret string) {
	t.Helper()
	e.pub.mu.Lock()
	defer e.pub.mu.Unlock()
	for _, m := range e.pub.msgs {
		if strings.Contains(string(m.Data), secret) {
			t.Errorf("event %s carries the secret", m.Subject)
		}
	}
	for _, en := range e.nb.JournalEntries() {
		if strings.Contains(en.Comments, secret) {
			t.Errorf("journal entry %d carries the secret", en.ID)
		}
	}
}

// TestStoragePBSDeleteOutcomes pins storage.pbs.delete: the registration is removed with one
// DELETE, a repeat is 200 already_absent with no write, a storage of another type is 404
// storage_not_found and stays.
func TestStoragePBSDeleteOutcomes(t *testing.T) {
	t.Parallel()
	e := pbsEnv(t)
	if res := e.resultOf(t, "storage.pbs.delete", "del-1", `{"storage":"pbs1"}`); res.Status != 200 || res.Result != ResultOK || !res.Finalized() {
		t.Fatalf("delete: %d %s %s", res.Status, res.Result, res.Detail)
	}
	if _, found := e.pve.StorageConfig("pbs1"); found {
		t.Error("pbs1 still configured")
	}
	if res := e.resultOf(t, "storage.pbs.delete", "del-2", `{"storage":"pbs1"}`); res.Status != 200 || res.Result != ResultAlreadyAbsent || !res.Finalized() {
		t.Fatalf("repeat: %d %s %s", res.Status, res.Result, res.Detail)
	}
	if res := e.resultOf(t, "storage.pbs.delete", "del-3", `{"storage":"local-lvm"}`); res.Status != 404 || res.Reason != ReasonStorageNotFound {
		t.Fatalf("local-lvm: %d %s %s", res.Status, res.Result, res.Detail)
	}
	if _, found := e.pve.StorageConfig("local-lvm"); !found {
		t.Error("local-lvm removed")
	}
	if w := storageWrites(e); !slices.Equal(w, []string{"DELETE /storage/pbs1"}) {
		t.Errorf("writes %q, want one DELETE /storage/pbs1", w)
	}
}

// TestStoragePBSChangeLostAnswer pins the confirmation of an update or a delete whose answer
// was lost (PVE applied it), by one read and never a second write: a readable change in place
// → 200 ok; a rotated secret cannot be read back → 502 proxmox_write_unconfirmed saying so;
// a delete whose storage is gone → 200 ok.
func TestStoragePBSChangeLostAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, verb, method, data string
		status                   int
		reason                   string
	}{
		{name: "fingerprint", verb: "storage.pbs.update", method: "PUT", data: `{"storage":"pbs1","fingerprint":"` + rotatedFingerprint + `"}`, status: 200},
		{name: "secret", verb: "storage.pbs.update", method: "PUT", data: `{"storage":"pbs1","password":"` + rotatedSecret + `"}`,
			status: 502, reason: ReasonProxmoxWriteUnconfirmed},
		{name: "delete", verb: "storage.pbs.delete", method: "DELETE", data: `{"storage":"pbs1"}`, status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := pbsEnv(t)
			e.pve.DropAnswerAfterApply(tt.method, "/storage/pbs1", 1)
			res := e.resultOf(t, tt.verb, "lost", tt.data)
			if res.Status != tt.status || res.Reason != tt.reason || !res.Finalized() {
				t.Fatalf("result %d %s %q (%s), want %d %q", res.Status, res.Result, res.Reason, res.Detail, tt.status, tt.reason)
			}
			if w := storageWrites(e); len(w) != 1 {
				t.Errorf("writes %q, want exactly one", w)
			}
			if tt.reason != "" && !strings.Contains(res.Detail, "never shows") {
				t.Errorf("detail %q does not say why the secret cannot be confirmed", res.Detail)
			}
			assertSecretNowhere(t, e, rotatedSecret)
		})
	}
}

// TestStoragePBSUpdateDryRun pins contract §4a for storage.pbs.update: the plan is the one
// PUT with the secret redacted, nothing is sent or journaled; an equal request plans
// already_present and no write.
func TestStoragePBSUpdateDryRun(t *testing.T) {
	t.Parallel()
	e := pbsEnv(t)
	entries := len(e.nb.JournalEntries())
	p := e.dryRun(t, "storage.pbs.update", "dry", `{"storage":"pbs1","password":"`+rotatedSecret+`","username":"backup@pbs!rotated"}`)
	if !p.Complete || p.Outcome == nil || p.Outcome.Result != ResultOK || len(p.Writes) != 1 || p.Writes[0].Method != "PUT" ||
		p.Writes[0].Path != "/storage/pbs1" || p.Writes[0].Params["username"] != "backup@pbs!rotated" || p.Writes[0].Params["password"] == rotatedSecret {
		t.Errorf("plan %+v (outcome %+v)", p, p.Outcome)
	}
	if eq := e.dryRun(t, "storage.pbs.update", "dry-equal", `{"storage":"pbs1","username":"backup@pbs!proxbus"}`); eq.Outcome == nil ||
		eq.Outcome.Result != ResultAlreadyPresent || len(eq.Writes) != 0 {
		t.Errorf("equal plan %+v (outcome %+v)", eq, eq.Outcome)
	}
	if w := storageWrites(e); len(w) != 0 {
		t.Errorf("a dry run sent %q", w)
	}
	if n := len(e.nb.JournalEntries()); n != entries {
		t.Errorf("a dry run journaled %d entries", n-entries)
	}
	assertSecretNowhere(t, e, rotatedSecret)
}

// dryRun handles a dry run of verb as a first delivery and returns its plan.
func (e *rtEnv) dryRun(t *testing.T, verb, id, data string) Plan {
	t.Helper()
	cmd := events.Command{ID: id, Source: "/test/" + verb, Type: events.TypePrefix + verb, Verb: verb,
		EndpointID: 1, HasEndpointID: true, DryRun: true, Data: json.RawMessage(data)}
	if d := e.p.Handle(context.Background(), cmd, events.Delivery{Number: 1, Stored: time.Now()}); d.Action != events.Ack {
		t.Fatalf("%s: decision %+v", id, d)
	}
	res := e.pub.result(t, id)
	var out PlanOutput
	if res.Status != 200 || res.Result != ResultPlanned || json.Unmarshal(res.Output, &out) != nil {
		t.Fatalf("%s: %d %s %s", id, res.Status, res.Result, res.Output)
	}
	return out.Plan
}

// TestStoragePBSChangeApproval pins contract §4b for the storage verbs on an endpoint that
// lists them: a delete that can run waits for a second person, announcing its plan (the one
// DELETE) and writing nothing; one bound to be refused (a storage that is not PBS) is refused
// without asking anyone; once another actor approves, the waiting delete runs.
func TestStoragePBSChangeApproval(t *testing.T) {
	t.Parallel()
	e := newRTEnvWith(t, store.Options{}, func(ep *proxmox.EndpointConfig) {
		ep.Approval.Verbs = []string{"storage.pbs.update", "storage.pbs.delete"}
	})
	e.run(t, "storage.pbs.create", "setup-pbs1", pbsData("pbs1"), 201, ResultCreated)
	deliver := func(id, verb, data string, n uint64) events.Disposition {
		cmd := events.Command{ID: id, Source: "/test/approval", Type: events.TypePrefix + verb, Verb: verb, Actor: "alice",
			EndpointID: 1, HasEndpointID: true, Data: json.RawMessage(data)}
		return e.p.Handle(context.Background(), cmd, events.Delivery{Number: n, Stored: time.Now()})
	}
	if d := deliver("refused", "storage.pbs.update", `{"storage":"local-lvm","fingerprint":"`+rotatedFingerprint+`"}`, 1); d.Action != events.Ack {
		t.Fatalf("a refusal waited: %+v", d)
	}
	if res := e.pub.result(t, "refused"); res.Status != 404 || res.Reason != ReasonStorageNotFound {
		t.Errorf("refusal: %d %s", res.Status, res.Reason)
	}
	if d := deliver("waits", "storage.pbs.delete", `{"storage":"pbs1"}`, 1); d.Action != events.Redeliver {
		t.Fatalf("the delete did not wait for approval: %+v", d)
	}
	steps := e.pub.stepsOf(t, "waits")
	if len(steps) == 0 || steps[len(steps)-1].Status != events.StepWaiting || !strings.Contains(string(steps[len(steps)-1].Plan), `"DELETE"`) {
		t.Errorf("steps %+v, want a waiting step with the plan's DELETE", steps)
	}
	if w := storageWrites(e); len(w) != 0 {
		t.Fatalf("wrote %q while awaiting approval", w)
	}
	approve := events.Command{ID: "by-bob", Source: "/test/approver", Type: events.TypePrefix + "command.approve", Verb: "command.approve",
		Actor: "bob", Data: json.RawMessage(`{"command_id":"waits","command_source":"/test/approval"}`)}
	if d := e.p.Handle(context.Background(), approve, events.Delivery{Number: 1, Stored: time.Now()}); d.Action != events.Ack {
		t.Fatalf("approval: %+v", d)
	}
	if d := deliver("waits", "storage.pbs.delete", `{"storage":"pbs1"}`, 2); d.Action != events.Ack {
		t.Fatalf("after approval: %+v", d)
	}
	if res := e.pub.result(t, "waits"); res.Status != 200 || res.Result != ResultOK {
		t.Errorf("approved delete: %d %s %s", res.Status, res.Result, res.Reason)
	}
	if w := storageWrites(e); !slices.Equal(w, []string{"DELETE /storage/pbs1"}) {
		t.Errorf("writes %q, want the one DELETE", w)
	}
}
