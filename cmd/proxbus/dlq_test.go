package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/deadletter"
	"github.com/proxbus/proxbus/internal/testenv"
)

// TestDLQShowEscapesTerminalSequences: a dead letter whose reason, headers and body carry
// terminal escape sequences (clear screen, an OSC title, an 8-bit CSI, a bidi override, invalid
// UTF-8) is printed by `dlq list` and `dlq show` with every one of them escaped, in text and
// JSON, so a message cannot act on the operator's terminal.
func TestDLQShowEscapesTerminalSequences(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	subjects := events.NewSubjects("")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := consumer.Provision(ctx, n.JS, consumer.Config{Subjects: subjects}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	const evil = "\x1b[2J\x1b]0;owned\x07\u009b31m\u202egnp.exe\xff"
	m := nats.NewMsg(subjects.DLQ("vm.start"))
	m.Header.Set(deadletter.HeaderDLQReason, "invalid_command"+evil)
	m.Header.Set(deadletter.HeaderDLQSubject, subjects.Command("vm.start"))
	m.Header.Set("X-Note", "note"+evil)
	m.Data = []byte("line one\n\tline two" + evil)
	ack, err := n.JS.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	seq := strconv.FormatUint(ack.Sequence, 10)
	for _, args := range [][]string{
		{"dlq", "list"}, {"dlq", "list", "--output", "json"},
		{"dlq", "show", seq}, {"dlq", "show", seq, "--output", "json"},
	} {
		code, out, errOut := runCLI(t, append(args, "--nats-url", n.URL)...)
		if code != 0 {
			t.Fatalf("%v: code %d: %s", args, code, errOut)
		}
		if i := strings.IndexFunc(out, func(r rune) bool { return r != '\n' && r != '\t' && terminalUnsafe(r) }); i >= 0 {
			t.Errorf("%v prints %q raw:\n%q", args, out[i:min(i+8, len(out))], out)
		}
		if strings.Contains(out, "\xff") {
			t.Errorf("%v prints invalid UTF-8 raw: %q", args, out)
		}
		if !strings.Contains(out, "invalid_command") {
			t.Errorf("%v: %q, want the reason", args, out)
		}
		if args[1] == "show" && args[len(args)-1] == seq && !strings.Contains(out, `\x1b[2J`) {
			t.Errorf("%v: %q, want the escape sequence shown escaped", args, out)
		}
	}
}
