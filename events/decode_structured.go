package events

import (
	"bytes"
	"encoding/json"
	"math"
)

// readStructured extracts a structured-mode envelope from a JSON event: known attributes with
// a JSON string value (null counts as absent), endpointid also as a JSON number, and the data.
// A body that is not a JSON object sets fatal. The CloudEvents SDK parses the body afterwards
// (see Decode); this pass exists to give precise poison reasons and to read endpointid without
// the SDK's 32-bit float conversion.
func readStructured(body []byte) envelope {
	var env envelope
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil { // raw is nil for null
		env.fatal = reasonNotObject
		return env
	}
	for i, name := range knownAttrs {
		v, ok := raw[name]
		if !ok || isNull(v) {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			env.set(i, s)
			continue
		}
		switch name {
		case AttrDryRun:
			var b bool
			if json.Unmarshal(v, &b) == nil {
				env.set(i, map[bool]string{true: "true", false: "false"}[b])
			} else {
				env.bad[i] = reasonDryRun
			}
		case AttrEndpointID:
			if digits, ok := int32Number(v); ok {
				env.set(i, digits)
			} else {
				env.bad[i] = reasonEndpointID
			}
		case AttrSpecVersion:
			env.bad[i] = reasonSpecVersion
		case AttrID:
			env.bad[i] = reasonID
		case AttrSource:
			env.bad[i] = reasonSource
		case AttrType:
			env.bad[i] = reasonType
		case AttrTime:
			env.bad[i] = reasonTime
		case AttrExpires:
			env.bad[i] = reasonExpires
		case AttrIdempotencyKey:
			env.bad[i] = reasonIdempotencyKey
		case AttrDataContentType:
			env.bad[i] = reasonDataContentType
		default:
			env.bad[i] = name + reasonNotStringSuffix
		}
	}
	if v, ok := raw["data_base64"]; ok && !isNull(v) {
		env.dataReason = reasonDataBase64
	}
	if v, ok := raw["data"]; ok {
		env.data = nonNullJSON(v)
	}
	return env
}

// sniffStructured reads body as a structured event for a message without ce-* headers and
// Content-Type (contract §2): it reports true, with the envelope, when body is a JSON object
// with a "specversion" member that is not null. Otherwise the message is binary and the
// envelope is to be discarded.
func sniffStructured(body []byte) (envelope, bool) {
	env := readStructured(body)
	if env.fatal != "" || !env.present[attrSpecVersion] && env.bad[attrSpecVersion] == "" {
		return envelope{}, false
	}
	return env, true
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// int32Number returns the decimal digits of a JSON number that is a positive integer within
// the CloudEvents Integer range (32-bit signed), written without fraction or exponent.
func int32Number(v json.RawMessage) (string, bool) {
	s := string(bytes.TrimSpace(v))
	n, ok := parseEndpointID(s)
	if !ok || n > math.MaxInt32 {
		return "", false
	}
	return s, true
}
