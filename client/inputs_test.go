package client_test

import (
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/client"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/clientgen"
)

// TestInputsMatchPipelineAndAsyncAPI pins the three descriptions of every verb's data to each
// other: the fields the pipeline's Decode accepts (its validation, through Registry.Check),
// the JSON fields of the client's typed input, and the properties of the verb's data schema
// in docs/asyncapi.yaml, nested fields included. The schema names what the other two are
// compared with: sample data naming every schema field (one per shape of a choice) must be
// read by Decode without an undeclared field, and the fields Decode declares reading them
// must be the schema's.
func TestInputsMatchPipelineAndAsyncAPI(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/asyncapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := clientgen.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	verbs, err := doc.Verbs()
	if err != nil {
		t.Fatal(err)
	}
	reg := handlers.NewRegistry(handlers.Builtin()...)
	var docVerbs []string
	for _, v := range verbs {
		docVerbs = append(docVerbs, v.Name)
	}
	sameList(t, "verbs: pipeline vs docs/asyncapi.yaml", reg.Names(), docVerbs)
	sameList(t, "verbs: client.Verbs vs docs/asyncapi.yaml (run go generate ./client)", client.Verbs(), docVerbs)
	for _, v := range verbs {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			schema := doc.Paths(v)
			in, ok := client.NewInput(v.Name)
			if !ok {
				t.Fatalf("client.NewInput(%q): no typed input (run go generate ./client)", v.Name)
			}
			if in.VerbName() != v.Name {
				t.Errorf("%T.VerbName() = %q", in, in.VerbName())
			}
			sameList(t, "client input "+reflect.TypeOf(in).Elem().Name()+" vs schema", jsonPaths(reflect.TypeOf(in).Elem(), ""), schema)
			declared := map[string]bool{}
			for _, sample := range doc.Samples(v) {
				res, err := reg.Check(v.Name, sample)
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				for _, u := range res.Undeclared {
					t.Errorf("the schema's field %q is not accepted by the pipeline (data %s)", u.Name, sample)
				}
				if res.UnnamedUndeclared {
					t.Errorf("a nested field of the schema is not accepted by the pipeline (data %s)", sample)
				}
				for _, p := range res.DeclaredPaths {
					declared[p] = true
				}
			}
			sameList(t, "pipeline Decode vs schema", keys(declared), schema)
		})
	}
}

// jsonPaths returns the JSON field paths of typ (parent.child for nested structs, through
// pointers and slices), sorted.
func jsonPaths(typ reflect.Type, prefix string) []string {
	var out []string
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		out = append(out, prefix+name)
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			out = append(out, jsonPaths(ft, prefix+name+".")...)
		}
	}
	sort.Strings(out)
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// sameList fails naming what is only in got and what is only in want.
func sameList(t *testing.T, what string, got, want []string) {
	t.Helper()
	var extra, missing []string
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	if len(extra) > 0 || len(missing) > 0 || len(want) == 0 && len(got) == 0 && strings.HasPrefix(what, "verbs") {
		t.Errorf("%s: only in the first %v, only in the schema %v", what, extra, missing)
	}
}
