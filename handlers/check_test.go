package handlers

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
)

// TestRegistryCheckNestedPaths: DeclaredPaths names the fields read inside nested objects and
// a list's objects as parent.child.
func TestRegistryCheckNestedPaths(t *testing.T) {
	t.Parallel()
	r := NewRegistry(Builtin()...)
	got, err := r.Check("vm.provision", json.RawMessage(`{"source":{"image":{"url":"x","checksum":"x"}},"extra_networks":[{"index":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"source", "source.image", "source.image.checksum_algorithm", "source.template_vmid", "extra_networks.bridge", "new_vmid"} {
		if !slices.Contains(got.DeclaredPaths, want) {
			t.Errorf("DeclaredPaths %v lacks %s", got.DeclaredPaths, want)
		}
	}
	if slices.Contains(got.Declared, "source.image") {
		t.Errorf("Declared %v names a nested field", got.Declared)
	}
}

// TestRegistryCheck pins Registry.Check: it names what the pipeline's validation finds
// (failed declared fields, missing ones, undeclared names with the closest declared one),
// and its verdict is the pipeline's own (prepare answers 422 exactly when Check is not valid).
func TestRegistryCheck(t *testing.T) {
	t.Parallel()
	r := NewRegistry(Builtin()...)
	cases := []struct {
		name, verb, data string
		want             CheckResult
	}{
		{"valid", "vm.stop", `{"vm":"web1","force":true}`,
			CheckResult{Declared: []string{"force", "vm"}, DeclaredPaths: []string{"force", "vm"}}},
		{"did you mean", "vm.stop", `{"vm":"web1","forse":true}`,
			CheckResult{Declared: []string{"force", "vm"}, Undeclared: []Undeclared{{Name: "forse", Closest: "force"}}}},
		{"transposition", "vm.reboot", `{"vm":100,"froce":true}`,
			CheckResult{Declared: []string{"force", "vm"}, Undeclared: []Undeclared{{Name: "froce", Closest: "force"}}}},
		{"nothing close", "vm.start", `{"vm":100,"force":true,"zzzzzzzz":1}`,
			CheckResult{Declared: []string{"vm"}, Undeclared: []Undeclared{{Name: "force"}, {Name: "zzzzzzzz"}}}},
		{"wrong type", "vm.stop", `{"vm":"web1","force":"yes"}`,
			CheckResult{Declared: []string{"force", "vm"}, Failed: []string{"force"}}},
		{"missing required", "vm.stop", `{"force":true}`,
			CheckResult{Declared: []string{"force", "vm"}, Failed: []string{"vm"}, Absent: []string{"vm"}}},
		{"not an object", "vm.stop", `[1]`, CheckResult{NotObject: true}},
		{"nested undeclared", "vm.provision", `{"new_vmid":200,"new_name":"a","target_node":"pve1","source":{"template_vmid":9000,"templat":1}}`,
			CheckResult{UnnamedUndeclared: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := r.Check(tc.verb, json.RawMessage(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if !got.NeedsEndpoint {
				t.Error("NeedsEndpoint false: the gate refuses every verb without endpointid")
			}
			if tc.want.Declared == nil { // not pinned for these
				got.Declared = nil
			}
			if tc.want.DeclaredPaths == nil {
				got.DeclaredPaths = nil
			}
			tc.want.NeedsEndpoint = true
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Check = %+v\nwant    %+v", got, tc.want)
			}
			v, _ := r.Lookup(tc.verb)
			_, out := v.prepare(json.RawMessage(tc.data))
			if (out == nil) != got.Valid() {
				t.Errorf("pipeline outcome %+v, Check valid %v", out, got.Valid())
			}
			if out != nil && !slices.Equal(out.Fields, got.Failed) {
				t.Errorf("pipeline fields %v, Check failed %v", out.Fields, got.Failed)
			}
		})
	}
}

// TestRegistryCheckUnknownVerb pins the unknown verb error: ErrUnknownVerb with the closest
// registered names.
func TestRegistryCheckUnknownVerb(t *testing.T) {
	t.Parallel()
	r := NewRegistry(Builtin()...)
	cases := []struct {
		verb string
		want []string
	}{
		{"vm.stpo", []string{"vm.stop"}},
		{"vm.strat", []string{"vm.start"}},
		{"stop", []string{"vm.stop"}},
		{"snapshot.create", []string{"vm.snapshot.create"}},
		{"frobnicate.everything", nil},
	}
	for _, tc := range cases {
		_, err := r.Check(tc.verb, nil)
		var uv *UnknownVerbError
		if !errors.Is(err, ErrUnknownVerb) || !errors.As(err, &uv) {
			t.Fatalf("Check(%q) error %v, want ErrUnknownVerb", tc.verb, err)
		}
		if !reflect.DeepEqual(uv.Closest, tc.want) || uv.Verb != tc.verb {
			t.Errorf("Check(%q) closest %v, want %v", tc.verb, uv.Closest, tc.want)
		}
	}
}

// TestEveryBuiltinIsChecked pins that every builtin verb names its undeclared fields (it is
// read through its Decode, not only through the pipeline's nameless answer).
func TestEveryBuiltinIsChecked(t *testing.T) {
	t.Parallel()
	for _, v := range Builtin() {
		if _, ok := v.(checker); !ok {
			t.Errorf("%s: Check cannot name its fields", v.VerbName())
		}
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"force", "force", 0}, {"forse", "force", 1}, {"froce", "force", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
