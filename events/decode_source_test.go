package events

import (
	"math/rand/v2"
	"testing"
)

// TestValidCommandSource pins that the parse-free fast path of validCommandSource agrees with
// validSource: every source simpleSource accepts, validSource accepts too, so
// validCommandSource accepts exactly what validSource does.
func TestValidCommandSource(t *testing.T) {
	t.Parallel()
	tests := []struct {
		source string
		simple bool
	}{
		{"/netbox/webhook", true},
		{"/bench", true},
		{"/", true},
		{"/a:b/c", true},
		{"/a/./../b~c_d-e.f", true},
		{"urn:proxbus:cli", true},
		{"urn:proxbus:demo-1", true},
		{"urn:a", true},
		{"a+b.c-d:x/y", true},
		{"//host/path", false},
		{"urn:", false},
		{"urn:/path", false},
		{"URN:proxbus:cli", false},
		{"Urn:x", false},
		{"1urn:x", false},
		{":x", false},
		{"relative/path", false},
		{"a b", false},
		{"/a%20b", false},
		{"/a?b", false},
		{"/a#b", false},
		{"https://example.com/x", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := simpleSource(tc.source); got != tc.simple {
			t.Errorf("simpleSource(%q) = %v, want %v", tc.source, got, tc.simple)
		}
		if got, want := validCommandSource(tc.source), validSource(tc.source); got != want {
			t.Errorf("validCommandSource(%q) = %v, validSource says %v", tc.source, got, want)
		}
	}

	// Random strings over the characters that matter to both the fast path and url.Parse.
	const alphabet = "aZ09-._~/:+%?#@ A"
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		b := make([]byte, 1+rng.IntN(10))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		s := string(b)
		if simpleSource(s) && !validSource(s) {
			t.Fatalf("simpleSource accepts %q, validSource refuses it", s)
		}
	}
}
