package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/proxbus/proxbus/seal"
)

// ReasonSecretNotSealed refuses a plain secret under --require-sealed-secrets (contract §8).
const ReasonSecretNotSealed = "secret_not_sealed"

// SecretOpener opens sealed secret values ({"sealed": "<armored>"}, contract §8); package
// seal's *Opener is one.
type SecretOpener interface {
	Open(armored string) (string, error)
}

// ErrNoOpener is returned when a sealed secret must be opened and proxbus holds no key.
var ErrNoOpener = errors.New("handlers: a secret is sealed, and proxbus has no key to open it (proxbus keys; serve --seal-key)")

// sealing is how the pipeline treats secret fields: the opener (nil: no key) and whether
// plain secrets are refused.
type sealing struct {
	opener  SecretOpener
	require bool
	// unopened accepts a sealed value without opening it, for a producer's check of its own
	// data (Registry.Check), which holds no key.
	unopened bool
}

func (p *Pipeline) sealing() sealing {
	return sealing{opener: p.cfg.Opener, require: p.cfg.RequireSealedSecrets}
}

// notSealed is the 422 secret_not_sealed outcome for data whose secret fields are not all
// sealed, when sealing is required; nil otherwise.
func (s sealing) notSealed(data json.RawMessage) *Outcome {
	if !s.require {
		return nil
	}
	names := seal.PlainSecrets(data)
	if len(names) == 0 {
		return nil
	}
	return &Outcome{Status: 422, Result: ResultRefused, Reason: ReasonSecretNotSealed, Fields: names,
		Detail: "this proxbus requires secret fields to be sealed to its public key (proxbus keys; proxbus send and the Go client seal them)"}
}

// sealedString reads a secret field that holds a sealed value: it is opened to be checked
// with valid (and opened again, by [Exec.Open], for the Proxmox call that needs it), and the
// armored text is returned. ok is false when raw is not a sealed value.
func (f *Fields) sealedString(name string, raw json.RawMessage, valid func(string) bool) (armored string, ok bool) {
	armored, ok = seal.Parse(raw)
	if !ok {
		return "", false
	}
	if f.sealing.opener == nil {
		if !f.sealing.unopened {
			f.Fail(name)
		}
		return armored, true
	}
	plain, err := f.sealing.opener.Open(armored)
	if err != nil || plain == "" || (valid != nil && !valid(plain)) {
		f.Fail(name)
		return "", true
	}
	return armored, true
}

// Open returns the value of a secret field of the input: a plain value as it is, a sealed
// one opened. Call it right before the Proxmox call that needs the value, and give the value
// to nothing else; it is cut out of every text the command emits from then on.
func (x *Exec) Open(value string) (string, error) {
	if !seal.IsArmored(value) {
		return value, nil
	}
	opener := x.r.p.cfg.Opener
	if opener == nil {
		return "", ErrNoOpener
	}
	plain, err := opener.Open(value)
	if err != nil {
		return "", fmt.Errorf("handlers: open a sealed secret: %w", err)
	}
	x.r.opened.add(plain)
	return plain, nil
}

// openedSecrets are the values a command's sealed secrets were opened to.
type openedSecrets struct {
	mu     sync.Mutex
	values []string
}

func (o *openedSecrets) add(v string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !slices.Contains(o.values, v) {
		o.values = append(o.values, v)
	}
}

// with returns secrets followed by the opened values, in a new slice.
func (o *openedSecrets) with(secrets []string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Concat(secrets, o.values)
}
