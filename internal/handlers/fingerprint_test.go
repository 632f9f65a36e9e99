package handlers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"testing"

	"github.com/proxbus/proxbus/internal/redact"
)

// fingerprintByRoundTrip is the definition fingerprint must match byte for byte: the form
// every fingerprint stored before the one-pass canonicalisation was computed with.
func fingerprintByRoundTrip(in any) (string, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return "", err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	canon, err := json.Marshal(redact.Strip(v))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// assertSameFingerprint fails unless fingerprint and its definition agree on in (both
// failing counts as agreeing).
func assertSameFingerprint(t *testing.T, in any) {
	t.Helper()
	got, gerr := fingerprint(in)
	want, werr := fingerprintByRoundTrip(in)
	if (gerr != nil) != (werr != nil) {
		t.Fatalf("fingerprint(%#v): error %v, definition's error %v", in, gerr, werr)
	}
	if got != want {
		t.Fatalf("fingerprint(%#v) = %s, definition gives %s", in, got, want)
	}
}

func TestFingerprintMatchesRoundTrip(t *testing.T) {
	t.Parallel()
	type nested struct {
		Token  string  `json:"token"`
		B      int     `json:"b"`
		Ratio  float64 `json:"ratio"`
		Hidden string  `json:"-"`
	}
	type input struct {
		Zed      string            `json:"zed"`
		Alpha    string            `json:"alpha"`
		Password string            `json:"password"`
		Port     int64             `json:"port"`
		Big      uint64            `json:"big"`
		Neg      int               `json:"neg"`
		Nodes    []string          `json:"nodes,omitempty"`
		Nested   nested            `json:"nested"`
		List     []nested          `json:"list"`
		Labels   map[string]string `json:"labels,omitempty"`
		Raw      json.RawMessage   `json:"raw,omitempty"`
		Num      json.Number       `json:"num,omitempty"`
		Ptr      *int              `json:"ptr"`
		Flag     bool              `json:"flag"`
	}
	seven := 7
	cases := map[string]any{
		"pbs input": PBSStorageInput{Storage: "b1", Server: "pbs.example.net", Port: 8007, Datastore: "store1",
			Username: "backup@pbs!proxbus", Password: "secret", Fingerprint: benchFingerprint, Nodes: []string{"pve2", "pve1"}},
		"zero struct": input{},
		"everything": input{
			Zed: "z", Alpha: "<a&b>\u2028\u2029\"\\\n\t\x01é😀", Password: "p", Port: 8007, Big: math.MaxUint64,
			Neg: -42, Nodes: []string{"b", "a"}, Nested: nested{Token: "t", B: 1, Ratio: 0.1},
			List:   []nested{{B: 2, Ratio: 1e21}, {B: 3, Ratio: 1e-7}, {Ratio: math.Copysign(0, -1)}},
			Labels: map[string]string{"z": "1", "a&b": "2", "é": "3", "API_TOKEN": "x", "PassWord2": "y"},
			Raw:    json.RawMessage(`{"b": [1.0, 2e3, -0, 123456789012345678], "a": {"secret": 1, "x": null}}`),
			Num:    "1.50", Ptr: &seven, Flag: true,
		},
		"invalid utf-8":     input{Alpha: "a\xffb", Labels: map[string]string{"k\xfe": "v"}},
		"fifteen digits":    map[string]any{"a": 999999999999999, "b": -999999999999999},
		"sixteen digits":    map[string]any{"a": int64(9999999999999999), "b": int64(-1234567890123456789)},
		"top-level array":   []any{map[string]any{"token": 1, "b": 2}, "s", 1.5, nil, true},
		"top-level string":  "plain",
		"top-level number":  12345678901234567,
		"empty containers":  map[string]any{"o": map[string]any{}, "a": []any{}},
		"only secrets":      map[string]any{"password": "x", "secret_key": "y"},
		"unencodable value": map[string]any{"f": math.Inf(1)},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			assertSameFingerprint(t, in)
		})
	}
}

// TestFingerprintIsStable pins the fingerprint of one storage.pbs.create input: fingerprints
// are stored with Idempotency-Key records, so a change of the form breaks every stored one.
func TestFingerprintIsStable(t *testing.T) {
	t.Parallel()
	in := PBSStorageInput{Storage: "b1", Server: "pbs.example.net", Port: 8007, Datastore: "store1",
		Username: "backup@pbs!proxbus", Password: "secret", Fingerprint: benchFingerprint}
	got, err := fingerprint(in)
	if err != nil {
		t.Fatal(err)
	}
	const want = "00ad291d44feaccf9ceccb627094bb888caf815076b896d420f39d0108a7b749"
	if got != want {
		t.Errorf("fingerprint = %s, want %s", got, want)
	}
}

// FuzzFingerprint checks fingerprint against its definition on arbitrary JSON documents.
func FuzzFingerprint(f *testing.F) {
	for _, seed := range []string{
		`{"b":1,"a":[1.5,"x",{"token":"t","z":null}],"password":"p"}`,
		`[1e400]`, `{"a":"\ufffd","b":"<>&"}`, `{"a":1,"a":2}`, `-0`, `123456789012345678`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var v any
		if json.Unmarshal(doc, &v) != nil {
			return
		}
		assertSameFingerprint(t, v)
		assertSameFingerprint(t, json.RawMessage(doc))
	})
}
