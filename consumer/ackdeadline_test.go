package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/beat"
)

// TestAckDeadlineIsSharedAndRenewed: the acks share one context until it has less than half
// its timeout left; the next gets a new one a full timeout ahead, and the one replaced is not
// cancelled (an ack may still wait on it) until its own deadline.
func TestAckDeadlineIsSharedAndRenewed(t *testing.T) {
	t.Parallel()
	now := time.Now().Add(time.Hour) // no deadline passes during the test
	a := &ackDeadline{timeout: 10 * time.Second, now: func() time.Time { return now }}
	t.Cleanup(a.release)

	first := a.context()
	if d, ok := first.Deadline(); !ok || !d.Equal(now.Add(10*time.Second)) {
		t.Fatalf("deadline %v (%v), want %v", d, ok, now.Add(10*time.Second))
	}
	steps := []struct {
		advance time.Duration
		same    bool
	}{
		{0, true},
		{4 * time.Second, true},
		{999 * time.Millisecond, true},   // 4.999 s: more than half left
		{time.Millisecond, false},        // 5 s: renewed
		{4 * time.Second, true},          // 9 s: the new one has 6 s left
		{1500 * time.Millisecond, false}, // 10.5 s
	}
	cur := first
	for i, s := range steps {
		now = now.Add(s.advance)
		got := a.context()
		if (got == cur) != s.same {
			t.Fatalf("step %d (+%v): same context %v, want %v", i, s.advance, got == cur, s.same)
		}
		if d, _ := got.Deadline(); !s.same && !d.Equal(now.Add(10*time.Second)) {
			t.Fatalf("step %d: renewed deadline %v, want %v", i, d, now.Add(10*time.Second))
		}
		cur = got
	}
	if err := first.Err(); err != nil {
		t.Errorf("replaced context: %v, want it left to its deadline", err)
	}
	a.release()
	if !errors.Is(cur.Err(), context.Canceled) {
		t.Errorf("current context after release: %v, want canceled", cur.Err())
	}
}

// ctxRecordingMsg records the context of each DoubleAck.
type ctxRecordingMsg struct {
	benchMsg
	ctxs *[]context.Context
}

func (m ctxRecordingMsg) DoubleAck(ctx context.Context) error {
	*m.ctxs = append(*m.ctxs, ctx)
	return nil
}

// TestAcksShareADeadline: the DoubleAcks of a consumer's commands get one context, with a
// deadline at most opTimeout ahead, not a timer each.
func TestAcksShareADeadline(t *testing.T) {
	t.Parallel()
	s := events.NewSubjects("proxbus")
	ack := HandlerFunc(func(context.Context, events.Command, Attempt) Disposition { return Disposition{Action: Ack} })
	c, err := New(noJS{}, Config{Subjects: s, Concurrency: 1, Logger: slog.New(slog.DiscardHandler)}, ack, NewPublisher(noJS{}), events.NewEmitter(s, "test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.acks.release)
	slot := beat.NewGroup(time.Hour).Slot()
	var ctxs []context.Context
	for i := range 3 {
		msg := ctxRecordingMsg{benchMsg{m: binaryCommand(s, "vm.start", fmt.Sprint("c", i), `{}`)}, &ctxs}
		start := time.Now()
		c.process(context.Background(), slot, msg, func() {})
		end := time.Now()
		if len(ctxs) != i+1 {
			t.Fatalf("%d acks after %d commands", len(ctxs), i+1)
		}
		d, ok := ctxs[i].Deadline()
		if !ok || d.Before(start.Add(opTimeout/2)) || d.After(end.Add(opTimeout)) {
			t.Fatalf("ack %d: deadline %v (%v), want %v to %v after the ack", i, d, ok, opTimeout/2, opTimeout)
		}
	}
	if ctxs[0] != ctxs[1] || ctxs[1] != ctxs[2] {
		t.Error("the acks got different contexts, want one shared")
	}
}
