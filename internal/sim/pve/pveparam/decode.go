package pveparam

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind is what a decoded parameter holds, as Perl sees it after pveproxy decoded it.
type Kind int

// The kinds of a decoded parameter.
const (
	Scalar    Kind = iota // a string (every form value, a JSON string or number)
	Undefined             // named without a value ("k", "k="): PVE treats it as absent
	Array                 // a form key given more than once, or a JSON array
	Bool                  // a JSON true or false
	Object                // a JSON object
)

// Value is one decoded parameter.
type Value struct {
	Kind  Kind
	Text  string   // Scalar: the value; Bool: "1" or "0"
	Items []string // Array: the values in order
}

// Values are a request's decoded parameters by name.
type Values map[string]Value

// ErrBody reports a request body pveproxy cannot decode.
var ErrBody = errors.New("unable to parse request body")

// Decode returns the parameters of a request as pve-http-server's extract_params
// (src/PVE/APIServer/AnyEvent.pm) reads them: for POST and PUT the body, as JSON when the
// Content-Type says application/json and URL-encoded otherwise, then the query string, whose
// parameters replace the body's; "_dc" (the GUI's cache breaker) is dropped
// (handle_api2_request).
func Decode(method, contentType, rawQuery string, body []byte) (Values, error) {
	params := Values{}
	if method == "POST" || method == "PUT" {
		ct, _, _ := mime.ParseMediaType(contentType)
		if ct == "application/json" {
			var err error
			if params, err = decodeJSON(body); err != nil {
				return nil, err
			}
		} else {
			params = DecodeURLEncoded(string(body))
		}
	}
	for k, v := range DecodeURLEncoded(rawQuery) {
		params[k] = v
	}
	delete(params, "_dc")
	return params, nil
}

var (
	percent       = regexp.MustCompile(`%[0-9a-fA-F]{2}`) // one %XX escape
	pairSeparator = regexp.MustCompile(`[&;]`)
)

// DecodeURLEncoded is pve-http-server's decode_urlencoded (src/PVE/APIServer/AnyEvent.pm):
// pairs split at "&" and ";", each at "=" as Perl's split does (trailing empty fields are
// dropped, so "k=" and "k" have no value and "k=a=b" has the value "a"), "+" and %XX
// decoded, the value then decoded as UTF-8 (malformed bytes become U+FFFD); a key given
// again turns into an array of its values, and a key without a value replaces any earlier
// value with none.
func DecodeURLEncoded(data string) Values {
	res := Values{}
	if data == "" || data == "0" { // Perl: return $res if !$data
		return res
	}
	unescape := func(s string) string {
		s = strings.ReplaceAll(s, "+", " ")
		return percent.ReplaceAllStringFunc(s, func(m string) string {
			var b byte
			fmt.Sscanf(m[1:], "%02x", &b)
			return string([]byte{b})
		})
	}
	pairs := pairSeparator.Split(data, -1)
	for len(pairs) > 0 && pairs[len(pairs)-1] == "" { // Perl's split drops trailing empty fields
		pairs = pairs[:len(pairs)-1]
	}
	for _, kv := range pairs {
		fields := perlSplit(kv, "=")
		if len(fields) == 0 {
			fields = []string{""}
		}
		k := unescape(fields[0])
		if len(fields) < 2 {
			res[k] = Value{Kind: Undefined}
			continue
		}
		v := decodeUTF8(unescape(fields[1]))
		if old, ok := res[k]; ok && old.Kind != Undefined {
			items := old.Items
			if old.Kind == Scalar {
				items = []string{old.Text}
			}
			res[k] = Value{Kind: Array, Items: append(items, v)}
			continue
		}
		res[k] = Value{Kind: Scalar, Text: v}
	}
	return res
}

// decodeUTF8 is Encode::decode('utf8', $v) without a check: each byte that is not part of
// a well-formed sequence becomes U+FFFD, so it counts as one character.
func decodeUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			b.WriteRune(utf8.RuneError)
			i++
			continue
		}
		b.WriteString(s[i : i+size])
		i += size
	}
	return b.String()
}

// perlNumber is how Perl prints a number decode_json read: an integer as written, any
// other as a double with 15 significant digits ("1.50" is "1.5", "1e2" is "100").
func perlNumber(n json.Number) string {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		return s
	}
	f, err := n.Float64()
	if err != nil {
		return s
	}
	return strconv.FormatFloat(f, 'g', 15, 64)
}

// perlSplit is Perl's split on a literal separator: trailing empty fields are removed.
func perlSplit(s, sep string) []string {
	fields := strings.Split(s, sep)
	for len(fields) > 0 && fields[len(fields)-1] == "" {
		fields = fields[:len(fields)-1]
	}
	return fields
}

// decodeJSON is decode_json of a JSON body: an object whose members keep their JSON kind.
func decodeJSON(body []byte) (Values, error) {
	res := Values{}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, fmt.Errorf("%w: malformed JSON string, neither tag, array, object, number, string or atom, at character offset 0", ErrBody)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBody, err)
	}
	for k, raw := range obj {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: parameter '%s': %w", ErrBody, k, err)
		}
		switch t := v.(type) {
		case nil:
			res[k] = Value{Kind: Undefined}
		case string:
			res[k] = Value{Kind: Scalar, Text: t}
		case json.Number:
			res[k] = Value{Kind: Scalar, Text: perlNumber(t)}
		case bool:
			res[k] = Value{Kind: Bool, Text: map[bool]string{true: "1", false: "0"}[t]}
		case []any:
			items := make([]string, 0, len(t))
			for _, it := range t {
				items = append(items, fmt.Sprint(it))
			}
			res[k] = Value{Kind: Array, Items: items}
		default:
			res[k] = Value{Kind: Object}
		}
	}
	return res, nil
}

// Set sets name to the string value v (a path parameter, which replaces any other).
func (p Values) Set(name, v string) { p[name] = Value{Kind: Scalar, Text: v} }

// Form returns the defined scalar parameters (JSON booleans as 1 and 0) as url.Values, the
// view a method's code has once the parameters passed [Method.Check].
func (p Values) Form() url.Values {
	out := url.Values{}
	for k, v := range p {
		switch v.Kind {
		case Scalar, Bool:
			out.Set(k, v.Text)
		case Array:
			out[k] = append([]string(nil), v.Items...)
		}
	}
	return out
}
