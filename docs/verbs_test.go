package docs_test

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/redact"
)

var update = flag.Bool("update", false, "rewrite docs/verbs.md from docs/asyncapi.yaml (TestVerbsDoc)")

// verbsDocFile is the generated reference of every verb's data fields.
const verbsDocFile = "verbs.md"

// regenerate is the command that rewrites verbsDocFile.
const regenerate = "go test ./docs/ -run TestVerbsDoc -update"

// TestVerbsDoc checks that docs/verbs.md is exactly what docs/asyncapi.yaml generates for the
// verbs of handlers.Builtin (in that order); with -update it rewrites the file instead. It
// also checks that each verb's x-proxbus-access is the code's and that exactly the
// secret-named data fields (redact.IsSecretName) are writeOnly.
func TestVerbsDoc(t *testing.T) {
	got := renderVerbsDoc(t)
	if *update {
		if err := os.WriteFile(verbsDocFile, got, 0o644); err != nil {
			t.Fatalf("write %s: %v", verbsDocFile, err)
		}
		return
	}
	want, err := os.ReadFile(verbsDocFile)
	if err != nil {
		t.Fatalf("read docs/%s: %v; generate it with: %s", verbsDocFile, err, regenerate)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/%s is not what docs/asyncapi.yaml generates (%s); regenerate it with: %s",
			verbsDocFile, firstDifference(want, got), regenerate)
	}
}

// firstDifference describes the first line where have and want differ.
func firstDifference(have, want []byte) string {
	h, w := strings.Split(string(have), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(h), len(w)) {
		var hl, wl string
		if i < len(h) {
			hl = h[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if hl != wl || i >= len(h) || i >= len(w) {
			return fmt.Sprintf("line %d is %q, want %q", i+1, hl, wl)
		}
	}
	return "they differ"
}

// orderedDoc is docs/asyncapi.yaml decoded with its maps in document order.
type orderedDoc struct {
	t    *testing.T
	root any
}

func loadOrderedAsyncAPI(t *testing.T) orderedDoc {
	t.Helper()
	raw, err := os.ReadFile("asyncapi.yaml")
	if err != nil {
		t.Fatalf("read asyncapi.yaml: %v", err)
	}
	var root any
	if err := yaml.UnmarshalWithOptions(raw, &root, yaml.UseOrderedMap()); err != nil {
		t.Fatalf("parse asyncapi.yaml: %v", err)
	}
	return orderedDoc{t: t, root: root}
}

// yget returns the value of key in an ordered map, or nil.
func yget(n any, key string) any {
	m, _ := n.(yaml.MapSlice)
	for _, it := range m {
		if k, _ := it.Key.(string); k == key {
			return it.Value
		}
	}
	return nil
}

// ypath walks keys from n.
func ypath(n any, keys ...string) any {
	for _, k := range keys {
		n = yget(n, k)
	}
	return n
}

func ystr(n any) string { s, _ := n.(string); return s }

func ylist(n any) []any { l, _ := n.([]any); return l }

func ystrs(n any) []string {
	var out []string
	for _, v := range ylist(n) {
		out = append(out, fmt.Sprint(v))
	}
	return out
}

// yentries returns an ordered map's entries with string keys.
func yentries(n any) []yaml.MapItem {
	m, _ := n.(yaml.MapSlice)
	return m
}

// deref follows local $refs ("#/components/schemas/X").
func (d orderedDoc) deref(n any) any {
	for range 10 {
		ref := ystr(yget(n, "$ref"))
		if ref == "" {
			return n
		}
		n = ypath(d.root, strings.Split(strings.TrimPrefix(ref, "#/"), "/")...)
		if n == nil {
			d.t.Fatalf("asyncapi.yaml: $ref %s points nowhere", ref)
		}
	}
	d.t.Fatalf("asyncapi.yaml: $ref chain too long")
	return nil
}

// refName is the last segment of n's $ref, or "".
func refName(n any) string {
	ref := ystr(yget(n, "$ref"))
	return ref[strings.LastIndex(ref, "/")+1:]
}

// verbDoc is what docs/verbs.md says about one verb.
type verbDoc struct {
	name, access, description string
	steps                     []string
	dataSchema                string
	fields                    []verbField
	outputSchema              string
	output                    []string
}

// endpoint says whether the verb needs an endpoint: every verb but the control verbs
// (command.approve, command.reject), which act on another command.
func (v verbDoc) endpoint() string {
	if v.access == "control" {
		return "not needed"
	}
	return "required"
}

// verbField is one row of a verb's data table.
type verbField struct {
	path, typ, need, constraint, notes string
	secret                             bool
}

// renderVerbsDoc generates docs/verbs.md.
func renderVerbsDoc(t *testing.T) []byte {
	t.Helper()
	d := loadOrderedAsyncAPI(t)
	var verbs []verbDoc
	for _, v := range handlers.Builtin() {
		verbs = append(verbs, d.verb(v))
	}
	var b strings.Builder
	b.WriteString(`# Verbs

<!-- Generated from docs/asyncapi.yaml by ` + "`" + regenerate + "`" + `; do not edit. -->

Every verb's data: the JSON object a command carries (the binary body, the structured event's
` + "`data`" + `, ` + "`proxbus send <verb> --data`" + `). This page is generated from the payload schemas of
[asyncapi.yaml](asyncapi.yaml), which ` + "`go test ./docs/`" + ` checks against the code; the result
codes, steps and events are there.

- **Endpoint.** Every verb but the control verbs (` + "`command.approve`" + `, ` + "`command.reject`" + `, which
  decide on another command) needs one: the command's ` + "`endpointid`" + ` (` + "`ce-endpointid`" + `, ` + "`proxbus send --endpoint N`" + `)
  names the NetBox ProxmoxEndpoint and the endpoints file's entry. Without it a command is refused 403
  ` + "`endpoint_id_required`" + `; one that NetBox or the endpoints file does not know, 403 ` + "`endpoint_not_found`" + `.
- **Read or write.** A write verb also needs the endpoint's ` + "`allow_writes: true`" + ` in NetBox and not
  ` + "`read_only`" + ` in the endpoints file (else 403 ` + "`endpoint_writes_disabled`" + `); it is journaled and made
  idempotent. A read skips that check, the Idempotency-Key window and the journal. A control verb
  skips the gate too; its outcome is kept so that a duplicate gets the same answer.
- **Fields.** A field not listed, a missing required one, or a value of the wrong type or outside
  its constraint is refused 422 ` + "`invalid_body`" + ` with the names of the fields concerned, never their
  values. A nested field's "required" and default apply when its parent is given. A secret field is
  write-only: proxbus never emits its value (journal, events, logs, dead letters).

| verb | access | endpoint | what it does |
|---|---|---|---|
`)
	for _, v := range verbs {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s | %s |\n", v.name, anchor(v.name), v.access, v.endpoint(), cell(v.description))
	}
	for _, v := range verbs {
		fmt.Fprintf(&b, "\n## `%s`\n\n%s\n\n", v.name, v.description)
		fmt.Fprintf(&b, "- access: %s\n- endpoint: %s\n", v.access, v.endpoint())
		if len(v.steps) > 0 {
			fmt.Fprintf(&b, "- steps: %s\n", codeList(v.steps))
		} else {
			b.WriteString("- steps: none of its own\n")
		}
		fmt.Fprintf(&b, "- data: `components.schemas.%s`\n", v.dataSchema)
		if v.outputSchema != "" {
			fmt.Fprintf(&b, "- result `output`: %s (`components.schemas.%s`)\n", codeList(v.output), v.outputSchema)
		}
		b.WriteString("\n")
		if len(v.fields) == 0 {
			b.WriteString("No fields: `{}` (or no data at all).\n")
			continue
		}
		b.WriteString("| field | type | required / default | constraint | secret | notes |\n|---|---|---|---|---|---|\n")
		for _, f := range v.fields {
			secret := ""
			if f.secret {
				secret = "yes"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", f.path, cell(f.typ), cell(f.need), cell(f.constraint), secret, cell(f.notes))
		}
	}
	return []byte(b.String())
}

// verb collects one verb's documentation and checks it against the code.
func (d orderedDoc) verb(v handlers.Verb) verbDoc {
	t := d.t
	name := v.VerbName()
	out := verbDoc{name: name}

	var channel string
	for _, ch := range yentries(ypath(d.root, "channels")) {
		if ystr(yget(ch.Value, "address")) == "proxbus.cmd."+name {
			channel = ystr(ch.Key)
			out.description = oneLine(ystr(yget(ch.Value, "description")))
		}
	}
	if channel == "" || out.description == "" {
		t.Fatalf("asyncapi.yaml: no channel with address proxbus.cmd.%s and a description", name)
	}

	found := false
	for _, op := range yentries(ypath(d.root, "operations")) {
		if ystr(ypath(op.Value, "channel", "$ref")) != "#/channels/"+channel {
			continue
		}
		found = true
		out.access = ystr(yget(op.Value, "x-proxbus-access"))
		out.steps = ystrs(yget(op.Value, "x-proxbus-steps"))
	}
	want := map[handlers.Access]string{handlers.Read: "read", handlers.Write: "write", handlers.Control: "control"}[v.VerbAccess()]
	if !found || out.access != want {
		t.Errorf("asyncapi.yaml: the operation of channel %s has x-proxbus-access %q, the code says %q", channel, out.access, want)
	}

	for _, m := range yentries(ypath(d.root, "components", "messages")) {
		if ystr(yget(m.Value, "x-proxbus-verb")) != name {
			continue
		}
		for _, tr := range ylist(yget(m.Value, "traits")) {
			switch refName(tr) {
			case "BinaryCommand":
				payload := yget(m.Value, "payload")
				out.dataSchema = refName(payload)
				out.fields = d.objectFields("", d.deref(payload))
			case "Event":
				if o := findOutput(yget(m.Value, "payload")); o != nil {
					out.outputSchema = refName(o)
					for _, p := range d.properties(o) {
						out.output = append(out.output, ystr(p.Key))
					}
				}
			}
		}
	}
	if out.dataSchema == "" {
		t.Fatalf("asyncapi.yaml: verb %s has no binary command message whose payload $refs a schema", name)
	}
	for _, f := range out.fields {
		leaf := f.path[strings.LastIndexAny(f.path, ".]")+1:]
		if redact.IsSecretName(leaf) != f.secret {
			t.Errorf("asyncapi.yaml: %s field %s: writeOnly is %v, but redact.IsSecretName(%q) is %v",
				name, f.path, f.secret, leaf, redact.IsSecretName(leaf))
		}
	}
	return out
}

// findOutput returns the schema of the first "output" property in a result payload.
func findOutput(n any) any {
	switch n := n.(type) {
	case yaml.MapSlice:
		if o := yget(yget(n, "properties"), "output"); o != nil && yget(o, "$ref") != nil {
			return o
		}
		for _, it := range n {
			if o := findOutput(it.Value); o != nil {
				return o
			}
		}
	case []any:
		for _, e := range n {
			if o := findOutput(e); o != nil {
				return o
			}
		}
	}
	return nil
}

// properties returns a schema's properties in document order, allOf branches merged.
func (d orderedDoc) properties(n any) []yaml.MapItem {
	s := d.deref(n)
	out := slices.Clone(yentries(yget(s, "properties")))
	for _, b := range ylist(yget(s, "allOf")) {
		out = append(out, d.properties(b)...)
	}
	return out
}

// objectFields returns the rows of an object schema's properties, nested objects (and
// arrays of objects, and object forms of a oneOf) after their parent.
func (d orderedDoc) objectFields(prefix string, s any) []verbField {
	required := ystrs(yget(s, "required"))
	var out []verbField
	for _, p := range d.properties(s) {
		name := ystr(p.Key)
		raw, schema := p.Value, d.deref(p.Value)
		f := verbField{path: prefix + name, secret: yget(schema, "writeOnly") == true}
		f.typ, f.constraint = d.describe(schema)
		switch def := yget(schema, "default"); {
		case slices.Contains(required, name):
			f.need = "required"
		case def != nil:
			f.need = fmt.Sprintf("default `%v`", def)
		default:
			f.need = "optional"
		}
		f.notes = oneLine(cmp.Or(ystr(yget(raw, "description")), ystr(yget(schema, "description"))))
		out = append(out, f)
		out = append(out, d.nested(f.path, schema)...)
	}
	return out
}

// nested returns the rows under a field: an object's properties, an array's object items',
// or the properties of a oneOf's object forms (required within their form).
func (d orderedDoc) nested(path string, s any) []verbField {
	switch {
	case yget(s, "properties") != nil:
		return d.objectFields(path+".", s)
	case yget(s, "items") != nil:
		if items := d.deref(yget(s, "items")); yget(items, "properties") != nil {
			return d.objectFields(path+"[].", items)
		}
	case yget(s, "oneOf") != nil:
		var out []verbField
		for _, br := range ylist(yget(s, "oneOf")) {
			br = d.deref(br)
			if yget(br, "properties") == nil {
				continue
			}
			for _, f := range d.objectFields(path+".", br) {
				if f.need == "required" && strings.Count(f.path, ".") == strings.Count(path, ".")+1 {
					f.need = "one form of `" + path + "`"
				}
				out = append(out, f)
			}
		}
		return out
	}
	return nil
}

// describe returns a schema's type and constraint as table text.
func (d orderedDoc) describe(s any) (typ, constraint string) {
	if forms := ylist(yget(s, "oneOf")); len(forms) > 0 {
		var types, cons, keys []string
		objects := true
		for _, br := range forms {
			br = d.deref(br)
			ty, c := d.describe(br)
			if !slices.Contains(types, ty) {
				types = append(types, ty)
			}
			if c != "" {
				cons = append(cons, ty+" "+c)
			}
			if ty != "object" {
				objects = false
			}
			keys = append(keys, ystrs(yget(br, "required"))...)
		}
		if objects {
			return "object", "exactly one of " + codeList(keys)
		}
		return strings.Join(types, " or "), strings.Join(cons, "; or ")
	}
	typ = ystr(yget(s, "type"))
	var c []string
	if typ == "array" {
		items := d.deref(yget(s, "items"))
		ity, icon := d.describe(items)
		typ = "array of " + ity
		if r := span(yget(s, "minItems"), yget(s, "maxItems"), "items"); r != "" {
			c = append(c, r)
		}
		if icon != "" {
			c = append(c, "each "+icon)
		}
		return typ, strings.Join(c, ", ")
	}
	if v := yget(s, "const"); v != nil {
		c = append(c, fmt.Sprintf("`%v`", v))
	}
	if e := ystrs(yget(s, "enum")); len(e) > 0 {
		c = append(c, "one of "+codeList(e))
	}
	if r := span(yget(s, "minimum"), yget(s, "maximum"), ""); r != "" {
		c = append(c, r)
	}
	if r := span(yget(s, "minLength"), yget(s, "maxLength"), "characters"); r != "" {
		c = append(c, r)
	}
	if p := ystr(yget(s, "pattern")); p != "" {
		c = append(c, "pattern `"+p+"`")
	}
	if f := ystr(yget(s, "format")); f != "" {
		c = append(c, "format `"+f+"`")
	}
	if v := yget(yget(s, "not"), "const"); v != nil {
		c = append(c, fmt.Sprintf("not `%v`", v))
	}
	return typ, strings.Join(c, ", ")
}

// span renders a range: "1–16", "at least 16", "non-empty", "at most 253 characters".
func span(lo, hi any, unit string) string {
	suffix := ""
	if unit != "" {
		suffix = " " + unit
	}
	switch {
	case lo != nil && hi != nil:
		return fmt.Sprintf("%v–%v%s", lo, hi, suffix)
	case lo != nil && fmt.Sprint(lo) == "1" && unit != "":
		return "non-empty"
	case lo != nil:
		return fmt.Sprintf("at least %v%s", lo, suffix)
	case hi != nil:
		return fmt.Sprintf("at most %v%s", hi, suffix)
	}
	return ""
}

func codeList(list []string) string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = "`" + s + "`"
	}
	return strings.Join(out, ", ")
}

// anchor is GitHub's heading anchor of "## `name`".
func anchor(name string) string { return strings.ReplaceAll(name, ".", "") }

// cell escapes a table cell's pipes (also inside code spans, as GitHub reads them).
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// oneLine collapses white space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
