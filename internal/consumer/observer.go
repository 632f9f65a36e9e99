package consumer

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
)

// Observer watches the consumer's work, for metrics and tracing, without the consumer
// knowing either. Every method is called from worker goroutines concurrently and must be
// fast and safe for concurrent use. A nil Observer in [Config] observes nothing.
type Observer interface {
	// Start is called once per delivery of a decodable command, just before the handler
	// runs. The returned Observation's Context (when non-nil) is the context the handler
	// runs in, e.g. one carrying a trace span that is a child of the command's traceparent;
	// a non-empty TraceParent replaces cmd.TraceParent for the handler, so every event it
	// publishes carries it; Done (when non-nil) is called once with the disposition after
	// the handler returned (also after a panic, with the Redeliver it became).
	Start(ctx context.Context, cmd events.Command, d events.Delivery) Observation
	// Redelivered is called for every delivery after the first of a message on verb's
	// subject ("" when the subject names no verb).
	Redelivered(verb string)
	// DeadLettered is called once a dead-letter copy has been newly stored (not for a
	// duplicate of a copy another replica, or an earlier attempt, already stored).
	DeadLettered(verb, reason string)
}

// Observation is what [Observer.Start] hands back for one delivery.
type Observation struct {
	// Context replaces the handler's context when non-nil.
	Context context.Context
	// TraceParent replaces the command's traceparent when non-empty.
	TraceParent string
	// Done is called with the disposition once the handler returned, when non-nil.
	Done func(events.Disposition)
}

// PublishHook watches every message a [Publisher] stores. Published is called after the
// stream acknowledged the message. It must be fast, safe for concurrent use and must not
// modify the message.
type PublishHook interface {
	Published(ctx context.Context, p Publication)
}

// Publication is one message a [Publisher] stored.
type Publication struct {
	Msg *nats.Msg
	// Event is the value Msg was built from (an events.Step, events.Result or
	// events.JournalRepaired) when the publisher was given it ([Publisher.PublishEvent]), so
	// a hook need not decode Msg; nil otherwise.
	Event any
	// Duplicate is true when the stream already held a message with Msg's Nats-Msg-Id (a
	// replay).
	Duplicate bool
}

// PublishHookFunc adapts a function to [PublishHook].
type PublishHookFunc func(ctx context.Context, p Publication)

// Published calls f.
func (f PublishHookFunc) Published(ctx context.Context, p Publication) { f(ctx, p) }

// noopObserver is the Observer of a Config without one.
type noopObserver struct{}

func (noopObserver) Start(context.Context, events.Command, events.Delivery) Observation {
	return Observation{}
}
func (noopObserver) Redelivered(string)          {}
func (noopObserver) DeadLettered(string, string) {}

// observer returns c.cfg.Observer or a no-op.
func (c *Consumer) observer() Observer {
	if c.cfg.Observer == nil {
		return noopObserver{}
	}
	return c.cfg.Observer
}

// start runs the observer's Start for one delivery and returns the handler's context and
// command, and the function to call with the disposition (never nil).
func (c *Consumer) start(ctx context.Context, cmd events.Command, d events.Delivery) (context.Context, events.Command, func(events.Disposition)) {
	obs := c.observer().Start(ctx, cmd, d)
	if obs.Context != nil {
		ctx = obs.Context
	}
	if obs.TraceParent != "" {
		cmd.TraceParent = obs.TraceParent
	}
	done := obs.Done
	if done == nil {
		done = func(events.Disposition) {}
	}
	return ctx, cmd, done
}

// Observers returns an Observer that calls each of obs in order (nil ones skipped). Start
// passes each observer the context the previous one returned; the last non-empty
// TraceParent wins; Done calls every observer's Done in reverse order.
func Observers(obs ...Observer) Observer {
	var out multiObserver
	for _, o := range obs {
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

type multiObserver []Observer

func (m multiObserver) Start(ctx context.Context, cmd events.Command, d events.Delivery) Observation {
	var res Observation
	dones := make([]func(events.Disposition), 0, len(m))
	for _, o := range m {
		obs := o.Start(ctx, cmd, d)
		if obs.Context != nil {
			ctx = obs.Context
			res.Context = ctx
		}
		if obs.TraceParent != "" {
			res.TraceParent = obs.TraceParent
		}
		if obs.Done != nil {
			dones = append(dones, obs.Done)
		}
	}
	res.Done = func(disp events.Disposition) {
		for i := len(dones) - 1; i >= 0; i-- {
			dones[i](disp)
		}
	}
	return res
}

func (m multiObserver) Redelivered(verb string) {
	for _, o := range m {
		o.Redelivered(verb)
	}
}

func (m multiObserver) DeadLettered(verb, reason string) {
	for _, o := range m {
		o.DeadLettered(verb, reason)
	}
}
