package events

import (
	"bytes"
	"encoding/json"
)

// readBinary extracts a binary-mode envelope: known attributes from the ce-* headers found by
// scanHeaders (values percent-decoded), data from the body. It never fails outright; what is
// unusable is recorded in the envelope. The Content-Type is checked by the caller.
func readBinary(hs *headerScan, body []byte) envelope {
	var env envelope
	for i, a := range hs.ce {
		if !a.seen {
			continue
		}
		name := knownAttrs[i]
		if a.n != 1 {
			env.bad[i] = name + reasonDuplicateSuffix
			continue
		}
		v, err := percentDecode(a.first)
		if err != nil {
			env.bad[i] = name + reasonPercentSuffix
			continue
		}
		env.set(i, v)
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
