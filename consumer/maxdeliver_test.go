package consumer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
)

// TestMaxDeliveriesDeadLetters: a command retried until MaxDeliver is dead-lettered from the
// max-deliveries advisory with reason max_deliveries, gets exactly one 503 result (none when
// the handler had already published one), and is removed from the command stream.
func TestMaxDeliveriesDeadLetters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		handlerResult bool // the handler publishes its own result on every delivery
		delay         time.Duration
		wantStatus    float64
	}{
		{"no result yet", false, 10 * time.Millisecond, 503},
		{"handler result kept", true, 10 * time.Millisecond, 502},
		// The last delivery is nak'ed without delay, whatever the handler asked.
		{"long retry delay", false, time.Hour, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(c *Config) { c.MaxDeliver = 2 })
			pub := NewPublisher(e.js)
			em := events.NewEmitter(e.s, "test")
			h := &recorder{answer: func(ctx context.Context, cmd events.Command, at Attempt) Disposition {
				if tt.handlerResult {
					m, err := em.ResultEvent(events.OriginOf(cmd), events.Result{Status: 502, Result: "failed", Reason: "proxmox_unreachable"})
					if err != nil {
						t.Errorf("result event: %v", err)
					} else if err := pub.Publish(ctx, m); err != nil {
						t.Errorf("publish result: %v", err)
					}
				}
				if at.Delivered == 1 {
					return Disposition{Action: Retry, Delay: 10 * time.Millisecond}
				}
				return Disposition{Action: Retry, Delay: tt.delay}
			}}
			e.start(t, h)
			seq := e.publish(t, binaryCommand(e.s, "vm.start", "x1", `{"vm":"100","token":"tok-secret-1"}`))

			eventually(t, 10*time.Second, "dead letter and deletion", func() bool {
				return len(e.deadLetters(t)) == 1 && e.streamMsgs(t, e.s.CommandsStream()) == 0
			})
			d := e.deadLetters(t)[0]
			if d.Reason != ReasonMaxDeliveries || d.Subject != "proxbus.dlq.vm.start" || d.Header.Get(HeaderDLQStreamSeq) != itoa(seq) {
				t.Errorf("dead letter: reason %q subject %q seq %q", d.Reason, d.Subject, d.Header.Get(HeaderDLQStreamSeq))
			}
			if got := d.Header.Get(HeaderDLQDeliveries); got != "2" {
				t.Errorf("deliveries header %q, want 2", got)
			}
			if string(d.Data) == "" || strings.Contains(string(d.Data), "tok-secret-1") {
				t.Errorf("DLQ body not redacted: %s", d.Data)
			}
			res := e.resultsFor(t, "/test", "x1")
			if len(res) != 1 {
				t.Fatalf("%d results, want exactly 1", len(res))
			}
			if res[0]["status"] != tt.wantStatus {
				t.Errorf("result = %v, want status %v", res[0], tt.wantStatus)
			}
			if tt.wantStatus == 503 && (res[0]["reason"] != ReasonDeliveryAttemptsExhausted || res[0]["result"] != "failed" || res[0]["journal_finalized"] != false) {
				t.Errorf("exhausted result = %v", res[0])
			}
			if h.count() != 2 {
				t.Errorf("handled %d times, want MaxDeliver=2", h.count())
			}
		})
	}
}

// TestSweepDeadLettersMissedAdvisories: a command that exhausted MaxDeliver while no proxbus
// was listening for the advisory is dead-lettered when a Consumer starts.
func TestSweepDeadLettersMissedAdvisories(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.MaxDeliver = 2 })
	seq := e.publish(t, binaryCommand(e.s, "vm.reboot", "lost1", `{}`))
	e.publish(t, binaryCommand(e.s, "vm.reboot", "fine1", `{}`))

	// Exhaust lost1 by hand, with nobody subscribed to the advisory; ack fine1.
	cons, err := e.js.Consumer(ctxT(t), e.s.CommandsStream(), "proxbus")
	if err != nil {
		t.Fatal(err)
	}
	naks, acked := 0, false
	for naks < 2 || !acked {
		m, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		if md.Sequence.Stream == seq {
			err, naks = m.Nak(), naks+1
		} else {
			err, acked = m.DoubleAck(ctxT(t)), true
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// One more pull makes the server give up on lost1.
	eventually(t, 5*time.Second, "server gave up on the exhausted command", func() bool {
		if m, err := cons.Next(jetstream.FetchMaxWait(50 * time.Millisecond)); err == nil {
			t.Fatalf("unexpected delivery of %s", m.Subject())
		}
		ci := e.consumerInfo(t)
		return ci.NumAckPending == 0 && ci.Delivered.Stream >= seq
	})
	if n := e.streamMsgs(t, e.s.CommandsStream()); n != 1 {
		t.Fatalf("%d messages in the stream, want 1 (the exhausted one stays)", n)
	}

	h := &recorder{}
	e.start(t, h)
	e.publish(t, binaryCommand(e.s, "vm.reboot", "after1", `{}`))
	eventually(t, 10*time.Second, "sweep", func() bool {
		return len(e.deadLetters(t)) == 1 && e.streamMsgs(t, e.s.CommandsStream()) == 0
	})
	if d := e.deadLetters(t)[0]; d.Reason != ReasonMaxDeliveries || d.Header.Get(HeaderDLQStreamSeq) != itoa(seq) {
		t.Errorf("dead letter reason %q seq %q", d.Reason, d.Header.Get(HeaderDLQStreamSeq))
	}
	if res := e.resultsFor(t, "/test", "lost1"); len(res) != 1 || res[0]["status"] != float64(503) {
		t.Errorf("results = %v, want one 503", res)
	}
	eventually(t, 10*time.Second, "later command handled", func() bool { return h.count() == 1 })
	if got := h.ids(); got[0] != "after1" {
		t.Errorf("handled %v, want [after1]", got)
	}
}

// TestSweepIgnoresDelayedRetry: a command waiting out a NakWithDelay is pending, so the sweep
// never mistakes it for an exhausted one.
func TestSweepIgnoresDelayedRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	h := &recorder{answer: func(ctx context.Context, cmd events.Command, at Attempt) Disposition {
		if at.Delivered == 1 {
			return Disposition{Action: Retry, Delay: 500 * time.Millisecond}
		}
		return Disposition{Action: Ack}
	}}
	e.start(t, h)
	e.publish(t, binaryCommand(e.s, "vm.start", "wait1", `{}`))
	eventually(t, 10*time.Second, "acked on the second delivery", func() bool {
		return h.count() == 2 && e.streamMsgs(t, e.s.CommandsStream()) == 0
	})
	if dl := e.deadLetters(t); len(dl) != 0 {
		t.Errorf("%d dead letters, want 0", len(dl))
	}
}
