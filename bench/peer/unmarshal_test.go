package peer

import (
	"bytes"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/bench/internal/harness"
	"github.com/proxbus/proxbus/events"
)

// natsMsg is a delivery made of a core NATS message, enough for an Unmarshaler.
type natsMsg struct {
	jetstream.Msg
	m *nats.Msg
}

func (n natsMsg) Subject() string      { return n.m.Subject }
func (n natsMsg) Headers() nats.Header { return n.m.Header }
func (n natsMsg) Data() []byte         { return n.m.Data }

// TestDecodingUnmarshalerDoesProxbusWork pins that Watermill's side of the comparison decodes
// every envelope as proxbus's consumer does: a valid command passes into Watermill's standard
// message, an envelope proxbus would dead-letter is counted.
func TestDecodingUnmarshalerDoesProxbusWork(t *testing.T) {
	t.Parallel()
	s := events.Subjects{}
	valid, err := events.EncodeBinary(s, harness.PBSCommand("peer", 1))
	if err != nil {
		t.Fatal(err)
	}
	noID, err := events.EncodeBinary(s, harness.PBSCommand("peer", 2))
	if err != nil {
		t.Fatal(err)
	}
	noID.Header.Del(events.HeaderPrefix + "id")
	wrongSubject, err := events.EncodeBinary(s, harness.PBSCommand("peer", 3))
	if err != nil {
		t.Fatal(err)
	}
	wrongSubject.Subject = s.Command("vm.start")

	tests := []struct {
		name   string
		msg    *nats.Msg
		failed int64
	}{
		{"valid command", valid, 0},
		{"no id", noID, 1},
		{"type not the subject's verb", wrongSubject, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := &decodingUnmarshaler{subjects: s}
			m, err := u.Unmarshal(natsMsg{m: tt.msg})
			if err != nil {
				t.Fatal(err)
			}
			if got := u.failed.Load(); got != tt.failed {
				t.Errorf("failed = %d, want %d", got, tt.failed)
			}
			// Compared, not printed: the command's data holds a (fixture) password.
			if !bytes.Equal(m.Payload, tt.msg.Data) {
				t.Errorf("payload (%d bytes) is not the message's data (%d bytes)", len(m.Payload), len(tt.msg.Data))
			}
		})
	}
}
