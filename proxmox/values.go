package proxmox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// flatObject decodes a PVE JSON object into strings the way PVE's config files hold them:
// strings as is, numbers in decimal, booleans as "0"/"1"; null members are dropped; nested
// arrays/objects keep their JSON text.
func flatObject(raw json.RawMessage) (map[string]string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	return flatFields(obj)
}

// flatFields renders the members of a decoded JSON object with flatValue.
func flatFields(obj map[string]json.RawMessage) (map[string]string, error) {
	out := make(map[string]string, len(obj))
	for k, v := range obj {
		s, ok, err := flatValue(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		if ok {
			out[k] = s
		}
	}
	return out, nil
}

// flatValue renders one JSON value as a PVE config string; ok is false for null.
func flatValue(v json.RawMessage) (string, bool, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return "", false, nil
	}
	switch v[0] {
	case '"':
		// v comes from a document json.Unmarshal has validated: without an escape (and
		// as valid UTF-8, which Unmarshal would otherwise repair) it is the text between
		// the quotes.
		if bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
			return string(v[1 : len(v)-1]), true, nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", false, err
		}
		return s, true, nil
	case 't':
		return "1", true, nil
	case 'f':
		return "0", true, nil
	case '{', '[':
		return string(v), true, nil
	default:
		var n json.Number
		if err := json.Unmarshal(v, &n); err != nil {
			return "", false, err
		}
		return n.String(), true, nil
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

// getList performs a GET that answers a list of objects and converts each flattened item.
func getList[T any](ctx context.Context, c *Client, r request, conv func(map[string]string) T) ([]T, error) {
	var raw json.RawMessage
	if err := c.do(ctx, r, &raw); err != nil {
		return nil, err
	}
	items, err := flatList(raw)
	if err != nil {
		return nil, unreadable(r, err)
	}
	out := make([]T, len(items))
	for i, it := range items {
		out[i] = conv(it)
	}
	return out, nil
}

// flatList decodes a JSON array of objects with flatObject.
func flatList(raw json.RawMessage) ([]map[string]string, error) {
	var items []map[string]json.RawMessage // one pass over the document
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	out := make([]map[string]string, 0, len(items))
	for i, it := range items {
		m, err := flatFields(it)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		out = append(out, m)
	}
	return out, nil
}
