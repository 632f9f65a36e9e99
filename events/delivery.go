package events

import "time"

// Delivery is one delivery of a command by JetStream, as the consumer hands it to its handler.
type Delivery struct {
	// Number counts JetStream's deliveries of the message, 1 first. Deliveries are not
	// attempts: a command that waits is delivered again without spending an attempt.
	Number uint64
	// Stored is when the commands stream stored the message (the command's arrival).
	Stored time.Time
	// StreamSeq is the message's sequence in the commands stream.
	StreamSeq uint64
}

// Action is what the consumer does with a delivered command once its handler returned. The
// zero value is no action: a handler that returns it has a bug, and the consumer redelivers.
type Action int

const (
	// Ack acknowledges the message: the handler has published the command's result.
	Ack Action = iota + 1
	// Redeliver naks the message with [Disposition.Delay], so it is delivered again; nothing is
	// counted. The handler decides whether the delivery spent an attempt (and when attempts
	// are exhausted, it answers DeadLetter instead).
	Redeliver
	// DeadLetter copies the message to the dead-letter stream with [Disposition.Reason] and
	// terminates it. The handler has published the command's result, if it has one.
	DeadLetter
)

// String returns "ack", "redeliver" or "dead_letter".
func (a Action) String() string {
	switch a {
	case Ack:
		return "ack"
	case Redeliver:
		return "redeliver"
	case DeadLetter:
		return "dead_letter"
	default:
		return "unknown"
	}
}

// Disposition is a handler's verdict on one delivery. The zero value is not a valid
// disposition (its Action is none of Ack, Redeliver, DeadLetter): the consumer logs it and
// redelivers the message, so a handler that forgot to decide never acknowledges a command.
type Disposition struct {
	// Action is what the consumer does with the message.
	Action Action
	// Delay applies to Redeliver: how long the message rests before its next delivery.
	Delay time.Duration
	// Reason applies to DeadLetter: the Proxbus-Dlq-Reason header and the term reason.
	Reason string
}
