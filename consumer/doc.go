// Package consumer is proxbus's JetStream plumbing: it provisions the three streams and the
// durable pull consumer (contract §1), reads the durable with nats.go's message iterator,
// hands each decodable command to a [Handler] on a worker of its own (at most
// [Config.Concurrency] at once), applies the [events.Disposition] the handler returns, keeps
// the message alive with InProgress heartbeats while it runs, drains gracefully on shutdown,
// publishes events through a [Publisher], and dead-letters poison messages (contract §7) with
// their secrets redacted.
//
// Observers know the consumer only through its small seams: a [Middleware] wraps the handler
// (tracing, metrics), a [PublishHook] sees the typed data of every event stored, and
// [Config.DeadLettered] hears of every dead-letter copy newly stored.
//
// The package knows no verb: deciding what a command means is the handler's job. It only
// decides what cannot be a command at all ([events.Decode] fails) before any handler runs.
//
// # Deliveries are not attempts
//
// Deliveries are JetStream's business; attempts are the handler's. The durable is provisioned
// with MaxDeliver -1 (unlimited), so JetStream never gives up on a message by itself, and the
// consumer counts nothing: the handler counts failed attempts where it keeps its state and
// answers [events.DeadLetter] when they are exhausted. A [events.Redeliver] spends nothing, so
// a command that waits (for a busy guest, a full endpoint, an approval) can be delivered any
// number of times and is never dead-lettered for waiting. [events.Delivery] tells the handler
// which delivery it sees and when the command arrived.
//
// # Dispositions
//
// A message is acknowledged only after Handle returned [events.Ack]. On [events.Redeliver] it
// is nak'ed with the disposition's Delay (0: redelivered at once); the durable has no BackOff,
// which would replace AckWait and which naks ignore. On [events.DeadLetter] it is copied to
// the dead-letter stream with the disposition's Reason and terminated. While Handle runs,
// InProgress is sent every [Config.Heartbeat], so a handler slower than AckWait is not
// redelivered; the heartbeat stops before the message is settled, so no InProgress follows
// the ack, nak or term. A handler that panics is logged and its message redelivered after a
// second; the consumer counts nothing for it, so the panic spent an attempt only if the
// handler had counted one.
//
// # Draining
//
// Draining follows net/http's Server.Shutdown: when [Consumer.Run]'s context is cancelled,
// the consumer stops pulling, naks at once every message that still arrives (so another
// replica takes it without waiting AckWait), lets every in-flight Handle finish while
// heartbeating, applies their dispositions, and returns.
package consumer
