package guestconfig

import (
	"fmt"
	"strconv"
	"strings"
)

// option is one option of a property string; Key is "" for a value without a key.
type option struct{ Key, Val string }

// split splits a PVE property string ("a,k=v,k2=v2") like
// PVE::JSONSchema::parse_property_string: blank parts are skipped, "k=" is an error.
func split(key, s string) ([]option, error) {
	var out []option
	for part := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, found := strings.Cut(part, "=")
		switch {
		case !found:
			out = append(out, option{Val: part})
		case k == "" || v == "":
			return nil, &Error{Key: key, Reason: "option without key or value"}
		default:
			out = append(out, option{Key: k, Val: v})
		}
	}
	return out, nil
}

// props parses a property string into options: a value without a key goes to defKey
// ("" = the format has no default key: an error), alias keys are renamed, and a repeated
// option is an error.
func props(key, s, defKey string, aliases map[string]string) (map[string]string, error) {
	opts, err := split(key, s)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(opts))
	for _, o := range opts {
		k := o.Key
		if k == "" {
			if defKey == "" {
				return nil, &Error{Key: key, Reason: "value without a key"}
			}
			k = defKey
		} else if a, ok := aliases[k]; ok {
			k = a
		}
		if _, dup := out[k]; dup {
			return nil, &Error{Key: key, Reason: "duplicate option " + k}
		}
		out[k] = o.Val
	}
	return out, nil
}

// parseBool parses a PVE boolean (1|on|yes|true, 0|off|no|false, any case).
func parseBool(key, opt, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "on", "yes", "true":
		return true, nil
	case "0", "off", "no", "false":
		return false, nil
	}
	return false, &Error{Key: key, Reason: what(opt) + "not a boolean"}
}

// optBool is parseBool of opts[opt], false when absent.
func optBool(key string, opts map[string]string, opt string) (bool, error) {
	v, ok := opts[opt]
	if !ok {
		return false, nil
	}
	return parseBool(key, opt, v)
}

// what prefixes a reason with the option name ("size: "), or nothing for a plain key.
func what(opt string) string {
	if opt == "" {
		return ""
	}
	return opt + ": "
}

// parseInt parses a decimal integer in [lo, hi].
func parseInt(key, opt, v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, &Error{Key: key, Reason: fmt.Sprintf("%snot an integer in %d..%d", what(opt), lo, hi)}
	}
	return n, nil
}

// scalarInt parses raw[key] as an integer in [lo, hi]; def when unset or empty.
func scalarInt(raw map[string]string, key string, def, lo, hi int64) (int64, error) {
	v := raw[key]
	if v == "" {
		return def, nil
	}
	return parseInt(key, "", v, lo, hi)
}
