package events

import "errors"

// errPoison is wrapped by every [*PoisonError]: the message is not a valid command and
// redelivering it cannot help.
var errPoison = errors.New("events: message is not a valid command")

// PoisonError says why a message is not a command.
//
// Reason is a fixed phrase naming the rule that failed (at most a known attribute name); it
// never contains a value from the message, so it may be logged and published as the result's
// detail. ID, Source and Verb hold what could be read and is itself valid (possibly empty):
// ID and Source are only reported when they would be accepted in a command, so they are safe to
// use in a result event and its headers. Err is the underlying cause, if any; its text may
// quote message content, so it is not part of Error().
type PoisonError struct {
	Reason           string
	ID, Source, Verb string
	Err              error
}

// Error returns "events: message is not a valid command: <reason>".
func (e *PoisonError) Error() string {
	return errPoison.Error() + ": " + e.Reason
}

// Unwrap returns the package's poison sentinel and, when set, Err, so errors.Is and errors.As
// see the underlying cause.
func (e *PoisonError) Unwrap() []error {
	if e.Err == nil {
		return []error{errPoison}
	}
	return []error{errPoison, e.Err}
}

// Poison reasons. They are stable: tests and operators match on them.
const (
	reasonTooLarge        = "message exceeds 1 MiB"
	reasonScheduleMsg     = "a message schedule on a command subject"
	reasonScheduler       = "fired by a message schedule that is not proxbus's (Nats-Scheduler must be <prefix>.schedule.<name> and source urn:proxbus:schedule:<name>)"
	reasonScheduledVerb   = "a message schedule may not fire a command.* or schedule.* verb"
	reasonSubject         = "subject is not a command subject"
	reasonNotObject       = "structured body is not a JSON object"
	reasonMalformed       = "malformed CloudEvent"
	reasonSpecVersion     = "specversion missing or not 1.0"
	reasonID              = "id missing or invalid"
	reasonSource          = "source missing or not a URI-reference"
	reasonType            = "type missing"
	reasonTypeMismatch    = "type does not match the subject's verb"
	reasonTime            = "time is not RFC 3339"
	reasonExpires         = "expires is not RFC 3339"
	reasonDryRun          = "dryrun is not true or false"
	reasonEndpointID      = "endpointid is not a positive integer"
	reasonIdempotencyKey  = "idempotencykey is not 1-255 printable ASCII characters"
	reasonActor           = "actor is longer than 255 bytes or holds control or formatting characters"
	reasonContentType     = "content type is not application/json"
	reasonDataContentType = "datacontenttype is not application/json"
	reasonDataBase64      = "data_base64 is not accepted: data must be JSON"
	reasonDataNotJSON     = "data is not JSON"
	reasonNotStringSuffix = " is not a string"
	reasonDuplicateSuffix = " is given more than once"
	reasonPercentSuffix   = " is not percent-encoded UTF-8"
)
