package docs_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/deadletter"
	"github.com/proxbus/proxbus/internal/guestconfig"
	"github.com/proxbus/proxbus/internal/producers"
)

// asyncAPIDoc is docs/asyncapi.yaml decoded as plain YAML.
type asyncAPIDoc map[string]any

func loadAsyncAPI(t *testing.T) asyncAPIDoc {
	t.Helper()
	raw, err := os.ReadFile("asyncapi.yaml")
	if err != nil {
		t.Fatalf("read asyncapi.yaml: %v", err)
	}
	var doc asyncAPIDoc
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("parse asyncapi.yaml: %v", err)
	}
	if v, _ := doc["asyncapi"].(string); !strings.HasPrefix(v, "3.") {
		t.Fatalf("asyncapi.yaml: asyncapi version %q, want 3.x", v)
	}
	return doc
}

// node walks a path of map keys and returns what is there, or fails.
func (d asyncAPIDoc) node(t *testing.T, path ...string) any {
	t.Helper()
	var cur any = map[string]any(d)
	for i, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("asyncapi.yaml: %s is not a map", strings.Join(path[:i], "."))
		}
		if cur, ok = m[k]; !ok {
			t.Fatalf("asyncapi.yaml: %s is missing", strings.Join(path[:i+1], "."))
		}
	}
	return cur
}

func (d asyncAPIDoc) mapAt(t *testing.T, path ...string) map[string]any {
	t.Helper()
	m, ok := d.node(t, path...).(map[string]any)
	if !ok {
		t.Fatalf("asyncapi.yaml: %s is not a map", strings.Join(path, "."))
	}
	return m
}

// enum returns components.schemas.<name>.enum as strings.
func (d asyncAPIDoc) enum(t *testing.T, name string) []string {
	t.Helper()
	return strs(t, d.node(t, "components", "schemas", name, "enum"), "components.schemas."+name+".enum")
}

func strs(t *testing.T, v any, what string) []string {
	t.Helper()
	list, ok := v.([]any)
	if !ok {
		t.Fatalf("asyncapi.yaml: %s is not a list", what)
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

// sameSet fails with the names missing from the document and the names the code does not have.
func sameSet(t *testing.T, what string, code, doc []string) {
	t.Helper()
	c, d := toSet(code), toSet(doc)
	var missing, extra []string
	for k := range c {
		if !d[k] {
			missing = append(missing, k)
		}
	}
	for k := range d {
		if !c[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("%s: in the code but not in docs/asyncapi.yaml: %v", what, missing)
	}
	if len(extra) > 0 {
		t.Errorf("%s: in docs/asyncapi.yaml but not in the code: %v", what, extra)
	}
	if len(c) == 0 {
		t.Errorf("%s: the code yielded none (the collector is broken)", what)
	}
}

func toSet(list []string) map[string]bool {
	s := make(map[string]bool, len(list))
	for _, v := range list {
		s[v] = true
	}
	return s
}

// TestAsyncAPIMatchesCode pins docs/asyncapi.yaml to the code in both directions: every name
// the code can emit or accept is documented, and the document names nothing the code lacks.
func TestAsyncAPIMatchesCode(t *testing.T) {
	t.Parallel()
	doc := loadAsyncAPI(t)
	hf := parsePackage(t, "../handlers")
	ef := parsePackage(t, "../events")

	verbs := handlers.NewRegistry(handlers.Builtin()...).Names()
	reasons := append(hf.constsWithPrefix("Reason"), events.ReasonInvalidCommand, producers.ReasonNotAllowed, producers.ReasonSignatureInvalid)
	results := append(hf.constsWithPrefix("Result"), events.ResultRefused)
	steps, unresolved := hf.stepNames()
	for _, u := range unresolved {
		t.Errorf("step name not statically known (use a string literal or constant): %s", u)
	}
	dlqReasons := append(hf.decisionReasons(), deadletter.ReasonDeadLetter, deadletter.ReasonInvalidCommand,
		producers.ReasonNotAllowed, producers.ReasonSignatureInvalid)

	tests := []struct {
		name string
		code []string
		doc  []string
	}{
		{"verbs (components.schemas.Verb)", verbs, doc.enum(t, "Verb")},
		{"verbs (command channels)", prefixed(verbs, "proxbus.cmd."), commandAddresses(t, doc)},
		{"steps (components.schemas.StepName)", steps, doc.enum(t, "StepName")},
		{"step statuses (components.schemas.StepStatus)", ef.constsOfType("StepStatus"), doc.enum(t, "StepStatus")},
		{"result words (components.schemas.ResultWord)", results, doc.enum(t, "ResultWord")},
		{"reasons (components.schemas.Reason)", reasons, doc.enum(t, "Reason")},
		{"dead-letter reasons (components.schemas.DlqReason)", dlqReasons, doc.enum(t, "DlqReason")},
		{"ce- headers (components.schemas.BinaryCommandHeaders)", prefixed(ef.constsWithPrefix("Attr"), events.HeaderPrefix), ceHeaders(t, doc)},
		{"repaired_by (components.schemas.JournalRepaired)", []string{events.RepairedByReplay, events.RepairedByRepairer},
			strs(t, doc.node(t, "components", "schemas", "JournalRepaired", "properties", "repaired_by", "enum"), "repaired_by.enum")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sameSet(t, tt.name, tt.code, tt.doc)
		})
	}
}

// TestAsyncAPIEventSubjects pins the event and dead-letter channel addresses to events.Subjects.
func TestAsyncAPIEventSubjects(t *testing.T) {
	t.Parallel()
	doc := loadAsyncAPI(t)
	s := events.NewSubjects("")
	tests := []struct{ channel, want string }{
		{"step", s.Step("{ref}")},
		{"result", s.Result("{ref}")},
		{"journal", s.Journal("{ref}")},
		{"deadLetter", s.DLQ("{verb}")},
		{"pveEvents", strings.Replace(s.PVE(0, "{kind}"), ".0.", ".{endpoint}.", 1)},
	}
	for _, tt := range tests {
		got, _ := doc.node(t, "channels", tt.channel, "address").(string)
		if got != tt.want {
			t.Errorf("channels.%s.address = %q, want %q", tt.channel, got, tt.want)
		}
	}
}

// TestAsyncAPIVerbMessages checks that every verb has a binary and a structured command
// message and a result message (x-proxbus-verb), and that every operation's x-proxbus-steps
// are known step names.
func TestAsyncAPIVerbMessages(t *testing.T) {
	t.Parallel()
	doc := loadAsyncAPI(t)
	count := map[string]int{}
	for name, m := range doc.mapAt(t, "components", "messages") {
		mm, _ := m.(map[string]any)
		if v, ok := mm["x-proxbus-verb"].(string); ok {
			count[v]++
			if !strings.HasPrefix(strings.ToLower(name), strings.ToLower(strings.ReplaceAll(v, ".", ""))) {
				t.Errorf("message %s is tagged x-proxbus-verb %s", name, v)
			}
		}
	}
	for _, v := range handlers.NewRegistry(handlers.Builtin()...).Names() {
		if count[v] != 3 {
			t.Errorf("verb %s has %d messages tagged x-proxbus-verb, want 3 (binary, structured, result)", v, count[v])
		}
	}
	known := toSet(doc.enum(t, "StepName"))
	for name, op := range doc.mapAt(t, "operations") {
		om, _ := op.(map[string]any)
		raw, ok := om["x-proxbus-steps"]
		if !ok {
			continue
		}
		for _, s := range strs(t, raw, "operations."+name+".x-proxbus-steps") {
			if !known[s] {
				t.Errorf("operations.%s.x-proxbus-steps: %q is not in components.schemas.StepName", name, s)
			}
		}
	}
}

func prefixed(list []string, prefix string) []string {
	out := make([]string, len(list))
	for i, v := range list {
		out[i] = prefix + v
	}
	return out
}

func commandAddresses(t *testing.T, doc asyncAPIDoc) []string {
	t.Helper()
	var out []string
	for _, ch := range doc.mapAt(t, "channels") {
		cm, _ := ch.(map[string]any)
		if addr, _ := cm["address"].(string); strings.HasPrefix(addr, events.NewSubjects("").Command("")) {
			out = append(out, addr)
		}
	}
	return out
}

func ceHeaders(t *testing.T, doc asyncAPIDoc) []string {
	t.Helper()
	var out []string
	for name := range doc.mapAt(t, "components", "schemas", "BinaryCommandHeaders", "properties") {
		if strings.HasPrefix(name, events.HeaderPrefix) {
			out = append(out, name)
		}
	}
	return out
}

// goPackage is the syntax of one package's non-test files.
type goPackage struct {
	fset   *token.FileSet
	files  []*ast.File
	consts map[string]string // string constants, package and function level, by name
	types  map[string]string // constant name → its declared type name, when it has one
}

func parsePackage(t *testing.T, dir string) *goPackage {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	p := &goPackage{fset: token.NewFileSet(), consts: map[string]string{}, types: map[string]string{}}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(p.fset, name, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		p.files = append(p.files, f)
	}
	for _, f := range p.files {
		ast.Inspect(f, func(n ast.Node) bool {
			gd, ok := n.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				return true
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					if v, ok := stringLit(vs.Values[i]); ok {
						p.consts[id.Name] = v
						if typ, ok := vs.Type.(*ast.Ident); ok {
							p.types[id.Name] = typ.Name
						}
					}
				}
			}
			return true
		})
	}
	return p
}

func stringLit(e ast.Expr) (string, bool) {
	bl, ok := e.(*ast.BasicLit)
	if !ok || bl.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(bl.Value)
	return v, err == nil
}

// constsWithPrefix returns the values of the exported string constants whose name starts with prefix.
func (p *goPackage) constsWithPrefix(prefix string) []string {
	var out []string
	for name, v := range p.consts {
		if strings.HasPrefix(name, prefix) && ast.IsExported(name) {
			out = append(out, v)
		}
	}
	return out
}

// constsOfType returns the values of the string constants declared with type typ.
func (p *goPackage) constsOfType(typ string) []string {
	var out []string
	for name, v := range p.consts {
		if p.types[name] == typ {
			out = append(out, v)
		}
	}
	return out
}

// decisionReasons returns the strings (literals or constants) given as Reason in
// events.Disposition{...} literals (or the older Decision{...}): the dead-letter reasons the
// pipeline asks for.
func (p *goPackage) decisionReasons() []string {
	var out []string
	for _, f := range p.files {
		ast.Inspect(f, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok || !isDispositionType(cl.Type) {
				return true
			}
			for _, el := range cl.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Reason" {
					if v, ok := p.resolve(kv.Value); ok {
						out = append(out, v)
					}
				}
			}
			return true
		})
	}
	return out
}

// isDispositionType reports whether a composite literal's type is events.Disposition (or the
// handlers' former Decision).
func isDispositionType(typ ast.Expr) bool {
	switch t := typ.(type) {
	case *ast.Ident:
		return t.Name == "Decision"
	case *ast.SelectorExpr:
		x, ok := t.X.(*ast.Ident)
		return ok && x.Name == "events" && t.Sel.Name == "Disposition"
	}
	return false
}

func (p *goPackage) resolve(e ast.Expr) (string, bool) {
	if v, ok := stringLit(e); ok {
		return v, true
	}
	if id, ok := e.(*ast.Ident); ok {
		v, ok := p.consts[id.Name]
		return v, ok
	}
	return "", false
}

// sink is an argument position whose value becomes a step event's step name.
type sink struct {
	fn  string
	arg int
}

// stepNames returns every step name the package can publish: the values that reach the Step
// field of an events.Step literal, followed through function parameters (by function name)
// to the literals and constants at their call sites. unresolved lists the call sites whose
// step argument is neither a literal, a constant nor a parameter.
func (p *goPackage) stepNames() (names, unresolved []string) {
	sinks := map[sink]bool{}
	found := map[string]bool{}
	var bad []string
	for changed := true; changed; {
		changed = false
		bad = bad[:0]
		for _, f := range p.files {
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				p.walkFunc(fd, func(arg ast.Expr, scopes []*ast.FieldList) {
					if v, ok := p.resolve(arg); ok {
						found[v] = true
						return
					}
					if id, ok := arg.(*ast.Ident); ok {
						// Innermost scope first: a closure's own parameter cannot be followed.
						for i := len(scopes) - 1; i >= 0; i-- {
							if idx := paramIndex(scopes[i], id.Name); idx >= 0 {
								if i == 0 {
									s := sink{fd.Name.Name, idx}
									if !sinks[s] {
										sinks[s] = true
										changed = true
									}
									return
								}
								break
							}
						}
					}
					bad = append(bad, p.fset.Position(arg.Pos()).String())
				}, sinks)
			}
		}
	}
	for v := range found {
		names = append(names, v)
	}
	sort.Strings(names)
	return names, slices.Clone(bad)
}

// walkFunc calls visit with every expression of fd that feeds a step name: the Step field of
// an events.Step literal and the sink arguments of calls, with the parameter lists in scope
// (fd's first, then enclosing closures').
func (p *goPackage) walkFunc(fd *ast.FuncDecl, visit func(ast.Expr, []*ast.FieldList), sinks map[sink]bool) {
	var walk func(n ast.Node, scopes []*ast.FieldList)
	walk = func(n ast.Node, scopes []*ast.FieldList) {
		ast.Inspect(n, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				walk(n.Body, append(slices.Clone(scopes), n.Type.Params))
				return false
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Step" {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "events" {
						for _, el := range n.Elts {
							if kv, ok := el.(*ast.KeyValueExpr); ok {
								if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Step" {
									visit(kv.Value, scopes)
								}
							}
						}
					}
				}
			case *ast.CallExpr:
				name := calleeName(n.Fun)
				for s := range sinks {
					if s.fn == name && s.arg < len(n.Args) {
						if _, lit := n.Args[s.arg].(*ast.CompositeLit); lit {
							// A same-named call taking a value (events.Emitter.Step vs
							// handlers' Exec.Step): an events.Step literal is read above.
							continue
						}
						visit(n.Args[s.arg], scopes)
					}
				}
			}
			return true
		})
	}
	walk(fd.Body, []*ast.FieldList{fd.Type.Params})
}

func calleeName(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// paramIndex is the position of the parameter called name in params, or -1.
func paramIndex(params *ast.FieldList, name string) int {
	if params == nil {
		return -1
	}
	i := 0
	for _, field := range params.List {
		if len(field.Names) == 0 {
			i++
			continue
		}
		for _, n := range field.Names {
			if n.Name == name {
				return i
			}
			i++
		}
	}
	return -1
}

// TestAsyncAPISchemasMatchTypes pins the property names of the document's data and payload
// schemas, nested objects included, to the JSON fields of the Go types that decode or
// produce them.
func TestAsyncAPISchemasMatchTypes(t *testing.T) {
	t.Parallel()
	doc := loadAsyncAPI(t)
	// ahead names, per schema, top-level properties the contract gives and the document
	// describes before the Go type has them; each is compared as soon as the type has it.
	ahead := map[string][]string{}
	tests := []struct {
		schemas []string // their properties together
		typ     reflect.Type
	}{
		{[]string{"StoragePbsCreateData"}, reflect.TypeFor[handlers.PBSStorageInput]()},
		{[]string{"StoragePbsUpdateData"}, reflect.TypeFor[handlers.PBSStorageUpdateInput]()},
		{[]string{"StoragePbsDeleteData"}, reflect.TypeFor[handlers.PBSStorageDeleteInput]()},
		{[]string{"VmProvisionData"}, reflect.TypeFor[handlers.ProvisionInput]()},
		{[]string{"CtProvisionData"}, reflect.TypeFor[handlers.CTProvisionInput]()},
		{[]string{"GuestData"}, reflect.TypeFor[handlers.GuestRef]()},
		{[]string{"GuestForceData"}, reflect.TypeFor[handlers.PowerInput]()},
		{[]string{"VmSnapshotCreateData", "VmSnapshotDeleteData", "VmSnapshotRollbackData"}, reflect.TypeFor[handlers.SnapshotInput]()},
		{[]string{"NodeRebootData"}, reflect.TypeFor[handlers.NodeRebootInput]()},
		{[]string{"VmListData"}, reflect.TypeFor[handlers.VMListInput]()},
		{[]string{"VmDeleteData"}, reflect.TypeFor[handlers.DeleteInput]()},
		{[]string{"VmMigrateData"}, reflect.TypeFor[handlers.MigrateInput]()},
		{[]string{"VmBackupData"}, reflect.TypeFor[handlers.BackupInput]()},
		{[]string{"DecisionData"}, reflect.TypeFor[handlers.DecisionInput]()},
		{[]string{"DecisionOutput"}, reflect.TypeFor[handlers.DecisionOutput]()},
		{[]string{"Plan"}, reflect.TypeFor[handlers.Plan]()},
		{[]string{"VmConfigGetOutput"}, reflect.TypeFor[guestconfig.Config]()},
		{[]string{"Step"}, reflect.TypeFor[events.Step]()},
		{[]string{"Result"}, reflect.TypeFor[events.Result]()},
		{[]string{"JournalRepaired"}, reflect.TypeFor[events.JournalRepaired]()},
		{[]string{"PVETask"}, reflect.TypeFor[events.PVETask]()},
		{[]string{"PVEGuest"}, reflect.TypeFor[events.PVEGuest]()},
		{[]string{"PVENotification"}, reflect.TypeFor[events.PVENotification]()},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.schemas, "+"), func(t *testing.T) {
			t.Parallel()
			var nodes []any
			for _, s := range tt.schemas {
				nodes = append(nodes, doc.node(t, "components", "schemas", s))
			}
			compareFields(t, doc, "components.schemas."+strings.Join(tt.schemas, "+"), nodes, tt.typ, ahead[strings.Join(tt.schemas, "+")])
		})
	}
}

// compareFields compares the properties of the schemas (merged) with the JSON fields of typ,
// and recurses into fields whose type is a struct (or a slice of, or pointer to, one). A
// property named in ahead is left out while typ has no such field.
func compareFields(t *testing.T, doc asyncAPIDoc, where string, schemas []any, typ reflect.Type, ahead []string) {
	t.Helper()
	props := map[string][]any{}
	for _, s := range schemas {
		for name, p := range doc.properties(t, s) {
			props[name] = append(props[name], p)
		}
	}
	fields := jsonFields(typ)
	for _, name := range ahead {
		if _, ok := fields[name]; !ok {
			delete(props, name)
		}
	}
	names := func(m map[string][]any) []string {
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		return out
	}
	fieldNames := make([]string, 0, len(fields))
	for k := range fields {
		fieldNames = append(fieldNames, k)
	}
	sameSet(t, where+" vs "+typ.String(), fieldNames, names(props))
	for name, ft := range fields {
		if st := structOf(ft); st != nil && props[name] != nil {
			var sub []any
			for _, p := range props[name] {
				sub = append(sub, doc.itemsOf(t, p))
			}
			compareFields(t, doc, where+"."+name, sub, st, nil)
		}
	}
}

// properties returns the properties of a schema, following $ref and merging allOf, oneOf and
// anyOf branches.
func (d asyncAPIDoc) properties(t *testing.T, schema any) map[string]any {
	t.Helper()
	s := d.deref(t, schema)
	out := map[string]any{}
	if p, ok := s["properties"].(map[string]any); ok {
		maps.Copy(out, p)
	}
	for _, k := range []string{"allOf", "oneOf", "anyOf"} {
		list, _ := s[k].([]any)
		for _, b := range list {
			maps.Copy(out, d.properties(t, b))
		}
	}
	return out
}

// itemsOf returns an array schema's items, or the schema itself.
func (d asyncAPIDoc) itemsOf(t *testing.T, schema any) any {
	t.Helper()
	s := d.deref(t, schema)
	if items, ok := s["items"]; ok {
		return items
	}
	return s
}

// deref follows a local $ref ("#/components/schemas/X").
func (d asyncAPIDoc) deref(t *testing.T, schema any) map[string]any {
	t.Helper()
	s, _ := schema.(map[string]any)
	for range 10 {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		path := strings.Split(strings.TrimPrefix(ref, "#/"), "/")
		s, _ = d.node(t, path...).(map[string]any)
	}
	t.Fatalf("asyncapi.yaml: $ref chain too long")
	return nil
}

// jsonFields returns the JSON names of typ's exported fields (embedded structs flattened).
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range typ.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			maps.Copy(out, jsonFields(f.Type))
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// structOf returns the struct type behind t (through pointers and slices), or nil. Types with
// their own JSON form (time.Time, json.RawMessage) are leaves.
func structOf(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeFor[time.Time]() {
		return nil
	}
	return t
}
