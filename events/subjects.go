package events

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// defaultPrefix is the subject prefix used when none is configured.
const defaultPrefix = "proxbus"

// Subjects derives every subject and stream name from one prefix. The zero value behaves as
// the default prefix, "proxbus".
type Subjects struct {
	// Prefix is the first token (or tokens) of every subject; "" means "proxbus".
	Prefix string
}

// NewSubjects returns the names for prefix; "" means "proxbus". The prefix is not
// validated: it is operator configuration and must be a valid NATS subject prefix.
func NewSubjects(prefix string) Subjects {
	if prefix == "" {
		prefix = defaultPrefix
	}
	return Subjects{Prefix: prefix}
}

func (s Subjects) prefix() string {
	if s.Prefix == "" {
		return defaultPrefix
	}
	return s.Prefix
}

// CommandsFilter is the commands stream's subject filter, "proxbus.cmd.>".
func (s Subjects) CommandsFilter() string { return s.prefix() + ".cmd.>" }

// Command is the subject of a command for verb, "proxbus.cmd.<verb>".
func (s Subjects) Command(verb string) string { return s.prefix() + ".cmd." + verb }

// VerbOf is the inverse of [Subjects.Command]: it returns the verb of a command subject, or
// false when subject is not a concrete subject under the commands prefix (empty verb, empty
// token, wildcard or whitespace).
func (s Subjects) VerbOf(subject string) (string, bool) {
	verb, ok := strings.CutPrefix(subject, s.prefix()+".cmd.")
	if !ok || !validVerb(verb) {
		return "", false
	}
	return verb, true
}

// validVerb reports whether verb is a non-empty sequence of dot-separated, non-wildcard
// subject tokens.
func validVerb(verb string) bool {
	if verb == "" {
		return false
	}
	for tok := range strings.SplitSeq(verb, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return false
		}
		for _, r := range tok {
			if r <= ' ' || r == 0x7f {
				return false
			}
		}
	}
	return true
}

// EventsFilter is the events stream's subject filter, "proxbus.evt.>".
func (s Subjects) EventsFilter() string { return s.prefix() + ".evt.>" }

// Step is the subject of a command's step events, "proxbus.evt.<ref>.step".
func (s Subjects) Step(ref string) string { return s.prefix() + ".evt." + ref + ".step" }

// Result is the subject of a command's result event, "proxbus.evt.<ref>.result".
func (s Subjects) Result(ref string) string { return s.prefix() + ".evt." + ref + ".result" }

// Journal is the subject of a command's journal events, "proxbus.evt.<ref>.journal".
func (s Subjects) Journal(ref string) string { return s.prefix() + ".evt." + ref + ".journal" }

// Follow matches every event of one command, "proxbus.evt.<ref>.>".
func (s Subjects) Follow(ref string) string { return s.prefix() + ".evt." + ref + ".>" }

// Schedule is the subject of the message schedule named name, "proxbus.schedule.<name>"
// (contract §11); only proxbus writes there.
func (s Subjects) Schedule(name string) string { return s.prefix() + ".schedule." + name }

// ScheduleSource is the CloudEvents source of the commands the schedule named name fires,
// "urn:proxbus:schedule:<name>" (contract §11).
func ScheduleSource(name string) string { return "urn:proxbus:schedule:" + name }

// DLQFilter is the dead-letter stream's subject filter, "proxbus.dlq.>".
func (s Subjects) DLQFilter() string { return s.prefix() + ".dlq.>" }

// DLQ is the dead-letter subject for verb, "proxbus.dlq.<verb>"; a verb that is empty or not a
// valid subject token sequence becomes "unknown".
func (s Subjects) DLQ(verb string) string {
	if !validVerb(verb) {
		verb = "unknown"
	}
	return s.prefix() + ".dlq." + verb
}

// CommandsStream is the commands stream name, "PROXBUS_COMMANDS".
func (s Subjects) CommandsStream() string { return s.streamBase() + "_COMMANDS" }

// EventsStream is the events stream name, "PROXBUS_EVENTS".
func (s Subjects) EventsStream() string { return s.streamBase() + "_EVENTS" }

// DLQStream is the dead-letter stream name, "PROXBUS_DLQ".
func (s Subjects) DLQStream() string { return s.streamBase() + "_DLQ" }

// streamBase is the prefix upper-cased, with every character that is not an ASCII letter,
// digit or '_' (notably '.' and '-') replaced by '_', so it is a valid stream name.
func (s Subjects) streamBase() string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			return r
		default:
			return '_'
		}
	}, s.prefix())
}

// Ref is the event-subject token of a command: id itself when it matches
// ^[A-Za-z0-9_-]{1,128}$, else "h" + the first 32 hex digits of sha256(source + "\n" + id).
// It is always a single valid subject token.
func Ref(source, id string) string {
	if simpleRef(id) {
		return id
	}
	sum := sha256.Sum256([]byte(source + "\n" + id))
	return "h" + hex.EncodeToString(sum[:])[:32]
}

func simpleRef(id string) bool {
	if len(id) < 1 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
