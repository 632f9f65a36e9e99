package events

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
)

// Decode turns a NATS message (subject, headers, body) into a [Command], or returns a
// [*PoisonError] (errors.Is(err, ErrPoison)) saying which rule the message breaks.
//
// The mode is structured when the Content-Type header (name matched case-insensitively, media
// type compared case-insensitively without parameters) is application/cloudevents+json, and
// binary otherwise: attributes from ce-* headers (names case-insensitive, values
// percent-decoded), Content-Type absent or application/json, body = data.
//
// A message is poison when it is over [MaxCommandBytes] (body plus headers); its NATS subject is
// not a command subject of s; specversion is not "1.0"; id is missing, has control characters
// or surrounding whitespace; source is missing or not a URI-reference in canonical form (as
// url.URL.String writes it, so both modes accept the same sources); type is missing or not
// TypePrefix+verb; time is not RFC 3339; endpointid is present but not a positive integer (a
// JSON number within the CloudEvents Integer range or a decimal string in structured mode, a
// decimal string in binary mode); idempotencykey is not 1–255 printable ASCII characters;
// subject or actor is not a string; an attribute header is repeated or not percent-encoded
// UTF-8; data is not JSON (binary: a non-JSON Content-Type; structured: data_base64 or a
// non-JSON datacontenttype); or the structured body is not a JSON object that the CloudEvents
// SDK accepts. A malformed traceparent is dropped, not poison (W3C Trace Context). Unknown
// verbs are not decided here. Surrounding whitespace in the subject attribute is dropped.
//
// The readable id and source reported in a PoisonError are read before the size check, so an
// oversized command can still get its invalid_command result; a structured body is only parsed
// for them when it is at most 8 × MaxCommandBytes.
func Decode(subject string, h nats.Header, body []byte, s Subjects) (Command, error) {
	verb, verbOK := s.VerbOf(subject)
	structured, ctReason := isStructured(h)

	tooLarge := len(body)+headerBytes(h) > MaxCommandBytes

	var env *envelope
	switch {
	case structured && len(body) > 8*MaxCommandBytes:
		env = newEnvelope()
	case structured:
		env = readStructured(body)
	case tooLarge:
		env = readBinary(h, nil) // the headers alone give the id and source
	default:
		env = readBinary(h, body)
		if ctReason != "" {
			env.dataReason = ctReason
		}
	}

	poison := func(reason string, err error) (Command, error) {
		p := &PoisonError{Reason: reason, Verb: verb, Err: err}
		env.fillReadable(p)
		return Command{}, p
	}

	if tooLarge {
		return poison(reasonTooLarge, nil)
	}
	if env.fatal != "" {
		return poison(env.fatal, nil)
	}
	c, reason := env.command(verb, verbOK)
	if reason != "" {
		return poison(reason, nil)
	}
	if !structured {
		c.Mode = ModeBinary
		return c, nil
	}
	// The SDK is the structured-mode codec of record: the pre-checks above only give precise
	// reasons; a body the SDK refuses is still poison.
	var ev event.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return poison(reasonMalformed, err)
	}
	if err := ev.Validate(); err != nil {
		return poison(reasonMalformed, err)
	}
	if ev.ID() != c.ID || ev.Source() != c.Source || ev.Type() != c.Type {
		return poison(reasonMalformed, errors.New("events: SDK attributes differ from the body"))
	}
	c.Data = nonNullJSON(ev.Data())
	c.Mode = ModeStructured
	return c, nil
}

// isStructured reports whether the Content-Type header selects structured mode. For binary
// mode it also returns a poison reason when Content-Type is present but is not
// application/json, or is given with different values.
func isStructured(h nats.Header) (bool, string) {
	var values []string
	for k, vs := range h {
		if strings.EqualFold(k, HeaderContentType) {
			values = append(values, vs...)
		}
	}
	if len(values) == 0 {
		return false, ""
	}
	mt := mediaType(values[0])
	for _, v := range values[1:] {
		if mediaType(v) != mt {
			return false, HeaderContentType + reasonDuplicateSuffix
		}
	}
	switch mt {
	case ContentTypeCE:
		return true, ""
	case ContentTypeJSON:
		return false, ""
	default:
		return false, reasonContentType
	}
}

// headerBytes is the size of the header names and values.
func headerBytes(h nats.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v)
		}
	}
	return n
}

// nonNullJSON returns nil for absent, empty or JSON-null data, else data.
func nonNullJSON(data []byte) json.RawMessage {
	t := strings.TrimSpace(string(data))
	if t == "" || t == "null" {
		return nil
	}
	return json.RawMessage(data)
}
