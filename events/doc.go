// Package events is proxbus's wire format: the CloudEvents 1.0 codec for NATS in both content
// modes (binary: ce-* headers; structured: application/cloudevents+json), the subject and stream
// names derived from one prefix, the event-subject <ref> rule, and the step, result and journal
// event payloads that proxbus publishes back.
//
// Decode is the only way a message becomes a [Command]; anything it refuses is a [*PoisonError]
// whose Reason is a fixed phrase that never contains a value from the message, so it can be
// logged, published and stored as is. Outgoing events are built by an [Emitter] with
// deterministic ids, so a republish after a crash is deduplicated by JetStream.
package events

// specVersion is the only CloudEvents specversion proxbus accepts and emits.
const specVersion = "1.0"

const (
	// ContentTypeJSON is the binary-mode Content-Type (the data's media type).
	ContentTypeJSON = "application/json"
	// ContentTypeCE is the structured-mode Content-Type.
	ContentTypeCE = "application/cloudevents+json"
	// MaxCommandBytes bounds a command message (body plus header names and values); larger
	// messages are poison.
	MaxCommandBytes = 1 << 20
	// HeaderMsgID is the JetStream de-duplication header; proxbus sets it to the CloudEvents id.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderContentType is the NATS header carrying the content mode / data media type.
	HeaderContentType = "Content-Type"
	// HeaderPrefix prefixes every CloudEvents attribute header in binary mode (matched
	// case-insensitively on input, written lower-case on output).
	HeaderPrefix = "ce-"
	// TypePrefix prefixes every command type: a command's type is TypePrefix + verb.
	TypePrefix = "proxbus."
)

// CloudEvents attribute names proxbus reads. The extension attributes are lower-case
// alphanumeric as the CloudEvents spec requires.
const (
	AttrSpecVersion     = "specversion"
	AttrID              = "id"
	AttrSource          = "source"
	AttrType            = "type"
	AttrTime            = "time"
	AttrSubject         = "subject"
	AttrDataContentType = "datacontenttype"
	AttrEndpointID      = "endpointid"
	AttrIdempotencyKey  = "idempotencykey"
	AttrActor           = "actor"
	AttrTraceParent     = "traceparent"
	AttrExpires         = "expires"
	AttrDryRun          = "dryrun"
	// AttrProducer and AttrSignature carry a signed command's producer key and signature
	// (contract §8a, package sign).
	AttrProducer  = "producer"
	AttrSignature = "signature"
)
