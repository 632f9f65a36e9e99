package consumer

import (
	"context"

	"github.com/proxbus/proxbus/events"
)

// Handler executes commands.
//
// Handle is called once per delivery of a decodable command; poison messages never reach it.
// d says which delivery it is (see [events.Delivery]: deliveries are not attempts). The
// returned Disposition is applied after Handle returns, and the message is kept alive with
// InProgress heartbeats until then. ctx is cancelled when the consumer starts draining: a
// handler that has started irreversible work must continue with context.WithoutCancel(ctx)
// and finish; the consumer waits for it. A handler that panics is logged and its message
// redelivered after a second.
type Handler interface {
	Handle(ctx context.Context, cmd events.Command, d events.Delivery) events.Disposition
}

// HandlerFunc adapts a function to [Handler].
type HandlerFunc func(ctx context.Context, cmd events.Command, d events.Delivery) events.Disposition

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, cmd events.Command, d events.Delivery) events.Disposition {
	return f(ctx, cmd, d)
}

// Middleware wraps a Handler with work of its own around each delivery (tracing, metrics),
// as net/http middleware wraps an http.Handler. The Handler it returns must call next's
// Handle once per call and return the disposition next returned, unless it means to change
// it; it may hand next a derived context and an amended command. See [Config.Middleware].
type Middleware func(next Handler) Handler
