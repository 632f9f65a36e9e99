package handlers

import (
	"encoding/json"
	"testing"
)

// BenchmarkPrepare is the validation and fingerprint of one storage.pbs.create command: the
// pipeline's own CPU between the gate and the claim.
func BenchmarkPrepare(b *testing.B) {
	data := json.RawMessage(`{"datastore":"store1","fingerprint":"` + benchFingerprint +
		`","password":"bench-secret","server":"pbs.example.net","storage":"bbench-17","username":"backup@pbs!proxbus"}`)
	v := StoragePBSCreate()
	b.ReportAllocs()
	for b.Loop() {
		if _, out := v.prepare(data); out != nil {
			b.Fatalf("invalid: %+v", out)
		}
	}
}

const benchFingerprint = "aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77:88:99"

// BenchmarkFingerprint is the request fingerprint of one storage.pbs.create input.
func BenchmarkFingerprint(b *testing.B) {
	in := PBSStorageInput{Storage: "bbench-17", Server: "pbs.example.net", Port: 8007, Datastore: "store1",
		Username: "backup@pbs!proxbus", Password: "bench-secret", Fingerprint: benchFingerprint}
	for _, impl := range []struct {
		name string
		f    func(any) (string, error)
	}{{"onepass", fingerprint}, {"roundtrip", fingerprintByRoundTrip}} {
		b.Run("impl="+impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := impl.f(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
