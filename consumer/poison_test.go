package consumer

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/deadletter"
	"github.com/proxbus/proxbus/internal/testenv"
)

// TestPoisonMessagesAreDeadLettered: messages that cannot be a command never reach the
// handler; each gets a DLQ copy (reason invalid_command, the decoder's rule as detail), a 400
// result when its id is readable, and is removed; the next good command is still processed.
func TestPoisonMessagesAreDeadLettered(t *testing.T) {
	t.Parallel()
	structured := func(subject, body string) *nats.Msg {
		h := nats.Header{}
		h.Set("Content-Type", "application/cloudevents+json")
		return &nats.Msg{Subject: subject, Header: h, Data: []byte(body)}
	}
	tests := []struct {
		name       string
		big        bool // needs a server that accepts messages over 1 MiB
		msg        func(s events.Subjects) *nats.Msg
		resultID   string // "" when no id is readable: no result
		dlqSubject string
	}{
		{
			name:       "structured body not JSON",
			msg:        func(s events.Subjects) *nats.Msg { return structured(s.Command("vm.start"), `{"id": "x1", nope`) },
			dlqSubject: "proxbus.dlq.vm.start",
		},
		{
			name: "missing id",
			msg: func(s events.Subjects) *nats.Msg {
				m := binaryCommand(s, "vm.start", "ignored", `{}`)
				m.Header.Del("ce-id")
				return m
			},
			dlqSubject: "proxbus.dlq.vm.start",
		},
		{
			name: "type does not match subject",
			msg: func(s events.Subjects) *nats.Msg {
				m := binaryCommand(s, "vm.start", "mismatch1", `{}`)
				m.Header.Set("ce-type", "proxbus.vm.stop")
				return m
			},
			resultID:   "mismatch1",
			dlqSubject: "proxbus.dlq.vm.start",
		},
		{
			name: "binary data not JSON",
			msg: func(s events.Subjects) *nats.Msg {
				m := binaryCommand(s, "vm.start", "bin1", "")
				m.Data = []byte{0xff, 0x00, 0xfe, 'p', 'w'}
				return m
			},
			resultID:   "bin1",
			dlqSubject: "proxbus.dlq.vm.start",
		},
		{
			name: "binary content type not JSON",
			msg: func(s events.Subjects) *nats.Msg {
				m := binaryCommand(s, "vm.start", "ct1", "hello")
				m.Header.Set("Content-Type", "text/plain")
				return m
			},
			resultID:   "ct1",
			dlqSubject: "proxbus.dlq.vm.start",
		},
		{
			name: "over 1 MiB",
			big:  true,
			msg: func(s events.Subjects) *nats.Msg {
				return binaryCommand(s, "vm.start", "big1", `{"pad":"`+strings.Repeat("a", events.MaxCommandBytes)+`"}`)
			},
			resultID:   "big1",
			dlqSubject: "proxbus.dlq.vm.start",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var e *env
			if tt.big {
				e = newBigPayloadEnv(t, nil)
			} else {
				e = newEnv(t, nil)
			}
			h := &recorder{}
			e.start(t, h)
			poison := tt.msg(e.s)
			seq := e.publish(t, poison)
			e.publish(t, binaryCommand(e.s, "vm.start", "good-after", `{}`))

			eventually(t, 10*time.Second, "good command handled and queue empty", func() bool {
				return h.count() == 1 && e.streamMsgs(t, e.s.CommandsStream()) == 0
			})
			if got := h.ids(); got[0] != "good-after" {
				t.Errorf("handler saw %v, want only good-after", got)
			}
			dl := e.deadLetters(t)
			if len(dl) != 1 {
				t.Fatalf("%d dead letters, want 1", len(dl))
			}
			d := dl[0]
			if d.Reason != deadletter.ReasonInvalidCommand || d.Header.Get(deadletter.HeaderDLQDetail) == "" {
				t.Errorf("reason %q detail %q", d.Reason, d.Header.Get(deadletter.HeaderDLQDetail))
			}
			if d.Subject != tt.dlqSubject || d.OriginalSubject != poison.Subject {
				t.Errorf("dlq subject %q original %q, want %q %q", d.Subject, d.OriginalSubject, tt.dlqSubject, poison.Subject)
			}
			if got := d.Header.Get(deadletter.HeaderDLQStreamSeq); got != itoa(seq) {
				t.Errorf("stream seq header %q, want %d", got, seq)
			}
			if got := d.Header.Get(deadletter.HeaderDLQDeliveries); got != "1" {
				t.Errorf("deliveries header %q, want 1", got)
			}
			if d.Header.Get("Nats-Msg-Id") != "dlq-"+itoa(seq) {
				t.Errorf("Nats-Msg-Id %q", d.Header.Get("Nats-Msg-Id"))
			}
			if tt.big && len(d.Data) <= events.MaxCommandBytes {
				t.Errorf("big body stored as %d bytes, want the whole body", len(d.Data))
			}
			if tt.resultID == "" {
				return
			}
			res := e.resultsFor(t, "/test", tt.resultID)
			if len(res) != 1 {
				t.Fatalf("%d results, want 1", len(res))
			}
			if res[0]["status"] != float64(400) || res[0]["reason"] != "invalid_command" {
				t.Errorf("result = %v, want 400 invalid_command", res[0])
			}
		})
	}
}

// TestPoisonCanaryIsRedacted: a secret in a poison message (JSON body, JSON inside a string,
// free text, a secret-named header) is absent from the DLQ copy, while the rest survives.
func TestPoisonCanaryIsRedacted(t *testing.T) {
	t.Parallel()
	const canary = "CANARY-7f3a9"
	tests := []struct {
		name string
		msg  func(s events.Subjects) *nats.Msg
		keep string
	}{
		{"binary json body", func(s events.Subjects) *nats.Msg {
			m := binaryCommand(s, "storage.pbs.create", "leak1", `{"storage":"pbs1","password":"`+canary+`"}`)
			m.Header.Del("ce-source")
			return m
		}, "pbs1"},
		{"secret header", func(s events.Subjects) *nats.Msg {
			m := binaryCommand(s, "storage.pbs.create", "leak2", `{"storage":"pbs2"}`)
			m.Header.Set("X-Api-Token", canary)
			m.Header.Set("ce-specversion", "0.3")
			return m
		}, "pbs2"},
		{"structured data with nested secret", func(s events.Subjects) *nats.Msg {
			h := nats.Header{}
			h.Set("Content-Type", "application/cloudevents+json")
			body := `{"specversion":"1.0","id":"leak3","source":"/t","type":"proxbus.vm.stop",` +
				`"data":{"vm":"pbs3","cloud_init":{"password":"` + canary + `"},"note":"{\"token_secret\":\"` + canary + `\"}"}}`
			return &nats.Msg{Subject: s.Command("vm.provision"), Header: h, Data: []byte(body)}
		}, "pbs3"},
		{"not JSON at all", func(s events.Subjects) *nats.Msg {
			m := binaryCommand(s, "storage.pbs.create", "leak4", "server=pbs4 password="+canary)
			m.Header.Set("Content-Type", "text/plain")
			return m
		}, "pbs4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			e.start(t, &recorder{})
			e.publish(t, tt.msg(e.s))
			eventually(t, 10*time.Second, "dead letter", func() bool { return len(e.deadLetters(t)) == 1 })
			d := e.deadLetters(t)[0]
			if bytes.Contains(d.Data, []byte(canary)) {
				t.Errorf("canary in DLQ body: %s", d.Data)
			}
			for k, vs := range d.Header {
				for _, v := range vs {
					if strings.Contains(v, canary) {
						t.Errorf("canary in DLQ header %s", k)
					}
				}
			}
			if !bytes.Contains(d.Data, []byte(tt.keep)) {
				t.Errorf("DLQ body lost the non-secret %q: %s", tt.keep, d.Data)
			}
		})
	}
}

// TestDeadLetterDisposition: a handler's DeadLetter copies the command to
// proxbus.dlq.<verb> with its reason and terminates it after one delivery.
func TestDeadLetterDisposition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, reason, want string
	}{
		{"with reason", "unknown_verb", "unknown_verb"},
		{"without reason", "", deadletter.ReasonDeadLetter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			h := &recorder{answer: func(context.Context, events.Command, events.Delivery) events.Disposition {
				return events.Disposition{Action: events.DeadLetter, Reason: tt.reason}
			}}
			e.start(t, h)
			e.publish(t, binaryCommand(e.s, "vm.frobnicate", "dl1", `{"password":"x-secret-x"}`))
			eventually(t, 10*time.Second, "terminated", func() bool {
				return len(e.deadLetters(t)) == 1 && e.streamMsgs(t, e.s.CommandsStream()) == 0
			})
			d := e.deadLetters(t)[0]
			if d.Reason != tt.want || d.Subject != "proxbus.dlq.vm.frobnicate" || d.OriginalSubject != "proxbus.cmd.vm.frobnicate" {
				t.Errorf("dead letter = reason %q subject %q original %q", d.Reason, d.Subject, d.OriginalSubject)
			}
			if bytes.Contains(d.Data, []byte("x-secret-x")) {
				t.Errorf("secret in DLQ copy: %s", d.Data)
			}
			if d.Header.Get("ce-id") != "dl1" || d.Header.Get(deadletter.HeaderDLQMsgID) != "dl1" {
				t.Errorf("headers not carried: %v", d.Header)
			}
			if h.count() != 1 {
				t.Errorf("handled %d times, want 1", h.count())
			}
		})
	}
}

// TestDeadLetterFailureKeepsTheMessage: when the dead-letter copy cannot be stored (the DLQ
// stream is gone), neither a poison message nor a handler's DeadLetter is terminated: the
// message is nak'ed with a delay and dead-lettered on a later delivery once the DLQ is back.
func TestDeadLetterFailureKeepsTheMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msg  func(s events.Subjects) *nats.Msg
	}{
		{"poison", func(s events.Subjects) *nats.Msg {
			m := binaryCommand(s, "vm.start", "kept-poison", `{}`)
			m.Header.Del("ce-source")
			return m
		}},
		{"handler dead letter", func(s events.Subjects) *nats.Msg {
			return binaryCommand(s, "vm.start", "kept-dl", `{}`)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			logs := &testenv.Buffer{}
			e := newEnv(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
			if err := e.js.DeleteStream(ctxT(t), e.s.DLQStream()); err != nil {
				t.Fatalf("delete DLQ stream: %v", err)
			}
			h := &recorder{answer: func(context.Context, events.Command, events.Delivery) events.Disposition {
				return events.Disposition{Action: events.DeadLetter, Reason: "attempts_exhausted"}
			}}
			e.start(t, h)
			e.publish(t, tt.msg(e.s))
			eventually(t, 10*time.Second, "a failed dead letter", func() bool {
				return strings.Contains(logs.String(), "could not dead-letter")
			})
			if n := e.streamMsgs(t, e.s.CommandsStream()); n != 1 {
				t.Fatalf("%d commands in the stream after a failed dead letter, want 1 (kept)", n)
			}

			if err := Provision(ctxT(t), e.js, e.cfg); err != nil {
				t.Fatalf("provision: %v", err)
			}
			eventually(t, 20*time.Second, "dead-lettered on a later delivery", func() bool {
				return e.streamMsgs(t, e.s.CommandsStream()) == 0 && len(e.deadLetters(t)) == 1
			})
			if d := e.deadLetters(t)[0]; d.Header.Get(deadletter.HeaderDLQDeliveries) == "1" {
				t.Errorf("dead-lettered on delivery %s, want a later one", d.Header.Get(deadletter.HeaderDLQDeliveries))
			}
		})
	}
}
