package proxmox

import (
	"fmt"
	"strconv"
	"strings"
)

// vmcOpt is one option of a property string; Key is "" for a value without a key.
type vmcOpt struct{ Key, Val string }

// vmcSplit splits a PVE property string ("a,k=v,k2=v2") like
// PVE::JSONSchema::parse_property_string: blank parts are skipped, "k=" is an error.
func vmcSplit(key, s string) ([]vmcOpt, error) {
	var out []vmcOpt
	for part := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, found := strings.Cut(part, "=")
		switch {
		case !found:
			out = append(out, vmcOpt{Val: part})
		case k == "" || v == "":
			return nil, &ConfigError{Key: key, Reason: "option without key or value"}
		default:
			out = append(out, vmcOpt{Key: k, Val: v})
		}
	}
	return out, nil
}

// vmcProps parses a property string into options: a value without a key goes to defKey
// ("" = the format has no default key: an error), alias keys are renamed, and a repeated
// option is an error.
func vmcProps(key, s, defKey string, aliases map[string]string) (map[string]string, error) {
	opts, err := vmcSplit(key, s)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(opts))
	for _, o := range opts {
		k := o.Key
		if k == "" {
			if defKey == "" {
				return nil, &ConfigError{Key: key, Reason: "value without a key"}
			}
			k = defKey
		} else if a, ok := aliases[k]; ok {
			k = a
		}
		if _, dup := out[k]; dup {
			return nil, &ConfigError{Key: key, Reason: "duplicate option " + k}
		}
		out[k] = o.Val
	}
	return out, nil
}

// vmcBool parses a PVE boolean (1|on|yes|true, 0|off|no|false, any case).
func vmcBool(key, opt, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "on", "yes", "true":
		return true, nil
	case "0", "off", "no", "false":
		return false, nil
	}
	return false, &ConfigError{Key: key, Reason: vmcWhat(opt) + "not a boolean"}
}

// vmcOptBool is vmcBool of opts[opt], false when absent.
func vmcOptBool(key string, opts map[string]string, opt string) (bool, error) {
	v, ok := opts[opt]
	if !ok {
		return false, nil
	}
	return vmcBool(key, opt, v)
}

// vmcWhat prefixes a reason with the option name ("size: "), or nothing for a plain key.
func vmcWhat(opt string) string {
	if opt == "" {
		return ""
	}
	return opt + ": "
}

// vmcInt parses a decimal integer in [lo, hi].
func vmcInt(key, opt, v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, &ConfigError{Key: key, Reason: fmt.Sprintf("%snot an integer in %d..%d", vmcWhat(opt), lo, hi)}
	}
	return n, nil
}

// vmcScalarInt parses raw[key] as an integer in [lo, hi]; def when unset or empty.
func vmcScalarInt(raw map[string]string, key string, def, lo, hi int64) (int64, error) {
	v := raw[key]
	if v == "" {
		return def, nil
	}
	return vmcInt(key, "", v, lo, hi)
}
