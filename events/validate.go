package events

import (
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// validID reports whether id can identify a command: non-empty, valid UTF-8, no control
// characters and no surrounding whitespace (it is echoed into Nats-Msg-Id headers, which NATS
// trims, and event ids, and the CloudEvents SDK trims it too).
func validID(id string) bool {
	return id != "" && strings.TrimSpace(id) == id && utf8.ValidString(id) && !hasControl(id)
}

// validSource reports whether source is a URI-reference (validID rules) in the form the
// CloudEvents SDK writes it back: a source the SDK would rewrite (a raw space, an upper-case
// scheme) is refused so that both content modes accept exactly the same sources and a command
// keeps its identity (source + id) whichever mode carries it.
func validSource(source string) bool {
	if !validID(source) {
		return false
	}
	u, err := url.Parse(source)
	return err == nil && u.String() == source
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

// validIdempotencyKey: 1–255 printable ASCII characters (U+0020–U+007E).
func validIdempotencyKey(k string) bool {
	if len(k) < 1 || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// MaxActorBytes is the longest actor a command may name.
const MaxActorBytes = 255

// ValidActor reports whether a is an acceptable actor: at most [MaxActorBytes] bytes of valid
// UTF-8 without control characters (C0, DEL, C1) or bidirectional and other invisible
// formatting characters (Unicode category Cf: U+202E, U+2066, U+200B...). The actor is shown
// to approvers, in the console and in NetBox journal entries, and compared by the two-person
// rule, so it must read as what it is.
func ValidActor(a string) bool {
	if len(a) > MaxActorBytes || !utf8.ValidString(a) {
		return false
	}
	for _, r := range a {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

// parseEndpointID accepts a positive decimal integer without sign or leading zeros that fits
// in an int64.
func parseEndpointID(s string) (int64, bool) {
	if s == "" || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// parseTime parses an RFC 3339 timestamp (fractional seconds optional) and returns it in UTC.
func parseTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// formatTime is the canonical CloudEvents time form proxbus writes: UTC, RFC 3339 with
// nanoseconds as needed (the same form the CloudEvents SDK writes).
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// mediaType returns the lower-cased media type of a Content-Type value, without parameters.
func mediaType(v string) string {
	if i := strings.IndexByte(v, ';'); i >= 0 {
		v = v[:i]
	}
	return strings.ToLower(strings.TrimSpace(v))
}

// validTraceParent reports whether tp is a well-formed W3C traceparent: version-traceid-
// parentid-flags in lower-case hex, trace and parent ids not all zero, version not ff, and for
// version 00 nothing after the flags.
func validTraceParent(tp string) bool {
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return false
	}
	version, traceID, parentID, flags := tp[0:2], tp[3:35], tp[36:52], tp[53:55]
	for _, part := range []string{version, traceID, parentID, flags} {
		if !lowerHex(part) {
			return false
		}
	}
	if version == "ff" || allZero(traceID) || allZero(parentID) {
		return false
	}
	if version == "00" {
		return len(tp) == 55
	}
	return len(tp) == 55 || tp[55] == '-'
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool { return strings.Trim(s, "0") == "" }

func utf8Valid(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}
