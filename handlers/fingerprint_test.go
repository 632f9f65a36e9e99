package handlers

import (
	"encoding/json"
	"math"
	"testing"
)

// fingerprintNested and fingerprintInput exercise struct encoding: field order, omitempty,
// json:"-", raw messages and numbers.
type fingerprintNested struct {
	Token  string  `json:"token"`
	B      int     `json:"b"`
	Ratio  float64 `json:"ratio"`
	Hidden string  `json:"-"`
}

type fingerprintInput struct {
	Zed      string              `json:"zed"`
	Alpha    string              `json:"alpha"`
	Password string              `json:"password"`
	Port     int64               `json:"port"`
	Big      uint64              `json:"big"`
	Neg      int                 `json:"neg"`
	Nodes    []string            `json:"nodes,omitempty"`
	Nested   fingerprintNested   `json:"nested"`
	List     []fingerprintNested `json:"list"`
	Labels   map[string]string   `json:"labels,omitempty"`
	Raw      json.RawMessage     `json:"raw,omitempty"`
	Num      json.Number         `json:"num,omitempty"`
	Ptr      *int                `json:"ptr"`
	Flag     bool                `json:"flag"`
}

// TestFingerprintIsStable pins the fingerprints of representative inputs. Fingerprints are
// stored with Idempotency-Key records, so a change of any of them breaks stored records: a
// redelivered command would be refused as idempotency_key_reused. want "" means an error.
func TestFingerprintIsStable(t *testing.T) {
	t.Parallel()
	seven := 7
	pbs := PBSStorageInput{Storage: "b1", Server: "pbs.example.net", Port: 8007, Datastore: "store1",
		Username: "backup@pbs!proxbus", Password: "secret", Fingerprint: benchFingerprint}
	pbsNodes, pbsOther := pbs, pbs
	pbsNodes.Nodes = []string{"pve2", "pve1"}
	pbsOther.Nodes, pbsOther.Password = pbsNodes.Nodes, "other"
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"key order map", map[string]any{"b": 1, "a": 2}, "d3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772"},
		{"key order raw", json.RawMessage(`{"b":1,"a":2}`), "d3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772"},
		{"key order raw spaced", json.RawMessage(` { "a" : 2 , "b" : 1 } `), "d3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772"},
		{"nested", json.RawMessage(`{"z":{"y":{"x":[1,{"w":true,"v":null}]}},"a":"s","m":{}}`),
			"58df03b40aedacfcfaa52108343d86f4e5c4c149e456f0df94795fefcaee84b7"},
		{"numbers", json.RawMessage(`{"a":1.0,"b":1e3,"c":123456789012345678,"d":-0,"e":0.1,"f":1e21,"g":1e-7,` +
			`"h":9007199254740993,"i":-1.5E+2,"j":100000000000000000000000}`),
			"b0b653e214bb4dc32d41878c7e7ef69470cfdf2d5d58958e3aff5992d09ffbcd"},
		{"go numbers", map[string]any{"a": 1.0, "b": int64(math.MaxInt64), "c": uint64(math.MaxUint64),
			"d": math.Copysign(0, -1), "e": float32(0.1), "f": json.Number("1.50")},
			"fb263d4dc83de820be9d5f1bb00462e97ef805b4d62c1457921a44ba61c9c500"},
		{"fifteen digits", map[string]any{"a": 999999999999999, "b": -999999999999999},
			"dcf4d00c1c0a7c4ae70a02f1bf8061ac10205afb41f60d366987878f1d3d0aef"},
		{"sixteen digits", map[string]any{"a": int64(9999999999999999), "b": int64(-1234567890123456789)},
			"81492f21b112d63da1f30ef4106cd67d01bd03f2cd5ec05bbe62c0455b46dd6c"},
		{"unicode escapes", json.RawMessage(`{"\u00e9":"caf\u00e9","s":"\u2028<&>\"\\\/","e":"😀","k\u0041":"\ud83d\ude00","c":"\u0001\t\n"}`),
			"816ad4984099615cf7ab35cff7742a123d6bd38df610e924816c7c1beaab4bfe"},
		{"invalid utf-8", map[string]any{"a": "a\xffb", "k\xfe": "v"}, "2dfa4af03600f708500e52c119e3c1a015bd6eec7e5754dd878dbed61e03e294"},
		{"lone surrogate", json.RawMessage(`{"a":"\ud800","b":"x\udc00y"}`), "7cbb1b7fb9ac018e1efbc9b6fd6b46ef23c7b229715bef1a126ef982a50ad88a"},
		{"html in names", map[string]any{"a&b": 1, "<k>": 2, "é": 3}, "8abcaeaa7013218794cfc9f8747c4afddfa8660a85617e91fe518afa0cb35ce6"},
		{"duplicate names", json.RawMessage(`{"a":1,"a":{"b":2}}`), "6377e7d18f737adcad5a0930c5d8ce72150fffe1fa2dc1c65d9c5f81d52346f5"},
		{"secrets raw", json.RawMessage(`{"Password":"x","api_token":"y","nested":{"secret":1,"keep":2},` +
			`"list":[{"token":3,"k":4}],"pass\u0077ord":"z","to\u212aen":"k"}`),
			"8cfb1d8dc4ae7de74704e0e9981ff2f396309607f33f46611b94f2a142fa833b"},
		{"pbs input", pbs, "00ad291d44feaccf9ceccb627094bb888caf815076b896d420f39d0108a7b749"},
		{"pbs input with nodes", pbsNodes, "7f9deac4d2ba97b1295c9fa23eb2e080ce36415ef6aa9a2a5b87bc3f6e331ac5"},
		{"pbs input, other password", pbsOther, "7f9deac4d2ba97b1295c9fa23eb2e080ce36415ef6aa9a2a5b87bc3f6e331ac5"},
		{"zero struct", fingerprintInput{}, "8c340df729d805f364fa161e0d04316ff18f293f7d62b5ac458df675ba14dfbe"},
		{"everything", fingerprintInput{
			Zed: "z", Alpha: "<a&b>\u2028\u2029\"\\\n\t\x01é😀", Password: "p", Port: 8007, Big: math.MaxUint64,
			Neg: -42, Nodes: []string{"b", "a"}, Nested: fingerprintNested{Token: "t", B: 1, Ratio: 0.1},
			List:   []fingerprintNested{{B: 2, Ratio: 1e21}, {B: 3, Ratio: 1e-7}, {Ratio: math.Copysign(0, -1)}},
			Labels: map[string]string{"z": "1", "a&b": "2", "é": "3", "API_TOKEN": "x", "PassWord2": "y"},
			Raw:    json.RawMessage(`{"b": [1.0, 2e3, -0, 123456789012345678], "a": {"secret": 1, "x": null}}`),
			Num:    "1.50", Ptr: &seven, Flag: true,
		}, "075560019625605c23f493edceb92b614d1f193e0bdd56b78fac5e43720ff4ba"},
		{"top-level array", []any{map[string]any{"token": 1, "b": 2}, "s", 1.5, nil, true},
			"e6b4b2aa4e0df422d3fee0fd825e91c93e17fc73b32362a6d993e0e2e43e50d3"},
		{"top-level string", "plain", "945603a8f587786b463c3f94fce115c0fae88fac2728cc96ddf5981cf7f61741"},
		{"top-level number", 12345678901234567, "94f3b57b6fdf9bd5bba6b80cfc77dc9d3abf844c876fecaf0bb0c714cf7568c8"},
		{"top-level null", nil, "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b"},
		{"empty object", map[string]any{}, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
		{"only secrets", map[string]any{"password": "x", "secret_key": "y"}, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
		{"number beyond float64", json.RawMessage(`{"a":1e400}`), ""},
		{"unencodable", map[string]any{"f": math.Inf(1)}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := fingerprint(tc.in)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("fingerprint = %s, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("fingerprint = %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}
