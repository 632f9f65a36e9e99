package proxmox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// The flat decoding: a PVE JSON object becomes strings the way PVE's config files hold
// them: strings as is, numbers as written ("8007", "0.75", "1e3"), booleans "1"/"0"; null
// members are dropped (a later null also drops an earlier duplicate); nested arrays/objects
// keep their exact JSON text. Decoding follows encoding/json: a later duplicate member wins
// and invalid UTF-8 in strings is replaced.

// flatObject decodes the JSON object raw with the flat rules. A null raw is an empty map;
// anything but an object (or invalid JSON) is an error.
func flatObject(raw json.RawMessage) (map[string]string, error) {
	var m flatMap
	if err := m.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	return m, nil
}

// flatMap is a JSON object decoded with the flat rules; as a json.Unmarshaler it can be the
// target of Client.do. Anything but an object is an error.
type flatMap map[string]string

// UnmarshalJSON decodes the object data (null → an empty map) into *m.
func (m *flatMap) UnmarshalJSON(data []byte) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return kindError(data, "an object", err)
	}
	out := make(map[string]string, len(members))
	for name, raw := range members {
		s, ok, err := flatValue(raw)
		switch {
		case err != nil:
			return fmt.Errorf("%s: %w", name, err)
		case ok: // null drops the member
			out[name] = s
		}
	}
	*m = out
	return nil
}

// flatMaps is a JSON array of objects decoded with the flat rules (a null item is an empty
// map); as a json.Unmarshaler it can be the target of Client.do. Anything but an array of
// objects is an error.
type flatMaps []map[string]string

// UnmarshalJSON decodes the array data (null → an empty list) into *l.
func (l *flatMaps) UnmarshalJSON(data []byte) error {
	var items []json.RawMessage
	if err := json.Unmarshal(data, &items); err != nil {
		return kindError(data, "a list", err)
	}
	list := make(flatMaps, 0, len(items))
	for i, raw := range items {
		var m flatMap
		if err := m.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
		list = append(list, m)
	}
	*l = list
	return nil
}

// kindError turns encoding/json's complaint that the valid JSON value data does not fit its
// target into "a JSON KIND where WANT was expected"; any other error is returned as is.
func kindError(data []byte, want string, err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	kind := "value"
	if v := bytes.TrimSpace(data); len(v) > 0 {
		switch v[0] {
		case '[':
			kind = "array"
		case '{':
			kind = "object"
		case '"':
			kind = "string"
		case 't', 'f':
			kind = "boolean"
		default:
			kind = "number"
		}
	}
	return fmt.Errorf("a JSON %s where %s was expected", kind, want)
}

// errNotString is flatValue's error for a value that starts with a quote but is not a valid
// JSON string.
var errNotString = errors.New("proxmox: invalid JSON string")

// flatValue renders one valid JSON value as a PVE config string; ok is false for null.
func flatValue(v []byte) (string, bool, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return "", false, nil
	}
	switch v[0] {
	case '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", false, errNotString // the value is not quoted: it may be a secret
		}
		return s, true, nil
	case 't':
		return "1", true, nil
	case 'f':
		return "0", true, nil
	default: // a number as written, or a nested array or object as its JSON text
		return string(v), true, nil
	}
}

// flatInt parses an integer member ("8007", 8007, 8007.0); missing or unparsable → 0.
func flatInt(m map[string]string, key string) int64 {
	s, ok := m[key]
	if !ok {
		return 0
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return int64(f)
	}
	return 0
}

// flatBool is PVE's boolean: "1" (or true) is true.
func flatBool(m map[string]string, key string) bool {
	switch m[key] {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// flatFloat parses a number member; missing or unparsable → 0.
func flatFloat(m map[string]string, key string) float64 {
	f, _ := strconv.ParseFloat(m[key], 64)
	return f
}

// getList performs a GET that answers a list of objects, decodes it with [flatMaps]' rules
// and converts each item. An answer that is not a list of objects is a *TransportError
// (sent) with "unreadable answer".
func getList[T any](ctx context.Context, c *Client, r request, conv func(map[string]string) T) ([]T, error) {
	var items flatMaps
	if err := c.do(ctx, r, &items); err != nil {
		return nil, err
	}
	out := make([]T, len(items))
	for i, it := range items {
		out[i] = conv(it)
	}
	return out, nil
}
