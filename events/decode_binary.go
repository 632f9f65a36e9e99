package events

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/nats-io/nats.go"
)

// readBinary extracts a binary-mode envelope: known attributes from ce-* headers (names
// case-insensitive, values percent-decoded), data from the body. It never fails outright; what
// is unusable is recorded in the envelope. The Content-Type is checked by the caller.
func readBinary(h nats.Header, body []byte) *envelope {
	env := newEnvelope()
	raw := map[string][]string{}
	for k, vs := range h {
		if len(k) <= len(HeaderPrefix) || !strings.EqualFold(k[:len(HeaderPrefix)], HeaderPrefix) {
			continue
		}
		name := strings.ToLower(k[len(HeaderPrefix):])
		if isKnownAttr(name) {
			raw[name] = append(raw[name], vs...)
		}
	}
	for name, vs := range raw {
		if len(vs) != 1 {
			env.bad[name] = name + reasonDuplicateSuffix
			continue
		}
		v, err := percentDecode(vs[0])
		if err != nil {
			env.bad[name] = name + reasonPercentSuffix
			continue
		}
		env.attrs[name] = v
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return env
	}
	if !json.Valid(body) {
		env.dataReason = reasonDataNotJSON
		return env
	}
	env.data = nonNullJSON(body)
	return env
}
