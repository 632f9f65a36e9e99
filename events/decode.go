package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
)

// Decode turns a NATS message (subject, headers, body) into a [Command], or returns a
// [*PoisonError] saying which rule the message breaks; it returns no other error.
//
// The mode is structured when the Content-Type header (name matched case-insensitively, media
// type compared case-insensitively without parameters) is application/cloudevents+json, or
// when the message has no ce-* header (any name starting with "ce-", in any letter case) and no
// Content-Type and its body is a JSON object with a non-null "specversion" member (the
// CloudEvents Go SDK's NATS bindings send structured events without any header). Otherwise it
// is binary: attributes from ce-* headers (names case-insensitive, values percent-decoded),
// Content-Type absent or application/json, body = data. A binary message without ce-* headers
// always lacks specversion, so the second structured rule only turns such poison into
// commands (or into poison with a readable id and source); a message with a ce-* header or a
// Content-Type is never sniffed.
//
// A message is poison when it is over [MaxCommandBytes] (body plus headers); its NATS subject is
// not a command subject of s; specversion is not "1.0"; id is missing, has control characters
// or surrounding whitespace; source is missing or not a URI-reference in canonical form (as
// url.URL.String writes it, so both modes accept the same sources); type is missing or not
// TypePrefix+verb; time or expires is not RFC 3339; dryrun is not true or false (a JSON
// boolean or the string, in structured mode); endpointid is present but not a positive integer (a
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
	hs := scanHeaders(h)
	structured, ctReason := hs.contentMode()

	tooLarge := len(body)+hs.size > MaxCommandBytes

	var env envelope
	sniffed := false
	if !structured && hs.bare() && len(body) <= 8*MaxCommandBytes {
		env, sniffed = sniffStructured(body)
		structured = sniffed
	}
	switch {
	case sniffed:
		// env was read by sniffStructured
	case structured && len(body) > 8*MaxCommandBytes:
		// nothing is read
	case structured:
		env = readStructured(body)
	case tooLarge:
		env = readBinary(&hs, nil) // the headers alone give the id and source
	default:
		env = readBinary(&hs, body)
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
	name, reason := hs.scheduleReason(s, c)
	if reason != "" {
		return poison(reason, nil)
	}
	if name != "" {
		c.Firing = hs.firing(name)
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

// headerScan is what Decode needs from the headers, read in one pass.
type headerScan struct {
	// size is the size of the header names and values.
	size int
	// contentTypes counts the Content-Type values (names matched case-insensitively);
	// mediaType is the media type of one of them, and mixed says whether they differ.
	contentTypes int
	mediaType    string
	mixed        bool
	// ce holds the values of the ce-* headers of each known attribute (indexed like
	// knownAttrs; names matched case-insensitively).
	ce [numAttrs]headerValues
	// anyCE says whether there is a header whose name starts with "ce-" (any letter case),
	// known attribute or not.
	anyCE bool
	// scheduler holds the Nats-Scheduler values (the subject of the message schedule that
	// fired this message); schedule says whether a Nats-Schedule header other than
	// Nats-Scheduler and Nats-Schedule-Next is present (the message is a schedule itself).
	scheduler []string
	schedule  bool
	// next, window, pattern and zone are the first Nats-Schedule-Next,
	// Proxbus-Schedule-Window, Proxbus-Schedule-Pattern and Proxbus-Schedule-Time-Zone values.
	next, window, pattern, zone string
}

// NATS message-schedule headers (nats-server server/stream.go, server/scheduler.go: a fired
// message carries Nats-Scheduler, the schedule's subject, and Nats-Schedule-Next; the
// schedule's own Nats-Schedule* headers are stripped from it).
const (
	headerSchedulePrefix = "Nats-Schedule"
	HeaderScheduler      = "Nats-Scheduler"
	headerScheduleNext   = "Nats-Schedule-Next"
)

// scheduleReason is why c, with these headers, may not run as a scheduled command, or "" and
// the name of the proxbus schedule that fired it ("" when no schedule did).
// nats-server stores whatever a schedule targets as long as the target is in the stream, so a
// user allowed one command subject could otherwise schedule an approval (contract §11): a
// fired command is accepted only from a schedule under <prefix>.schedule.> (which only proxbus
// may write) whose name its source repeats, and never for a command.* verb.
func (hs *headerScan) scheduleReason(s Subjects, c Command) (string, string) {
	if hs.schedule {
		return "", reasonScheduleMsg
	}
	if len(hs.scheduler) == 0 {
		return "", ""
	}
	if strings.HasPrefix(c.Verb, "command.") || strings.HasPrefix(c.Verb, "schedule.") {
		return "", reasonScheduledVerb
	}
	name, ok := strings.CutPrefix(hs.scheduler[0], s.Schedule(""))
	if len(hs.scheduler) != 1 || !ok || !ValidScheduleName(name) || c.Source != ScheduleSource(name) {
		return "", reasonScheduler
	}
	return name, ""
}

// proxbusScheduleHeader is where the value of header k goes when it is one of proxbus's own
// schedule headers, else nil.
func (hs *headerScan) proxbusScheduleHeader(k string) *string {
	switch {
	case strings.EqualFold(k, HeaderScheduleWindow):
		return &hs.window
	case strings.EqualFold(k, HeaderSchedulePattern):
		return &hs.pattern
	case strings.EqualFold(k, HeaderScheduleZone):
		return &hs.zone
	}
	return nil
}

// headerValues are the values of the headers naming one attribute: whether there is such a
// header, how many values they have in all, and the first value seen.
type headerValues struct {
	seen  bool
	n     int
	first string
}

// scanHeaders reads the header size, the Content-Type values and the known ce-* attributes.
func scanHeaders(h nats.Header) headerScan {
	var hs headerScan
	for k, vs := range h {
		for _, v := range vs {
			hs.size += len(k) + len(v)
		}
		if len(k) >= len(HeaderPrefix) && strings.EqualFold(k[:len(HeaderPrefix)], HeaderPrefix) {
			hs.anyCE = true
			if i := attrIndex(k[len(HeaderPrefix):]); i >= 0 {
				a := &hs.ce[i]
				if a.n == 0 && len(vs) > 0 {
					a.first = vs[0]
				}
				a.seen = true
				a.n += len(vs)
			}
			continue
		}
		if len(k) >= len(headerSchedulePrefix) && strings.EqualFold(k[:len(headerSchedulePrefix)], headerSchedulePrefix) {
			switch {
			case strings.EqualFold(k, HeaderScheduler):
				hs.scheduler = append(hs.scheduler, vs...)
			case strings.EqualFold(k, headerScheduleNext):
				if len(vs) > 0 {
					hs.next = vs[0]
				}
			default:
				hs.schedule = true
			}
			continue
		}
		if dst := hs.proxbusScheduleHeader(k); dst != nil {
			if len(vs) > 0 {
				*dst = vs[0]
			}
			continue
		}
		if strings.EqualFold(k, HeaderContentType) {
			for _, v := range vs {
				mt := mediaType(v)
				if hs.contentTypes == 0 {
					hs.mediaType = mt
				} else if mt != hs.mediaType {
					hs.mixed = true
				}
				hs.contentTypes++
			}
		}
	}
	return hs
}

// contentMode reports whether the Content-Type header selects structured mode. For binary
// mode it also returns a poison reason when Content-Type is present but is not
// application/json, or is given with different values.
func (hs *headerScan) contentMode() (bool, string) {
	switch {
	case hs.contentTypes == 0:
		return false, ""
	case hs.mixed:
		return false, HeaderContentType + reasonDuplicateSuffix
	case hs.mediaType == ContentTypeCE:
		return true, ""
	case hs.mediaType == ContentTypeJSON:
		return false, ""
	default:
		return false, reasonContentType
	}
}

// bare reports whether the message has neither a ce-* header nor a Content-Type value: the
// only messages whose mode is decided by their body (see Decode).
func (hs *headerScan) bare() bool { return !hs.anyCE && hs.contentTypes == 0 }

// nonNullJSON returns nil for absent, empty or JSON-null data, else data.
func nonNullJSON(data []byte) json.RawMessage {
	t := bytes.TrimSpace(data)
	if len(t) == 0 || string(t) == "null" {
		return nil
	}
	return json.RawMessage(data)
}
