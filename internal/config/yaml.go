package config

import (
	"errors"
	"fmt"

	"github.com/goccy/go-yaml"
)

// ErrYAMLDecoder is wrapped (with [ErrInvalid]) when the YAML decoder itself crashed on a
// document: goccy/go-yaml v1.19 dereferences nil on some malformed flow collections
// (`rules: ! {a:\n- b}`, upstream issue #735) instead of reporting a syntax error.
var ErrYAMLDecoder = errors.New("the YAML decoder failed on this document")

// UnmarshalYAMLStrict decodes data into v with goccy/go-yaml in strict mode (unknown keys are
// errors). A syntax or type error is an error wrapping [ErrInvalid] with the decoder's
// message; a panic inside the decoder is recovered and becomes an error wrapping ErrInvalid
// and [ErrYAMLDecoder], which never quotes the document. The caller names the file.
func UnmarshalYAMLStrict(data []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %w: check its syntax (an unclosed or mixed flow {...}/[...] collection, a bare tag)", ErrInvalid, ErrYAMLDecoder)
		}
	}()
	if err := yaml.UnmarshalWithOptions(data, v, yaml.Strict()); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalid, yaml.FormatError(err, false, false))
	}
	return nil
}
