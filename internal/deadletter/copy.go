package deadletter

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
)

// Headers of a dead-letter copy. Every one starts with "Proxbus-Dlq-" and a replay removes
// them all.
const (
	// HeaderDLQReason is the machine-readable reason the message was dead-lettered:
	// invalid_command (poison) or the handler's reason (e.g. unknown_verb).
	HeaderDLQReason = "Proxbus-Dlq-Reason"
	// HeaderDLQSubject is the subject the message was originally published on.
	HeaderDLQSubject = "Proxbus-Dlq-Subject"
	// HeaderDLQStreamSeq is the message's sequence in the commands stream.
	HeaderDLQStreamSeq = "Proxbus-Dlq-Stream-Seq"
	// HeaderDLQDeliveries is how many times the message had been delivered.
	HeaderDLQDeliveries = "Proxbus-Dlq-Deliveries"
	// HeaderDLQTime is when it was dead-lettered (RFC 3339, UTC).
	HeaderDLQTime = "Proxbus-Dlq-Time"
	// HeaderDLQMsgID is the original Nats-Msg-Id, if the message had one.
	HeaderDLQMsgID = "Proxbus-Dlq-Msg-Id"
	// HeaderDLQDetail says more about the reason when there is more to say: for a poison
	// message, the rule it broke ("id missing or invalid"). It never quotes the message.
	HeaderDLQDetail = "Proxbus-Dlq-Detail"
	// HeaderDLQTruncated is "true" when the body was cut to fit the server's max payload.
	HeaderDLQTruncated = "Proxbus-Dlq-Truncated"

	// HeaderPrefix starts every header above; a replay removes them all.
	HeaderPrefix = "Proxbus-Dlq-"

	jetstreamMsgID = "Nats-Msg-Id"
)

// Dead-letter reasons the consumer itself gives (the Proxbus-Dlq-Reason header).
const (
	// ReasonDeadLetter is the reason used when a handler's [events.DeadLetter] gives none.
	ReasonDeadLetter = "dead_letter"
	// ReasonInvalidCommand is the reason of every poison message (one that cannot be a
	// command); [HeaderDLQDetail] carries the decoder's reason.
	ReasonInvalidCommand = events.ReasonInvalidCommand
)

// Original is a message of the commands stream about to be dead-lettered.
type Original struct {
	Subject    string
	Header     nats.Header
	Data       []byte
	StreamSeq  uint64
	Deliveries uint64
}

// msgID is the Nats-Msg-Id of the dead-letter copy of the command at stream sequence seq,
// so copying the same message twice (two replicas, a retry) stores it once.
func msgID(seq uint64) string { return "dlq-" + strconv.FormatUint(seq, 10) }

// Build returns the redacted dead-letter copy of o, addressed to s.DLQ(verb).
// maxPayload (0 = unknown) bounds the copy: a body that would not fit is truncated and marked
// with [HeaderDLQTruncated].
func Build(s events.Subjects, o Original, verb, reason, detail string, now time.Time, maxPayload int64) *nats.Msg {
	h := redactHeader(o.Header)
	h.Set(HeaderDLQReason, reason)
	if detail != "" {
		h.Set(HeaderDLQDetail, detail)
	}
	h.Set(HeaderDLQSubject, o.Subject)
	h.Set(HeaderDLQStreamSeq, strconv.FormatUint(o.StreamSeq, 10))
	h.Set(HeaderDLQDeliveries, strconv.FormatUint(o.Deliveries, 10))
	h.Set(HeaderDLQTime, now.UTC().Format(time.RFC3339Nano))
	h.Set(jetstreamMsgID, msgID(o.StreamSeq))
	body := redactBody(o.Data)
	if maxPayload > 0 {
		const margin = 1024
		limit := maxPayload - int64(headerSize(h)) - margin
		if int64(len(body)) > limit {
			body = body[:max(limit, 0)]
			h.Set(HeaderDLQTruncated, "true")
		}
	}
	subject := s.DLQ(verb)
	return &nats.Msg{Subject: subject, Header: h, Data: body}
}

// headerSize approximates the encoded size of h on the wire.
func headerSize(h nats.Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vals := range h {
		for _, v := range vals {
			n += len(k) + len(v) + 4
		}
	}
	return n
}
