package consumer

import (
	"context"
	"time"

	"github.com/proxbus/proxbus/events"
)

// Attempt describes which delivery of a command the handler is seeing.
type Attempt struct {
	// Delivered counts deliveries of this message, starting at 1.
	Delivered uint64
	// MaxDeliver is the durable's delivery limit as the server has it (0 = unlimited).
	MaxDeliver int
}

// Last reports whether this is the last delivery: a Retry now ends in the max-deliveries dead
// letter and its 503 result, so a handler may prefer to publish a definitive result instead.
func (a Attempt) Last() bool { return a.MaxDeliver > 0 && a.Delivered >= uint64(a.MaxDeliver) }

// Action is what the consumer does with a message once Handle returned.
type Action int

const (
	// Ack acknowledges the message: the handler has published the command's result.
	Ack Action = iota
	// Retry naks the message with [Disposition.Delay] (or the backoff schedule), so it is
	// delivered again, up to MaxDeliver times in all. On the last delivery it naks without
	// delay: the server then gives up on it and the consumer dead-letters it with reason
	// max_deliveries and publishes a 503 result unless one exists.
	Retry
	// DeadLetterAction copies the message to the dead-letter stream with
	// [Disposition.Reason] and terminates it. The handler publishes any result it wants
	// before returning. (Named so because [DeadLetter] is the DLQ entry type.)
	DeadLetterAction
)

// String returns "ack", "retry" or "dead_letter".
func (a Action) String() string {
	switch a {
	case Ack:
		return "ack"
	case Retry:
		return "retry"
	case DeadLetterAction:
		return "dead_letter"
	default:
		return "unknown"
	}
}

// Disposition is a handler's verdict on one delivery. The zero value is Ack.
type Disposition struct {
	Action Action
	// Delay applies to Retry; 0 means the backoff schedule for the delivery count.
	Delay time.Duration
	// Reason applies to DeadLetterAction: it becomes the Proxbus-Dlq-Reason header and the term
	// reason (e.g. "unknown_verb"). Empty means "dead_letter".
	Reason string
}

// Handler executes commands.
//
// Handle is called once per delivery of a decodable command; poison messages never reach it.
// The returned Disposition is applied after Handle returns, and the message is kept alive
// with InProgress heartbeats until then. ctx is cancelled when the consumer starts draining:
// a handler that has started irreversible work must continue with context.WithoutCancel(ctx)
// and finish; the consumer waits for it. A handler that panics is logged and retried.
type Handler interface {
	Handle(ctx context.Context, cmd events.Command, at Attempt) Disposition
}

// HandlerFunc adapts a function to [Handler].
type HandlerFunc func(ctx context.Context, cmd events.Command, at Attempt) Disposition

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, cmd events.Command, at Attempt) Disposition {
	return f(ctx, cmd, at)
}
