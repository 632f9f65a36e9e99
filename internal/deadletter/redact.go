package deadletter

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/internal/redact"
)

// redactBody returns a copy of a message body that is safe to store in the dead-letter
// stream. A JSON body (binary-mode data or a structured event) has every secret-named value
// replaced at any depth, including inside string values that themselves hold JSON and inside
// a structured event's data_base64; any other body is redacted as free text.
func redactBody(body []byte) []byte {
	v, ok := decodeJSON(body)
	if !ok {
		return []byte(redactText(string(body)))
	}
	out, err := json.Marshal(redactDeep(redact.Value(v)))
	if err != nil {
		return []byte(redactText(string(body)))
	}
	return out
}

// redactText redacts a body that is not JSON as free text. Such a body may still be meant as
// JSON and spell a secret's name with \u escapes ("pass\u0077ord"), which the text redactor
// does not read: the escapes are decoded first, so the name is seen.
func redactText(s string) string {
	if strings.Contains(s, `\u`) || strings.Contains(s, `\U`) {
		s = unescapeUnicode(s)
	}
	return redact.Text(s)
}

// unicodeEscape is one JSON \uXXXX escape (a surrogate pair is two).
var unicodeEscape = regexp.MustCompile(`\\[uU][0-9A-Fa-f]{4}`)

// unescapeUnicode replaces each \uXXXX escape by the character it names (a lone surrogate
// by U+FFFD).
func unescapeUnicode(s string) string {
	return unicodeEscape.ReplaceAllStringFunc(s, func(m string) string {
		n, err := strconv.ParseUint(m[2:], 16, 32)
		if err != nil {
			return m
		}
		return string(rune(n))
	})
}

// base64Encodings are the encodings a data_base64 value is tried with: standard and URL-safe,
// padded or not. What none of them decodes is replaced whole.
var base64Encodings = []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding}

// decodeJSON decodes exactly one JSON document, keeping numbers as written.
func decodeJSON(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	return v, true
}

// redactDeep walks a value that redact.Value already scrubbed by key and scrubs the strings:
// a string holding JSON is redacted as JSON, data_base64 is decoded, redacted and re-encoded,
// and any other string is redacted as free text ("password=…").
func redactDeep(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			if clean := redactText(k); clean != k { // a secret in the key itself ("password=…")
				delete(t, k)
				k = clean
				t[k] = redact.Placeholder
				continue
			}
			if k == "data_base64" {
				t[k] = redactBase64(val)
				continue
			}
			t[k] = redactDeep(val)
		}
		return t
	case []any:
		for i, val := range t {
			t[i] = redactDeep(val)
		}
		return t
	case string:
		trimmed := strings.TrimSpace(t)
		if strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[") {
			if _, ok := decodeJSON([]byte(trimmed)); ok {
				return string(redactBody([]byte(trimmed)))
			}
		}
		return redact.Text(t)
	default:
		return v
	}
}

// redactBase64 redacts a structured event's data_base64: decoded with the first encoding
// that reads it (standard or URL-safe, padded or not), redacted as a body and re-encoded in
// the standard encoding; anything else, which might hide a secret, becomes the placeholder.
func redactBase64(v any) any {
	s, ok := v.(string)
	if !ok {
		return redactDeep(v)
	}
	for _, enc := range base64Encodings {
		if raw, err := enc.DecodeString(s); err == nil {
			return base64.StdEncoding.EncodeToString(redactBody(raw))
		}
	}
	return redact.Placeholder
}

// redactHeader returns a copy of h without the JetStream control headers (Nats-*, which
// would change how the copy is stored) and with the value of every secret-named header
// replaced and every other value redacted as free text. The original Nats-Msg-Id is kept
// under [HeaderDLQMsgID].
func redactHeader(h nats.Header) nats.Header {
	out := nats.Header{}
	for k, vals := range h {
		if strings.EqualFold(k, jetstreamMsgID) {
			if len(vals) > 0 && vals[0] != "" {
				out.Set(HeaderDLQMsgID, vals[0])
			}
			continue
		}
		if strings.HasPrefix(strings.ToLower(k), "nats-") {
			continue
		}
		cp := make([]string, len(vals))
		for i, v := range vals {
			if redact.IsSecretName(k) {
				cp[i] = redact.Placeholder
			} else {
				cp[i] = redactText(v)
			}
		}
		k = redactText(k) // a secret in the header's name
		out[k] = append(out[k], cp...)
	}
	return out
}
