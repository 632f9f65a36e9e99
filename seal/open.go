package seal

import (
	"fmt"
	"io"
	"strings"

	"filippo.io/age"
	"filippo.io/age/armor"
)

// Opener opens sealed values with proxbus's identities. During a key rotation it holds two:
// the new one, and the old one until no command sealed to it is left.
type Opener struct {
	ids    []age.Identity
	public []string
}

// NewOpener returns an Opener for one or more identities ("AGE-SECRET-KEY-1…").
func NewOpener(identities ...string) (*Opener, error) {
	if len(identities) == 0 {
		return nil, fmt.Errorf("%w: no identity", ErrBadKey)
	}
	o := &Opener{}
	for _, s := range identities {
		id, err := age.ParseX25519Identity(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("%w: identity: %w", ErrBadKey, err)
		}
		o.ids = append(o.ids, id)
		o.public = append(o.public, id.Recipient().String())
	}
	return o, nil
}

// Public returns the public keys of the opener's identities, in the order given.
func (o *Opener) Public() []string { return append([]string(nil), o.public...) }

// Open decrypts an armored age ciphertext. Any failure is [ErrCannotOpen]; the error says
// nothing about the value.
func (o *Opener) Open(armored string) (string, error) {
	if !IsArmored(armored) {
		return "", ErrCannotOpen
	}
	r, err := age.Decrypt(armor.NewReader(strings.NewReader(armored)), o.ids...)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrCannotOpen, err)
	}
	plain, err := io.ReadAll(io.LimitReader(r, MaxSealedBytes+1))
	if err != nil || len(plain) > MaxSealedBytes {
		return "", ErrCannotOpen
	}
	return string(plain), nil
}
