package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/consumer"
)

var _ consumer.Observer = (*Tracing)(nil)

// Start begins the delivery's consumer span, a child of cmd.TraceParent (a new trace when
// the command has none), and hands the handler a context carrying it and, when the span is
// sampled, its traceparent, so the events the pipeline publishes point at it
// (consumer.Observer). The span ends when Done is called; a Retry or dead letter marks it as
// an error. Off, it
// returns an empty Observation: the command's traceparent stays as it came.
func (t *Tracing) Start(ctx context.Context, cmd events.Command, at events.Delivery) consumer.Observation {
	if !t.On() {
		return consumer.Observation{}
	}
	parent := ContextWithTraceParent(ctx, cmd.TraceParent)
	ctx, span := t.tracer.Start(parent, "proxbus.command "+cmd.Verb,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("proxbus.verb", cmd.Verb),
			attribute.String("proxbus.command.id", cmd.ID),
			attribute.String("proxbus.command.source", cmd.Source),
			attribute.Int64("messaging.nats.delivery_count", int64(min(at.Number, 1<<62))),
		))
	tp := ""
	if span.SpanContext().IsSampled() {
		// An unsampled span is never exported: events keep pointing at the caller's span.
		tp = t.TraceParent(ctx)
	}
	return consumer.Observation{
		Context:     ctx,
		TraceParent: tp,
		Done: func(d events.Disposition) {
			span.SetAttributes(attribute.String("proxbus.disposition", d.Action.String()))
			// A redelivery is a wait, not a failure (contract §4): only a dead letter is an error.
			if d.Action == events.DeadLetter {
				span.SetStatus(codes.Error, "dead letter")
			}
			span.End()
		},
	}
}

// Redelivered does nothing (the delivery count is a span attribute).
func (t *Tracing) Redelivered(string) {}

// DeadLettered does nothing (the disposition is a span attribute).
func (t *Tracing) DeadLettered(string, string) {}
