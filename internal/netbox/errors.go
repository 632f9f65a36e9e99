package netbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/proxbus/proxbus/internal/redact"
)

// Sentinel errors: every error the client returns wraps exactly one of them.
var (
	// ErrNotFound: NetBox answered 404 (the object, or the plugin route, does not exist).
	ErrNotFound = errors.New("netbox: not found")
	// ErrUnauthorized: NetBox answered 401 or 403 (bad or missing token, or no permission).
	ErrUnauthorized = errors.New("netbox: unauthorized")
	// ErrUnavailable: network errors, timeouts, 408, 429, 5xx and unreadable answers: transient.
	ErrUnavailable = errors.New("netbox: unavailable")
	// ErrRejected: any other 4xx, or a request refused before sending: permanent. The error
	// names the fields NetBox rejected, never their values.
	ErrRejected = errors.New("netbox: request rejected")
	// ErrNotNetBox: the URL answered, but not as NetBox's API does ([Client.Ping] only): 404
	// on /api/status/, or an answer that is not NetBox's status document. The URL is wrong.
	ErrNotNetBox = errors.New("netbox: not a NetBox API")
)

// IsTransient reports whether err is worth retrying later: errors.Is(err, ErrUnavailable).
func IsTransient(err error) bool { return errors.Is(err, ErrUnavailable) }

// ShouldWait reports whether a command that met err before any write should wait for NetBox
// rather than fail (contract §4, "Waiting is not failing"): NetBox is unavailable
// ([ErrUnavailable]) or refuses the token ([ErrUnauthorized]: 401/403, which the operator
// fixes, not the command). Rejections and not-found answers are the command's outcome.
func ShouldWait(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrUnauthorized)
}

// StatusOf returns the HTTP status of a NetBox answer carried by err (an [*Error]), or 0 when
// no answer arrived or err is not the client's.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// Error is the error type the client returns for a failed request. It unwraps to its sentinel
// (ErrNotFound, ErrUnauthorized, ErrUnavailable, ErrRejected or ErrNotNetBox) and to the
// transport error, if any.
type Error struct {
	// Op names the operation, e.g. "create journal entry".
	Op string
	// Status is NetBox's HTTP status, 0 when no answer arrived.
	Status int
	// Fields are the names of the fields NetBox rejected (400), sorted; never their values.
	Fields []string
	// Detail is NetBox's "detail" message for 401/403/404 answers, redacted and shortened.
	Detail string

	kind  error
	cause error
	text  string
}

// Error returns a one-line description without secrets or rejected values.
func (e *Error) Error() string { return e.text }

// Unwrap returns the sentinel and the underlying transport error, if any.
func (e *Error) Unwrap() []error {
	if e.cause != nil {
		return []error{e.kind, e.cause}
	}
	return []error{e.kind}
}

// newError builds an Error and its (redacted) text once.
func newError(op string, kind error, status int, fields []string, detail string, cause error, secrets []string) *Error {
	e := &Error{Op: op, Status: status, Fields: fields, kind: kind, cause: cause}
	var b strings.Builder
	b.WriteString("netbox: ")
	b.WriteString(op)
	b.WriteString(": ")
	b.WriteString(strings.TrimPrefix(kind.Error(), "netbox: "))
	if status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", status)
	}
	if len(fields) > 0 {
		b.WriteString(": fields ")
		b.WriteString(strings.Join(fields, ", "))
	}
	if detail != "" {
		detail = shorten(redact.Values(detail, secrets...), 200)
		e.Detail = detail
		b.WriteString(": ")
		b.WriteString(detail)
	}
	if cause != nil {
		b.WriteString(": ")
		b.WriteString(shorten(cause.Error(), 300))
	}
	e.text = redact.Values(b.String(), secrets...)
	return e
}

// shorten cuts s to at most n bytes on a rune boundary.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// classify turns a non-2xx answer into an *Error.
func classify(op string, status int, body []byte, secrets []string) *Error {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return newError(op, ErrUnauthorized, status, nil, detailOf(body), nil, secrets)
	case status == http.StatusNotFound:
		return newError(op, ErrNotFound, status, nil, detailOf(body), nil, secrets)
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
		return newError(op, ErrUnavailable, status, nil, "", nil, secrets)
	default:
		return newError(op, ErrRejected, status, fieldsOf(body), "", nil, secrets)
	}
}

// detailOf returns the "detail" string of a DRF error body, or "".
func detailOf(body []byte) string {
	var v struct {
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	return v.Detail
}

// fieldsOf returns the sorted field names of a DRF validation error body: the keys of the
// object (or of each object of a bulk answer). Messages are dropped: they may echo values.
func fieldsOf(body []byte) []string {
	var objs []map[string]json.RawMessage
	var one map[string]json.RawMessage
	if json.Unmarshal(body, &one) == nil {
		objs = append(objs, one)
	} else if json.Unmarshal(body, &objs) != nil {
		return nil
	}
	set := map[string]bool{}
	for _, o := range objs {
		for k := range o {
			switch {
			case k == "detail":
			case fieldName.MatchString(k):
				set[k] = true
			default:
				set["(unnamed)"] = true // not a field name: it could be a value
			}
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) > maxFields {
		out = append(out[:maxFields], "…")
	}
	return out
}

// fieldName is what a DRF field name looks like; other keys are never repeated.
var fieldName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]{0,63}$`)

// maxFields bounds the field names an error lists.
const maxFields = 20

// sortedCopy returns the strings sorted, in a new slice.
func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
