// Package jsonstr decodes JSON string values exactly as encoding/json does, without its
// reflection for the common case of a string without escapes.
package jsonstr

import (
	"encoding/json"
	"unicode/utf8"
)

// Decode returns the string raw encodes, as json.Unmarshal into a string does (null is ""),
// and false when json.Unmarshal would fail. A string without escapes or control characters
// and in valid UTF-8 (which json.Unmarshal would otherwise repair) is sliced rather than
// decoded.
func Decode(raw []byte) (string, bool) {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' && literal(raw[1:n-1]) {
		return string(raw[1 : n-1]), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// literal reports whether b, the text between a JSON string's quotes, stands for itself:
// valid UTF-8 without a quote, backslash or control character.
func literal(b []byte) bool {
	ascii := true
	for _, c := range b {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
		ascii = ascii && c < utf8.RuneSelf
	}
	return ascii || utf8.Valid(b)
}
