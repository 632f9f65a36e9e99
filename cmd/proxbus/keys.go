package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/seal"
	"github.com/proxbus/proxbus/sign"
)

// File names `proxbus keys` writes in --dir.
const (
	sealKeyFile     = "proxbus-seal.key"     // the identity serve opens seals with (0600)
	sealPublicFile  = "proxbus-seal.pub"     // the public key producers seal to
	producerKeyFile = "proxbus-producer.nk"  // an NKey user seed a producer (or the fronts) signs with (0600)
	producerPubFile = "proxbus-producer.pub" // its public key, for the producers file
)

// keysCmd is `proxbus keys`: the key pairs of sealed secrets and signed commands (contract
// §8, §8a; docs/security.md).
type keysCmd struct {
	Create   keysCreateCmd   `cmd:"" help:"Create proxbus's sealing key pair (serve --seal-key-file) and print its public key."`
	Publish  keysPublishCmd  `cmd:"" help:"Publish the sealing public keys of --seal-key-file in the keys bucket, where producers find them."`
	Producer keysProducerCmd `cmd:"" help:"Create a producer's NKey (it signs commands; the HTTP fronts' --front-key-file) and print its public key."`
}

// keysCreateCmd is `proxbus keys create`.
type keysCreateCmd struct {
	Dir     string `name:"dir" default:"." noenv:"" help:"Directory to write ${seal_key_file} (0600) and ${seal_public_file} in."`
	Publish bool   `name:"publish" noenv:"" help:"Also publish the public key in the keys bucket (as keys publish)."`
	natsFlags
}

// Run writes the key pair; it never overwrites a key.
func (c *keysCreateCmd) Run(e *cliEnv) error {
	k, err := seal.GenerateKey()
	if err != nil {
		return err
	}
	keyPath := filepath.Join(c.Dir, sealKeyFile)
	if err := writeKeyPair(keyPath, "# proxbus sealing key (serve --seal-key-file); public key: "+k.Public+"\n"+k.Identity+"\n",
		filepath.Join(c.Dir, sealPublicFile), k.Public+"\n"); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, k.Public)
	fmt.Fprintf(e.stderr, "wrote %s (give it to serve: --seal-key-file) and %s (for producers: send --seal-public-key)\n",
		keyPath, filepath.Join(c.Dir, sealPublicFile))
	if !c.Publish {
		return nil
	}
	return publishSealKeys(e, &c.natsFlags, []string{k.Public})
}

// keysPublishCmd is `proxbus keys publish`.
type keysPublishCmd struct {
	SealKeyFile []string `name:"seal-key-file" help:"Files of proxbus's sealing keys: the current one first, during a rotation the old one second."`
	natsFlags
}

// Run publishes the public keys of the key files.
func (c *keysPublishCmd) Run(e *cliEnv) error {
	if len(c.SealKeyFile) == 0 {
		return fmt.Errorf("%w: --seal-key-file is required (proxbus keys create writes one)", errUsage)
	}
	var public []string
	for _, f := range c.SealKeyFile {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("%w: --seal-key-file %s: %w", errUsage, f, err)
		}
		p, err := seal.PublicOf(app.IdentityLine(string(b)))
		if err != nil {
			return fmt.Errorf("%w: --seal-key-file %s: %w", errUsage, f, err)
		}
		public = append(public, p)
	}
	return publishSealKeys(e, &c.natsFlags, public)
}

func publishSealKeys(e *cliEnv, nf *natsFlags, public []string) error {
	client, err := e.connectNATS(nf, app.InboxService)
	if err != nil {
		return err
	}
	defer client.Close()
	subjects := events.NewSubjects(nf.SubjectPrefix)
	if err := seal.PublishPublicKeys(client.ctx, client.js, subjects, public); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "published in the KV bucket %s, key %s\n", seal.KeysBucket(subjects), seal.PublicKeyName)
	return nil
}

// keysProducerCmd is `proxbus keys producer`.
type keysProducerCmd struct {
	Dir string `name:"dir" default:"." noenv:"" help:"Directory to write ${producer_key_file} (0600) and ${producer_public_file} in."`
}

// Run writes the producer's seed and public key.
func (c *keysProducerCmd) Run(e *cliEnv) error {
	s, seed, err := sign.Generate()
	if err != nil {
		return err
	}
	keyPath := filepath.Join(c.Dir, producerKeyFile)
	if err := writeKeyPair(keyPath, string(seed)+"\n", filepath.Join(c.Dir, producerPubFile), s.Public()+"\n"); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, s.Public())
	fmt.Fprintf(e.stderr, "wrote %s (the producer signs with it; keep it secret) and %s (list it in serve's --producers-file)\n",
		keyPath, filepath.Join(c.Dir, producerPubFile))
	return nil
}

// writeKeyPair writes a secret key file (0600) and its public file, refusing to overwrite
// either.
func writeKeyPair(secretPath, secret, publicPath, public string) error {
	for _, p := range []string{secretPath, publicPath} {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%w: %s exists: proxbus keys never overwrites a key (move it away, or choose another --dir)", errUsage, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s: %w", errUsage, p, err)
		}
	}
	f, err := os.OpenFile(secretPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if _, err := f.WriteString(secret); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.WriteFile(publicPath, []byte(strings.TrimSpace(public)+"\n"), 0o644)
}
