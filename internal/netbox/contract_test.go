package netbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/testenv"

	"github.com/proxbus/proxbus/internal/netbox"
	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
)

// The OpenAPI excerpts live outside the repository, in <repo root>/../shared/contracts/netbox.
const (
	spec422 = "netbox-4.2.2-openapi-journal-excerpt.json"
	spec47  = "netbox-4.7.0-beta1-openapi-journal-schemas-excerpt.json"
)

// objectTypeForm is NetBox's "app_label.model" identifier of an object type.
var objectTypeForm = regexp.MustCompile(`^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$`)

// loadSpec reads one excerpt, skipping the test when the shared contracts are not checked out.
func loadSpec(t *testing.T, name string) map[string]any {
	t.Helper()
	raw := testenv.SharedContract(t, "netbox", name)
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return spec
}

// schemaChecker validates JSON values against the OpenAPI 3.0 subset NetBox's schemas use.
type schemaChecker struct {
	schemas map[string]any
	request bool // readOnly properties must not be sent
}

func newChecker(spec map[string]any, request bool) *schemaChecker {
	comps, _ := spec["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	return &schemaChecker{schemas: schemas, request: request}
}

func (c *schemaChecker) schema(name string) map[string]any {
	s, _ := c.schemas[name].(map[string]any)
	return s
}

// check returns the violations of v against s, each prefixed by its JSON path.
func (c *schemaChecker) check(s map[string]any, v any, path string) []string {
	if ref, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		target := c.schema(name)
		if target == nil {
			return []string{path + ": unresolved " + ref}
		}
		return c.check(target, v, path)
	}
	if v == nil {
		if s["nullable"] == true {
			return nil
		}
		if _, typed := s["type"]; !typed && len(s) <= 2 {
			return nil // an untyped schema ({readOnly, nullable}) accepts anything
		}
		return []string{path + ": null is not allowed"}
	}
	var errs []string
	if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, v) {
		errs = append(errs, fmt.Sprintf("%s: %v is not in the enum %v", path, v, enum))
	}
	switch s["type"] {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			return append(errs, path+": not an object")
		}
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				name := r.(string)
				prop, _ := s["properties"].(map[string]any)[name].(map[string]any)
				if c.request && prop["readOnly"] == true {
					continue
				}
				if _, ok := obj[name]; !ok {
					errs = append(errs, path+"."+name+": required but missing")
				}
			}
		}
		props, _ := s["properties"].(map[string]any)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			prop, ok := props[k].(map[string]any)
			if !ok {
				if c.request {
					errs = append(errs, path+"."+k+": not a declared property")
				}
				continue
			}
			if c.request && prop["readOnly"] == true {
				errs = append(errs, path+"."+k+": read-only property sent")
			}
			errs = append(errs, c.check(prop, obj[k], path+"."+k)...)
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			return append(errs, path+": not an array")
		}
		items, _ := s["items"].(map[string]any)
		for i, it := range arr {
			errs = append(errs, c.check(items, it, fmt.Sprintf("%s[%d]", path, i))...)
		}
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return append(errs, path+": not a number")
		}
		i, err := n.Int64()
		if err != nil {
			return append(errs, path+": not an integer")
		}
		if m, ok := s["minimum"].(json.Number); ok {
			if lo, _ := m.Int64(); i < lo {
				errs = append(errs, fmt.Sprintf("%s: %d below minimum %d", path, i, lo))
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return append(errs, path+": not a string")
		}
		if m, ok := s["minLength"].(json.Number); ok {
			if lo, _ := m.Int64(); int64(len(str)) < lo {
				errs = append(errs, path+": shorter than minLength")
			}
		}
		switch s["format"] {
		case "date-time":
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				errs = append(errs, path+": not an RFC 3339 date-time")
			}
		case "uri":
			if u, err := url.Parse(str); err != nil || u.Scheme == "" || u.Host == "" {
				errs = append(errs, path+": not an absolute URI")
			}
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			errs = append(errs, path+": not a boolean")
		}
	}
	return errs
}

// decode parses JSON keeping numbers as json.Number.
func decode(t *testing.T, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", raw, err)
	}
	return v
}

// specNumbers re-reads a spec so that numeric keywords are json.Number like the values.
func specNumbers(t *testing.T, spec map[string]any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, raw).(map[string]any)
}

// exchange drives the client through a journal entry's life against the simulator and returns
// what was sent and what the simulator answered to each request.
func exchange(t *testing.T) (f *fixture, answers map[string][]byte) {
	t.Helper()
	f = newFixture(t, simnetbox.TokenV2)
	f.sim.AddVM(9, "web", 100, 1)
	ctx := context.Background()
	var refs []netbox.JournalRef
	for _, e := range []netbox.JournalEntry{
		{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 1, Kind: netbox.KindInfo, Comments: "- verb: node.reboot\n- result: in_progress"},
		{ObjectType: netbox.ObjectTypeVM, ObjectID: 9, Comments: "- verb: vm.start"},
	} {
		ref, err := f.client.CreateJournalEntry(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	if err := f.client.UpdateJournalEntry(ctx, refs[0].ID, netbox.KindSuccess, "- verb: node.reboot\n- result: ok"); err != nil {
		t.Fatal(err)
	}
	if err := f.client.UpdateJournalEntry(ctx, refs[1].ID, netbox.KindWarning, "- verb: vm.start\n- result: failed"); err != nil {
		t.Fatal(err)
	}
	answers = map[string][]byte{}
	get := func(name, path string) {
		req, _ := http.NewRequest("GET", f.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+simnetbox.TokenV2)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(resp.Body); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		answers[name] = buf.Bytes()
	}
	get("detail", fmt.Sprintf("/api/extras/journal-entries/%d/", refs[0].ID))
	get("list", "/api/extras/journal-entries/?assigned_object_type=virtualization.virtualmachine&assigned_object_id=9")
	return f, answers
}

// TestContractJournal checks, against NetBox's published OpenAPI (4.2.2 and 4.7), that the
// client's journal requests and the simulator's answers fit the schemas: required fields, kind
// enum values, the "app_label.model" object type form, and field types.
func TestContractJournal(t *testing.T) {
	t.Parallel()
	old := specNumbers(t, loadSpec(t, spec422))
	cur := specNumbers(t, loadSpec(t, spec47))
	f, answers := exchange(t)

	// The paths and methods the client uses exist in the spec.
	paths, _ := old["paths"].(map[string]any)
	for _, pm := range []struct{ path, method string }{
		{"/api/extras/journal-entries/", "post"},
		{"/api/extras/journal-entries/", "get"},
		{"/api/extras/journal-entries/{id}/", "patch"},
	} {
		if op, _ := paths[pm.path].(map[string]any); op == nil || op[pm.method] == nil {
			t.Fatalf("4.2.2 spec has no %s %s", pm.method, pm.path)
		}
	}

	// Requests.
	type reqCase struct {
		spec    map[string]any
		version string
		post    string
		patch   string
	}
	cases := []reqCase{
		{old, "4.2.2", "WritableJournalEntryRequest", "PatchedWritableJournalEntryRequest"},
		{cur, "4.7", "JournalEntryRequest", "JournalEntryRequest"},
	}
	reqs := f.rec.requests()
	var posts, patches int
	for _, r := range reqs {
		var name func(reqCase) string
		var partial bool
		switch {
		case r.Method == "POST" && r.Path == "/api/extras/journal-entries/":
			posts++
			name = func(c reqCase) string { return c.post }
		case r.Method == "PATCH" && regexp.MustCompile(`^/api/extras/journal-entries/\d+/$`).MatchString(r.Path):
			patches++
			name, partial = func(c reqCase) string { return c.patch }, true
		default:
			continue
		}
		body := decode(t, r.Body)
		for _, c := range cases {
			ch := newChecker(c.spec, true)
			s := ch.schema(name(c))
			if s == nil {
				t.Fatalf("%s spec has no schema %s", c.version, name(c))
			}
			if partial {
				// PATCH is a partial update: NetBox drops `required` for it.
				s = withoutRequired(s)
			}
			for _, e := range ch.check(s, body, r.Method) {
				t.Errorf("%s %s vs %s %s: %s", r.Method, r.Path, c.version, name(c), e)
			}
		}
		obj := body.(map[string]any)
		if ot, ok := obj["assigned_object_type"]; ok && !objectTypeForm.MatchString(ot.(string)) {
			t.Errorf("%s sent assigned_object_type %q, not app_label.model", r.Method, ot)
		}
		if partial {
			if _, ok := obj["kind"]; !ok {
				t.Errorf("PATCH without kind: %s", r.Body)
			}
			if _, ok := obj["comments"]; !ok {
				t.Errorf("PATCH without comments: %s", r.Body)
			}
		}
	}
	if posts != 2 || patches != 2 {
		t.Fatalf("saw %d POSTs and %d PATCHes, want 2 and 2", posts, patches)
	}

	// Answers: the create and patch answers were recorded by the simulator's own responses;
	// fetch the same objects and check detail and list answers against both versions.
	for _, c := range []struct {
		spec    map[string]any
		version string
	}{{old, "4.2.2"}, {cur, "4.7"}} {
		ch := newChecker(c.spec, false)
		entry := ch.schema("JournalEntry")
		for _, e := range ch.check(entry, decode(t, answers["detail"]), "detail") {
			t.Errorf("%s JournalEntry: %s", c.version, e)
		}
		list := decode(t, answers["list"]).(map[string]any)
		if c.version == "4.2.2" {
			for _, e := range ch.check(ch.schema("PaginatedJournalEntryList"), list, "list") {
				t.Errorf("4.2.2 PaginatedJournalEntryList: %s", e)
			}
		}
		for i, item := range list["results"].([]any) {
			for _, e := range ch.check(entry, item, fmt.Sprintf("list[%d]", i)) {
				t.Errorf("%s JournalEntry: %s", c.version, e)
			}
			if ot := item.(map[string]any)["assigned_object_type"].(string); !objectTypeForm.MatchString(ot) {
				t.Errorf("answer assigned_object_type %q is not app_label.model", ot)
			}
		}
	}
}

// TestContractAnswersOfWrites checks the simulator's 201 and PATCH answers themselves.
func TestContractAnswersOfWrites(t *testing.T) {
	t.Parallel()
	specs := []map[string]any{specNumbers(t, loadSpec(t, spec422)), specNumbers(t, loadSpec(t, spec47))}
	sim := simnetbox.New(simnetbox.Options{Scenario: simnetbox.ScenarioDemo})
	srv := &recordingAnswers{next: sim.Handler()}
	ts := newHTTPTest(t, srv)
	c := newClient(t, ts, simnetbox.TokenV1, 2*time.Second)
	ref, err := c.CreateJournalEntry(context.Background(), netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 2, Kind: netbox.KindWarning, Comments: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateJournalEntry(context.Background(), ref.ID, netbox.KindDanger, "y"); err != nil {
		t.Fatal(err)
	}
	bodies := srv.all()
	if len(bodies) != 2 {
		t.Fatalf("%d answers", len(bodies))
	}
	for _, spec := range specs {
		ch := newChecker(spec, false)
		for i, b := range bodies {
			for _, e := range ch.check(ch.schema("JournalEntry"), decode(t, b), fmt.Sprintf("answer%d", i)) {
				t.Errorf("%v: %s", spec["info"].(map[string]any)["version"], e)
			}
		}
	}
}

// TestContractKindsAndAuth checks the Kind constants against the spec's kind enum and the auth
// header prefixes against the security scheme.
func TestContractKindsAndAuth(t *testing.T) {
	t.Parallel()
	for _, name := range []string{spec422, spec47} {
		spec := loadSpec(t, name)
		ch := newChecker(spec, true)
		req := ch.schema("WritableJournalEntryRequest")
		if req == nil {
			req = ch.schema("JournalEntryRequest")
		}
		enum := req["properties"].(map[string]any)["kind"].(map[string]any)["enum"].([]any)
		var got []string
		for _, v := range enum {
			got = append(got, v.(string))
			if !netbox.Kind(v.(string)).Valid() {
				t.Errorf("%s: kind %v is not a valid netbox.Kind", name, v)
			}
		}
		want := []string{string(netbox.KindInfo), string(netbox.KindSuccess), string(netbox.KindWarning), string(netbox.KindDanger)}
		if !slices.Equal(got, want) {
			t.Errorf("%s: kind enum %v, want %v", name, got, want)
		}
		if netbox.Kind("fatal").Valid() {
			t.Error("Kind.Valid accepts a kind outside the enum")
		}
		comps := spec["components"].(map[string]any)
		auth := comps["securitySchemes"].(map[string]any)["tokenAuth"].(map[string]any)
		if auth["in"] != "header" || auth["name"] != "Authorization" {
			t.Errorf("%s: tokenAuth = %v", name, auth)
		}
		desc, _ := auth["description"].(string)
		if !strings.Contains(desc, "Token") {
			t.Errorf("%s: tokenAuth does not describe the Token prefix: %q", name, desc)
		}
		if name == spec47 && !strings.Contains(desc, "Bearer") {
			t.Errorf("%s: tokenAuth does not describe the Bearer prefix: %q", name, desc)
		}
	}
}

// withoutRequired returns s without its required list (a PATCH may send any subset).
func withoutRequired(s map[string]any) map[string]any {
	out := make(map[string]any, len(s))
	for k, v := range s {
		if k != "required" {
			out[k] = v
		}
	}
	return out
}
