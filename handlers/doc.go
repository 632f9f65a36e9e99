// Package handlers is the verb pipeline of contract §4, written once: gate → validate →
// idempotency → write-ahead journal → dispatch → terminal journal update → result.
//
// A verb is data plus functions ([Spec]): how to decode and validate its input, what its
// resource id is, and how to dispatch it against Proxmox, reporting steps through [Exec]. Gate,
// idempotency, journaling, secret scrubbing, result building and error mapping live here, not in
// the verbs. Adding a verb is one file and one row in [Builtin].
//
// The pipeline never touches NATS: it receives decoded commands from the consumer, publishes
// prepared events through a [Publisher], and answers with a [Decision] the consumer applies.
package handlers
