// Package sign signs and verifies commands with a producer's NATS NKey (Ed25519), as
// contract §8a describes: the command carries the producer's public user key ("U…") in the
// `producer` attribute and a base64 Ed25519 signature over [Canonical] in `signature`.
//
// The canonical form is documented byte for byte in docs/producers.md, so that a producer in
// any language can sign.
package sign

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/proxbus/proxbus/events"
)

// Version is the first line of the canonical form; it changes if the form ever does.
const Version = "proxbus-command-signature-v1"

var (
	// ErrUnsigned is returned by Verify for a command without producer or signature.
	ErrUnsigned = errors.New("sign: the command is not signed")
	// ErrInvalid is returned by Verify when the producer is not an NKey user public key or the
	// signature does not verify over the command.
	ErrInvalid = errors.New("sign: signature invalid")
	// ErrBadSeed is returned by NewSigner for a seed that is not an NKey user seed.
	ErrBadSeed = errors.New("sign: not an NKey user seed (SU…)")
)

// Canonical returns the bytes a signature covers: the line [Version], then for each of
// specversion, id, source, type, time, endpointid, idempotencykey, actor, expires, dryrun and
// data, in this order, a line "<name> <length>" (the value's length in bytes, decimal)
// followed by the value's bytes and a newline. Values: specversion "1.0"; time and expires in
// UTC as RFC 3339 with fractional seconds only as long as needed (Go's time.RFC3339Nano), ""
// when absent; endpointid in decimal, "" when absent; dryrun "true" or "false"; data the JSON
// data exactly as sent (the payload in binary mode, the `data` member's text in structured
// mode), "" when absent.
func Canonical(c events.Command) []byte {
	endpoint := ""
	if c.HasEndpointID {
		endpoint = strconv.FormatInt(c.EndpointID, 10)
	}
	typ := c.Type
	if typ == "" {
		typ = events.TypePrefix + c.Verb
	}
	var b bytes.Buffer
	b.WriteString(Version)
	b.WriteByte('\n')
	for _, f := range []struct{ name, value string }{
		{events.AttrSpecVersion, "1.0"},
		{events.AttrID, c.ID},
		{events.AttrSource, c.Source},
		{events.AttrType, typ},
		{events.AttrTime, stamp(c.Time)},
		{events.AttrEndpointID, endpoint},
		{events.AttrIdempotencyKey, c.IdempotencyKey},
		{events.AttrActor, c.Actor},
		{events.AttrExpires, stamp(c.Expires)},
		{events.AttrDryRun, strconv.FormatBool(c.DryRun)},
		{"data", string(c.Data)},
	} {
		b.WriteString(f.name)
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(len(f.value)))
		b.WriteByte('\n')
		b.WriteString(f.value)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// Signer signs commands with one producer's key.
type Signer struct {
	kp     nkeys.KeyPair
	public string
}

// NewSigner returns a Signer for an NKey user seed ("SU…").
func NewSigner(seed []byte) (*Signer, error) {
	kp, err := nkeys.FromSeed(bytes.TrimSpace(seed))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSeed, err)
	}
	public, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(public) {
		return nil, ErrBadSeed
	}
	return &Signer{kp: kp, public: public}, nil
}

// Generate creates a new producer key: its Signer and its seed ("SU…", to keep secret).
func Generate() (*Signer, []byte, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, nil, fmt.Errorf("sign: generate key: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, nil, fmt.Errorf("sign: generate key: %w", err)
	}
	s, err := NewSigner(seed)
	return s, seed, err
}

// Public returns the producer's public key ("U…").
func (s *Signer) Public() string { return s.public }

// Sign returns c with Producer and Signature set. Sign the command as it will be sent: after
// its secrets are sealed, with its time and expires set.
func (s *Signer) Sign(c events.Command) (events.Command, error) {
	sig, err := s.kp.Sign(Canonical(c))
	if err != nil {
		return c, fmt.Errorf("sign: %w", err)
	}
	c.Producer, c.Signature = s.public, base64.StdEncoding.EncodeToString(sig)
	return c, nil
}

// Verify checks c's signature against its producer key: nil, [ErrUnsigned], or [ErrInvalid].
// It does not say what the producer may do; see [Producers].
func Verify(c events.Command) error {
	if c.Producer == "" && c.Signature == "" {
		return ErrUnsigned
	}
	if !nkeys.IsValidPublicUserKey(c.Producer) {
		return fmt.Errorf("%w: producer is not an NKey user public key", ErrInvalid)
	}
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil {
		return fmt.Errorf("%w: signature is not base64", ErrInvalid)
	}
	kp, err := nkeys.FromPublicKey(c.Producer)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := kp.Verify(Canonical(c), sig); err != nil {
		return ErrInvalid
	}
	return nil
}
