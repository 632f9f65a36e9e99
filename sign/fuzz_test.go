package sign_test

import (
	"encoding/json"
	"testing"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/sign"
)

// testSeed is a test-only NKey user seed.
const testSeed = "SUAMRVHUSVXIOUC4QGKBM6S5ZOXKDVX7K2KXEMLBGG2F6KZLNIH2E4IOQE"

// FuzzVerify feeds untrusted producer keys, signatures and data to Verify: it never panics,
// and a command whose id or data differ from what was signed never verifies.
func FuzzVerify(f *testing.F) {
	// A fixed key: fuzzing workers run this setup again, and must sign like the coordinator.
	s, err := sign.NewSigner([]byte(testSeed))
	if err != nil {
		f.Fatal(err)
	}
	signed, err := s.Sign(sampleCommand())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(signed.Producer, signed.Signature, signed.ID, []byte(signed.Data))
	f.Add(signed.Producer, "", "cmd-1", []byte(`{}`))
	f.Add("UNOTAKEY", signed.Signature, "cmd-1", []byte(`{"vm":"web1"}`))
	f.Add("", "AAAA", "", []byte(nil))
	f.Fuzz(func(t *testing.T, producer, signature, id string, data []byte) {
		c := signed
		c.Producer, c.Signature, c.ID, c.Data = producer, signature, id, json.RawMessage(data)
		err := sign.Verify(c)
		if err == nil && (producer != signed.Producer || id != signed.ID || string(data) != string(signed.Data)) {
			t.Fatalf("a changed command verified: producer %q id %q data %q", producer, id, data)
		}
	})
}

// FuzzCanonical checks that the canonical form is injective in the fields a producer can
// choose freely: two commands that differ in id, actor or data never share it.
func FuzzCanonical(f *testing.F) {
	f.Add("a", "b\nactor 1\nx", []byte("{}"), "a\nactor 1", "b", []byte("{}"))
	f.Add("id", "", []byte(nil), "id", "", []byte(""))
	f.Fuzz(func(t *testing.T, id1, actor1 string, data1 []byte, id2, actor2 string, data2 []byte) {
		a := events.Command{ID: id1, Actor: actor1, Data: data1, Verb: "vm.start"}
		b := events.Command{ID: id2, Actor: actor2, Data: data2, Verb: "vm.start"}
		same := id1 == id2 && actor1 == actor2 && string(data1) == string(data2)
		if string(sign.Canonical(a)) == string(sign.Canonical(b)) && !same {
			t.Fatalf("two commands share a canonical form: %+v %+v", a, b)
		}
	})
}
