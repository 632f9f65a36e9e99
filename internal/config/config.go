// Package config holds what every configuration of proxbus shares: the error that says it
// cannot work.
//
// Every package's configuration follows one rule, stated in its doc: the zero value of a
// field means its documented default (an exported Default… constant), and a value out of
// range is an error wrapping [ErrInvalid], never silently replaced.
package config

import (
	"errors"
	"fmt"
)

// ErrInvalid reports a configuration that cannot work: a required setting missing, a value
// out of range, a file that cannot be read or does not parse, settings that contradict each
// other. Every package's configuration error wraps it, so errors.Is(err, ErrInvalid) tells
// such an error from a failure at run time. The error's text names the flag or field at
// fault, never a secret's value.
var ErrInvalid = errors.New("invalid configuration")

// Default applies the defaulting rule to one field: it sets *field to def when *field holds
// its type's zero value, and leaves a set value alone (even one the validation refuses).
func Default[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// Setting is a numeric setting's name and value, for [NonNegative].
type Setting struct {
	Name  string
	Value int64
}

// Named returns the setting name with value v (an int or a time.Duration).
func Named[T ~int | ~int64](name string, v T) Setting { return Setting{Name: name, Value: int64(v)} }

// NonNegative returns an error wrapping [ErrInvalid] that names the first of settings with a
// negative value, prefixed with component ("store", "consumer", …); nil when there is none.
func NonNegative(component string, settings ...Setting) error {
	for _, s := range settings {
		if s.Value < 0 {
			return fmt.Errorf("%s: %w: %s is negative", component, ErrInvalid, s.Name)
		}
	}
	return nil
}
