package events

import (
	"errors"
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
	if !strings.Contains(s, "%") {
		if !utf8.ValidString(s) {
			return "", errPercent
		}
		return s, nil
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			out = append(out, s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", errPercent
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", errPercent
		}
		out = append(out, hi<<4|lo)
		i += 2
	}
	if !utf8.Valid(out) {
		return "", errPercent
	}
	return string(out), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
