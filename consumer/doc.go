// Package consumer is proxbus's JetStream plumbing: it provisions the three streams and the
// durable pull consumer (contract §1), runs a bounded worker pool that hands each decodable
// command to a [Handler] and applies the returned [Disposition] (ack, nak with delay, or dead
// letter), keeps long-running commands alive with InProgress heartbeats, drains gracefully on
// shutdown, publishes events through a [Publisher], and dead-letters poison messages and
// commands that exhausted MaxDeliver (contract §7) with their secrets redacted.
//
// The package knows no verb: deciding what a command means is the handler's job. It only
// decides what cannot be a command at all ([events.Decode] fails) before any handler runs.
//
// Delivery semantics. A message is acknowledged only after Handle returned [Ack]; it is
// nak'ed with a delay (our own backoff schedule, never a consumer BackOff, which would replace
// AckWait and is ignored by naks) on [Retry]; it is copied to the dead-letter stream and
// terminated on [DeadLetterAction]. While Handle runs, the message is kept alive with InProgress
// every [Config.Heartbeat], so a handler slower than AckWait is not redelivered.
package consumer
