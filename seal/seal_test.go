package seal_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/seal"
)

func newKey(t *testing.T) seal.Key {
	t.Helper()
	k, err := seal.GenerateKey()
	if err != nil {
		t.Fatalf("GenerateKey: %v", err)
	}
	return k
}

func opener(t *testing.T, ids ...string) *seal.Opener {
	t.Helper()
	o, err := seal.NewOpener(ids...)
	if err != nil {
		t.Fatalf("NewOpener: %v", err)
	}
	return o
}

func TestSealOpen(t *testing.T) {
	t.Parallel()
	old, cur, other := newKey(t), newKey(t), newKey(t)
	tests := []struct {
		name    string
		sealTo  []string
		openers []string
		wantErr bool
	}{
		{"one key", []string{cur.Public}, []string{cur.Identity}, false},
		{"sealed to the old key during a rotation", []string{old.Public}, []string{cur.Identity, old.Identity}, false},
		{"sealed to both keys, opened by the new one", []string{cur.Public, old.Public}, []string{cur.Identity}, false},
		{"sealed to a key proxbus does not hold", []string{other.Public}, []string{cur.Identity, old.Identity}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := seal.Seal("canary-Δ-secret", tt.sealTo...)
			if err != nil {
				t.Fatalf("Seal: %v", err)
			}
			if strings.Contains(s.Sealed, "canary") {
				t.Fatal("the sealed text holds the plain value")
			}
			got, err := opener(t, tt.openers...).Open(s.Sealed)
			switch {
			case tt.wantErr && !errors.Is(err, seal.ErrCannotOpen):
				t.Fatalf("Open: %v, want ErrCannotOpen", err)
			case !tt.wantErr && (err != nil || got != "canary-Δ-secret"):
				t.Fatalf("Open = %q, %v", got, err)
			}
		})
	}
}

func TestKeyErrors(t *testing.T) {
	t.Parallel()
	if _, err := seal.Seal("x"); !errors.Is(err, seal.ErrNoRecipient) {
		t.Errorf("Seal without a key: %v", err)
	}
	if _, err := seal.Seal("x", "age1nope"); !errors.Is(err, seal.ErrBadKey) {
		t.Errorf("Seal to a bad key: %v", err)
	}
	if _, err := seal.NewOpener("AGE-SECRET-KEY-1NOPE"); !errors.Is(err, seal.ErrBadKey) {
		t.Errorf("NewOpener with a bad identity: %v", err)
	}
	k := newKey(t)
	if pub, err := seal.PublicOf(k.Identity + "\n"); err != nil || pub != k.Public {
		t.Errorf("PublicOf = %q, %v; want %q", pub, err, k.Public)
	}
	if got := opener(t, k.Identity).Public(); !slices.Equal(got, []string{k.Public}) {
		t.Errorf("Public = %v", got)
	}
}

func TestSealData(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	o := opener(t, k.Identity)
	already, err := seal.Seal("kept", k.Public)
	if err != nil {
		t.Fatal(err)
	}
	alreadyJSON, _ := json.Marshal(already)
	data := json.RawMessage(`{"storage":"pbs1","password":"pw-1","port":8007,` +
		`"cloud_init":{"user":"ops","password":"pw-2"},"list":[{"api_token":"pw-3"}],"token_secret":` + string(alreadyJSON) + `,"secret_ref":null}`)
	got, err := seal.SealData(data, k.Public)
	if err != nil {
		t.Fatalf("SealData: %v", err)
	}
	if strings.Contains(string(got), "pw-") {
		t.Fatalf("a plain secret is left: %s", got)
	}
	if names := seal.PlainSecrets(got); len(names) != 0 {
		t.Errorf("PlainSecrets after sealing = %v", names)
	}
	if names := seal.PlainSecrets(data); !slices.Equal(names, []string{"cloud_init.password", "list.api_token", "password"}) {
		t.Errorf("PlainSecrets before sealing = %v", names)
	}
	var doc struct {
		Storage   string `json:"storage"`
		Port      int    `json:"port"`
		Password  json.RawMessage
		CloudInit struct {
			User     string          `json:"user"`
			Password json.RawMessage `json:"password"`
		} `json:"cloud_init"`
		TokenSecret json.RawMessage `json:"token_secret"`
	}
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatalf("sealed data is not JSON: %v", err)
	}
	if doc.Storage != "pbs1" || doc.Port != 8007 || doc.CloudInit.User != "ops" {
		t.Errorf("non-secret fields changed: %s", got)
	}
	for raw, want := range map[string]string{string(doc.Password): "pw-1", string(doc.CloudInit.Password): "pw-2", string(doc.TokenSecret): "kept"} {
		armored, ok := seal.Parse(json.RawMessage(raw))
		if !ok {
			t.Fatalf("not a sealed value: %s", raw)
		}
		if plain, err := o.Open(armored); err != nil || plain != want {
			t.Errorf("Open = %q, %v; want %q", plain, err, want)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	s, err := seal.Seal("v", k.Public)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := json.Marshal(s)
	extra, _ := json.Marshal(map[string]any{"sealed": s.Sealed, "x": 1})
	tests := []struct {
		name string
		raw  string
		ok   bool
	}{
		{"sealed", string(good), true},
		{"a plain string", `"v"`, false},
		{"not armored", `{"sealed":"abc"}`, false},
		{"another member too", string(extra), false},
		{"not JSON", `{"sealed":`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, ok := seal.Parse(json.RawMessage(tt.raw)); ok != tt.ok {
				t.Errorf("Parse(%s) ok = %v, want %v", tt.raw, ok, tt.ok)
			}
		})
	}
}
