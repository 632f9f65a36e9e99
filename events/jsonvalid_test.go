package events

import (
	"encoding/json"
	"testing"
)

// validJSONCases are documents on which JSON validators commonly disagree.
var validJSONCases = []string{
	`{}`, ` [1, 2.5e3, -0, true, null] `, `{"a":1,"a":2}`, "\"\xff\"", `"\ud800"`, `"\udc00\ud800"`,
	`{"a":"\u0000"}`, "\"\x01\"", "\xef\xbb\xbf{}", `1 2`, ``, ` `, `nul`, `01`, `1.`, `-`, `{"a" 1}`,
	`[1,]`, `{"a":1,}`, `"\x"`, `"\u12"`, `1e400`, `{"a":{"b":[{"c":"d"}]}}`, "\"\t\"", `"\/"`,
}

func TestValidJSONIsJSONValid(t *testing.T) {
	t.Parallel()
	for _, doc := range validJSONCases {
		if got, want := validJSON([]byte(doc)), json.Valid([]byte(doc)); got != want {
			t.Errorf("validJSON(%q) = %v, json.Valid says %v", doc, got, want)
		}
	}
}

// FuzzValidJSON checks validJSON against encoding/json's Valid on arbitrary input.
func FuzzValidJSON(f *testing.F) {
	for _, doc := range validJSONCases {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if got, want := validJSON(doc), json.Valid(doc); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", doc, got, want)
		}
	})
}
