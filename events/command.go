package events

import (
	"encoding/json"
	"time"
)

// Mode is the CloudEvents content mode a command arrived in (or is encoded in).
type Mode int

const (
	// ModeBinary carries attributes in ce-* headers and data as the body.
	ModeBinary Mode = iota
	// ModeStructured carries the whole event as a JSON body.
	ModeStructured
)

// String returns "binary" or "structured" ("unknown" for any other value).
func (m Mode) String() string {
	switch m {
	case ModeBinary:
		return "binary"
	case ModeStructured:
		return "structured"
	default:
		return "unknown"
	}
}

// Command is a decoded, envelope-valid command. Data is the raw JSON of `data` (not yet
// validated against the verb).
type Command struct {
	// ID and Source are the CloudEvents id and source; together they identify the command.
	ID, Source string
	// Type is the CloudEvents type, always TypePrefix + Verb.
	Type string
	// Verb comes from the NATS subject.
	Verb string
	// Time is the CloudEvents time in UTC; zero when absent.
	Time time.Time
	// Expires is the expires extension in UTC: the command must not start after it (contract
	// §4 step 0); zero when absent.
	Expires time.Time
	// DryRun is the dryrun extension: plan the command, write nothing (contract §4a).
	DryRun bool
	// Subject is the CloudEvents `subject` attribute, not the NATS subject.
	Subject string
	// EndpointID is the endpointid extension, a positive integer; it is valid only when
	// HasEndpointID.
	EndpointID    int64
	HasEndpointID bool
	// IdempotencyKey is "" when absent.
	IdempotencyKey string
	// Actor is "" when absent (the pipeline defaults it to "proxbus").
	Actor string
	// TraceParent is a well-formed W3C traceparent or "" (a malformed one is dropped, as W3C
	// Trace Context requires).
	TraceParent string
	// Producer and Signature are the producer's NKey public key and its signature over the
	// command (contract §8a, package sign); "" when the command is not signed. Decode does not
	// verify them.
	Producer, Signature string
	// Data is the command's JSON data; nil when absent or JSON null.
	Data json.RawMessage
	// Mode is the content mode the command arrived in (Decode) or is to be encoded in.
	Mode Mode
	// Firing is set on a command a proxbus schedule fired (contract §11); nil otherwise.
	Firing *Firing
}

// Ref is the event-subject token of the command, [Ref](c.Source, c.ID).
func (c Command) Ref() string { return Ref(c.Source, c.ID) }
