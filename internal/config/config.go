// Package config holds what every configuration of proxbus shares: the error that says it
// cannot work.
//
// Every package's configuration follows one rule, stated in its doc: the zero value of a
// field means its documented default (an exported Default… constant), and a value out of
// range is an error wrapping [ErrInvalid], never silently replaced.
package config

import "errors"

// ErrInvalid reports a configuration that cannot work: a required setting missing, a value
// out of range, a file that cannot be read or does not parse, settings that contradict each
// other. Every package's configuration error wraps it, so errors.Is(err, ErrInvalid) tells
// such an error from a failure at run time. The error's text names the flag or field at
// fault, never a secret's value.
var ErrInvalid = errors.New("invalid configuration")
