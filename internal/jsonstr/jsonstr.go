// Package jsonstr decodes JSON string values exactly as encoding/json does, without its
// reflection for the common case of plain ASCII.
package jsonstr

import "encoding/json"

// Decode returns the string raw encodes, as json.Unmarshal into a string does (null is ""),
// and false when json.Unmarshal would fail. A string of printable ASCII without escapes is
// sliced rather than decoded.
func Decode(raw []byte) (string, bool) {
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' && plainASCII(raw[1:n-1]) {
		return string(raw[1 : n-1]), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// plainASCII reports whether b is printable ASCII without a quote or backslash: the bytes of
// a JSON string that stand for themselves.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
