// Package redact keeps write-only values (passwords, token secrets) out of everything proxbus
// emits: results, events, logs, journal comments, dead letters and Redis records.
//
// Two mechanisms cover the two ways a secret can travel. By name: any JSON object key or log
// attribute whose name contains "password", "secret" or "token" (case-insensitive) has its value
// replaced by [Placeholder]. By value: a secret known to the caller (the password of the command
// being executed) is cut out of free text such as an upstream error message that echoes it.
package redact

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"filippo.io/age/armor"
)

// Placeholder replaces every redacted value.
const Placeholder = "[redacted]"

// IsSecretName reports whether a field or attribute with this name holds a write-only value.
// Names are matched case-insensitively on the substrings password, secret and token, so
// "token_secret", "cloud_init.password" and "X-Auth-Token" are all secret.
func IsSecretName(name string) bool {
	n := name
	if strings.ContainsFunc(name, unicode.IsUpper) { // most names are lower-case already
		n = strings.ToLower(name)
	}
	return strings.Contains(n, "password") || strings.Contains(n, "secret") || strings.Contains(n, "token")
}

// JSON returns a copy of the JSON document with the value of every secret-named key, at any
// depth, replaced by [Placeholder]. A document that is not valid JSON is returned by [Text]
// instead, so the caller always gets something safe to store or print.
func JSON(doc []byte) []byte {
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		return []byte(Text(string(doc)))
	}
	out, err := json.Marshal(Value(v))
	if err != nil {
		return []byte(Text(string(doc)))
	}
	return out
}

// Value returns a copy of a decoded JSON value (maps, slices, scalars as produced by
// encoding/json) with every secret-named key's value replaced by [Placeholder], except a
// sealed one ({"sealed": "<armored age ciphertext>"}, package seal), which is only ciphertext
// and is kept so that a dead letter can be replayed.
func Value(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			if IsSecretName(k) {
				out[k] = Placeholder
				if isSealed(val) {
					out[k] = val
				}
				continue
			}
			out[k] = Value(val)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = Value(val)
		}
		return out
	default:
		return v
	}
}

// isSealed reports whether v is a sealed value: an object whose one member "sealed" is an
// armored age ciphertext that decodes to an age file (its header line first), so that no
// other text passes as one.
func isSealed(v any) bool {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return false
	}
	s, ok := m["sealed"].(string)
	if !ok || len(s) > maxSealed || !strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), armor.Header) {
		return false
	}
	raw, err := io.ReadAll(armor.NewReader(strings.NewReader(s)))
	return err == nil && bytes.HasPrefix(raw, []byte("age-encryption.org/v1\n"))
}

// maxSealed bounds the sealed values kept (seal.MaxSealedBytes).
const maxSealed = 16 << 10

// Strip returns a copy of a decoded JSON value with every secret-named key removed. It is what
// request fingerprints are computed over, so a secret never reaches a hash either.
func Strip(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			if IsSecretName(k) {
				continue
			}
			out[k] = Strip(val)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = Strip(val)
		}
		return out
	default:
		return v
	}
}

// secretAssignment matches "name=value", "name: value" and "name":"value" forms whose name is
// secret-like, in free text that is not a JSON document.
// A quoted value runs to its closing quote (escaped quotes included); an unterminated one, or
// an unquoted one, to the end of the token.
var secretAssignment = regexp.MustCompile(`(?i)("?[a-z0-9_.-]*(?:password|secret|token)[a-z0-9_.-]*"?\s*[:=]\s*)("(?:[^"\\]|\\.)*"?|'[^']*'?|[^\s,;&"'}]+)`)

// Text redacts secret-named assignments (password=..., "token": "...") in free text. A quoted
// value stays quoted, so redacted JSON is still JSON.
func Text(s string) string {
	if !MayNameSecret(s) {
		return s
	}
	return secretAssignment.ReplaceAllStringFunc(s, func(m string) string {
		sub := secretAssignment.FindStringSubmatch(m)
		switch {
		case strings.HasPrefix(sub[2], `"`):
			return sub[1] + `"` + Placeholder + `"`
		case strings.HasPrefix(sub[2], "'"):
			return sub[1] + "'" + Placeholder + "'"
		default:
			return sub[1] + Placeholder
		}
	})
}

// MayNameSecret reports whether s could hold a secret-like name ([IsSecretName]), so that a
// caller can skip a costlier search for the text of almost every event: false only when s is
// ASCII and holds none of the words in any case (with non-ASCII text, Unicode case folding
// could make one). JSON text may spell a name with \u escapes, which this does not decode.
func MayNameSecret(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return true
		}
	}
	return IsSecretName(s)
}

// Values returns s with every occurrence of each known secret value replaced by [Placeholder],
// and with secret-named assignments redacted as [Text] does. Secrets shorter than four bytes
// are ignored: cutting them out would mangle ordinary text without protecting anything.
func Values(s string, secrets ...string) string {
	for _, sec := range secrets {
		if len(sec) < 4 {
			continue
		}
		s = strings.ReplaceAll(s, sec, Placeholder)
	}
	return Text(s)
}
