package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/seal"
	"github.com/proxbus/proxbus/sign"
)

// sendTrustFlags are send's flags of sealed secrets and signed commands (contract §8, §8a).
type sendTrustFlags struct {
	SealPublicKey string `name:"seal-public-key" help:"proxbus's sealing public key (age1…), or a file holding it (proxbus keys create writes ${seal_public_file}); default: the key published in the keys bucket. Secret fields are sealed to it."`
	SignKeyFile   string `name:"sign-key-file" help:"NKey seed file to sign the command with (proxbus keys producer); its key must be in serve's --producers-file."`
}

// finish seals cmd's secret fields, when a sealing key is given or published, and signs it
// when a key file is given; notes go to stderr.
func (f sendTrustFlags) finish(ctx context.Context, js jetstream.JetStream, subjects events.Subjects, cmd events.Command, stderr io.Writer) (events.Command, error) {
	public, err := f.sealKey(ctx, js, subjects)
	switch {
	case errors.Is(err, seal.ErrNoPublicKey):
		// no key anywhere: the secrets go as they are, which a proxbus without sealing expects
	case err != nil && f.SealPublicKey != "":
		return cmd, err
	case err != nil:
		fmt.Fprintf(stderr, "proxbus send: the sealing key could not be read from the keys bucket (%v); secret fields are sent as they are (give --seal-public-key)\n", err)
	case len(seal.PlainSecrets(cmd.Data)) > 0:
		if cmd.Data, err = seal.SealData(cmd.Data, public); err != nil {
			return cmd, fmt.Errorf("--seal-public-key: %w", err)
		}
	}
	if f.SignKeyFile == "" {
		return cmd, nil
	}
	seed, err := os.ReadFile(f.SignKeyFile)
	if err != nil {
		return cmd, fmt.Errorf("--sign-key-file: %w", err)
	}
	signer, err := sign.NewSigner(seed)
	if err != nil {
		return cmd, fmt.Errorf("--sign-key-file %s: %w", f.SignKeyFile, err)
	}
	return signer.Sign(cmd)
}

// sealKey is the public key to seal to: --seal-public-key (a key or a file), else the one
// published in the keys bucket; seal.ErrNoPublicKey when there is none.
func (f sendTrustFlags) sealKey(ctx context.Context, js jetstream.JetStream, subjects events.Subjects) (string, error) {
	v := strings.TrimSpace(f.SealPublicKey)
	switch {
	case strings.HasPrefix(v, "age1"):
		return v, nil
	case v != "":
		b, err := os.ReadFile(v)
		if err != nil {
			return "", fmt.Errorf("--seal-public-key: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return seal.LookupPublicKey(ctx, js, subjects)
}
