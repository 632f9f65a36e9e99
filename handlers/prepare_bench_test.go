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

// benchFingerprint is a PBS certificate fingerprint in the form storage.pbs.create accepts.
const benchFingerprint = "aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77:88:99"
