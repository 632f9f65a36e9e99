package events

import (
	"errors"
	"net/url"
	"strings"
	"unicode/utf8"
)

// errPercent says a header value is not valid percent-encoded UTF-8.
var errPercent = errors.New("events: invalid percent-encoding")

// percentEncode encodes a header value as the CloudEvents HTTP binding (§3.1.3.2), which the
// NATS binding refers to, prescribes: the value's UTF-8 bytes, with space, '"', '%' and every
// byte outside printable ASCII (U+0021–U+007E) written as %XX.
func percentEncode(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= 0x20 || c >= 0x7f || c == '"' || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0x0f])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// percentDecode reverses percentEncode. Characters that should have been encoded but were not
// are accepted as they are; a '%' not followed by two hex digits, or a result that is not valid
// UTF-8, is an error wrapping errPercent.
func percentDecode(s string) (string, error) {
	// In a path segment url.PathUnescape decodes every %XX and nothing else ('+' stays '+').
	v, err := url.PathUnescape(s)
	if err != nil || !utf8.ValidString(v) {
		return "", errPercent
	}
	return v, nil
}
