package e2e_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/store"
)

// TestIdempotencyKeyWindow pins contract §5: inside the window the same key and body replays
// the first answer with no second write; a different body is 422 idempotency_key_reused; after
// the window the command executes again.
func TestIdempotencyKeyWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(func(c *app.Config) { c.Store.Window = 1500 * time.Millisecond })

	first := e.command(pbs("pbs-idem"))
	first.IdempotencyKey = "key-1"
	r1 := e.send(first)
	if r1.Status != 201 || r1.Replayed {
		t.Fatalf("first: %d %s replayed=%v", r1.Status, r1.Result, r1.Replayed)
	}

	again := e.command(pbs("pbs-idem", "password", `"a-rotated-password"`)) // secrets are not fingerprinted
	again.IdempotencyKey = "key-1"
	r2 := e.send(again)
	if r2.Status != 201 || r2.Result != "created" || !r2.Replayed || r2.CommandID != again.ID || r2.IdempotencyKey != "key-1" {
		t.Fatalf("replay: %+v", r2)
	}

	other := e.command(pbs("pbs-idem", "datastore", `"store2"`))
	other.IdempotencyKey = "key-1"
	r3 := e.send(other)
	if r3.Status != 422 || r3.Reason != "idempotency_key_reused" {
		t.Fatalf("reuse: %d %s", r3.Status, r3.Reason)
	}
	if n := e.pve.Requests("POST", "/storage"); n != 1 {
		t.Fatalf("POSTs inside the window = %d, want 1", n)
	}
	if n := len(e.netbox.JournalEntries()); n != 1 {
		t.Errorf("journal entries = %d, want 1 (replays and reuse refusals are not journaled)", n)
	}

	// Another storage id is another scope: the same key executes.
	scoped := e.command(pbs("pbs-idem-2"))
	scoped.IdempotencyKey = "key-1"
	if r := e.send(scoped); r.Status != 201 || r.Replayed {
		t.Fatalf("other resource with the same key: %d replayed=%v", r.Status, r.Replayed)
	}

	time.Sleep(1600 * time.Millisecond)
	late := e.command(pbs("pbs-idem"))
	late.IdempotencyKey = "key-1"
	r4 := e.send(late)
	if r4.Replayed || r4.Status != 200 || r4.Result != "already_present" {
		t.Fatalf("after the window: %d %s replayed=%v, want a fresh execution (already_present)", r4.Status, r4.Result, r4.Replayed)
	}
	if n := e.pve.Requests("GET", "/storage"); n != 3 {
		t.Errorf("storage reads = %d, want 3 (first, other resource, after the window)", n)
	}
}

// TestDuplicateCommandRedelivered: the same command (source+id) published again after it
// finished replays its stored result without a second write (command identity, 24 h).
func TestDuplicateCommandRedelivered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	cmd := e.command(pbs("pbs-dup"))
	if r := e.send(cmd); r.Status != 201 {
		t.Fatalf("first: %d", r.Status)
	}
	// Publish the same id again with another Nats-Msg-Id so the stream does not drop it.
	msg := mustEncode(t, e, cmd)
	msg.Header.Set("Nats-Msg-Id", cmd.ID+"-again")
	e.publishMsg(msg)
	eventually(t, 10*time.Second, "the duplicate to be consumed", func() bool {
		s, _ := e.nats.JS.Stream(context.Background(), e.subjects.CommandsStream())
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
	if n := e.pve.Requests("POST", "/storage"); n != 1 {
		t.Errorf("POSTs = %d, want 1", n)
	}
	if n := len(e.netbox.JournalEntries()); n != 1 {
		t.Errorf("journal entries = %d, want 1", n)
	}
}

// TestDuplicateInFlightAcrossReplicas: two replicas, two commands with the same key arriving
// together while Proxmox is slow → one write; the twin waits and replays the answer.
func TestDuplicateInFlightAcrossReplicas(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fast := func(c *app.Config) { c.Consumer.Concurrency = 1 }
	e.replica("r1", fast)
	e.replica("r2", fast)
	e.pve.SetLatency(400 * time.Millisecond)
	a, b := e.command(pbs("pbs-race")), e.command(pbs("pbs-race"))
	a.IdempotencyKey, b.IdempotencyKey = "race", "race"
	e.publish(a)
	e.publish(b)
	var wg sync.WaitGroup
	results := make([]int, 2)
	replayed := make([]bool, 2)
	for i, c := range []string{a.ID, b.ID} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.resultFor(a.Source, c)
			results[i], replayed[i] = r.Status, r.Replayed
		}()
	}
	wg.Wait()
	if results[0] != 201 || results[1] != 201 || replayed[0] == replayed[1] {
		t.Fatalf("statuses %v replayed %v, want both 201 and exactly one replayed", results, replayed)
	}
	if n := e.pve.Requests("POST", "/storage"); n != 1 {
		t.Errorf("POSTs = %d, want 1", n)
	}
}

// TestRecordsInRedis pins what is kept: the finished command's identity record and its
// Idempotency-Key record, under the documented prefix.
func TestRecordsInRedis(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	cmd := e.command(pbs("pbs-rec"))
	cmd.IdempotencyKey = "rec"
	if r := e.send(cmd); r.Status != 201 {
		t.Fatalf("status %d", r.Status)
	}
	raw, err := e.store.Result(context.Background(), store.CommandKey{Source: cmd.Source, ID: cmd.ID})
	if err != nil || len(raw) == 0 {
		t.Fatalf("stored result: %v", err)
	}
	claim, err := e.store.Claim(context.Background(), store.ClaimRequest{
		Command: store.CommandKey{Source: "/other", ID: "x"}, Fingerprint: "different",
		Idem: &store.IdemScope{EndpointID: 1, Verb: "storage.pbs.create", Resource: "pbs-rec", Key: "rec"}, Owner: "probe",
	})
	if err != nil || claim.State != store.IdemReused {
		t.Fatalf("idempotency record: %v %v", claim.State, err)
	}
}
