package deadletter

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
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
		return []byte(redact.Text(string(body)))
	}
	out, err := json.Marshal(redactDeep(redact.Value(v)))
	if err != nil {
		return []byte(redact.Text(string(body)))
	}
	return out
}

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
			if s, ok := val.(string); ok && k == "data_base64" {
				if raw, err := base64.StdEncoding.DecodeString(s); err == nil {
					t[k] = base64.StdEncoding.EncodeToString(redactBody(raw))
					continue
				}
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
				cp[i] = redact.Text(v)
			}
		}
		out[k] = cp
	}
	return out
}
