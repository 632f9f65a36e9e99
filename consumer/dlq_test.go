package consumer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/deadletter"
)

// TestDeadLetterListShowReplay: dead letters can be listed (newest limit, oldest first),
// shown by sequence, and replayed to their original subject without the Proxbus-Dlq-*
// headers, with a replay message id; replaying twice enqueues once; the replayed command is
// processed again.
func TestDeadLetterListShowReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	h := &recorder{answer: func(context.Context, events.Command, events.Delivery) events.Disposition {
		return events.Disposition{Action: events.DeadLetter, Reason: "unknown_verb"}
	}}
	r := e.start(t, h)
	for _, id := range []string{"a1", "a2", "a3"} {
		e.publish(t, binaryCommand(e.s, "vm.nope", id, `{"vm":"100","password":"pw-secret"}`))
	}
	eventually(t, 10*time.Second, "three dead letters", func() bool { return len(e.deadLetters(t)) == 3 })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	all := e.deadLetters(t)
	for i, d := range all {
		if d.Seq != uint64(i+1) || d.Reason != "unknown_verb" || d.OriginalSubject != "proxbus.cmd.vm.nope" || d.Time.IsZero() {
			t.Errorf("dead letter %d = %+v", i, d)
		}
	}
	tests := []struct {
		limit int
		want  []uint64
	}{{0, []uint64{1, 2, 3}}, {2, []uint64{2, 3}}, {5, []uint64{1, 2, 3}}}
	for _, tt := range tests {
		got, err := deadletter.List(ctxT(t), e.js, e.s, tt.limit)
		if err != nil {
			t.Fatalf("list %d: %v", tt.limit, err)
		}
		var seqs []uint64
		for _, d := range got {
			seqs = append(seqs, d.Seq)
		}
		if len(seqs) != len(tt.want) || (len(seqs) > 0 && (seqs[0] != tt.want[0] || seqs[len(seqs)-1] != tt.want[len(tt.want)-1])) {
			t.Errorf("list limit %d = %v, want %v", tt.limit, seqs, tt.want)
		}
	}

	// Dead letters are stored in the order the workers finished; find a2's.
	var seq uint64
	for _, d := range all {
		if d.Header.Get("ce-id") == "a2" {
			seq = d.Seq
		}
	}
	d, err := deadletter.Get(ctxT(t), e.js, e.s, seq)
	if err != nil {
		t.Fatalf("show: %v", err)
	}
	if d.Header.Get("ce-id") != "a2" || string(d.Data) != `{"password":"[redacted]","vm":"100"}` {
		t.Errorf("show = %v %s", d.Header, d.Data)
	}
	for _, seq := range []uint64{0, 99} {
		if _, err := deadletter.Get(ctxT(t), e.js, e.s, seq); !errors.Is(err, deadletter.ErrNotFound) {
			t.Errorf("show %d: err = %v, want deadletter.ErrNotFound", seq, err)
		}
		if _, err := deadletter.Replay(ctxT(t), e.js, e.s, seq); !errors.Is(err, deadletter.ErrNotFound) {
			t.Errorf("replay %d: err = %v, want deadletter.ErrNotFound", seq, err)
		}
	}

	rep, err := deadletter.Replay(ctxT(t), e.js, e.s, seq)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	newSeq := rep.CommandSeq
	if rep.CommandID != "a2-replay-"+itoa(seq) || rep.DeadLetterSeq != seq {
		t.Errorf("replay = %+v, want command id a2-replay-%d", rep, seq)
	}
	again, err := deadletter.Replay(ctxT(t), e.js, e.s, seq)
	if err != nil || again.CommandSeq != newSeq {
		t.Errorf("second replay = %+v, %v; want the same seq %d (deduplicated)", again, err, newSeq)
	}
	// The letter is marked replayed, once, in show and list; the marker is no letter.
	shown, err := deadletter.Get(ctxT(t), e.js, e.s, seq)
	if err != nil || len(shown.Replays) != 1 || shown.Replays[0].CommandID != rep.CommandID || shown.Replays[0].CommandSeq != newSeq {
		t.Errorf("show after replay: replays %+v, %v", shown.Replays, err)
	}
	listed := e.deadLetters(t)
	if len(listed) != 3 {
		t.Errorf("list after replay holds %d letters, want 3 (markers are not letters)", len(listed))
	}
	for _, d := range listed {
		if want := map[bool]int{true: 1, false: 0}[d.Seq == seq]; len(d.Replays) != want {
			t.Errorf("listed letter %d has %d replays, want %d", d.Seq, len(d.Replays), want)
		}
	}
	st, err := e.js.Stream(ctxT(t), e.s.CommandsStream())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetMsg(ctxT(t), newSeq)
	if err != nil {
		t.Fatalf("replayed command: %v", err)
	}
	if raw.Subject != "proxbus.cmd.vm.nope" || raw.Header.Get("Nats-Msg-Id") != "a2.replay."+itoa(seq) || raw.Header.Get(deadletter.HeaderReplayOf) != itoa(seq) || raw.Header.Get("ce-id") != rep.CommandID {
		t.Errorf("replayed subject %q msg id %q replay-of %q ce-id %q", raw.Subject, raw.Header.Get("Nats-Msg-Id"), raw.Header.Get(deadletter.HeaderReplayOf), raw.Header.Get("ce-id"))
	}
	for k := range raw.Header {
		if len(k) >= len(deadletter.HeaderPrefix) && k[:len(deadletter.HeaderPrefix)] == deadletter.HeaderPrefix {
			t.Errorf("replayed command keeps header %s", k)
		}
	}
	if e.streamMsgs(t, e.s.CommandsStream()) != 1 {
		t.Errorf("commands stream holds %d, want the one replay", e.streamMsgs(t, e.s.CommandsStream()))
	}

	// The replayed command decodes and reaches the handler again.
	h2 := &recorder{}
	e.start(t, h2)
	eventually(t, 10*time.Second, "replay handled", func() bool { return h2.count() == 1 })
	if got := h2.ids(); got[0] != rep.CommandID {
		t.Errorf("replayed command id %q, want %s", got[0], rep.CommandID)
	}
}

// TestListDeadLettersEmpty: an empty DLQ lists as an empty slice.
func TestListDeadLettersEmpty(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	got, err := deadletter.List(ctxT(t), e.js, e.s, 10)
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("list = %v, %v; want empty", got, err)
	}
}

// TestPurgeDeadLetters pins purge: --before removes the letters stored before the time (and
// their replay markers) and counts only letters; a zero time removes all the rest.
func TestPurgeDeadLetters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	h := &recorder{answer: func(context.Context, events.Command, events.Delivery) events.Disposition {
		return events.Disposition{Action: events.DeadLetter, Reason: "unknown_verb"}
	}}
	r := e.start(t, h)
	e.publish(t, binaryCommand(e.s, "vm.nope", "p1", `{}`))
	e.publish(t, binaryCommand(e.s, "vm.nope", "p2", `{}`))
	eventually(t, 10*time.Second, "two dead letters", func() bool { return len(e.deadLetters(t)) == 2 })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	first := e.deadLetters(t)[0]
	if _, err := deadletter.Replay(ctxT(t), e.js, e.s, first.Seq); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	lateHeader := nats.Header{}
	lateHeader.Set(deadletter.HeaderDLQReason, "unknown_verb")
	if _, err := e.js.PublishMsg(ctxT(t), &nats.Msg{Subject: e.s.DLQ("vm.late"), Header: lateHeader, Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		before   time.Time
		want     int
		wantLeft int
	}{
		{"before a time", mid, 2, 1},
		{"nothing older", mid, 0, 1},
		{"all", time.Time{}, 1, 0},
		{"empty", time.Time{}, 0, 0},
	}
	for _, tt := range tests {
		n, err := deadletter.Purge(ctxT(t), e.js, e.s, tt.before)
		if err != nil || n != tt.want {
			t.Fatalf("%s: purged %d, %v; want %d", tt.name, n, err, tt.want)
		}
		if left := len(e.deadLetters(t)); left != tt.wantLeft {
			t.Errorf("%s: %d letters left, want %d", tt.name, left, tt.wantLeft)
		}
	}
	if n := e.streamMsgs(t, e.s.DLQStream()); n != 0 {
		t.Errorf("the DLQ stream keeps %d messages (markers?) after purging all", n)
	}
}
