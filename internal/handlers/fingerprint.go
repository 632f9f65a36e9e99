package handlers

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/proxbus/proxbus/internal/redact"
)

// fingerprint is the sha256 (hex) of the canonical JSON of in: in's encoding/json form with
// every secret-named member removed at any depth, object members sorted by name and numbers
// written as encoding/json writes a float64 — byte for byte json.Marshal(redact.Strip(v)),
// where v is in's JSON decoded by encoding/json into an any. Fingerprints are stored with
// Idempotency-Key records, so this form must never change: a stored fingerprint that no
// longer matched its own command's would turn a redelivery into idempotency_key_reused.
//
// It returns an error when in cannot be encoded as JSON, or its JSON not decoded into an any
// (a json.Number beyond a float64's range).
func fingerprint(in any) (string, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	canon, ok := canonicalJSON(raw)
	if !ok {
		if canon, err = canonicalByRoundTrip(raw); err != nil {
			return "", fmt.Errorf("fingerprint: %w", err)
		}
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// canonicalByRoundTrip is the definition of the canonical form, used where canonicalJSON
// declines.
func canonicalByRoundTrip(raw []byte) ([]byte, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return json.Marshal(redact.Strip(v)) // map keys are sorted by encoding/json
}

// canonicalJSON writes the canonical form of raw, a document json.Marshal wrote, in one pass
// without decoding it into maps. It declines (false) where it cannot be sure to reproduce the
// round trip byte for byte (a repeated name, invalid UTF-8), and the caller takes the round
// trip instead.
func canonicalJSON(raw []byte) ([]byte, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	return appendCanonical(make([]byte, 0, len(raw)), dec)
}

// member is one object member in canonical form: its name and its value's span in the
// object's buffer.
type member struct {
	name       string
	start, end int
}

func appendCanonical(dst []byte, dec *jsontext.Decoder) ([]byte, bool) {
	switch dec.PeekKind() {
	case '{':
		return appendCanonicalObject(dst, dec)
	case '[':
		if _, err := dec.ReadToken(); err != nil {
			return nil, false
		}
		dst = append(dst, '[')
		for first := true; dec.PeekKind() != ']'; first = false {
			if !first {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendCanonical(dst, dec); !ok {
				return nil, false
			}
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, false
		}
		return append(dst, ']'), true
	case '0':
		lit, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		return appendCanonicalNumber(dst, lit)
	case '"':
		v, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		return appendCanonicalString(dst, v)
	case 't', 'f', 'n':
		v, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		return append(dst, v...), true
	default:
		return nil, false
	}
}

func appendCanonicalObject(dst []byte, dec *jsontext.Decoder) ([]byte, bool) {
	if _, err := dec.ReadToken(); err != nil {
		return nil, false
	}
	var values []byte
	var members []member
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil || tok.Kind() != '"' {
			return nil, false
		}
		name := tok.String()
		if redact.IsSecretName(name) {
			if err := dec.SkipValue(); err != nil {
				return nil, false
			}
			continue
		}
		start := len(values)
		var ok bool
		if values, ok = appendCanonical(values, dec); !ok {
			return nil, false
		}
		members = append(members, member{name: name, start: start, end: len(values)})
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, false
	}
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.name, b.name) })
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			if m.name == members[i-1].name {
				return nil, false // a map keeps one of them
			}
			dst = append(dst, ',')
		}
		dst = appendName(dst, m.name)
		dst = append(dst, ':')
		dst = append(dst, values[m.start:m.end]...)
	}
	return append(dst, '}'), true
}

// appendCanonicalString writes a quoted string as encoding/json writes its value. Without
// escapes it is already that: json.Marshal escapes every character it would escape again.
// With escapes (a json.RawMessage or a MarshalJSON may choose other ones than
// encoding/json's, and an invalid-UTF-8 replacement is written escaped but re-encoded raw)
// it is decoded and encoded again.
func appendCanonicalString(dst, quoted []byte) ([]byte, bool) {
	if bytes.IndexByte(quoted, '\\') < 0 && utf8.Valid(quoted) {
		return append(dst, quoted...), true
	}
	s, err := jsontext.AppendUnquote(nil, quoted)
	if err != nil {
		return nil, false
	}
	b, err := json.Marshal(string(s))
	if err != nil {
		return nil, false
	}
	return append(dst, b...), true
}

// appendName writes an object member name as encoding/json writes a map key.
func appendName(dst []byte, name string) []byte {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, _ := json.Marshal(name) // a string always encodes
			return append(dst, quoted...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"')
}

// appendCanonicalNumber writes a number as encoding/json writes it after decoding it into a
// float64. An integer of at most 15 digits is exact in a float64 and written with the same
// digits.
func appendCanonicalNumber(dst, lit []byte) ([]byte, bool) {
	digits := lit
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	plain := len(digits) > 0 && len(digits) <= 15 && !bytes.ContainsFunc(digits, func(r rune) bool { return r < '0' || r > '9' })
	if plain {
		return append(dst, lit...), true
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return nil, false
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, false
	}
	return append(dst, b...), true
}
