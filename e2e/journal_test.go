package e2e_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
)

// TestJournalPatchRetried: the terminal PATCH fails twice and succeeds on the third try; the
// result is final and clean.
func TestJournalPatchRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.netbox.FailPatches(2, 503)
	res := e.send(e.command(pbs("pbs-j2")))
	if res.Status != 201 || !res.Finalized() || res.Reason != "" {
		t.Fatalf("result %+v", res)
	}
	entries := e.netbox.JournalEntries()
	if len(entries) != 1 || entries[0].Kind != "success" {
		t.Fatalf("journal %+v", entries)
	}
}

// TestJournalFinalizationFailsThenRepairedByReplay: three failing PATCHes → 502 with the real
// outcome kept and journal_finalized false; a replay with the same key repairs the entry without
// another Proxmox write and publishes the journal event.
func TestJournalFinalizationFailsThenRepairedByReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.netbox.FailPatches(3, 503)
	first := e.command(pbs("pbs-j3"))
	first.IdempotencyKey = "j3"
	res := e.send(first)
	if res.Status != 502 || res.Result != "created" || !res.JournalPending() || res.Reason != "netbox_journal_finalization_failed" || res.JournalEntryURL == "" {
		t.Fatalf("first result %+v", res)
	}
	entries := e.netbox.JournalEntries()
	if len(entries) != 1 || entries[0].Kind != "info" {
		t.Fatalf("journal before repair %+v", entries)
	}

	replay := e.command(pbs("pbs-j3"))
	replay.IdempotencyKey = "j3"
	r2 := e.send(replay)
	if !r2.Replayed || !r2.Finalized() || r2.Status != 201 || r2.Result != "created" {
		t.Fatalf("replay result %+v", r2)
	}
	entries = e.netbox.JournalEntries()
	if len(entries) != 1 || entries[0].Kind != "success" {
		t.Fatalf("journal after repair %+v", entries)
	}
	if n := e.pve.Requests("POST", "/storage"); n != 1 {
		t.Errorf("POSTs = %d, want 1", n)
	}
	var ev events.JournalRepaired
	e.waitEvent(e.subjects.Journal(first.Ref()), 5*time.Second, func(data []byte) {
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("journal event: %v", err)
		}
	})
	if ev.CommandID != first.ID || ev.RepairedBy != "replay" || ev.JournalEntryURL != res.JournalEntryURL {
		t.Errorf("journal event %+v", ev)
	}
}

// TestJournalRepairedByRepairer: the background repairer applies a pending update once NetBox
// accepts it again, and announces it.
func TestJournalRepairedByRepairer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(func(c *app.Config) { c.Repair.Interval = 100 * time.Millisecond })
	e.netbox.FailPatches(4, 503) // three in the pipeline, one for the repairer's first try
	cmd := e.command(pbs("pbs-j4"))
	if res := e.send(cmd); !res.JournalPending() {
		t.Fatalf("expected an unfinalized journal: %+v", res)
	}
	var ev events.JournalRepaired
	e.waitEvent(e.subjects.Journal(cmd.Ref()), 20*time.Second, func(data []byte) { _ = json.Unmarshal(data, &ev) })
	if ev.RepairedBy != "repairer" {
		t.Errorf("repaired_by %q", ev.RepairedBy)
	}
	if entries := e.netbox.JournalEntries(); len(entries) != 1 || entries[0].Kind != "success" {
		t.Errorf("journal %+v", entries)
	}
}

// TestJournalWriteAheadUnavailable: without the write-ahead entry nothing is dispatched; the
// command waits for NetBox (it spends no attempt) and runs once NetBox answers.
func TestJournalWriteAheadUnavailable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(func(c *app.Config) { c.EndpointCacheTTL = 30 * time.Second })
	// Warm the endpoint cache so the gate passes, then make every journal POST fail.
	if r := e.send(e.command(pbs("pbs-warm"))); r.Status != 201 {
		t.Fatalf("warm-up %d", r.Status)
	}
	e.netbox.SetDown(true)
	cmd := e.command(pbs("pbs-wa"))
	e.publish(cmd)
	eventually(t, 20*time.Second, "a retrying journal step", func() bool {
		return slices.ContainsFunc(e.steps(cmd), func(s events.Step) bool { return s.Step == "journal" && s.Status == events.StepRetrying })
	})
	time.Sleep(time.Second) // several more deliveries while NetBox is down
	if _, ok := e.pve.StorageConfig("pbs-wa"); ok {
		t.Error("storage created without a write-ahead entry")
	}
	if res := e.resultsOf(cmd); len(res) != 0 {
		t.Fatalf("answered while NetBox was down: %+v", res)
	}
	e.netbox.SetDown(false)
	if res := e.result(cmd); res.Status != 201 || !res.Finalized() {
		t.Fatalf("after NetBox came back: %d %s %s", res.Status, res.Result, res.Reason)
	}
	if n := e.pve.Requests("POST", "/storage"); n != 2 {
		t.Errorf("POSTs = %d, want 2 (the warm-up and this one)", n)
	}
}
