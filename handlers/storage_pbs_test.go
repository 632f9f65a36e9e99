package handlers

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/proxmox"
)

const (
	testPBSPassword    = "0b7c9d4e-1f2a-4b3c-8d5e-6f7a8b9c0d1e"
	testPBSFingerprint = "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89"
)

// validPBSBody is a storage.pbs.create body that passes every rule.
func validPBSBody() map[string]any {
	return map[string]any{
		"storage":     "pbs-backup1",
		"server":      "pbs.example.com",
		"port":        8007,
		"datastore":   "store1",
		"namespace":   "site/rack",
		"username":    "proxbus@pbs!create",
		"password":    testPBSPassword,
		"fingerprint": testPBSFingerprint,
		"nodes":       []any{"pve1", "pve2"},
	}
}

// pbsBody is validPBSBody with edits applied: a nil value deletes the key.
func pbsBody(t *testing.T, edits map[string]any) json.RawMessage {
	t.Helper()
	return editedBody(t, validPBSBody(), edits)
}

// editedBody is body with edits applied (a nil value deletes the key), as JSON.
func editedBody(t *testing.T, body, edits map[string]any) json.RawMessage {
	t.Helper()
	for k, v := range edits {
		if v == nil {
			delete(body, k)
			continue
		}
		body[k] = v
	}
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatalf("marshal body: %v", err)
	}
	return raw
}

// del marks a key for deletion in pbsBody edits.
var del any

// rawNull is a JSON null value in pbsBody edits (nil deletes).
var rawNull = json.RawMessage(`null`)

func preparePBS(t *testing.T, data json.RawMessage) (prepared, *Outcome) {
	t.Helper()
	return StoragePBSCreate().prepare(data)
}

func mustPreparePBS(t *testing.T, data json.RawMessage) prepared {
	t.Helper()
	p, out := preparePBS(t, data)
	if out != nil {
		t.Fatalf("prepare(%s) = %+v, want valid", data, out)
	}
	return p
}

func TestStoragePBSCreateSpec(t *testing.T) {
	t.Parallel()
	v := StoragePBSCreate()
	if v.VerbName() != "storage.pbs.create" || v.VerbAccess() != Write {
		t.Errorf("verb = %s/%v, want storage.pbs.create/Write", v.VerbName(), v.VerbAccess())
	}
	r := NewRegistry(Builtin()...)
	if got, ok := r.Lookup("storage.pbs.create"); !ok || got.VerbName() != "storage.pbs.create" {
		t.Errorf("Builtin registry lookup = %v, %v", got, ok)
	}
	if _, ok := r.Lookup("storage.nfs.create"); ok {
		t.Error("lookup of an unknown verb succeeded")
	}
}

func TestStoragePBSPrepareValid(t *testing.T) {
	t.Parallel()
	p := mustPreparePBS(t, pbsBody(t, nil))
	if p.resource != "pbs-backup1" {
		t.Errorf("resource = %q, want the storage id", p.resource)
	}
	if !reflect.DeepEqual(p.secrets, []string{testPBSPassword}) {
		t.Errorf("secrets = %q, want the password", p.secrets)
	}
	if len(p.fingerprint) != 64 {
		t.Errorf("fingerprint = %q, want hex sha256", p.fingerprint)
	}
	if p.dispatch == nil {
		t.Error("dispatch is nil")
	}
	want := []Bullet{{"storage", "pbs-backup1"}, {"server", "pbs.example.com"}, {"port", "8007"},
		{"datastore", "store1"}, {"username", "proxbus@pbs!create"}, {"fingerprint", testPBSFingerprint},
		{"namespace", "site/rack"}, {"nodes", "pve1,pve2"}}
	if !reflect.DeepEqual(p.bullets, want) {
		t.Errorf("bullets = %v\nwant %v", p.bullets, want)
	}
	for _, b := range p.bullets {
		if strings.Contains(b.Value, testPBSPassword) || strings.Contains(b.Name, "password") {
			t.Errorf("bullet %v carries the secret", b)
		}
	}
}

func TestStoragePBSPrepareDefaults(t *testing.T) {
	t.Parallel()
	p := mustPreparePBS(t, pbsBody(t, map[string]any{"port": del, "namespace": del, "nodes": del}))
	want := []Bullet{{"storage", "pbs-backup1"}, {"server", "pbs.example.com"}, {"port", "8007"},
		{"datastore", "store1"}, {"username", "proxbus@pbs!create"}, {"fingerprint", testPBSFingerprint}}
	if !reflect.DeepEqual(p.bullets, want) {
		t.Errorf("bullets = %v\nwant %v", p.bullets, want)
	}
	// The default port is part of the canonical data: an explicit 8007 is the same request.
	explicit := mustPreparePBS(t, pbsBody(t, map[string]any{"port": 8007, "namespace": del, "nodes": del}))
	if p.fingerprint != explicit.fingerprint {
		t.Error("fingerprint differs between an absent port and an explicit 8007")
	}
	null := mustPreparePBS(t, pbsBody(t, map[string]any{"port": rawNull, "namespace": rawNull, "nodes": rawNull}))
	if p.fingerprint != null.fingerprint {
		t.Error("fingerprint differs between absent and null optional fields")
	}
}

func TestStoragePBSFingerprint(t *testing.T) {
	t.Parallel()
	base := mustPreparePBS(t, pbsBody(t, nil)).fingerprint
	tests := []struct {
		name  string
		edits map[string]any
		same  bool
	}{
		{"identical", nil, true},
		{"only the password differs", map[string]any{"password": "another-secret-value"}, true},
		{"datastore differs", map[string]any{"datastore": "store2"}, false},
		{"storage differs", map[string]any{"storage": "pbs-backup2"}, false},
		{"server differs", map[string]any{"server": "10.0.0.9"}, false},
		{"port differs", map[string]any{"port": 8008}, false},
		{"namespace differs", map[string]any{"namespace": "site"}, false},
		{"username differs", map[string]any{"username": "proxbus@pbs!other"}, false},
		{"nodes differ", map[string]any{"nodes": []any{"pve1"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := mustPreparePBS(t, pbsBody(t, tt.edits)).fingerprint
			if (got == base) != tt.same {
				t.Errorf("fingerprint equal = %v, want %v", got == base, tt.same)
			}
		})
	}
	// Key order and whitespace in the data do not matter: the fingerprint is over the
	// validated input.
	reordered := `{ "password":"x-secret-1", "nodes":["pve1","pve2"], "fingerprint":"` + testPBSFingerprint +
		`", "username":"proxbus@pbs!create", "namespace":"site/rack", "datastore":"store1", "port":8007,
		"server":"pbs.example.com", "storage":"pbs-backup1" }`
	if got := mustPreparePBS(t, json.RawMessage(reordered)).fingerprint; got != base {
		t.Error("fingerprint depends on key order or the password")
	}
}

func TestFingerprintStripsSecrets(t *testing.T) {
	t.Parallel()
	type in struct {
		A        string `json:"a"`
		Password string `json:"password"`
		Nested   struct {
			Token string `json:"token"`
			B     int    `json:"b"`
		} `json:"nested"`
	}
	x, y := in{A: "a", Password: "p1"}, in{A: "a", Password: "p2"}
	x.Nested.Token, y.Nested.Token = "t1", "t2"
	fx, err := fingerprint(x)
	if err != nil {
		t.Fatal(err)
	}
	fy, err := fingerprint(y)
	if err != nil {
		t.Fatal(err)
	}
	if fx != fy {
		t.Error("fingerprint depends on secret-named fields")
	}
	y.A = "b"
	if fz, _ := fingerprint(y); fz == fx {
		t.Error("fingerprint ignores a non-secret field")
	}
	if _, err := fingerprint(func() {}); err == nil {
		t.Error("fingerprint of an unmarshalable value succeeded")
	}
}

func TestStoragePBSPrepareInvalid(t *testing.T) {
	t.Parallel()
	long := func(n int) string { return strings.Repeat("a", n) }
	label63 := long(63)
	namespace7 := "a/b/c/d/e/f/g"
	fp32lower := strings.ToLower(testPBSFingerprint)
	fp31 := testPBSFingerprint[:len(testPBSFingerprint)-3]
	fp33 := testPBSFingerprint + ":AB"

	tests := []struct {
		name   string
		edits  map[string]any
		fields []string // nil: valid
		detail string
	}{
		// storage id: ^[A-Za-z][A-Za-z0-9._-]*[A-Za-z0-9]$
		{"storage two chars", map[string]any{"storage": "p1"}, nil, ""},
		{"storage dots and underscores", map[string]any{"storage": "Pbs.back_up-1"}, nil, ""},
		{"storage absent", map[string]any{"storage": del}, []string{"storage"}, ""},
		{"storage null", map[string]any{"storage": rawNull}, []string{"storage"}, ""},
		{"storage empty", map[string]any{"storage": ""}, []string{"storage"}, ""},
		{"storage one char", map[string]any{"storage": "p"}, []string{"storage"}, ""},
		{"storage starts with digit", map[string]any{"storage": "1pbs"}, []string{"storage"}, ""},
		{"storage ends with dash", map[string]any{"storage": "pbs-"}, []string{"storage"}, ""},
		{"storage ends with dot", map[string]any{"storage": "pbs."}, []string{"storage"}, ""},
		{"storage with space", map[string]any{"storage": "pbs 1"}, []string{"storage"}, ""},
		{"storage with slash", map[string]any{"storage": "pbs/1"}, []string{"storage"}, ""},
		{"storage number", map[string]any{"storage": 12}, []string{"storage"}, ""},

		// server: host name or IP
		{"server IPv4", map[string]any{"server": "192.0.2.10"}, nil, ""},
		{"server IPv6", map[string]any{"server": "2001:db8::10"}, nil, ""},
		{"server IPv6 loopback", map[string]any{"server": "::1"}, nil, ""},
		{"server single label", map[string]any{"server": "pbs"}, nil, ""},
		{"server mixed case", map[string]any{"server": "PBS.Example.COM"}, nil, ""},
		{"server 63-char label", map[string]any{"server": label63 + ".example.com"}, nil, ""},
		{"server absent", map[string]any{"server": del}, []string{"server"}, ""},
		{"server empty", map[string]any{"server": ""}, []string{"server"}, ""},
		{"server underscore", map[string]any{"server": "pbs_1.example.com"}, []string{"server"}, ""},
		{"server leading dash", map[string]any{"server": "-pbs.example.com"}, []string{"server"}, ""},
		{"server empty label", map[string]any{"server": "pbs..example.com"}, []string{"server"}, ""},
		{"server trailing dot", map[string]any{"server": "pbs.example.com."}, []string{"server"}, ""},
		{"server with port", map[string]any{"server": "pbs.example.com:8007"}, []string{"server"}, ""},
		{"server URL", map[string]any{"server": "https://pbs.example.com"}, []string{"server"}, ""},
		{"server 64-char label", map[string]any{"server": long(64) + ".example.com"}, []string{"server"}, ""},
		{"server over 253 chars", map[string]any{"server": strings.Repeat(label63+".", 4) + "com"}, []string{"server"}, ""},
		{"server IPv6 with zone", map[string]any{"server": "fe80::1%eth0"}, []string{"server"}, ""},
		{"server number", map[string]any{"server": 10}, []string{"server"}, ""},

		// port: 1–65535, default 8007
		{"port absent", map[string]any{"port": del}, nil, ""},
		{"port 1", map[string]any{"port": 1}, nil, ""},
		{"port 65535", map[string]any{"port": 65535}, nil, ""},
		{"port 0", map[string]any{"port": 0}, []string{"port"}, ""},
		{"port 65536", map[string]any{"port": 65536}, []string{"port"}, ""},
		{"port negative", map[string]any{"port": -8007}, []string{"port"}, ""},
		{"port quoted", map[string]any{"port": "8007"}, []string{"port"}, ""},
		{"port fraction", map[string]any{"port": 8007.5}, []string{"port"}, ""},
		{"port bool", map[string]any{"port": true}, []string{"port"}, ""},

		// datastore: 3–32 of [A-Za-z0-9_.-]
		{"datastore 3 chars", map[string]any{"datastore": "abc"}, nil, ""},
		{"datastore 32 chars", map[string]any{"datastore": long(32)}, nil, ""},
		{"datastore punctuation", map[string]any{"datastore": "a_b.c-d"}, nil, ""},
		{"datastore absent", map[string]any{"datastore": del}, []string{"datastore"}, ""},
		{"datastore 2 chars", map[string]any{"datastore": "ab"}, []string{"datastore"}, ""},
		{"datastore 33 chars", map[string]any{"datastore": long(33)}, []string{"datastore"}, ""},
		{"datastore space", map[string]any{"datastore": "my store"}, []string{"datastore"}, ""},
		{"datastore slash", map[string]any{"datastore": "data/store"}, []string{"datastore"}, ""},

		// namespace: up to 7 /-separated PBS names
		{"namespace absent", map[string]any{"namespace": del}, nil, ""},
		{"namespace one part", map[string]any{"namespace": "site"}, nil, ""},
		{"namespace 7 parts", map[string]any{"namespace": namespace7}, nil, ""},
		{"namespace 8 parts", map[string]any{"namespace": namespace7 + "/h"}, []string{"namespace"}, ""},
		{"namespace empty part", map[string]any{"namespace": "a//b"}, []string{"namespace"}, ""},
		{"namespace leading slash", map[string]any{"namespace": "/a"}, []string{"namespace"}, ""},
		{"namespace trailing slash", map[string]any{"namespace": "a/"}, []string{"namespace"}, ""},
		{"namespace space", map[string]any{"namespace": "a b"}, []string{"namespace"}, ""},
		{"namespace list", map[string]any{"namespace": []any{"a"}}, []string{"namespace"}, ""},

		// username: API token id user@realm!token
		{"username absent", map[string]any{"username": del}, []string{"username"}, ""},
		{"username no token", map[string]any{"username": "root@pam"}, []string{"username"}, ""},
		{"username no realm", map[string]any{"username": "root!token"}, []string{"username"}, ""},
		{"username empty token", map[string]any{"username": "root@pam!"}, []string{"username"}, ""},
		{"username empty user", map[string]any{"username": "@pam!token"}, []string{"username"}, ""},
		{"username two tokens", map[string]any{"username": "root@pam!a!b"}, []string{"username"}, ""},
		{"username space", map[string]any{"username": "ro ot@pam!token"}, []string{"username"}, ""},

		// password: secret, required
		{"password absent", map[string]any{"password": del}, []string{"password"}, ""},
		{"password null", map[string]any{"password": rawNull}, []string{"password"}, ""},
		{"password empty", map[string]any{"password": ""}, []string{"password"}, ""},
		{"password number", map[string]any{"password": 1234}, []string{"password"}, ""},
		{"password placeholder", map[string]any{"password": "[redacted]"}, []string{"password"}, ""},

		// fingerprint: 32 colon-separated hex pairs, any case
		{"fingerprint lower case", map[string]any{"fingerprint": fp32lower}, nil, ""},
		{"fingerprint absent", map[string]any{"fingerprint": del}, []string{"fingerprint"}, ""},
		{"fingerprint 31 pairs", map[string]any{"fingerprint": fp31}, []string{"fingerprint"}, ""},
		{"fingerprint 33 pairs", map[string]any{"fingerprint": fp33}, []string{"fingerprint"}, ""},
		{"fingerprint trailing colon", map[string]any{"fingerprint": testPBSFingerprint + ":"}, []string{"fingerprint"}, ""},
		{"fingerprint dashes", map[string]any{"fingerprint": strings.ReplaceAll(testPBSFingerprint, ":", "-")}, []string{"fingerprint"}, ""},
		{"fingerprint no separators", map[string]any{"fingerprint": strings.ReplaceAll(testPBSFingerprint, ":", "")}, []string{"fingerprint"}, ""},
		{"fingerprint non-hex", map[string]any{"fingerprint": "GG" + testPBSFingerprint[2:]}, []string{"fingerprint"}, ""},

		// nodes: node names
		{"nodes absent", map[string]any{"nodes": del}, nil, ""},
		{"nodes empty list", map[string]any{"nodes": []any{}}, nil, ""},
		{"nodes with dash", map[string]any{"nodes": []any{"node-2"}}, nil, ""},
		{"nodes string", map[string]any{"nodes": "pve1"}, []string{"nodes"}, ""},
		{"nodes underscore", map[string]any{"nodes": []any{"pve_1"}}, []string{"nodes"}, ""},
		{"nodes empty name", map[string]any{"nodes": []any{""}}, []string{"nodes"}, ""},
		{"nodes leading dash", map[string]any{"nodes": []any{"-pve"}}, []string{"nodes"}, ""},
		{"nodes dotted", map[string]any{"nodes": []any{"pve1.example.com"}}, []string{"nodes"}, ""},
		{"nodes null item", map[string]any{"nodes": []any{"pve1", nil}}, []string{"nodes"}, ""},
		{"nodes number", map[string]any{"nodes": []any{1}}, []string{"nodes"}, ""},

		// several failures, sorted; undeclared fields never named
		{"several failures sorted", map[string]any{"storage": "1", "port": 0, "fingerprint": "x", "datastore": "ab"},
			[]string{"datastore", "fingerprint", "port", "storage"}, ""},
		{"undeclared field only", map[string]any{"type": "pbs"}, []string{}, "undeclared fields present"},
		{"undeclared secret-named field", map[string]any{"token_secret": "leak-me-not"}, []string{}, "undeclared fields present"},
		{"wrong-case key", map[string]any{"password": del, "Password": testPBSPassword},
			[]string{"password"}, "undeclared fields present"},
		{"failure and undeclared", map[string]any{"port": "x", "extra": "y"}, []string{"port"}, "undeclared fields present"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := pbsBody(t, tt.edits)
			p, out := preparePBS(t, data)
			if tt.fields == nil {
				if out != nil {
					t.Fatalf("prepare(%s) = %+v, want valid", data, out)
				}
				if p.resource == "" || p.fingerprint == "" {
					t.Errorf("valid prepare = %+v", p)
				}
				return
			}
			if out == nil {
				t.Fatalf("prepare(%s) valid, want 422 fields %v", data, tt.fields)
			}
			if out.Status != 422 || out.Result != ResultRefused || out.Reason != ReasonInvalidBody {
				t.Errorf("outcome = %d %s %s, want 422 refused invalid_body", out.Status, out.Result, out.Reason)
			}
			if len(out.Fields) != len(tt.fields) || (len(tt.fields) > 0 && !reflect.DeepEqual(out.Fields, tt.fields)) {
				t.Errorf("fields = %q, want %q", out.Fields, tt.fields)
			}
			if out.Detail != tt.detail {
				t.Errorf("detail = %q, want %q", out.Detail, tt.detail)
			}
			assertNoValueEchoed(t, out, data)
		})
	}
}

// assertNoValueEchoed fails when any value or undeclared name of the body shows up in the outcome.
func assertNoValueEchoed(t *testing.T, out *Outcome, data json.RawMessage) {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		t.Fatal(err)
	}
	text := out.Detail + " " + strings.Join(out.Fields, " ")
	declared := map[string]bool{"storage": true, "server": true, "port": true, "datastore": true, "namespace": true,
		"username": true, "password": true, "fingerprint": true, "nodes": true}
	for k, v := range body {
		if !declared[k] && strings.Contains(text, k) {
			t.Errorf("outcome names the undeclared field %q: %q", k, text)
		}
		for _, s := range leafStrings(v) {
			if len(s) >= 3 && !declared[s] && strings.Contains(text, s) {
				t.Errorf("outcome echoes the value %q: %q", s, text)
			}
		}
	}
}

func leafStrings(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			out = append(out, leafStrings(e)...)
		}
		return out
	default:
		return nil
	}
}

func TestStoragePBSPrepareNotAnObject(t *testing.T) {
	t.Parallel()
	for _, data := range []string{`[]`, `"storage"`, `{"storage":`} {
		t.Run(data, func(t *testing.T) {
			t.Parallel()
			_, out := preparePBS(t, json.RawMessage(data))
			if out == nil || out.Status != 422 || out.Reason != ReasonInvalidBody || len(out.Fields) != 0 ||
				out.Detail != "data must be a JSON object" {
				t.Errorf("prepare(%s) = %+v, want 422 invalid_body without fields", data, out)
			}
		})
	}
	// No data at all: every required field fails.
	_, out := preparePBS(t, nil)
	want := []string{"datastore", "fingerprint", "password", "server", "storage", "username"}
	if out == nil || !reflect.DeepEqual(out.Fields, want) || out.Detail != "" {
		t.Errorf("prepare(nil) = %+v, want fields %v", out, want)
	}
}

// pbsInput is the validated input the existing-storage comparisons start from.
func pbsInput() PBSStorageInput {
	return PBSStorageInput{
		Storage: "pbs-backup1", Server: "pbs.example.com", Port: 8007, Datastore: "store1", Namespace: "site/rack",
		Username: "proxbus@pbs!create", Password: testPBSPassword, Fingerprint: testPBSFingerprint,
		Nodes: []string{"pve1", "pve2"},
	}
}

// pbsConfig is the storage PVE reports for pbsInput, with edits applied ("" deletes a key).
func pbsConfig(edits map[string]string) proxmox.StorageConfig {
	c := proxmox.StorageConfig{
		"storage": "pbs-backup1", "type": "pbs", "content": "backup", "server": "pbs.example.com", "port": "8007",
		"datastore": "store1", "namespace": "site/rack", "username": "proxbus@pbs!create",
		"fingerprint": testPBSFingerprint, "nodes": "pve1,pve2", "prune-backups": "keep-all=1",
		"digest": "0123456789abcdef",
	}
	for k, v := range edits {
		if v == "" {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

func TestPBSDifferences(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    func(*PBSStorageInput)
		edits map[string]string
		want  []string
	}{
		{"equal", nil, nil, nil},
		{"fingerprint case-insensitive", nil, map[string]string{"fingerprint": strings.ToLower(testPBSFingerprint)}, nil},
		{"nodes as a set", nil, map[string]string{"nodes": "pve2,pve1"}, nil},
		{"nodes duplicated", nil, map[string]string{"nodes": "pve2,pve1,pve1"}, nil},
		{"nodes other separators", nil, map[string]string{"nodes": "pve2; pve1"}, nil},
		{"port absent means 8007", nil, map[string]string{"port": ""}, nil},
		{"prune keep-all=true", nil, map[string]string{"prune-backups": "keep-all=true"}, nil},
		{"password never compared", func(in *PBSStorageInput) { in.Password = "other" }, nil, nil},
		{"no namespace no nodes", func(in *PBSStorageInput) { in.Namespace, in.Nodes = "", nil },
			map[string]string{"namespace": "", "nodes": ""}, nil},
		{"empty nodes list equals none", func(in *PBSStorageInput) { in.Nodes = []string{} },
			map[string]string{"nodes": ""}, nil},

		{"content", nil, map[string]string{"content": "backup,iso"}, []string{"content"}},
		{"content absent", nil, map[string]string{"content": ""}, []string{"content"}},
		{"datastore", nil, map[string]string{"datastore": "store2"}, []string{"datastore"}},
		{"fingerprint", nil, map[string]string{"fingerprint": "00" + testPBSFingerprint[2:]}, []string{"fingerprint"}},
		{"namespace", nil, map[string]string{"namespace": "site"}, []string{"namespace"}},
		{"namespace absent", nil, map[string]string{"namespace": ""}, []string{"namespace"}},
		{"nodes", nil, map[string]string{"nodes": "pve1"}, []string{"nodes"}},
		{"nodes all vs some", nil, map[string]string{"nodes": ""}, []string{"nodes"}},
		{"port", nil, map[string]string{"port": "8008"}, []string{"port"}},
		{"port absent vs non-default", func(in *PBSStorageInput) { in.Port = 8008 }, map[string]string{"port": ""}, []string{"port"}},
		{"prune-backups", nil, map[string]string{"prune-backups": "keep-last=3"}, []string{"prune-backups"}},
		{"prune-backups absent", nil, map[string]string{"prune-backups": ""}, []string{"prune-backups"}},
		{"server", nil, map[string]string{"server": "pbs2.example.com"}, []string{"server"}},
		{"type", nil, map[string]string{"type": "nfs"}, []string{"type"}},
		{"username", nil, map[string]string{"username": "proxbus@pbs!other"}, []string{"username"}},

		{"several, sorted", nil, map[string]string{"username": "x@pbs!y", "datastore": "store2", "type": "dir"},
			[]string{"datastore", "type", "username"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := pbsInput()
			if tt.in != nil {
				tt.in(&in)
			}
			got := pbsDifferences(in, pbsConfig(tt.edits))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("pbsDifferences = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCompareExisting(t *testing.T) {
	t.Parallel()
	in := pbsInput()
	tests := []struct {
		name       string
		cfg        proxmox.StorageConfig
		ifEqual    string
		wantStatus int
		wantResult string
		wantFields []string
	}{
		{"equal, ours", pbsConfig(nil), ResultCreated, 201, ResultCreated, nil},
		{"equal, someone else's", pbsConfig(nil), ResultAlreadyPresent, 200, ResultAlreadyPresent, nil},
		{"different", pbsConfig(map[string]string{"server": "other"}), ResultAlreadyPresent, 409, ResultRefused, []string{"server"}},
		{"different, ours", pbsConfig(map[string]string{"port": "1"}), ResultCreated, 409, ResultRefused, []string{"port"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := compareExisting(in, tt.cfg, tt.ifEqual)
			if out.Status != tt.wantStatus || out.Result != tt.wantResult || !reflect.DeepEqual(out.Fields, tt.wantFields) {
				t.Errorf("compareExisting = %+v, want %d %s %v", out, tt.wantStatus, tt.wantResult, tt.wantFields)
			}
			if tt.wantStatus == 409 && out.Reason != ReasonStorageConflict {
				t.Errorf("reason = %q, want %q", out.Reason, ReasonStorageConflict)
			}
			if tt.wantStatus != 409 && out.Output == nil {
				t.Error("no output on success")
			}
		})
	}
}

func TestPBSOutputHasNoPassword(t *testing.T) {
	t.Parallel()
	raw, err := json.Marshal(pbsOutput(pbsInput()))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"storage": "pbs-backup1", "type": "pbs", "server": "pbs.example.com", "port": float64(8007),
		"datastore": "store1", "username": "proxbus@pbs!create", "fingerprint": testPBSFingerprint, "content": "backup",
		"namespace": "site/rack", "nodes": []any{"pve1", "pve2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("output = %v\nwant %v", got, want)
	}
	if strings.Contains(string(raw), testPBSPassword) {
		t.Errorf("output carries the password: %s", raw)
	}
	in := pbsInput()
	in.Namespace, in.Nodes = "", nil
	bare := pbsOutput(in)
	if _, ok := bare["namespace"]; ok {
		t.Error("empty namespace in output")
	}
	if _, ok := bare["nodes"]; ok {
		t.Error("empty nodes in output")
	}
}
