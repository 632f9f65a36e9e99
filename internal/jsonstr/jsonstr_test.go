package jsonstr

import (
	"encoding/json"
	"testing"
)

// TestDecodeMatchesUnmarshal: Decode decodes exactly as json.Unmarshal into a string does, on
// its fast path (plain ASCII) and off it (escapes, non-ASCII, invalid UTF-8, wrong types).
func TestDecodeMatchesUnmarshal(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`"plain"`, `""`, `"with space ~!"`, `"a\"b"`, `"a\\b"`, `"tab\tx"`, `"\u00e9t\u00e9"`,
		`"été"`, "\"bad \xff utf8\"", "\"raw\x01control\"", `"unterminated`, `"`, `x"`, `42`, `null`,
		`["a"]`, `{"a":"b"}`, `"a" `, `"a""b"`, ``,
	} {
		t.Run(raw, func(t *testing.T) { checkDecode(t, []byte(raw)) })
	}
}

// FuzzDecode: Decode agrees with json.Unmarshal on any input.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{`"plain"`, `"a\"b"`, `"\u00e9"`, "\"\xff\"", `"a""b"`, `null`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkDecode(t, raw) })
}

func checkDecode(t *testing.T, raw []byte) {
	t.Helper()
	var want string
	wantErr := json.Unmarshal(raw, &want)
	got, ok := Decode(raw)
	if ok != (wantErr == nil) || got != want {
		t.Errorf("Decode(%q) = %q, %v; json.Unmarshal: %q, %v", raw, got, ok, want, wantErr)
	}
}
