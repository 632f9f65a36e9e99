package events

import (
	"encoding/json"
	"testing"

	"github.com/proxbus/proxbus/internal/redact"
)

// hasSecretKeyByDecoding is the reference hasSecretKey must agree with: the document decoded
// into maps and slices, every key at any depth tested with redact.IsSecretName.
func hasSecretKeyByDecoding(doc []byte) bool {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch t := v.(type) {
		case map[string]any:
			for k, val := range t {
				if redact.IsSecretName(k) || walk(val) {
					return true
				}
			}
		case []any:
			for _, val := range t {
				if walk(val) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

// secretKeyCases are result outputs with and without secret-named members.
var secretKeyCases = []struct {
	doc  string
	want bool
}{
	{`{"storage":"pbs1","type":"pbs"}`, false},
	{`{"vm":101,"password":"hunter22"}`, true},
	{`{"cloud_init":{"Password":"x"},"vmid":100}`, true},
	{`[{"a":1},{"b":[{"api_token":"x"}]}]`, true},
	{`{"note":"the password is not a name here","secret?":0}`, true},
	{`{"note":"the password is only a value"}`, false},
	{`["password","secret","token"]`, false},
	{`{"pass\u0077ord":"x"}`, true}, // escaped: only the decoded name says password
	{`{"a\"secret":1}`, true},
	{`{"a":1,"a":{"token":2}}`, true}, // repeated names are accepted, as json.Unmarshal does
	{`{"to\u212aen":"x"}`, true},      // K (Kelvin) lower-cases to k
	{`{"pa\u017fsword":"x"}`, false},  // ſ does not lower-case to s
	{`"password"`, false},
	{`42`, false},
	{`{"password":`, false}, // not JSON
	{``, false},
	{`{"a":1} {"password":2}`, false}, // two documents are not JSON
}

// TestHasSecretKey pins which outputs are redacted before they are published.
func TestHasSecretKey(t *testing.T) {
	t.Parallel()
	for _, tc := range secretKeyCases {
		if got := hasSecretKey([]byte(tc.doc)); got != tc.want {
			t.Errorf("hasSecretKey(%s) = %v, want %v", tc.doc, got, tc.want)
		}
		if ref := hasSecretKeyByDecoding([]byte(tc.doc)); ref != tc.want {
			t.Errorf("reference(%s) = %v, want %v: the case is wrong", tc.doc, ref, tc.want)
		}
	}
}

// FuzzHasSecretKey checks the streaming hasSecretKey against decoding the whole document.
func FuzzHasSecretKey(f *testing.F) {
	for _, tc := range secretKeyCases {
		f.Add([]byte(tc.doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if got, want := hasSecretKey(doc), hasSecretKeyByDecoding(doc); got != want {
			t.Fatalf("hasSecretKey(%q) = %v, decoding says %v", doc, got, want)
		}
	})
}

// BenchmarkHasSecretKey measures the check on a typical result output (no secret names) and
// on one that has to be read.
func BenchmarkHasSecretKey(b *testing.B) {
	for _, bc := range []struct{ name, doc string }{
		{"plain", `{"storage":"pbs1","type":"pbs","server":"10.0.0.5","port":8007,"datastore":"store1","nodes":["pve1","pve2"],"content":"backup"}`},
		{"secret", `{"vmid":101,"cloud_init":{"user":"ops","password":"hunter22"},"nodes":["pve1"]}`},
	} {
		doc := []byte(bc.doc)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				hasSecretKey(doc)
			}
		})
	}
}
