package events

import (
	"encoding/json"
	"slices"
	"strings"
)

// knownAttrs are the attributes Decode reads; every other attribute is ignored. Only these
// names ever appear in a poison reason.
var knownAttrs = []string{
	AttrSpecVersion, AttrID, AttrSource, AttrType, AttrTime, AttrSubject,
	AttrDataContentType, AttrEndpointID, AttrIdempotencyKey, AttrActor, AttrTraceParent,
}

func isKnownAttr(name string) bool { return slices.Contains(knownAttrs, name) }

// envelope is what a content-mode reader extracted, before validation: known attributes with a
// string value, the attributes that were present but unusable (with the reason), and the data.
type envelope struct {
	attrs map[string]string
	bad   map[string]string
	// fatal is set when nothing can be read (structured body not a JSON object).
	fatal string
	// dataReason is set when the data is not acceptable JSON.
	dataReason string
	data       json.RawMessage
}

func newEnvelope() *envelope {
	return &envelope{attrs: map[string]string{}, bad: map[string]string{}}
}

// fillReadable copies the id and source into p when they are present and valid.
func (e *envelope) fillReadable(p *PoisonError) {
	if id, ok := e.attrs[AttrID]; ok && e.bad[AttrID] == "" && validID(id) {
		p.ID = id
	}
	if src, ok := e.attrs[AttrSource]; ok && e.bad[AttrSource] == "" && validSource(src) {
		p.Source = src
	}
}

// command validates the envelope into a Command (Mode unset), or returns a poison reason. The
// rules are checked in a fixed order so a message always gets the same reason.
func (e *envelope) command(verb string, verbOK bool) (Command, string) {
	c := Command{Verb: verb}
	if !verbOK {
		return c, reasonSubject
	}
	var reason string
	if _, reason = e.required(AttrSpecVersion, reasonSpecVersion, func(v string) bool { return v == SpecVersion }); reason != "" {
		return c, reason
	}
	if c.ID, reason = e.required(AttrID, reasonID, validID); reason != "" {
		return c, reason
	}
	if c.Source, reason = e.required(AttrSource, reasonSource, validSource); reason != "" {
		return c, reason
	}
	if c.Type, reason = e.required(AttrType, reasonType, func(v string) bool { return v != "" }); reason != "" {
		return c, reason
	}
	if c.Type != TypePrefix+verb {
		return c, reasonTypeMismatch
	}
	if reason = e.optional(AttrTime, reasonTime, func(v string) bool {
		t, ok := parseTime(v)
		c.Time = t
		return ok
	}); reason != "" {
		return c, reason
	}
	if reason = e.optional(AttrEndpointID, reasonEndpointID, func(v string) bool {
		n, ok := parseEndpointID(v)
		c.EndpointID, c.HasEndpointID = n, ok
		return ok
	}); reason != "" {
		return c, reason
	}
	if reason = e.optional(AttrIdempotencyKey, reasonIdempotencyKey, func(v string) bool {
		c.IdempotencyKey = v
		return validIdempotencyKey(v)
	}); reason != "" {
		return c, reason
	}
	for _, a := range []struct {
		name string
		dst  *string
	}{{AttrSubject, &c.Subject}, {AttrActor, &c.Actor}, {AttrTraceParent, &c.TraceParent}} {
		if reason = e.optional(a.name, "", func(v string) bool { *a.dst = v; return true }); reason != "" {
			return c, reason
		}
	}
	// Surrounding whitespace in subject carries nothing and the SDK drops it on output.
	c.Subject = strings.TrimSpace(c.Subject)
	if !validTraceParent(c.TraceParent) {
		c.TraceParent = ""
	}
	if reason = e.optional(AttrDataContentType, reasonDataContentType, func(v string) bool {
		return mediaType(v) == ContentTypeJSON
	}); reason != "" {
		return c, reason
	}
	if e.dataReason != "" {
		return c, e.dataReason
	}
	c.Data = e.data
	return c, ""
}

// required returns a present attribute's value when valid accepts it, else a poison reason:
// the reader's specific one when it recorded one, else generic.
func (e *envelope) required(name, generic string, valid func(string) bool) (string, string) {
	if r := e.bad[name]; r != "" {
		return "", r
	}
	v, ok := e.attrs[name]
	if !ok || !valid(v) {
		return "", generic
	}
	return v, ""
}

// optional calls valid for a present attribute and returns a poison reason when the reader
// recorded one or valid refuses the value; an absent attribute is fine.
func (e *envelope) optional(name, generic string, valid func(string) bool) string {
	if r := e.bad[name]; r != "" {
		return r
	}
	v, ok := e.attrs[name]
	if ok && !valid(v) {
		return generic
	}
	return ""
}
