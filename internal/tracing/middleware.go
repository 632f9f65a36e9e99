package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
)

// Middleware makes one consumer span per delivery (a consumer.Middleware), a child of the
// command's traceparent (a new trace when it has none). next runs in a context carrying the
// span and, when the span is sampled, sees its traceparent as the command's, so the events
// it publishes point at it. The span records the disposition and ends when next returns; only
// a dead letter marks it as an error, a redelivery being a wait. Off, Middleware returns
// next: no span is made and the command's traceparent stays as it came.
func (t *Tracing) Middleware(next consumer.Handler) consumer.Handler {
	if !t.On() {
		return next
	}
	return consumer.HandlerFunc(func(ctx context.Context, cmd events.Command, d events.Delivery) events.Disposition {
		ctx, span := t.tracer.Start(ContextWithTraceParent(ctx, cmd.TraceParent), "proxbus.command "+cmd.Verb,
			trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(
				attribute.String("messaging.system", "nats"),
				attribute.String("messaging.operation.type", "process"),
				attribute.String("proxbus.verb", cmd.Verb),
				attribute.String("proxbus.command.id", cmd.ID),
				attribute.String("proxbus.command.source", cmd.Source),
				attribute.Int64("messaging.nats.delivery_count", int64(min(d.Number, 1<<62))),
			))
		defer span.End()
		if span.SpanContext().IsSampled() {
			// An unsampled span is never exported: events keep pointing at the caller's span.
			cmd.TraceParent = t.TraceParent(ctx)
		}
		disp := next.Handle(ctx, cmd, d)
		span.SetAttributes(attribute.String("proxbus.disposition", disp.Action.String()))
		if disp.Action == events.DeadLetter {
			span.SetStatus(codes.Error, "dead letter")
		}
		return disp
	})
}
