package clientgen

import (
	"encoding/json"
)

// Samples returns data for the verb in which every field of the schema is present, once per
// branch of its choices of shapes (vm.provision's source: a template, an image), so that
// together they name every path [Doc.Paths] returns. Values have the right JSON type (a
// const, the first of an enum, an integer's minimum, true, "x"); they need not pass the
// fields' rules.
func (d *Doc) Samples(v Verb) []json.RawMessage {
	if v.data == nil {
		return []json.RawMessage{json.RawMessage(`{}`)}
	}
	n := d.variants(v.data, map[*obj]bool{})
	out := make([]json.RawMessage, 0, n)
	for k := range n {
		b, _ := json.Marshal(d.sample(v.data, k))
		out = append(out, b)
	}
	return out
}

// variants is the largest number of object branches of any choice in s.
func (d *Doc) variants(s *obj, seen map[*obj]bool) int {
	s = d.deref(s)
	if seen[s] {
		return 1
	}
	seen[s] = true
	n := max(1, len(d.objectBranches(s)))
	for _, p := range d.properties(s) {
		n = max(n, d.variants(p.schema, seen))
	}
	if it := d.itemsOf(s); it != nil {
		n = max(n, d.variants(it, seen))
	}
	return n
}

// sample is a value for s; at a choice of object shapes it takes branch k (the last when
// there are fewer).
func (d *Doc) sample(s *obj, k int) any {
	s = d.deref(s)
	if c, ok := s.m["const"]; ok {
		return c
	}
	if e := s.list("enum"); len(e) > 0 {
		return e[0]
	}
	if d.isObject(s) {
		return d.sampleObject(s, k)
	}
	for _, key := range []string{"oneOf", "anyOf"} {
		if b := s.list(key); len(b) > 0 {
			if bo, ok := b[0].(*obj); ok {
				return d.sample(bo, k)
			}
		}
	}
	switch s.str("type") {
	case "string":
		return "x"
	case "integer", "number":
		if m, ok := s.m["minimum"]; ok {
			return m
		}
		return 1
	case "boolean":
		return true
	case "array":
		return []any{d.sample(d.itemsOf(s), k)}
	}
	return map[string]any{}
}

// sampleObject is a value for the object schema s: its own properties, and those of its
// choice's branch k (the last when there are fewer).
func (d *Doc) sampleObject(s *obj, k int) map[string]any {
	out := map[string]any{}
	props := d.propertiesOf(s, false)
	if branches := d.objectBranches(s); len(branches) > 0 {
		props = append(props, d.propertiesOf(branches[min(k, len(branches)-1)], false)...)
	}
	for _, p := range props {
		out[p.name] = d.sample(p.schema, k)
	}
	return out
}
