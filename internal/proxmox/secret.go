package proxmox

import (
	"fmt"
	"log/slog"

	"github.com/proxbus/proxbus/internal/redact"
)

// Secret is a write-only string: a token secret or a password. Every way of printing,
// marshalling or logging it (String, GoString, Format, MarshalJSON, MarshalText, MarshalYAML,
// LogValue) yields "[redacted]"; only [Secret.Reveal] returns the value.
type Secret string

// Reveal returns the secret value. Call it only where the value is sent to its destination.
func (s Secret) Reveal() string { return string(s) }

// String returns "[redacted]".
func (s Secret) String() string { return redact.Placeholder }

// GoString returns "[redacted]", so %#v does not leak the value either.
func (s Secret) GoString() string { return redact.Placeholder }

// Format writes "[redacted]" for every fmt verb.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redact.Placeholder)) }

// MarshalJSON encodes the secret as the JSON string "[redacted]".
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redact.Placeholder + `"`), nil }

// MarshalText returns "[redacted]".
func (s Secret) MarshalText() ([]byte, error) { return []byte(redact.Placeholder), nil }

// MarshalYAML returns "[redacted]".
func (s Secret) MarshalYAML() (any, error) { return redact.Placeholder, nil }

// LogValue makes slog record "[redacted]".
func (s Secret) LogValue() slog.Value { return slog.StringValue(redact.Placeholder) }
