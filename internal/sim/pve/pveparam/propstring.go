package pveparam

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// formatError is PVE::Exception's "format error" with errors by path, stringified as
// stringify does (one "path: message" line each; sorted here, Perl's hash order is random).
type formatError map[string]string

func (e formatError) Error() string {
	var b strings.Builder
	b.WriteString("format error\n")
	for _, k := range slices.Sorted(maps.Keys(e)) {
		fmt.Fprintf(&b, "%s: %s\n", k, e[k])
	}
	return b.String()
}

var (
	blankPart = regexp.MustCompile(`^\s*$`)
	keyValue  = regexp.MustCompile(`^([^=]+)=(.+)\n?$`)
)

// parsePropertyString is parse_property_string (src/PVE/JSONSchema.pm): the value split at
// ",", blank parts skipped; "key=value" parts (a key given twice is refused, an alias
// stands for its target and, with keyAlias, records its own name there; booleans are read
// with parse_boolean), at most one part without "=" for the default key; then the keys
// checked as an object under path (additional properties refused), then the named
// format's validator. Errors end with a newline, as PVE's die messages do.
func parsePropertyString(format map[string]Schema, validator func(map[string]string) error, data, path string) error {
	res := map[string]string{}
	defaultKey := ""
	for _, part := range perlSplit(data, ",") {
		if blankPart.MatchString(part) {
			continue
		}
		if m := keyValue.FindStringSubmatch(part); m != nil {
			k, v := m[1], m[2]
			if _, dup := res[k]; dup {
				return fmt.Errorf("duplicate key in comma-separated list property: %s\n", k)
			}
			schema, known := format[k]
			if known && schema.Alias != "" {
				if ka := schema.KeyAlias; ka != "" {
					if _, dup := res[ka]; dup {
						return fmt.Errorf("key alias '%s' is already defined\n", ka)
					}
					res[ka] = k
				}
				k = schema.Alias
				schema, known = format[k]
				if _, dup := res[k]; dup {
					return fmt.Errorf("key '%s' is already defined (via alias)\n", k)
				}
			}
			if !known {
				return fmt.Errorf("invalid key in comma-separated list property: %s\n", k)
			}
			if schema.Type == "boolean" {
				v = parseBoolean(v)
			}
			res[k] = v
			continue
		}
		if strings.Contains(part, "=") {
			return errors.New("missing key in comma-separated list property\n")
		}
		if defaultKey != "" {
			return fmt.Errorf("duplicate key in comma-separated list property: %s\n", defaultKey)
		}
		for _, key := range slices.Sorted(maps.Keys(format)) {
			if !format[key].DefaultKey {
				continue
			}
			defaultKey = key
			if old, ok := res[key]; ok && old != "" && old != "0" {
				return fmt.Errorf("duplicate key in comma-separated list property: %s\n", defaultKey)
			}
			if format[key].Type == "boolean" {
				part = parseBoolean(part)
			}
			res[key] = part
			break
		}
		if defaultKey == "" {
			return errors.New("value without key, but schema does not define a default key\n")
		}
	}
	if errs := checkObject(path, format, res); len(errs) > 0 {
		return formatError(errs)
	}
	if validator != nil {
		return validator(res)
	}
	return nil
}

// checkObject is check_object (src/PVE/JSONSchema.pm) for a parsed property string: alias
// keys remapped, every key of the format checked, "requires" and unknown keys refused.
func checkObject(path string, format map[string]Schema, value map[string]string) errorSet {
	errs := errorSet{}
	sub := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	for k, v := range value {
		alias := format[k].Alias
		if alias == "" {
			continue
		}
		if _, both := value[alias]; both {
			errs.add(sub(k), fmt.Sprintf("cannot set both '%s' and its alias target '%s'", k, alias))
			continue
		}
		value[alias] = v
		delete(value, k)
	}
	for k, s := range format {
		v, ok := value[k]
		checkProp(Value{Kind: Scalar, Text: v}, ok, s, sub(k), errs)
	}
	for k := range value {
		s, ok := format[k]
		if !ok {
			errs.add(sub(k), "property is not defined in schema and the schema does not allow additional properties")
			continue
		}
		if s.Requires != "" {
			if _, ok := value[s.Requires]; !ok {
				errs.add(sub(s.Requires), fmt.Sprintf("missing property required by '%s'", sub(k)))
			}
		}
	}
	return errs
}

var (
	boolTrue  = regexp.MustCompile(`(?i)^(1|on|yes|true)\n?$`)
	boolFalse = regexp.MustCompile(`(?i)^(0|off|no|false)\n?$`)
)

// parseBoolean is parse_boolean (src/PVE/JSONSchema.pm) with "// $v": 1 and 0 for the
// words it knows, the value unchanged otherwise (check_type then refuses it).
func parseBoolean(v string) string {
	switch {
	case boolTrue.MatchString(v):
		return "1"
	case boolFalse.MatchString(v):
		return "0"
	}
	return v
}
