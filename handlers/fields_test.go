package handlers

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/redact"
)

// mustFields is newFields on a document that must be accepted.
func mustFields(t *testing.T, data string) *Fields {
	t.Helper()
	f, err := newFields(json.RawMessage(data))
	if err != nil {
		t.Fatalf("newFields(%s): %v", data, err)
	}
	return f
}

func lowerOnly(s string) bool { return s == strings.ToLower(s) }

func nonEmptyLower(s string) bool { return s != "" && lowerOnly(s) }

func TestNewFieldsRejectsNonObjects(t *testing.T) {
	t.Parallel()
	for _, data := range []string{`[]`, `[{"a":1}]`, `"str"`, `42`, `true`, `{`, `{"a":}`, `{"a":1}x`} {
		t.Run(data, func(t *testing.T) {
			t.Parallel()
			f, err := newFields(json.RawMessage(data))
			if !errors.Is(err, errNotObject) {
				t.Errorf("newFields(%s) error = %v, want errNotObject", data, err)
			}
			if f != nil {
				t.Errorf("newFields(%s) returned fields %v with an error", data, f)
			}
		})
	}
}

func TestNewFieldsEmptyData(t *testing.T) {
	t.Parallel()
	// Absent or null data is an empty object: required fields then fail by name.
	for _, data := range []string{``, `  `, `null`, ` null `, `{}`} {
		t.Run(data, func(t *testing.T) {
			t.Parallel()
			f := mustFields(t, data)
			if f.Has("storage") {
				t.Error("Has on empty data = true")
			}
			if got := f.String("storage", true, nil); got != "" {
				t.Errorf("String = %q, want empty", got)
			}
			out := f.outcome()
			if out == nil || !reflect.DeepEqual(out.Fields, []string{"storage"}) || out.Detail != "" {
				t.Errorf("outcome = %+v, want fields [storage], no detail", out)
			}
		})
	}
}

func TestFieldsString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		data     string
		required bool
		valid    func(string) bool
		want     string
		fail     bool
	}{
		{"required present", `{"s":"abc"}`, true, nil, "abc", false},
		{"required absent", `{}`, true, nil, "", true},
		{"required null", `{"s":null}`, true, nil, "", true},
		{"required empty", `{"s":""}`, true, nil, "", true},
		{"optional absent", `{}`, false, nil, "", false},
		{"optional null", `{"s":null}`, false, nil, "", false},
		{"optional empty", `{"s":""}`, false, nil, "", false},
		{"rule passes", `{"s":"abc"}`, true, lowerOnly, "abc", false},
		{"rule fails", `{"s":"ABC"}`, true, lowerOnly, "", true},
		{"optional rule fails", `{"s":"ABC"}`, false, lowerOnly, "", true},
		{"number is wrong type", `{"s":12}`, false, nil, "", true},
		{"bool is wrong type", `{"s":true}`, true, nil, "", true},
		{"object is wrong type", `{"s":{"a":"b"}}`, true, nil, "", true},
		{"list is wrong type", `{"s":["a"]}`, true, nil, "", true},
		{"placeholder in a non-secret field is a value", `{"s":"[redacted]"}`, true, nil, "[redacted]", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := mustFields(t, tt.data)
			got := f.String("s", tt.required, tt.valid)
			if got != tt.want || f.Failed("s") != tt.fail {
				t.Errorf("String = %q (failed %v), want %q (failed %v)", got, f.Failed("s"), tt.want, tt.fail)
			}
			if !f.declared["s"] {
				t.Error("String did not declare its field")
			}
		})
	}
}

func TestFieldsSecretPlaceholder(t *testing.T) {
	t.Parallel()
	// A dead letter replayed as stored carries "[redacted]" in its secret fields: refused.
	for _, name := range []string{"password", "token_secret", "cloud_init.password"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, _ := json.Marshal(map[string]string{name: redact.Placeholder})
			f := mustFields(t, string(data))
			if got := f.String(name, false, nil); got != "" || !f.Failed(name) {
				t.Errorf("String(%s = placeholder) = %q, failed %v; want a failure", name, got, f.Failed(name))
			}
		})
	}
	f := mustFields(t, `{"password":"real-secret"}`)
	if got := f.String("password", true, nil); got != "real-secret" || f.Failed("password") {
		t.Errorf("a real secret: got %q, failed %v", got, f.Failed("password"))
	}
}

func TestFieldsInt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		data     string
		required bool
		want     int64
		fail     bool
	}{
		{"absent gives default", `{}`, false, 8007, false},
		{"null gives default", `{"n":null}`, false, 8007, false},
		{"required absent", `{}`, true, 8007, true},
		{"in range", `{"n":443}`, false, 443, false},
		{"min", `{"n":1}`, false, 1, false},
		{"max", `{"n":65535}`, false, 65535, false},
		{"below min", `{"n":0}`, false, 8007, true},
		{"negative", `{"n":-1}`, false, 8007, true},
		{"above max", `{"n":65536}`, false, 8007, true},
		{"quoted number is wrong type", `{"n":"8007"}`, false, 8007, true},
		{"quoted number with spaces", `{"n": "8007" }`, false, 8007, true},
		{"fraction", `{"n":8007.5}`, false, 8007, true},
		{"integral float", `{"n":8007.0}`, false, 8007, true},
		{"exponent", `{"n":8e3}`, false, 8007, true},
		{"overflow", `{"n":99999999999999999999}`, false, 8007, true},
		{"bool", `{"n":true}`, false, 8007, true},
		{"list", `{"n":[1]}`, false, 8007, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := mustFields(t, tt.data)
			got := f.Int("n", tt.required, 8007, 1, 65535)
			if got != tt.want || f.Failed("n") != tt.fail {
				t.Errorf("Int = %d (failed %v), want %d (failed %v)", got, f.Failed("n"), tt.want, tt.fail)
			}
		})
	}
}

func TestFieldsBool(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
		def  bool
		want bool
		fail bool
	}{
		{"absent gives default true", `{}`, true, true, false},
		{"absent gives default false", `{}`, false, false, false},
		{"null gives default", `{"b":null}`, true, true, false},
		{"false", `{"b":false}`, true, false, false},
		{"true", `{"b":true}`, false, true, false},
		{"string is wrong type", `{"b":"true"}`, false, false, true},
		{"number is wrong type", `{"b":1}`, true, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := mustFields(t, tt.data)
			got := f.Bool("b", tt.def)
			if got != tt.want || f.Failed("b") != tt.fail {
				t.Errorf("Bool = %v (failed %v), want %v (failed %v)", got, f.Failed("b"), tt.want, tt.fail)
			}
		})
	}
}

func TestFieldsStrings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		data     string
		required bool
		maxItems int
		valid    func(string) bool
		want     []string
		fail     bool
	}{
		{"optional absent", `{}`, false, 0, nil, nil, false},
		{"optional null", `{"l":null}`, false, 0, nil, nil, false},
		{"required absent", `{}`, true, 0, nil, nil, true},
		{"required empty", `{"l":[]}`, true, 0, nil, nil, true},
		{"optional empty", `{"l":[]}`, false, 0, nil, []string{}, false},
		{"list", `{"l":["a","b"]}`, true, 0, nil, []string{"a", "b"}, false},
		{"at maxItems", `{"l":["a","b"]}`, false, 2, nil, []string{"a", "b"}, false},
		{"over maxItems", `{"l":["a","b","c"]}`, false, 2, nil, nil, true},
		{"no limit", `{"l":["a","b","c"]}`, false, 0, nil, []string{"a", "b", "c"}, false},
		{"rule passes", `{"l":["a","b"]}`, false, 0, lowerOnly, []string{"a", "b"}, false},
		{"rule fails on one item", `{"l":["a","B"]}`, false, 0, lowerOnly, nil, true},
		{"string is wrong type", `{"l":"a"}`, false, 0, nil, nil, true},
		{"numbers are wrong type", `{"l":[1,2]}`, false, 0, nil, nil, true},
		// A null item decodes as "": it is refused by any rule that refuses "" (as node names do).
		{"null item fails a non-empty rule", `{"l":["a",null]}`, false, 0, nonEmptyLower, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := mustFields(t, tt.data)
			got := f.Strings("l", tt.required, tt.maxItems, tt.valid)
			if !reflect.DeepEqual(got, tt.want) || f.Failed("l") != tt.fail {
				t.Errorf("Strings = %#v (failed %v), want %#v (failed %v)", got, f.Failed("l"), tt.want, tt.fail)
			}
		})
	}
}

func TestFieldsRaw(t *testing.T) {
	t.Parallel()
	f := mustFields(t, `{"a":{"x":1},"b":null}`)
	if got := string(f.Raw("a")); got != `{"x":1}` {
		t.Errorf("Raw(a) = %s", got)
	}
	if got := f.Raw("b"); got != nil {
		t.Errorf("Raw(null) = %s, want nil", got)
	}
	if got := f.Raw("c"); got != nil {
		t.Errorf("Raw(absent) = %s, want nil", got)
	}
	if out := f.outcome(); out != nil {
		t.Errorf("every field declared by Raw, outcome = %+v, want nil", out)
	}
}

func TestFieldsOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		data       string
		read       func(f *Fields)
		wantNil    bool
		wantFields []string
		wantDetail string
	}{
		{
			name:    "nothing failing",
			data:    `{"a":"x","b":1}`,
			read:    func(f *Fields) { f.String("a", true, nil); f.Int("b", true, 0, 0, 9) },
			wantNil: true,
		},
		{
			name:    "optional absent",
			data:    `{}`,
			read:    func(f *Fields) { f.String("a", false, nil); f.Bool("c", false) },
			wantNil: true,
		},
		{
			name:       "failures sorted",
			data:       `{"zeta":1,"alpha":2,"mid":3}`,
			read:       func(f *Fields) { f.String("zeta", true, nil); f.String("mid", true, nil); f.String("alpha", true, nil) },
			wantFields: []string{"alpha", "mid", "zeta"},
		},
		{
			name:       "undeclared only",
			data:       `{"a":"x","sneaky_password":"hunter2"}`,
			read:       func(f *Fields) { f.String("a", true, nil) },
			wantFields: nil,
			wantDetail: "undeclared fields present",
		},
		{
			name:       "failure and undeclared",
			data:       `{"a":5,"extra":"hunter2"}`,
			read:       func(f *Fields) { f.String("a", true, nil) },
			wantFields: []string{"a"},
			wantDetail: "undeclared fields present",
		},
		{
			name:       "explicit Fail",
			data:       `{"a":"x"}`,
			read:       func(f *Fields) { f.String("a", true, nil); f.Fail("b") },
			wantFields: []string{"b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := mustFields(t, tt.data)
			tt.read(f)
			out := f.outcome()
			if tt.wantNil {
				if out != nil {
					t.Fatalf("outcome = %+v, want nil", out)
				}
				return
			}
			if out == nil {
				t.Fatal("outcome = nil, want 422")
			}
			if out.Status != 422 || out.Result != ResultRefused || out.Reason != ReasonInvalidBody {
				t.Errorf("outcome = %d %s %s, want 422 refused invalid_body", out.Status, out.Result, out.Reason)
			}
			// Compared by content: an empty list and nil both marshal as an absent `fields`.
			if len(out.Fields) != len(tt.wantFields) || (len(tt.wantFields) > 0 && !reflect.DeepEqual(out.Fields, tt.wantFields)) {
				t.Errorf("fields = %#v, want %#v", out.Fields, tt.wantFields)
			}
			if out.Detail != tt.wantDetail {
				t.Errorf("detail = %q, want %q", out.Detail, tt.wantDetail)
			}
			if strings.Contains(out.Detail, "hunter2") || strings.Contains(out.Detail, "sneaky") || strings.Contains(out.Detail, "extra") {
				t.Errorf("detail echoes a name or value: %q", out.Detail)
			}
		})
	}
}
