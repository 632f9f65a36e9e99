package seal_test

import (
	"encoding/json"
	"testing"

	"github.com/proxbus/proxbus/seal"
)

// FuzzOpen feeds untrusted sealed values (any JSON a producer may put in a secret field) to
// Parse and Open: they may fail, never panic, and only a value sealed to the key opens.
func FuzzOpen(f *testing.F) {
	k, err := seal.GenerateKey()
	if err != nil {
		f.Fatal(err)
	}
	o, err := seal.NewOpener(k.Identity)
	if err != nil {
		f.Fatal(err)
	}
	good, err := seal.Seal("s3cret", k.Public)
	if err != nil {
		f.Fatal(err)
	}
	goodJSON, _ := json.Marshal(good)
	for _, s := range []string{string(goodJSON), `{"sealed":""}`, `{"sealed":"-----BEGIN AGE ENCRYPTED FILE-----\n-----END AGE ENCRYPTED FILE-----\n"}`,
		`{"sealed":"-----BEGIN AGE ENCRYPTED FILE-----\nYWdlLWVuY3J5cHRpb24ub3JnL3YxCi0+IFgyNTUxOSBh\n-----END AGE ENCRYPTED FILE-----\n"}`, `"plain"`, `null`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		armored, ok := seal.Parse(raw)
		if !ok {
			return
		}
		plain, err := o.Open(armored)
		if err == nil && len(plain) > seal.MaxSealedBytes {
			t.Fatalf("opened %d bytes", len(plain))
		}
	})
}

// FuzzSealData checks that sealing any JSON document leaves no plain secret field and keeps
// it JSON.
func FuzzSealData(f *testing.F) {
	k, err := seal.GenerateKey()
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`{"password":"x"}`, `{"cloud_init":{"password":"y","user":"u"}}`, `[{"token":"t"}]`, `{"a":1.5e300,"b":[true,null]}`, `"s"`, `{"password":{"sealed":1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		out, err := seal.SealData(data, k.Public)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("SealData(%s) = %s: not JSON", data, out)
		}
		for _, name := range seal.PlainSecrets(out) {
			// only non-string secrets (numbers, objects) are left as they were
			if names := seal.PlainSecrets(data); len(names) == 0 {
				t.Fatalf("a plain secret %s appeared in %s", name, out)
			}
		}
	})
}
