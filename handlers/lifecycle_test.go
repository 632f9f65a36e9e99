package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/redis/go-redis/v9"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
	"github.com/proxbus/proxbus/internal/testenv"
	"github.com/proxbus/proxbus/store"
)

// The lifecycle tests drive the pipeline delivery by delivery, as JetStream would, against a
// real Redis and a fake clock, with test verbs whose writes and reads the test scripts. They
// pin contract §4's "waiting is not failing", the write protocol and the one first-hand result.

// stream is the events stream as the pipeline sees it: the Publisher and the History. Result
// publications fail while failResults > 0.
type stream struct {
	mu          sync.Mutex
	steps       map[string][]events.Step
	results     map[string][]events.Result
	failResults int
}

// testEmitter builds the events the fake Publishers keep.
var testEmitter = events.NewEmitter(events.NewSubjects("proxbus"), "test")

func newStream() *stream {
	return &stream{steps: map[string][]events.Step{}, results: map[string][]events.Result{}}
}

// Publish keeps data as the event built by a real emitter carries it.
func (s *stream) Publish(_ context.Context, o events.Origin, data events.Payload) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := events.Ref(o.Source, o.ID)
	data, _, err := testEmitter.Event(o, data)
	if err != nil {
		return err
	}
	switch ev := data.(type) {
	case events.Step:
		s.steps[ref] = append(s.steps[ref], ev)
	case events.Result:
		if s.failResults > 0 {
			s.failResults--
			return errors.New("nats: timeout")
		}
		s.results[ref] = append(s.results[ref], ev)
	}
	return nil
}

func (s *stream) LastStep(_ context.Context, ref string) (events.Step, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.steps[ref]
	if len(st) == 0 {
		return events.Step{}, false, nil
	}
	return st[len(st)-1], true, nil
}

func (s *stream) HasResult(_ context.Context, ref string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.results[ref]) > 0, nil
}

func (s *stream) stepsOf(ref string) []events.Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]events.Step(nil), s.steps[ref]...)
}

func (s *stream) resultsOf(ref string) []events.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]events.Result(nil), s.results[ref]...)
}

// journal is an in-memory NetBox journal.
type journal struct {
	mu      sync.Mutex
	entries map[int64]string // id → comments
	next    int64
}

func (j *journal) CreateJournalEntry(_ context.Context, e netbox.JournalEntry) (netbox.JournalRef, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.next++
	if j.entries == nil {
		j.entries = map[int64]string{}
	}
	j.entries[j.next] = e.Comments
	return netbox.JournalRef{ID: j.next, URL: fmt.Sprintf("http://netbox/api/extras/journal-entries/%d/", j.next)}, nil
}

func (j *journal) UpdateJournalEntry(_ context.Context, id int64, _ netbox.Kind, comments string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries[id] = comments
	return nil
}

func (j *journal) VMsByProxmoxID(context.Context, int64) ([]netbox.VM, error) { return nil, nil }

func (j *journal) FindJournalEntry(_ context.Context, _ string, _ int64, commandID string) (netbox.JournalRef, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for id, c := range j.entries {
		if strings.Contains(c, "- command_id: "+commandID+"\n") {
			return netbox.JournalRef{ID: id, URL: fmt.Sprintf("http://netbox/api/extras/journal-entries/%d/", id)}, nil
		}
	}
	return netbox.JournalRef{}, fmt.Errorf("find: %w", netbox.ErrNotFound)
}

// inProgress counts the entries still saying result: in_progress.
func (j *journal) inProgress() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, c := range j.entries {
		if strings.Contains(c, "- result: in_progress\n") {
			n++
		}
	}
	return n
}

type writable struct{}

func (writable) Endpoint(_ context.Context, id int64) (netbox.Endpoint, error) {
	return netbox.Endpoint{ID: id, Name: "lab", AllowWrites: true}, nil
}

// script is what a test verb does on each call, in order; the last entry repeats.
type script struct {
	mu       sync.Mutex
	dispatch []func(ctx context.Context, x *Exec) (Outcome, error)
	confirm  func(ctx context.Context, x *Exec) (Outcome, error)
	// locate, when set, runs before the claim (a read, as a guest lookup is).
	locate func() error
	// refusal, when set, is what the verb finds by reading alone: a dry run (the preflight of a
	// command that needs approval) answers it; a real run still follows dispatch.
	refusal *Outcome
	// writes counts the writes that reached "Proxmox" (the send function ran).
	writes, confirms, dispatches int
}

func (s *script) next() func(ctx context.Context, x *Exec) (Outcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := min(s.dispatches, len(s.dispatch)-1)
	s.dispatches++
	return s.dispatch[i]
}

// send is a write that reaches Proxmox and answers with err.
func (s *script) send(err error) func(context.Context) (Sent, error) {
	return func(context.Context) (Sent, error) {
		s.mu.Lock()
		s.writes++
		s.mu.Unlock()
		return Sent{UPID: "UPID:pve1:00000001:00000001:00000001:test:100:root@pam:"}, err
	}
}

// planned is the script's dispatch in a dry run: the refusal, when set; else one write planned
// and 200 ok. It counts nothing and sends nothing.
func (s *script) planned(ctx context.Context, x *Exec) (Outcome, error) {
	s.mu.Lock()
	refusal := s.refusal
	s.mu.Unlock()
	if refusal != nil {
		return *refusal, nil
	}
	if _, err := x.Write(ctx, "write", "", func(context.Context) (Sent, error) { return Sent{}, nil }); err != nil {
		return Outcome{}, err
	}
	return Outcome{Status: 200, Result: ResultOK}, nil
}

func (s *script) counts() (writes, confirms int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes, s.confirms
}

// testVerb is a write verb on guest 100 run by sc.
func testVerb(sc *script) Verb {
	spec := Spec[struct{}]{
		Name: "test.write", Access: Write,
		Decode:    func(*Fields) struct{} { return struct{}{} },
		Resource:  func(struct{}) string { return "100" },
		Exclusive: func(struct{}) (string, string) { return store.KindGuest, "100" },
		Dispatch: func(ctx context.Context, x *Exec, _ struct{}) (Outcome, error) {
			if x.plan != nil {
				return sc.planned(ctx, x)
			}
			return sc.next()(ctx, x)
		},
		Locate: func(context.Context, *proxmox.Client, struct{}) (struct{}, error) {
			sc.mu.Lock()
			locate := sc.locate
			sc.mu.Unlock()
			if locate != nil {
				return struct{}{}, locate()
			}
			return struct{}{}, nil
		},
	}
	if sc.confirm != nil {
		spec.Confirm = func(ctx context.Context, x *Exec, _ struct{}) (Outcome, error) {
			sc.mu.Lock()
			sc.confirms++
			sc.mu.Unlock()
			return sc.confirm(ctx, x)
		}
	}
	return spec
}

type lifecycle struct {
	p       *Pipeline
	store   *store.Store
	redis   *redis.Client
	clock   *testenv.Clock
	stream  *stream
	journal *journal
	// schedules are the message schedules schedule.add made.
	schedules *fakeSchedules
}

func newLifecycle(t *testing.T, sc *script) *lifecycle {
	t.Helper()
	return newLifecycleWith(t, sc, nil)
}

// newLifecycleWith is newLifecycle whose endpoint 1 is changed by tune, with the approval
// verbs registered too.
func newLifecycleWith(t *testing.T, sc *script, tune func(*proxmox.EndpointConfig)) *lifecycle {
	t.Helper()
	r := testenv.StartRedis(t)
	c := testenv.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	st, err := store.New(r.Client, store.Options{Prefix: r.Prefix, LeaseTTL: 30 * time.Second, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	pve := simpve.New(simpve.Options{Scenario: "demo", TaskDuration: -1})
	srv := httptest.NewServer(pve.Handler())
	t.Cleanup(srv.Close)
	ep := proxmox.EndpointConfig{ID: 1, Name: "lab", URLs: []string{srv.URL},
		TokenID: simpve.DemoTokenID, TokenSecretEnv: "PVE_SECRET", Timeout: 5 * time.Second, MaxParallel: 4}
	if tune != nil {
		tune(&ep)
	}
	clients, err := proxmox.NewClients([]proxmox.EndpointConfig{ep}, func(string) string { return simpve.DemoSecret })
	if err != nil {
		t.Fatal(err)
	}
	l := &lifecycle{store: st, redis: r.Client, clock: c, stream: newStream(), journal: &journal{}, schedules: &fakeSchedules{}}
	l.p, err = New(Config{
		Registry: NewRegistry(testVerb(sc), CommandApprove(), CommandReject(), CommandCancel(), ScheduleAdd(), ScheduleRemove()),
		Store:    st, Endpoints: writable{}, Journal: l.journal, Proxmox: clients,
		Publisher: l.stream, History: l.stream, Schedules: l.schedules,
		Instance: "test", Now: c.Now, Settings: Settings{MaxAttempts: 3, JournalRetryDelay: time.Millisecond, GuardWait: 5 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	followTable(t, l.p)
	return l
}

func testCommand(id string) events.Command {
	return events.Command{ID: id, Source: "/test/lifecycle", Type: "proxbus.test.write", Verb: "test.write",
		EndpointID: 1, HasEndpointID: true, Data: json.RawMessage(`{}`)}
}

// deliver hands cmd to the pipeline as delivery n.
func (l *lifecycle) deliver(cmd events.Command, n uint64) events.Disposition {
	return l.p.Handle(context.Background(), cmd, events.Delivery{Number: n})
}

func (l *lifecycle) failures(t *testing.T, cmd events.Command) int {
	t.Helper()
	n, err := l.store.Failures(context.Background(), store.CommandKey{Source: cmd.Source, ID: cmd.ID})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// unreachable is a dispatch whose write finds Proxmox unreachable: nothing leaves.
func unreachable(ctx context.Context, x *Exec) (Outcome, error) {
	_, err := x.Write(ctx, "write", "", func(context.Context) (Sent, error) {
		return Sent{}, &proxmox.TransportError{Method: "POST", Path: "/x", Err: errors.New("connection refused")}
	})
	return Outcome{}, err
}

// ok is a dispatch whose write succeeds.
func ok(ctx context.Context, x *Exec, sc *script) (Outcome, error) {
	if _, err := x.Write(ctx, "write", "", sc.send(nil)); err != nil {
		return Outcome{}, err
	}
	return Outcome{Status: 200, Result: ResultOK}, nil
}

// TestWaitingSpendsNoAttempt: a command whose guest is held by another command (here for longer
// than GuardWait, the time a delivery waits in the process) is redelivered, after a pause that
// doubles with each delivery up to MaxWait, as often as it takes — here 25 times, five times MaxAttempts — without spending an attempt or
// being dead-lettered, says once that it waits, and runs as soon as the guest is free.
func TestWaitingSpendsNoAttempt(t *testing.T) {
	t.Parallel()
	sc := &script{}
	sc.dispatch = []func(ctx context.Context, x *Exec) (Outcome, error){func(ctx context.Context, x *Exec) (Outcome, error) { return ok(ctx, x, sc) }}
	l := newLifecycle(t, sc)
	holder := store.ClaimRequest{Command: store.CommandKey{Source: "/other", ID: "holder"}, Owner: "other",
		Guards: store.Guards{Resource: &store.ResourceKey{EndpointID: 1, Kind: store.KindGuest, ID: "100"}}}
	claim, err := l.store.Claim(context.Background(), holder)
	if err != nil || claim.State != store.Claimed {
		t.Fatalf("holder claim %v %v", claim.State, err)
	}
	cmd := testCommand("waits")
	for n := uint64(1); n <= 25; n++ {
		d := l.deliver(cmd, n)
		if want := min(DefaultBusyDelay<<(n-1), DefaultMaxWait); d.Action != events.Redeliver || d.Delay != want {
			t.Fatalf("delivery %d: %+v, want a redelivery after %s", n, d, want)
		}
	}
	if f := l.failures(t, cmd); f != 0 {
		t.Errorf("failed attempts = %d, want 0: waiting spends none", f)
	}
	steps := l.stream.stepsOf(cmd.Ref())
	if len(steps) != 1 || steps[0].Status != events.StepWaiting || steps[0].Attempt != 1 || !strings.Contains(steps[0].Detail, "guest/100") {
		t.Errorf("steps %+v, want one waiting step naming the guest, attempt 1", steps)
	}
	if err := l.store.Complete(context.Background(), claim.Lease, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if d := l.deliver(cmd, 26); d.Action != events.Ack {
		t.Fatalf("after the guest was freed: %+v, want ack", d)
	}
	if res := l.stream.resultsOf(cmd.Ref()); len(res) != 1 || res[0].Status != 200 || res[0].Replayed {
		t.Errorf("results %+v, want one first-hand 200", res)
	}
	if w, _ := sc.counts(); w != 1 {
		t.Errorf("writes = %d, want 1", w)
	}
}

// TestUnreachableBeforeWriteWaits: Proxmox unreachable before the write left waits without an
// attempt; the write is sent once Proxmox answers.
func TestUnreachableBeforeWriteWaits(t *testing.T) {
	t.Parallel()
	sc := &script{}
	sc.dispatch = []func(ctx context.Context, x *Exec) (Outcome, error){unreachable, unreachable, unreachable, unreachable,
		func(ctx context.Context, x *Exec) (Outcome, error) { return ok(ctx, x, sc) }}
	l := newLifecycle(t, sc)
	cmd := testCommand("unreachable")
	for n := uint64(1); n <= 4; n++ {
		if d := l.deliver(cmd, n); d.Action != events.Redeliver {
			t.Fatalf("delivery %d: %+v, want a redelivery", n, d)
		}
	}
	if f := l.failures(t, cmd); f != 0 {
		t.Errorf("failed attempts = %d, want 0", f)
	}
	if d := l.deliver(cmd, 5); d.Action != events.Ack {
		t.Fatalf("delivery 5: %+v, want ack", d)
	}
	if w, c := sc.counts(); w != 1 || c != 0 {
		t.Errorf("writes %d confirms %d, want 1 and 0: nothing had left before", w, c)
	}
	if res := l.stream.resultsOf(cmd.Ref()); len(res) != 1 || res[0].Status != 200 {
		t.Errorf("results %+v", res)
	}
	if n := l.journal.inProgress(); n != 0 {
		t.Errorf("%d journal entries in_progress", n)
	}
}

// TestFailedAttemptsExhaust: failures before any write are counted; the steps carry the
// attempt; after MaxAttempts the command is answered 503 attempts_exhausted, its journal entry
// finalized, and dead-lettered.
func TestFailedAttemptsExhaust(t *testing.T) {
	t.Parallel()
	sc := &script{}
	sc.dispatch = []func(ctx context.Context, x *Exec) (Outcome, error){func(context.Context, *Exec) (Outcome, error) { panic("boom") }}
	l := newLifecycle(t, sc)
	cmd := testCommand("fails")
	for n := uint64(1); n <= 2; n++ {
		d := l.deliver(cmd, n)
		if d.Action != events.Redeliver {
			t.Fatalf("delivery %d: %+v, want a redelivery", n, d)
		}
		if f := l.failures(t, cmd); f != int(n) {
			t.Fatalf("failed attempts after delivery %d = %d", n, f)
		}
	}
	d := l.deliver(cmd, 3)
	if d.Action != events.DeadLetter || d.Reason != ReasonAttemptsExhausted {
		t.Fatalf("delivery 3: %+v, want dead letter %s", d, ReasonAttemptsExhausted)
	}
	res := l.stream.resultsOf(cmd.Ref())
	if len(res) != 1 || res[0].Status != 503 || res[0].Reason != ReasonAttemptsExhausted || !res[0].Finalized() {
		t.Fatalf("results %+v", res)
	}
	if n := l.journal.inProgress(); n != 0 {
		t.Errorf("%d journal entries in_progress", n)
	}
	attempts := map[int]bool{}
	for _, st := range l.stream.stepsOf(cmd.Ref()) {
		attempts[st.Attempt] = true
	}
	if !attempts[1] || !attempts[2] || attempts[3] {
		t.Errorf("step attempts %v, want 1 and 2 (the third ends in the result)", attempts)
	}
	// A redelivery of the finished command (a lost ack) replays; it is never dead-lettered.
	if d := l.deliver(cmd, 4); d.Action != events.Ack {
		t.Errorf("redelivery after the end: %+v, want ack", d)
	}
}

// TestMayHaveWrittenIsNeverFailed: a command that fails after its write may have left is
// confirmed by reading on its next delivery — not failed, not dead-lettered, not written twice —
// even when its attempts are exhausted.
func TestMayHaveWrittenIsNeverFailed(t *testing.T) {
	t.Parallel()
	sc := &script{}
	sc.dispatch = []func(ctx context.Context, x *Exec) (Outcome, error){func(ctx context.Context, x *Exec) (Outcome, error) {
		if _, err := x.Write(ctx, "write", "", sc.send(nil)); err != nil {
			return Outcome{}, err
		}
		panic("after the write")
	}}
	sc.confirm = func(context.Context, *Exec) (Outcome, error) { return Outcome{Status: 200, Result: ResultOK}, nil }
	l := newLifecycle(t, sc)
	if _, err := l.store.RecordFailure(context.Background(), store.CommandKey{Source: "/test/lifecycle", ID: "wrote"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.store.RecordFailure(context.Background(), store.CommandKey{Source: "/test/lifecycle", ID: "wrote"}); err != nil {
		t.Fatal(err)
	}
	cmd := testCommand("wrote") // two failures already: the next would exhaust MaxAttempts 3
	if d := l.deliver(cmd, 3); d.Action != events.Redeliver {
		t.Fatalf("delivery 3: %+v, want a redelivery to confirm", d)
	}
	if d := l.deliver(cmd, 4); d.Action != events.Ack {
		t.Fatalf("delivery 4: %+v, want ack after confirming", d)
	}
	if w, c := sc.counts(); w != 1 || c != 1 {
		t.Errorf("writes %d confirms %d, want 1 and 1", w, c)
	}
	res := l.stream.resultsOf(cmd.Ref())
	if len(res) != 1 || res[0].Status != 200 || res[0].Replayed {
		t.Errorf("results %+v, want one first-hand 200", res)
	}
}

// TestLostAnswerConfirmed: a write whose answer was lost is confirmed by the verb's Confirm in
// the same delivery, never sent again; without a Confirm it answers 502
// proxmox_write_unconfirmed.
func TestLostAnswerConfirmed(t *testing.T) {
	t.Parallel()
	lost := &proxmox.TransportError{Method: "POST", Path: "/x", Sent: true, Err: errors.New("connection reset")}
	for _, tc := range []struct {
		name       string
		confirm    bool
		wantStatus int
		wantReason string
	}{
		{"confirmed by reading", true, 200, ""},
		{"cannot be confirmed", false, 502, ReasonProxmoxWriteUnconfirmed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc := &script{}
			sc.dispatch = []func(ctx context.Context, x *Exec) (Outcome, error){func(ctx context.Context, x *Exec) (Outcome, error) {
				_, err := x.Write(ctx, "write", "", sc.send(lost))
				return Outcome{}, err
			}}
			if tc.confirm {
				sc.confirm = func(context.Context, *Exec) (Outcome, error) { return Outcome{Status: 200, Result: ResultOK}, nil }
			}
			l := newLifecycle(t, sc)
			cmd := testCommand("lost")
			if d := l.deliver(cmd, 1); d.Action != events.Ack {
				t.Fatalf("%+v, want ack", d)
			}
			res := l.stream.resultsOf(cmd.Ref())
			if len(res) != 1 || res[0].Status != tc.wantStatus || res[0].Reason != tc.wantReason {
				t.Fatalf("results %+v", res)
			}
			if w, _ := sc.counts(); w != 1 {
				t.Errorf("writes = %d, want 1", w)
			}
		})
	}
}

// TestFirstHandResultRepublished: a result whose publication was not confirmed is published
// first-hand (replayed: false) by the next delivery; once the stream holds it, a later delivery
// replays it (replayed: true). The write is made once.
func TestFirstHandResultRepublished(t *testing.T) {
	t.Parallel()
	sc := &script{}
	sc.dispatch = []func(ctx context.Context, x *Exec) (Outcome, error){func(ctx context.Context, x *Exec) (Outcome, error) { return ok(ctx, x, sc) }}
	l := newLifecycle(t, sc)
	l.stream.failResults = publishTries // every try of the first delivery fails
	cmd := testCommand("unconfirmed")
	if d := l.deliver(cmd, 1); d.Action != events.Redeliver {
		t.Fatalf("delivery 1: %+v, want a redelivery", d)
	}
	if res := l.stream.resultsOf(cmd.Ref()); len(res) != 0 {
		t.Fatalf("results %+v, want none yet", res)
	}
	if d := l.deliver(cmd, 2); d.Action != events.Ack {
		t.Fatalf("delivery 2: %+v, want ack", d)
	}
	if d := l.deliver(cmd, 3); d.Action != events.Ack {
		t.Fatalf("delivery 3: %+v, want ack", d)
	}
	res := l.stream.resultsOf(cmd.Ref())
	if len(res) != 2 || res[0].Replayed || !res[1].Replayed || res[0].Status != 200 {
		t.Errorf("results %+v, want a first-hand result, then a replay", res)
	}
	if w, _ := sc.counts(); w != 1 {
		t.Errorf("writes = %d, want 1", w)
	}
}

// TestStepSeqContinues: a later delivery numbers its steps after the newest step of the
// earlier ones, so no step event id is used twice and seq never jumps.
func TestStepSeqContinues(t *testing.T) {
	t.Parallel()
	sc := &script{}
	sc.dispatch = []func(ctx context.Context, x *Exec) (Outcome, error){unreachable, func(ctx context.Context, x *Exec) (Outcome, error) { return ok(ctx, x, sc) }}
	l := newLifecycle(t, sc)
	cmd := testCommand("seq")
	l.deliver(cmd, 1)
	l.deliver(cmd, 2)
	steps := l.stream.stepsOf(cmd.Ref())
	if len(steps) < 4 {
		t.Fatalf("steps %+v", steps)
	}
	for i, st := range steps {
		if st.Seq != i+1 {
			t.Errorf("step %d has seq %d, want %d (%+v)", i, st.Seq, i+1, steps)
		}
	}
}

// TestCrashAfterJournalResumes: a delivery that stopped (its replica killed) after its
// write-ahead entry is resumed once its lease expired, reusing the entry. What it had sent is
// what its record's marks say: no mark → no write left, the write is sent (once); its write
// marked → it may have left, and is confirmed by reading, never sent again; a record of an
// owner that does not mark (an older version) → it may have left too.
func TestCrashAfterJournalResumes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name              string
		marked, unmarking bool
		writes, confirms  int
	}{
		{name: "died before its write", writes: 1},
		{name: "died after marking its write", marked: true, confirms: 1},
		{name: "an owner that does not mark", unmarking: true, confirms: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			sc := &script{}
			sc.dispatch = []func(ctx context.Context, x *Exec) (Outcome, error){func(ctx context.Context, x *Exec) (Outcome, error) { return ok(ctx, x, sc) }}
			sc.confirm = func(context.Context, *Exec) (Outcome, error) { return Outcome{Status: 200, Result: ResultOK}, nil }
			l := newLifecycle(t, sc)
			cmd := testCommand("crashed")
			key := store.CommandKey{Source: cmd.Source, ID: cmd.ID}
			// The crashed delivery: it claimed and wrote its journal entry, then the process died.
			claim, err := l.store.Claim(ctx, store.ClaimRequest{Command: key, Owner: "dead/1/1"})
			if err != nil || claim.State != store.Claimed {
				t.Fatalf("claim %v %v", claim.State, err)
			}
			ref, err := l.journal.CreateJournalEntry(ctx, netbox.JournalEntry{Comments: "- result: in_progress\n- command_id: crashed\n"})
			if err != nil {
				t.Fatal(err)
			}
			if tc.marked {
				if err := l.store.Dispatching(ctx, claim.Lease, store.Progress{JournalID: ref.ID, JournalURL: ref.URL}, "write"); err != nil {
					t.Fatal(err)
				}
			}
			if tc.unmarking {
				keys, err := l.redis.Keys(ctx, l.store.Options().Prefix+":cmd:*").Result()
				if err != nil || len(keys) != 1 {
					t.Fatalf("record keys %v %v", keys, err)
				}
				l.redis.HDel(ctx, keys[0], "marks")
			}
			if d := l.deliver(cmd, 2); d.Action != events.Redeliver || d.Delay != DefaultBusyDelay {
				t.Fatalf("while the dead owner's lease lives: %+v, want a wait", d)
			}
			l.clock.Advance(31 * time.Second)
			if d := l.deliver(cmd, 3); d.Action != events.Ack {
				t.Fatalf("after the lease expired: %+v, want ack", d)
			}
			if w, c := sc.counts(); w != tc.writes || c != tc.confirms {
				t.Errorf("writes %d confirms %d, want %d and %d", w, c, tc.writes, tc.confirms)
			}
			if n := len(l.journal.entries); n != 1 {
				t.Errorf("%d journal entries, want the one reused", n)
			}
			if n := l.journal.inProgress(); n != 0 {
				t.Errorf("%d journal entries in_progress", n)
			}
			if f := l.failures(t, cmd); f != 0 {
				t.Errorf("failed attempts = %d, want 0: a crash is not a failed attempt", f)
			}
		})
	}
}

// TestExhaustedReadsTheRecord: a command whose attempts run out before its claim (here its
// lookup panics) is not dead-lettered when its record says it finished — a duplicate publish
// of it, each delivered for the first time (a redelivery is answered from the record at once) —
// but answered from the record; nor when another delivery holds its claim.
func TestExhaustedReadsTheRecord(t *testing.T) {
	t.Parallel()
	sc := &script{}
	sc.dispatch = []func(ctx context.Context, x *Exec) (Outcome, error){func(ctx context.Context, x *Exec) (Outcome, error) { return ok(ctx, x, sc) }}
	l := newLifecycle(t, sc)
	done := testCommand("finished")
	if d := l.deliver(done, 1); d.Action != events.Ack {
		t.Fatalf("delivery 1: %+v", d)
	}
	sc.mu.Lock()
	sc.locate = func() error { panic("lookup broke") }
	sc.mu.Unlock()
	for n := uint64(2); n <= 4; n++ {
		d := l.deliver(done, 1)
		if d.Action == events.DeadLetter {
			t.Fatalf("delivery %d of a finished command: dead-lettered", n)
		}
		if n == 4 && d.Action != events.Ack {
			t.Fatalf("delivery 4: %+v, want ack from the record", d)
		}
	}
	if res := l.stream.resultsOf(done.Ref()); len(res) != 2 || res[0].Replayed || !res[1].Replayed || res[1].Status != 200 {
		t.Errorf("results %+v, want the first-hand 200 and its replay", res)
	}

	claimed := testCommand("claimed-elsewhere")
	if _, err := l.store.Claim(context.Background(), store.ClaimRequest{Command: store.CommandKey{Source: claimed.Source, ID: claimed.ID}, Owner: "other/1/1"}); err != nil {
		t.Fatal(err)
	}
	for n := uint64(1); n <= 5; n++ {
		if d := l.deliver(claimed, n); d.Action != events.Redeliver {
			t.Fatalf("delivery %d of a command claimed elsewhere: %+v, want a redelivery", n, d)
		}
	}
	if res := l.stream.resultsOf(claimed.Ref()); len(res) != 0 {
		t.Errorf("results %+v, want none", res)
	}
}
