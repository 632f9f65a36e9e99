package client

import (
	"errors"
	"fmt"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/seal"
	"github.com/proxbus/proxbus/sign"
)

// WithSealing seals every secret-named field of each command's data (password, secret, token;
// contract §8) to publicKeys, proxbus's age X25519 keys (proxbus keys, or
// [seal.LookupPublicKey]), before it is published; the bus then never holds the secret in the
// clear. A field sealed already is kept as it is.
func WithSealing(publicKeys ...string) Option {
	return func(c *Client) error {
		if len(publicKeys) == 0 {
			return errors.New("client: WithSealing needs at least one public key")
		}
		if _, err := seal.Seal("", publicKeys...); err != nil {
			return fmt.Errorf("client: WithSealing: %w", err)
		}
		return withHook(stageTransform, func(cmd *events.Command) error {
			if len(seal.PlainSecrets(cmd.Data)) == 0 {
				return nil
			}
			data, err := seal.SealData(cmd.Data, publicKeys...)
			if err != nil {
				return err
			}
			cmd.Data = data
			return nil
		})(c)
	}
}

// WithSigner signs each command with s (its producer key and an Ed25519 signature over the
// canonical command; contract §8a), after every other change, so the signature covers the
// command as it is published.
func WithSigner(s *sign.Signer) Option {
	return func(c *Client) error {
		if s == nil {
			return errors.New("client: WithSigner: no signer")
		}
		return withHook(stageSign, func(cmd *events.Command) error {
			signed, err := s.Sign(*cmd)
			if err != nil {
				return err
			}
			*cmd = signed
			return nil
		})(c)
	}
}

// WithPrepare has fn finish each command after every other change and before it is
// published: a producer's own sealing and signing (the HTTP fronts', proxbus send's). An error
// from fn publishes nothing and is returned, wrapped, by Send and Publish.
func WithPrepare(fn func(events.Command) (events.Command, error)) Option {
	return withHook(stageSign+1, func(cmd *events.Command) error {
		out, err := fn(*cmd)
		if err != nil {
			return err
		}
		*cmd = out
		return nil
	})
}
