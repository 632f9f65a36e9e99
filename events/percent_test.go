package events

import (
	"errors"
	"testing"
)

// TestPercentEncoding pins the HTTP binding's rule: space, '"', '%' and non-printable or
// non-ASCII bytes are %XX-encoded; decoding reverses it and accepts unencoded characters.
func TestPercentEncoding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, plain, encoded string
	}{
		{"plain", "urn:proxbus:cli", "urn:proxbus:cli"},
		{"space", "a b", "a%20b"},
		{"quote", `say "hi"`, "say%20%22hi%22"},
		{"percent", "100%", "100%25"},
		{"utf8", "café", "caf%C3%A9"},
		{"control", "a\r\nb", "a%0D%0Ab"},
		{"del", "a\x7fb", "a%7Fb"},
		{"tilde and bang stay", "~!", "~!"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := percentEncode(tc.plain); got != tc.encoded {
				t.Errorf("encode = %q, want %q", got, tc.encoded)
			}
			got, err := percentDecode(tc.encoded)
			if err != nil || got != tc.plain {
				t.Errorf("decode = %q, %v; want %q", got, err, tc.plain)
			}
		})
	}
}

// TestPercentDecodeRejects pins what is not percent-encoded UTF-8.
func TestPercentDecodeRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
	}{
		{"truncated escape", "abc%2"},
		{"lone percent", "%"},
		{"non-hex", "%zz"},
		{"invalid utf8 after decoding", "%C3"},
		{"raw invalid utf8", "\xff"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got, err := percentDecode(tc.in); !errors.Is(err, errPercent) {
				t.Errorf("decode(%q) = %q, %v; want errPercent", tc.in, got, err)
			}
		})
	}
	if got, err := percentDecode("lower %c3%a9 ok"); err != nil || got != "lower é ok" {
		t.Errorf("lower-case hex: %q, %v", got, err)
	}
}
