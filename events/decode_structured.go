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
func readStructured(body []byte) *envelope {
	env := newEnvelope()
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(body) {
		env.fatal = reasonNotObject
		return env
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		env.fatal = reasonNotObject
		return env
	}
	for _, name := range knownAttrs {
		v, ok := raw[name]
		if !ok || isNull(v) {
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			env.attrs[name] = s
			continue
		}
		switch name {
		case AttrEndpointID:
			if digits, ok := int32Number(v); ok {
				env.attrs[name] = digits
			} else {
				env.bad[name] = reasonEndpointID
			}
		case AttrSpecVersion:
			env.bad[name] = reasonSpecVersion
		case AttrID:
			env.bad[name] = reasonID
		case AttrSource:
			env.bad[name] = reasonSource
		case AttrType:
			env.bad[name] = reasonType
		case AttrTime:
			env.bad[name] = reasonTime
		case AttrIdempotencyKey:
			env.bad[name] = reasonIdempotencyKey
		case AttrDataContentType:
			env.bad[name] = reasonDataContentType
		default:
			env.bad[name] = name + reasonNotStringSuffix
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
