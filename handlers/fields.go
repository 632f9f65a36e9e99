package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"

	"github.com/proxbus/proxbus/internal/redact"
	"github.com/proxbus/proxbus/seal"
)

// Fields reads a command's data as declared fields. Every getter declares its field; a field
// that is present but of the wrong type or breaking its rule is recorded as failed. Values are
// never echoed: failures carry names only, and undeclared names are not reported at all.
type Fields struct {
	raw      map[string]json.RawMessage
	declared map[string]bool
	failed   map[string]bool
	// nestedUndeclared is set when an object inside the data has undeclared fields.
	nestedUndeclared bool
	// nestedDeclared are the fields declared inside nested objects, as parent.child paths.
	nestedDeclared map[string]bool
	// sealing opens sealed secret fields to check them (sealed.go).
	sealing sealing
}

var errNotObject = errors.New("data is not a JSON object")

// newFields reads data, a JSON object; absent, empty or null data reads as an empty object.
// Anything else is errNotObject.
func newFields(data json.RawMessage) (*Fields, error) {
	f := &Fields{raw: map[string]json.RawMessage{}, declared: map[string]bool{}, failed: map[string]bool{}}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return f, nil
	}
	if err := json.Unmarshal(trimmed, &f.raw); err != nil { // anything but an object
		return nil, errNotObject
	}
	return f, nil
}

// Fail marks a declared field as failed.
func (f *Fields) Fail(name string) {
	f.declared[name] = true
	f.failed[name] = true
}

// Failed reports whether name has failed so far.
func (f *Fields) Failed(name string) bool { return f.failed[name] }

// Has reports whether name is present and not null (and declares it).
func (f *Fields) Has(name string) bool {
	f.declared[name] = true
	v, ok := f.raw[name]
	return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// Raw declares name and returns its raw JSON (nil when absent or null).
func (f *Fields) Raw(name string) json.RawMessage {
	if !f.Has(name) {
		return nil
	}
	return f.raw[name]
}

// String returns a string field. Absent: fails when required, else "". valid (optional) is the
// field's rule.
func (f *Fields) String(name string, required bool, valid func(string) bool) string {
	raw := f.Raw(name)
	if raw == nil {
		if required {
			f.Fail(name)
		}
		return ""
	}
	if redact.IsSecretName(name) {
		if armored, sealed := f.sealedString(name, raw, valid); sealed {
			return armored
		}
	}
	var s string
	if json.Unmarshal(raw, &s) != nil || (valid != nil && !valid(s)) || (required && s == "") || redactedSecret(name, s) || seal.IsArmored(s) {
		f.Fail(name)
		return ""
	}
	return s
}

// Int returns an integer field in [min, max]; def when absent and not required.
func (f *Fields) Int(name string, required bool, def, min, max int64) int64 {
	raw := f.Raw(name)
	if raw == nil {
		if required {
			f.Fail(name)
		}
		return def
	}
	// json.Number keeps the literal exactly; it also accepts a quoted number, but a string
	// is the wrong type here.
	var n json.Number
	if raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
		f.Fail(name)
		return def
	}
	v, err := n.Int64()
	if err != nil || v < min || v > max {
		f.Fail(name)
		return def
	}
	return v
}

// Bool returns a boolean field; def when absent.
func (f *Fields) Bool(name string, def bool) bool {
	raw := f.Raw(name)
	if raw == nil {
		return def
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		f.Fail(name)
		return def
	}
	return b
}

// Strings returns a list of strings, each passing valid, with at most maxItems items (0: no limit).
func (f *Fields) Strings(name string, required bool, maxItems int, valid func(string) bool) []string {
	raw := f.Raw(name)
	if raw == nil {
		if required {
			f.Fail(name)
		}
		return nil
	}
	var items []any
	if err := json.Unmarshal(raw, &items); err != nil || (maxItems > 0 && len(items) > maxItems) || (required && len(items) == 0) {
		f.Fail(name)
		return nil
	}
	list := make([]string, len(items))
	for i, item := range items {
		s, ok := item.(string) // null and other types are wrong types
		if !ok || (valid != nil && !valid(s)) {
			f.Fail(name)
			return nil
		}
		list[i] = s
	}
	return list
}

// Object decodes the object field name with decode, which reads it through its own Fields. A
// failure inside fails name (names of nested fields are never reported); undeclared nested
// fields are reported like top-level ones. It reports whether the field was present.
func (f *Fields) Object(name string, required bool, decode func(sub *Fields)) bool {
	raw := f.Raw(name)
	if raw == nil {
		if required {
			f.Fail(name)
		}
		return false
	}
	f.nested(name, raw, decode)
	return true
}

// Objects decodes the list-of-objects field name (at most maxItems), each item with decode.
func (f *Fields) Objects(name string, maxItems int, decode func(i int, sub *Fields)) {
	raw := f.Raw(name)
	if raw == nil {
		return
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || (maxItems > 0 && len(items) > maxItems) {
		f.Fail(name)
		return
	}
	for i, item := range items {
		f.nested(name, item, func(sub *Fields) { decode(i, sub) })
	}
}

func (f *Fields) nested(name string, raw json.RawMessage, decode func(sub *Fields)) {
	sub, err := newFields(raw)
	if err != nil {
		f.Fail(name)
		return
	}
	sub.sealing = f.sealing
	decode(sub)
	if f.nestedDeclared == nil {
		f.nestedDeclared = map[string]bool{}
	}
	for _, p := range sub.declaredPaths() {
		f.nestedDeclared[name+"."+p] = true
	}
	if len(sub.failed) > 0 {
		f.Fail(name)
	}
	if sub.undeclared() {
		f.nestedUndeclared = true
	}
}

// declaredPaths returns every declared field, nested ones as parent.child paths, sorted.
func (f *Fields) declaredPaths() []string {
	out := make([]string, 0, len(f.declared)+len(f.nestedDeclared))
	for n := range f.declared {
		out = append(out, n)
	}
	for p := range f.nestedDeclared {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func (f *Fields) undeclared() bool {
	if f.nestedUndeclared {
		return true
	}
	for name := range f.raw {
		if !f.declared[name] {
			return true
		}
	}
	return false
}

// redactedSecret reports a secret field that holds the redaction placeholder: a dead letter
// replayed as it was stored lost its secret, and must not write "[redacted]" to Proxmox.
func redactedSecret(name, value string) bool {
	return value == redact.Placeholder && redact.IsSecretName(name)
}

// outcome is the 422 invalid_body outcome when anything failed or undeclared fields are present.
func (f *Fields) outcome() *Outcome {
	undeclared := f.undeclared()
	if len(f.failed) == 0 && !undeclared {
		return nil
	}
	names := make([]string, 0, len(f.failed))
	for n := range f.failed {
		names = append(names, n)
	}
	sort.Strings(names)
	detail := ""
	if undeclared {
		detail = "undeclared fields present"
	}
	return invalidBody(names, detail)
}

func invalidBody(fields []string, detail string) *Outcome {
	return &Outcome{Status: 422, Result: ResultRefused, Reason: ReasonInvalidBody, Fields: fields, Detail: detail}
}
