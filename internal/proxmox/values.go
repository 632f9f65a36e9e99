package proxmox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/proxbus/proxbus/internal/jsonstr"
)

// The flat decoding: a PVE JSON object becomes strings the way PVE's config files hold
// them: strings as is, numbers as written ("8007", "0.75", "1e3"), booleans "1"/"0"; null
// members are dropped (a later null also drops an earlier duplicate); nested arrays/objects
// keep their exact JSON text. One pass of a streaming JSON decoder (jsontext) reads each
// document and renders every value from its raw bytes.

// flatObject decodes the JSON object raw with the flat rules. A null raw is an empty map;
// anything but an object (or invalid JSON) is an error.
func flatObject(raw json.RawMessage) (map[string]string, error) {
	var m flatMap
	if err := m.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	return m, nil
}

// flatList decodes the JSON array of objects raw with the flat rules (a null item is an
// empty map). A null raw is an empty list; anything but an array of objects (or invalid
// JSON) is an error.
func flatList(raw json.RawMessage) ([]map[string]string, error) {
	var l flatMaps
	if err := l.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	return l, nil
}

// flatMap is a JSON object decoded with the flat rules; as a json.Unmarshaler it can be the
// target of Client.do.
type flatMap map[string]string

// UnmarshalJSON decodes the object data (null → an empty map) into *m.
func (m *flatMap) UnmarshalJSON(data []byte) error {
	dec := newFlatDecoder(data)
	obj, err := readFlatObject(dec, memberNames{})
	if err == nil {
		err = readEnd(dec)
	}
	if err != nil {
		return err
	}
	*m = obj
	return nil
}

// flatMaps is a JSON array of objects decoded with the flat rules; as a json.Unmarshaler it
// can be the target of Client.do.
type flatMaps []map[string]string

// UnmarshalJSON decodes the array data (null → an empty list) into *l.
func (l *flatMaps) UnmarshalJSON(data []byte) error {
	dec := newFlatDecoder(data)
	list := flatMaps{}
	names := memberNames{}
	switch tok, err := dec.ReadToken(); {
	case err != nil:
		return err
	case tok.Kind() == 'n':
	case tok.Kind() != '[':
		return fmt.Errorf("a JSON %s where a list was expected", kindName(tok.Kind()))
	default:
		for dec.PeekKind() != ']' {
			obj, err := readFlatObject(dec, names)
			if err != nil {
				return fmt.Errorf("item %d: %w", len(list), err)
			}
			list = append(list, obj)
		}
		if _, err := dec.ReadToken(); err != nil { // ]
			return err
		}
	}
	if err := readEnd(dec); err != nil {
		return err
	}
	*l = list
	return nil
}

// readFlatObject reads one object (null → an empty map) from dec with the flat rules.
func readFlatObject(dec *jsontext.Decoder, names memberNames) (map[string]string, error) {
	tok, err := dec.ReadToken()
	switch {
	case err != nil:
		return nil, err
	case tok.Kind() == 'n':
		return map[string]string{}, nil
	case tok.Kind() != '{':
		return nil, fmt.Errorf("a JSON %s where an object was expected", kindName(tok.Kind()))
	}
	out := make(map[string]string)
	for dec.PeekKind() != '}' {
		name, err := names.read(dec)
		if err != nil {
			return nil, err
		}
		val, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		s, ok, err := flatValue(val)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s: %w", name, err)
		case ok:
			out[name] = s
		default: // null drops the member, also an earlier one of the same name
			delete(out, name)
		}
	}
	if _, err := dec.ReadToken(); err != nil { // }
		return nil, err
	}
	return out, nil
}

// memberNames interns the member names of one document: the items of a PVE list repeat the
// same few names, each is allocated once.
type memberNames map[string]string

// read reads the next member name from dec.
func (n memberNames) read(dec *jsontext.Decoder) (string, error) {
	raw, err := dec.ReadValue()
	if err != nil {
		return "", err
	}
	if name, ok := n[string(raw)]; ok { // no allocation: the conversion is only a lookup
		return name, nil
	}
	name, _, err := flatValue(raw) // the member name is a JSON string
	if err != nil {
		return "", err
	}
	n[string(raw)] = name
	return name, nil
}

// newFlatDecoder reads data as encoding/json does: duplicate member names (the last one
// wins) and invalid UTF-8 (replaced) are accepted.
func newFlatDecoder(data []byte) *jsontext.Decoder {
	return jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
}

// kindName names a JSON kind in an error.
func kindName(k jsontext.Kind) string {
	switch k {
	case '[':
		return "array"
	case '{':
		return "object"
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "boolean"
	default:
		return k.String()
	}
}

// readEnd requires dec to be at the end of its input.
func readEnd(dec *jsontext.Decoder) error {
	if _, err := dec.ReadToken(); err != io.EOF {
		return fmt.Errorf("data after the value: %w", err)
	}
	return nil
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
		s, ok := jsonstr.Decode(v)
		if !ok {
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

// getList performs a GET that answers a list of objects, decodes it with [flatList]'s
// rules in the same pass as go-proxmox's and converts each item. An answer that is not a
// list of objects is a *TransportError (sent) with "unreadable answer".
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
