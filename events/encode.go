package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
)

// ErrEncode matches (errors.Is) every error of the encoders and the [Emitter]: the command or
// event breaks a rule Decode would enforce, or cannot be serialised.
var ErrEncode = errors.New("events: cannot encode")

// EncodeBinary produces a binary-mode message for c on s.Command(c.Verb): attributes in
// lower-case ce-* headers with percent-encoded values, Content-Type application/json,
// Nats-Msg-Id = c.ID, body = c.Data. c.Type may be empty (it is TypePrefix+c.Verb); c.Verb may
// be empty when c.Type names it; surrounding whitespace in c.Subject is dropped. Decode of the
// result returns c (with Type filled and Mode binary). It returns an error wrapping ErrEncode when c would not decode.
func EncodeBinary(s Subjects, c Command) (*nats.Msg, error) {
	c, err := normalize(c)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(s.Command(c.Verb))
	set := func(name, value string) { msg.Header.Set(HeaderPrefix+name, percentEncode(value)) }
	set(AttrSpecVersion, specVersion)
	set(AttrID, c.ID)
	set(AttrSource, c.Source)
	set(AttrType, c.Type)
	if !c.Time.IsZero() {
		set(AttrTime, formatTime(c.Time))
	}
	if !c.Expires.IsZero() {
		set(AttrExpires, formatTime(c.Expires))
	}
	if c.DryRun {
		set(AttrDryRun, "true")
	}
	if c.Subject != "" {
		set(AttrSubject, c.Subject)
	}
	if c.HasEndpointID {
		set(AttrEndpointID, strconv.FormatInt(c.EndpointID, 10))
	}
	if c.IdempotencyKey != "" {
		set(AttrIdempotencyKey, c.IdempotencyKey)
	}
	if c.Actor != "" {
		set(AttrActor, c.Actor)
	}
	if c.TraceParent != "" {
		set(AttrTraceParent, c.TraceParent)
	}
	if c.Producer != "" {
		set(AttrProducer, c.Producer)
	}
	if c.Signature != "" {
		set(AttrSignature, c.Signature)
	}
	msg.Header.Set(HeaderContentType, ContentTypeJSON)
	msg.Header.Set(HeaderMsgID, c.ID)
	msg.Data = c.Data
	return msg, nil
}

// EncodeStructured produces a structured-mode message for c on s.Command(c.Verb): the JSON
// event written by the CloudEvents SDK, Content-Type application/cloudevents+json,
// Nats-Msg-Id = c.ID. endpointid is a JSON number when it fits the CloudEvents Integer range
// and a decimal string otherwise. Same input rules and round-trip guarantee as
// [EncodeBinary].
func EncodeStructured(s Subjects, c Command) (*nats.Msg, error) {
	c, err := normalize(c)
	if err != nil {
		return nil, err
	}
	ev := event.New(event.CloudEventsVersionV1)
	ev.SetID(c.ID)
	ev.SetSource(c.Source)
	ev.SetType(c.Type)
	if !c.Time.IsZero() {
		ev.SetTime(c.Time.UTC())
	}
	if !c.Expires.IsZero() {
		ev.SetExtension(AttrExpires, formatTime(c.Expires))
	}
	if c.DryRun {
		ev.SetExtension(AttrDryRun, true)
	}
	if c.Subject != "" {
		ev.SetSubject(c.Subject)
	}
	if c.HasEndpointID {
		if c.EndpointID <= math.MaxInt32 {
			ev.SetExtension(AttrEndpointID, int32(c.EndpointID))
		} else {
			ev.SetExtension(AttrEndpointID, strconv.FormatInt(c.EndpointID, 10))
		}
	}
	if c.IdempotencyKey != "" {
		ev.SetExtension(AttrIdempotencyKey, c.IdempotencyKey)
	}
	if c.Actor != "" {
		ev.SetExtension(AttrActor, c.Actor)
	}
	if c.TraceParent != "" {
		ev.SetExtension(AttrTraceParent, c.TraceParent)
	}
	if c.Producer != "" {
		ev.SetExtension(AttrProducer, c.Producer)
	}
	if c.Signature != "" {
		ev.SetExtension(AttrSignature, c.Signature)
	}
	if c.Data != nil {
		ev.SetDataContentType(ContentTypeJSON)
		ev.DataEncoded = c.Data
	}
	body, err := marshalEvent(ev)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(s.Command(c.Verb))
	msg.Header.Set(HeaderContentType, ContentTypeCE)
	msg.Header.Set(HeaderMsgID, c.ID)
	msg.Data = body
	return msg, nil
}

// normalize fills Type or Verb from the other and checks c against Decode's rules.
func normalize(c Command) (Command, error) {
	if c.Verb == "" {
		c.Verb = strings.TrimPrefix(c.Type, TypePrefix)
	}
	if c.Type == "" {
		c.Type = TypePrefix + c.Verb
	}
	c.Data = nonNullJSON(c.Data)
	c.Subject = strings.TrimSpace(c.Subject)
	var problem string
	switch {
	case !validVerb(c.Verb):
		problem = "verb is not a valid subject token sequence"
	case c.Type != TypePrefix+c.Verb:
		problem = reasonTypeMismatch
	case !validID(c.ID):
		problem = reasonID
	case !validSource(c.Source):
		problem = reasonSource
	case c.HasEndpointID && c.EndpointID <= 0:
		problem = reasonEndpointID
	case c.IdempotencyKey != "" && !validIdempotencyKey(c.IdempotencyKey):
		problem = reasonIdempotencyKey
	case c.TraceParent != "" && !validTraceParent(c.TraceParent):
		problem = "traceparent is not a W3C traceparent"
	case !ValidActor(c.Actor):
		problem = reasonActor
	case !utf8Valid(c.Subject, c.Actor):
		problem = "subject or actor is not valid UTF-8"
	case c.Data != nil && !json.Valid(c.Data):
		problem = reasonDataNotJSON
	}
	if problem != "" {
		return c, fmt.Errorf("%w: %s", ErrEncode, problem)
	}
	return c, nil
}

// marshalEvent validates and serialises an SDK event as the SDK writes it: compact, the data
// written as it is.
func marshalEvent(ev event.Event) ([]byte, error) {
	if err := ev.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEncode, err)
	}
	body, err := ev.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEncode, err)
	}
	return body, nil
}
