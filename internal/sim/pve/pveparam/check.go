package pveparam

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Check validates params against m as pve-common's PVE::RESTHandler::handle does before a
// method runs (src/PVE/RESTHandler.pm: $normalize_legacy_param_formats, then
// PVE::JSONSchema::validate with the method's parameters, additionalProperties 0) and
// returns the errors by parameter with PVE's texts; nil when every parameter passes.
// Repeated values of a "-list" format are joined with "," first, as PVE does.
func (m Method) Check(params Values) map[string]string {
	for k, v := range params {
		s, ok := m.param(k)
		if ok && v.Kind == Array && s.Type == "string" && strings.HasSuffix(s.Format, "-list") {
			params[k] = Value{Kind: Scalar, Text: strings.Join(v.Items, ",")}
		}
	}
	errs := errorSet{}
	for name, s := range m.Params {
		if strings.HasSuffix(name, "[n]") {
			continue // indexed keys are optional: the present ones are checked below
		}
		v, ok := params[name]
		checkProp(v, ok, s, name, errs)
	}
	for k, v := range params {
		if _, plain := m.Params[k]; !plain {
			if s, indexed := m.param(k); indexed {
				checkProp(v, true, s, k, errs)
			}
		}
	}
	m.checkKeys(params, errs)
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// checkKeys is the second half of check_object: "requires" and undeclared parameters.
func (m Method) checkKeys(params Values, errs errorSet) {
	for k := range params {
		s, ok := m.param(k)
		if !ok {
			errs.add(k, "property is not defined in schema and the schema does not allow additional properties")
			continue
		}
		if s.Requires == "" {
			continue
		}
		if r, ok := params[s.Requires]; !ok || r.Kind == Undefined {
			errs.add(s.Requires, fmt.Sprintf("missing property required by '%s'", k))
		}
	}
}

// errorSet collects errors by path as add_error does: a second error for the same path is
// appended after a literal backslash-n (join('\n', …) in single quotes).
type errorSet map[string]string

func (e errorSet) add(path, msg string) {
	if path == "" {
		path = "_root"
	}
	if old, ok := e[path]; ok {
		e[path] = old + `\n` + msg
		return
	}
	e[path] = msg
}

// checkProp is check_prop (src/PVE/JSONSchema.pm) for one parameter or property-string key:
// absent or undefined (an error unless optional), then the type, then for a string: the
// format, the pattern, maxLength and minLength in characters, the bounds when the value is a
// number, the enumeration; each check stops at the first failure but the enumeration.
func checkProp(v Value, present bool, s Schema, path string, errs errorSet) {
	if s.Alias != "" {
		return // aliases were remapped to their target, which is checked
	}
	if !present || v.Kind == Undefined {
		if !s.Optional {
			errs.add(path, "property is missing and it is not optional")
		}
		return
	}
	if !checkType(v, s.Type, path, errs) || v.Kind != Scalar {
		return
	}
	text := v.Text
	if s.Properties != nil {
		if err := parsePropertyString(s.Properties, nil, text, path); err != nil {
			errs.add(path, "invalid format - "+err.Error())
			return
		}
	} else if s.Format != "" {
		if err := checkFormat(s.Format, text, path); err != nil {
			errs.add(path, "invalid format - "+err.Error())
			return
		}
	}
	if s.Pattern != "" && !perlMatch(s.Pattern, text) {
		errs.add(path, "value does not match the regex pattern")
		return
	}
	if s.MaxLength > 0 && utf8.RuneCountInString(text) > s.MaxLength {
		errs.add(path, fmt.Sprintf("value may only be %d characters long", s.MaxLength))
		return
	}
	if s.MinLength > 0 && utf8.RuneCountInString(text) < s.MinLength {
		errs.add(path, fmt.Sprintf("value must be at least %d characters long", s.MinLength))
		return
	}
	if isNumber(text) {
		n := numify(text)
		if s.Maximum != nil && n > *s.Maximum {
			errs.add(path, "value must have a maximum value of "+perlNum(*s.Maximum))
			return
		}
		if s.Minimum != nil && n < *s.Minimum {
			errs.add(path, "value must have a minimum value of "+perlNum(*s.Minimum))
			return
		}
	}
	if s.Enum != nil && !slices.Contains(s.Enum, text) {
		errs.add(path, fmt.Sprintf("value '%s' does not have a value in the enumeration '%s'", text, strings.Join(s.Enum, ", ")))
	}
}

// checkType is check_type (src/PVE/JSONSchema.pm): a boolean is exactly "1" or "0" (or a
// JSON boolean: PVE takes no "true", "yes" or "on" at the top level), an integer
// /^[+-]?\d+$/, a number Perl's is_number; arrays, objects and JSON booleans are refused
// where a string, integer or number is declared.
func checkType(v Value, typ, path string, errs errorSet) bool {
	if typ == "" {
		return true
	}
	switch v.Kind {
	case Array:
		errs.add(path, fmt.Sprintf("type check ('%s') failed - got ARRAY", typ))
		return false
	case Object:
		errs.add(path, fmt.Sprintf("type check ('%s') failed - got HASH", typ))
		return false
	case Bool:
		if typ == "boolean" {
			return true
		}
		errs.add(path, fmt.Sprintf("type check ('%s') failed - got JSON::PP::Boolean", typ))
		return false
	}
	ok := true
	switch typ {
	case "boolean":
		ok = v.Text == "1" || v.Text == "0"
	case "integer":
		ok = isInteger(v.Text)
	case "number":
		ok = isNumber(v.Text)
	}
	if !ok {
		errs.add(path, fmt.Sprintf("type check ('%s') failed - got '%s'", typ, v.Text))
	}
	return ok
}

// Perl's $ matches at the end or before a final newline: these allow one.
var (
	integerRe = regexp.MustCompile(`^[+-]?\p{Nd}+\n?$`)
	numberRe  = regexp.MustCompile(`^[+-]?(\p{Nd}+\.\p{Nd}+|\p{Nd}+\.|\.\p{Nd}+|\p{Nd}+)([eE][+-]?\p{Nd}+)?\n?$`)
	numPrefix = regexp.MustCompile(`^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?`)
)

// isInteger is is_integer (src/PVE/JSONSchema.pm); \d is Unicode's digits in Perl.
func isInteger(s string) bool { return integerRe.MatchString(s) }

// isNumber is is_number (src/PVE/JSONSchema.pm).
func isNumber(s string) bool { return numberRe.MatchString(s) }

// numify is Perl's numeric value of a string: its leading decimal number, 0 without one.
func numify(s string) float64 {
	m := numPrefix.FindString(s)
	f, err := strconv.ParseFloat(strings.TrimSpace(m), 64)
	if err != nil {
		return 0
	}
	return f
}

// perlNum prints a bound as Perl interpolates a number.
func perlNum(f float64) string { return strconv.FormatFloat(f, 'g', 15, 64) }

// perlMatch is `$value =~ m/^$pattern$/` of check_prop: the pattern anchored as Perl
// interpolates it (a top-level alternative is anchored on one side only), $ also matching
// before a final newline.
func perlMatch(pattern, value string) bool {
	re, err := compilePerl(pattern)
	if err != nil {
		return false
	}
	return re.MatchString(value)
}

// perlFlags is a stringified qr// ("(?^:…)", "(?^i:…)"): Perl's default flags, which RE2
// writes "(?:…)".
var perlFlags = regexp.MustCompile(`\(\?\^([a-z]*):`)

// compilePerl compiles the anchored pattern of check_prop in RE2 syntax.
func compilePerl(pattern string) (*regexp.Regexp, error) {
	pattern = perlFlags.ReplaceAllStringFunc(pattern, func(m string) string {
		if flags := m[3 : len(m)-1]; flags != "" {
			return "(?" + flags + ":"
		}
		return "(?:"
	})
	return regexp.Compile("^" + perlClasses(pattern) + `\n?$`)
}

// perlClasses rewrites Perl's \d, \w and \s, which match Unicode characters in the decoded
// (character) strings PVE checks, as RE2's Unicode classes (RE2's own are ASCII only), and
// Perl's {,n} (at most n, since Perl 5.34; PVE 9 runs 5.40) as {0,n}.
func perlClasses(pattern string) string {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '\\' && i+1 < len(pattern):
			i++
			classes := map[byte]string{'d': `\p{Nd}`, 'w': `\p{L}\p{M}\p{Nd}\p{Pc}`, 's': `\s\x{85}\p{Z}`}
			if cls, ok := classes[pattern[i]]; ok {
				if inClass || pattern[i] == 'd' {
					b.WriteString(cls)
				} else {
					b.WriteString("[" + cls + "]")
				}
				continue
			}
			b.WriteByte(c)
			b.WriteByte(pattern[i])
		case c == '{' && !inClass && strings.HasPrefix(pattern[i:], "{,"):
			b.WriteString("{0") // Perl 5.34+ reads {,n} as {0,n}; RE2 as the literal text
		case c == '[' && !inClass:
			inClass = true
			b.WriteByte(c)
			if i+1 < len(pattern) && pattern[i+1] == '^' { // a leading ] or ^] is literal
				i++
				b.WriteByte('^')
			}
			if i+1 < len(pattern) && pattern[i+1] == ']' {
				i++
				b.WriteByte(']')
			}
		case c == ']' && inClass:
			inClass = false
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
