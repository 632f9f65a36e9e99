package consumer

import (
	"context"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/beat"
)

// benchMsg is a delivered binary-mode command whose settlement costs nothing.
type benchMsg struct {
	jetstream.Msg
	m *nats.Msg
}

func (m benchMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{NumDelivered: 1, Sequence: jetstream.SequencePair{Stream: 7, Consumer: 7}}, nil
}
func (m benchMsg) Subject() string                 { return m.m.Subject }
func (m benchMsg) Headers() nats.Header            { return m.m.Header }
func (m benchMsg) Data() []byte                    { return m.m.Data }
func (m benchMsg) DoubleAck(context.Context) error { return nil }

// BenchmarkProcess measures the consumer's own work per message, from a delivery to its
// DoubleAck, around a handler that acks at once: the envelope decode, heartbeat, observer,
// panic guard and ack context (no broker: the message's metadata and ack are stubs).
//
//	go test -run '^$' -bench Process -benchmem ./consumer
func BenchmarkProcess(b *testing.B) {
	s := events.NewSubjects("proxbus")
	noop := HandlerFunc(func(context.Context, events.Command, Attempt) Disposition { return Disposition{Action: Ack} })
	cfg := Config{Subjects: s, Concurrency: 1, Logger: slog.New(slog.DiscardHandler)}
	c, err := New(noJS{}, cfg, noop, NewPublisher(noJS{}), events.NewEmitter(s, "bench"))
	if err != nil {
		b.Fatal(err)
	}
	msg := benchMsg{m: binaryCommand(s, "vm.start", "bench-1", `{"vmid":100}`)}
	slot := beat.NewGroup(cfg.Heartbeat).Slot()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c.process(ctx, slot, msg, func() {})
	}
}
