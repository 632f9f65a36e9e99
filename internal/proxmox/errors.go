package proxmox

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Sentinel errors. Every error returned by a [Client] method matches exactly one of
// [ErrUnreachable], [ErrAnswerLost] or an [*APIError] (which in turn may match ErrNotFound,
// ErrUnauthorized or ErrAlreadyExists); use errors.Is and errors.As.
var (
	// ErrNotFound: the addressed object does not exist (HTTP 404, or PVE's 500 "… does not
	// exist"). Matched by *APIError.
	ErrNotFound = errors.New("proxmox: not found")
	// ErrUnreachable: nothing was sent — DNS, dial, TLS (including a pinned-fingerprint
	// mismatch) or connection failure before the request was written. Safe to retry.
	ErrUnreachable = errors.New("proxmox: unreachable")
	// ErrAnswerLost: the request was written but no usable answer arrived (timeout, reset,
	// unreadable body). A write may have happened: confirm it by reading, never resend blindly.
	ErrAnswerLost = errors.New("proxmox: answer lost")
	// ErrUnauthorized: HTTP 401, the token was refused. Matched by *APIError.
	ErrUnauthorized = errors.New("proxmox: unauthorized")
	// ErrAlreadyExists: PVE refused a create because the object exists (500 "… already
	// defined" / "… already exists"). Matched by *APIError.
	ErrAlreadyExists = errors.New("proxmox: already exists")
	// ErrUndecodable: a 2xx answer came whose body is not what the API sends (not JSON, null
	// data, or data of another shape). Matched by the cause of an ErrAnswerLost
	// *TransportError.
	ErrUndecodable = errors.New("unreadable answer")
)

// APIError is a refusal by Proxmox: it answered with a non-2xx status.
// Error() never includes parameter values: only the method, path, status, PVE's message and
// the names of rejected parameters. Secrets known to the client are scrubbed from Message
// and Params.
type APIError struct {
	Method string // HTTP method
	Path   string // API path below /api2/json, e.g. "/storage/pbs1"
	Status int    // HTTP status
	// Message is PVE's message (the JSON "message" or the status line's reason phrase),
	// e.g. "Parameter verification failed." or "storage 'x' does not exist".
	Message string
	// Params are the per-parameter errors of a 400 (name → PVE's message). The messages may
	// quote submitted values; show only the names ([APIError.ParamNames]) to users.
	Params map[string]string

	notFound bool // go-proxmox's not-found classification, when converted from it
}

// Error renders "proxmox: METHOD PATH: STATUS MESSAGE [(parameters: a, b)]".
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "proxmox: %s %s: %d", e.Method, e.Path, e.Status)
	if e.Message != "" {
		b.WriteString(" " + e.Message)
	} else if t := http.StatusText(e.Status); t != "" {
		b.WriteString(" " + t)
	}
	if names := e.ParamNames(); len(names) > 0 {
		b.WriteString(" (parameters: " + strings.Join(names, ", ") + ")")
	}
	return b.String()
}

// ParamNames returns the names of the rejected parameters, sorted; nil when there are none.
func (e *APIError) ParamNames() []string {
	if len(e.Params) == 0 {
		return nil
	}
	names := make([]string, 0, len(e.Params))
	for k := range e.Params {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

var (
	notFoundMessage = regexp.MustCompile(`(?i)\bdoes not exists?\b|\bno such (?:cluster node|user|token|storage|vm|resource|task)\b|\bunable to find configuration file\b`)
	existsMessage   = regexp.MustCompile(`(?i)\balready (?:defined|exists?)\b`)
)

// Is makes errors.Is(err, ErrNotFound / ErrUnauthorized / ErrAlreadyExists) work.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound || e.notFound ||
			(e.Status == http.StatusInternalServerError && notFoundMessage.MatchString(e.Message))
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrAlreadyExists:
		return e.Status == http.StatusInternalServerError && existsMessage.MatchString(e.Message)
	}
	return false
}

// TransportError is a request that got no usable answer. Sent tells whether the request
// had been completely written: false matches [ErrUnreachable], true matches [ErrAnswerLost].
// Err is the cause (a *url.Error, context.DeadlineExceeded, a decoding error, …).
type TransportError struct {
	Method string
	Path   string
	Sent   bool
	Err    error
}

// Error renders "proxmox: unreachable|answer lost: METHOD PATH: cause".
func (e *TransportError) Error() string {
	kind := "unreachable"
	if e.Sent {
		kind = "answer lost"
	}
	return fmt.Sprintf("proxmox: %s: %s %s: %v", kind, e.Method, e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *TransportError) Unwrap() error { return e.Err }

// Is matches ErrUnreachable (not sent) or ErrAnswerLost (sent).
func (e *TransportError) Is(target error) bool {
	return (target == ErrUnreachable && !e.Sent) || (target == ErrAnswerLost && e.Sent)
}

// IsTransient reports whether repeating the same request later is safe and may succeed.
// The rule:
//   - ErrUnreachable: yes, for every method (nothing was sent).
//   - ErrAnswerLost: only for reads (GET); a write may have been applied.
//   - *APIError 502, 503, 504: yes (a proxy or an overloaded pveproxy answered, not the API).
//   - *APIError 595, 596 (pveproxy could not reach the target node): only for reads.
//   - everything else, including 500 (PVE uses it for "does not exist", "already defined",
//     failed checks), 4xx and nil: no.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var te *TransportError
	if errors.As(err, &te) {
		return !te.Sent || te.Method == http.MethodGet
	}
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		case 595, 596:
			return ae.Method == http.MethodGet
		}
		return false
	}
	return errors.Is(err, ErrUnreachable)
}

// statusText is "STATUS MESSAGE" for logs.
func statusText(status int, msg string) string {
	if msg == "" {
		msg = http.StatusText(status)
	}
	return strconv.Itoa(status) + " " + msg
}
