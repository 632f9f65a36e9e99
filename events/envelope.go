package events

import (
	"encoding/json"
	"strings"
)

// Indices of the known attributes, in knownAttrs order.
const (
	attrSpecVersion = iota
	attrID
	attrSource
	attrType
	attrTime
	attrSubject
	attrDataContentType
	attrEndpointID
	attrIdempotencyKey
	attrActor
	attrTraceParent
	attrExpires
	attrDryRun
	attrProducer
	attrSignature
	numAttrs
)

// knownAttrs are the attributes Decode reads; every other attribute is ignored. Only these
// names ever appear in a poison reason.
var knownAttrs = [numAttrs]string{
	attrSpecVersion: AttrSpecVersion, attrID: AttrID, attrSource: AttrSource, attrType: AttrType,
	attrTime: AttrTime, attrSubject: AttrSubject, attrDataContentType: AttrDataContentType,
	attrEndpointID: AttrEndpointID, attrIdempotencyKey: AttrIdempotencyKey, attrActor: AttrActor,
	attrTraceParent: AttrTraceParent, attrExpires: AttrExpires, attrDryRun: AttrDryRun,
	attrProducer: AttrProducer, attrSignature: AttrSignature,
}

// attrIndex returns the index of the known attribute named name, or -1. The name is matched
// as strings.ToLower(name), so any letter case is accepted.
func attrIndex(name string) int {
	name = strings.ToLower(name)
	for i, a := range knownAttrs {
		if a == name {
			return i
		}
	}
	return -1
}

// envelope is what a content-mode reader extracted, before validation: the known attributes
// with a string value, the attributes that were present but unusable (with the reason), and
// the data. Each array is indexed like knownAttrs.
type envelope struct {
	attrs [numAttrs]string
	// present says which attrs hold a value (which may be "").
	present [numAttrs]bool
	// bad holds the reason a present attribute is unusable; "" when it is not.
	bad [numAttrs]string
	// fatal is set when nothing can be read (structured body not a JSON object).
	fatal string
	// dataReason is set when the data is not acceptable JSON.
	dataReason string
	data       json.RawMessage
}

// set records the string value of attribute i.
func (e *envelope) set(i int, v string) { e.attrs[i], e.present[i] = v, true }

// fillReadable copies the id and source into p when they are present and valid.
func (e *envelope) fillReadable(p *PoisonError) {
	if id := e.attrs[attrID]; e.present[attrID] && e.bad[attrID] == "" && validID(id) {
		p.ID = id
	}
	if src := e.attrs[attrSource]; e.present[attrSource] && e.bad[attrSource] == "" && validSource(src) {
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
	if _, reason = e.required(attrSpecVersion, reasonSpecVersion, func(v string) bool { return v == specVersion }); reason != "" {
		return c, reason
	}
	if c.ID, reason = e.required(attrID, reasonID, validID); reason != "" {
		return c, reason
	}
	if c.Source, reason = e.required(attrSource, reasonSource, validSource); reason != "" {
		return c, reason
	}
	if c.Type, reason = e.required(attrType, reasonType, func(v string) bool { return v != "" }); reason != "" {
		return c, reason
	}
	if v, ok := strings.CutPrefix(c.Type, TypePrefix); !ok || v != verb {
		return c, reasonTypeMismatch
	}
	if reason = e.optional(attrTime, reasonTime, func(v string) bool {
		t, ok := parseTime(v)
		c.Time = t
		return ok
	}); reason != "" {
		return c, reason
	}
	if reason = e.optional(attrEndpointID, reasonEndpointID, func(v string) bool {
		n, ok := parseEndpointID(v)
		c.EndpointID, c.HasEndpointID = n, ok
		return ok
	}); reason != "" {
		return c, reason
	}
	if reason = e.optional(attrIdempotencyKey, reasonIdempotencyKey, func(v string) bool {
		c.IdempotencyKey = v
		return validIdempotencyKey(v)
	}); reason != "" {
		return c, reason
	}
	if reason = e.optional(attrExpires, reasonExpires, func(v string) bool {
		t, ok := parseTime(v)
		c.Expires = t
		return ok
	}); reason != "" {
		return c, reason
	}
	if reason = e.optional(attrDryRun, reasonDryRun, func(v string) bool {
		switch v {
		case "true":
			c.DryRun = true
		case "false":
		default:
			return false
		}
		return true
	}); reason != "" {
		return c, reason
	}
	for _, a := range []struct {
		attr int
		dst  *string
	}{{attrSubject, &c.Subject}, {attrTraceParent, &c.TraceParent}, {attrProducer, &c.Producer}, {attrSignature, &c.Signature}} {
		if reason = e.optional(a.attr, "", func(v string) bool { *a.dst = v; return true }); reason != "" {
			return c, reason
		}
	}
	if reason = e.optional(attrActor, reasonActor, func(v string) bool {
		c.Actor = v
		return ValidActor(v)
	}); reason != "" {
		return c, reason
	}
	// Surrounding whitespace in subject carries nothing and the SDK drops it on output.
	c.Subject = strings.TrimSpace(c.Subject)
	if !validTraceParent(c.TraceParent) {
		c.TraceParent = ""
	}
	if reason = e.optional(attrDataContentType, reasonDataContentType, func(v string) bool {
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
func (e *envelope) required(i int, generic string, valid func(string) bool) (string, string) {
	if r := e.bad[i]; r != "" {
		return "", r
	}
	v := e.attrs[i]
	if !e.present[i] || !valid(v) {
		return "", generic
	}
	return v, ""
}

// optional calls valid for a present attribute and returns a poison reason when the reader
// recorded one or valid refuses the value; an absent attribute is fine.
func (e *envelope) optional(i int, generic string, valid func(string) bool) string {
	if r := e.bad[i]; r != "" {
		return r
	}
	if e.present[i] && !valid(e.attrs[i]) {
		return generic
	}
	return ""
}
