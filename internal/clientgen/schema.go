// Package clientgen reads the verbs' data schemas from docs/asyncapi.yaml, the one source of
// the verbs' fields: it generates the client package's typed inputs from them ([Generate],
// run by `go generate ./client`), and gives tests every field path of a verb's data and
// sample data naming every field ([Doc.Paths], [Doc.Samples]), so that the pipeline's
// validation can be checked against the same schemas.
package clientgen

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
)

// ErrSchema is wrapped by every error about the document's shape.
var ErrSchema = errors.New("clientgen: asyncapi document")

// obj is a YAML mapping with its keys in document order.
type obj struct {
	keys []string
	m    map[string]any
}

func (o *obj) get(k string) any {
	if o == nil {
		return nil
	}
	return o.m[k]
}

func (o *obj) obj(k string) *obj {
	v, _ := o.get(k).(*obj)
	return v
}

func (o *obj) str(k string) string {
	v, _ := o.get(k).(string)
	return v
}

func (o *obj) list(k string) []any {
	v, _ := o.get(k).([]any)
	return v
}

// convert turns goccy/go-yaml's ordered values into obj and []any.
func convert(v any) any {
	switch v := v.(type) {
	case yaml.MapSlice:
		o := &obj{m: map[string]any{}}
		for _, it := range v {
			k := fmt.Sprint(it.Key)
			o.keys = append(o.keys, k)
			o.m[k] = convert(it.Value)
		}
		return o
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = convert(e)
		}
		return out
	}
	return v
}

// Doc is an AsyncAPI document.
type Doc struct {
	root *obj
}

// Load parses an AsyncAPI document (docs/asyncapi.yaml).
func Load(raw []byte) (*Doc, error) {
	var v any
	if err := yaml.UnmarshalWithOptions(raw, &v, yaml.UseOrderedMap()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSchema, err)
	}
	root, ok := convert(v).(*obj)
	if !ok || root.obj("components").obj("schemas") == nil {
		return nil, fmt.Errorf("%w: no components.schemas", ErrSchema)
	}
	return &Doc{root: root}, nil
}

// Verb is one verb and the schema of its data.
type Verb struct {
	// Name is the verb, e.g. "vm.start".
	Name string
	// Schema is the name of its data schema under components.schemas ("" when inline or
	// absent).
	Schema string
	data   *obj
}

// Verbs returns every verb with a binary command message (x-proxbus-verb and the
// BinaryCommand trait), sorted by name, with its payload schema: the verb's data.
func (d *Doc) Verbs() ([]Verb, error) {
	msgs := d.root.obj("components").obj("messages")
	var out []Verb
	for _, name := range msgs.keys {
		m := msgs.obj(name)
		verb := m.str("x-proxbus-verb")
		if verb == "" || !binary(m) {
			continue
		}
		v := Verb{Name: verb}
		if p := m.obj("payload"); p != nil {
			if ref := p.str("$ref"); ref != "" {
				v.Schema = strings.TrimPrefix(ref, "#/components/schemas/")
			}
			v.data = d.deref(p)
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	for i := 1; i < len(out); i++ {
		if out[i].Name == out[i-1].Name {
			return nil, fmt.Errorf("%w: verb %s has two binary messages", ErrSchema, out[i].Name)
		}
	}
	return out, nil
}

// binary reports whether a message has the BinaryCommand trait.
func binary(m *obj) bool {
	for _, t := range m.list("traits") {
		if o, ok := t.(*obj); ok && strings.HasSuffix(o.str("$ref"), "/BinaryCommand") {
			return true
		}
	}
	return false
}

// deref follows local $refs ("#/components/schemas/X"); a schema with a $ref and siblings
// (a description) is the referenced schema.
func (d *Doc) deref(s *obj) *obj {
	for range 16 {
		ref := s.str("$ref")
		if ref == "" {
			return s
		}
		s = d.root.obj("components").obj("schemas").obj(strings.TrimPrefix(ref, "#/components/schemas/"))
	}
	return s
}

// refName is the component name a schema refers to, "" when it is inline.
func refName(s *obj) string {
	return strings.TrimPrefix(s.str("$ref"), "#/components/schemas/")
}

// objectBranches returns the object schemas of s's oneOf/anyOf when every branch is an
// object with properties (a choice of shapes, like vm.provision's source), else nil.
func (d *Doc) objectBranches(s *obj) []*obj {
	var out []*obj
	for _, k := range []string{"oneOf", "anyOf"} {
		for _, b := range s.list(k) {
			bo, ok := b.(*obj)
			if !ok {
				return nil
			}
			bo = d.deref(bo)
			if bo.obj("properties") == nil {
				return nil
			}
			out = append(out, bo)
		}
	}
	return out
}

// property is one property of an object schema, its branches merged.
type property struct {
	name     string
	schema   *obj // as written (maybe a $ref)
	required bool
}

// properties returns the properties of an object schema in document order, with those of its
// object oneOf/anyOf/allOf branches merged (a property of a oneOf branch is never required).
func (d *Doc) properties(s *obj) []property {
	return d.propertiesOf(s, true)
}

// propertiesOf is [Doc.properties], with the oneOf/anyOf branches' properties only when
// branches is set.
func (d *Doc) propertiesOf(s *obj, branches bool) []property {
	s = d.deref(s)
	var out []property
	seen := map[string]bool{}
	add := func(ps *obj, required []any) {
		req := map[string]bool{}
		for _, r := range required {
			req[fmt.Sprint(r)] = true
		}
		for _, k := range ps.keysOrNil() {
			if seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, property{name: k, schema: ps.obj(k), required: req[k]})
		}
	}
	add(s.obj("properties"), s.list("required"))
	for _, b := range s.list("allOf") {
		if bo, ok := b.(*obj); ok {
			bo = d.deref(bo)
			add(bo.obj("properties"), bo.list("required"))
		}
	}
	if branches {
		for _, b := range d.objectBranches(s) {
			add(b.obj("properties"), nil)
		}
	}
	return out
}

func (o *obj) keysOrNil() []string {
	if o == nil {
		return nil
	}
	return o.keys
}

// isObject reports whether s (dereferenced) is an object with properties, or a choice of such.
func (d *Doc) isObject(s *obj) bool {
	s = d.deref(s)
	return s.obj("properties") != nil || len(d.objectBranches(s)) > 0
}

// itemsOf returns an array schema's items (dereferenced), or nil.
func (d *Doc) itemsOf(s *obj) *obj {
	s = d.deref(s)
	if s.str("type") != "array" {
		return nil
	}
	if it := s.obj("items"); it != nil {
		return it
	}
	return &obj{m: map[string]any{}}
}

// Paths returns every field path of the verb's data, sorted: top-level names, and
// parent.child for the fields of nested objects (and of a list's objects).
func (d *Doc) Paths(v Verb) []string {
	var out []string
	var walk func(prefix string, s *obj)
	walk = func(prefix string, s *obj) {
		for _, p := range d.properties(s) {
			path := prefix + p.name
			out = append(out, path)
			switch {
			case d.isObject(p.schema):
				walk(path+".", p.schema)
			case d.itemsOf(p.schema) != nil && d.isObject(d.itemsOf(p.schema)):
				walk(path+".", d.itemsOf(p.schema))
			}
		}
	}
	if v.data != nil {
		walk("", v.data)
	}
	sort.Strings(out)
	return out
}
