package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/embedded"
	"github.com/proxbus/proxbus/seal"
	"github.com/proxbus/proxbus/sign"
)

func keysCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut strings.Builder
	err := runSub(context.Background(), []string{"keys"}, args, strings.NewReader(""), &out, &errOut)
	return out.String(), err
}

// TestKeysCreate: proxbus keys create writes the identity (0600) and the public key, prints
// the public key, publishes it with --publish, and never overwrites a key.
func TestKeysCreate(t *testing.T) {
	t.Parallel()
	n := natsWithStreams(t, embedded.NATSOptions{})
	dir := t.TempDir()
	out, err := keysCLI(t, "create", "--dir", dir, "--publish", "--nats-url", n.URL)
	if err != nil {
		t.Fatalf("keys create: %v", err)
	}
	public := strings.TrimSpace(out)
	id, err := os.ReadFile(filepath.Join(dir, sealKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := seal.PublicOf(app.IdentityLine(string(id))); err != nil || got != public {
		t.Errorf("the key file's public key %q, %v; printed %q", got, err, public)
	}
	if fi, _ := os.Stat(filepath.Join(dir, sealKeyFile)); fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	if pub, _ := os.ReadFile(filepath.Join(dir, sealPublicFile)); strings.TrimSpace(string(pub)) != public {
		t.Errorf("public file %q, want %q", pub, public)
	}
	if got, err := seal.LookupPublicKey(context.Background(), n.JS, events.NewSubjects("")); err != nil || got != public {
		t.Errorf("published %q, %v; want %q", got, err, public)
	}
	if _, err := keysCLI(t, "create", "--dir", dir); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a second create in the same directory: %v, want a refusal", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, sealKeyFile)); string(after) != string(id) {
		t.Error("the key was overwritten")
	}
}

// TestKeysProducer: proxbus keys producer writes an NKey seed that signs as the printed key.
func TestKeysProducer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, err := keysCLI(t, "producer", "--dir", dir)
	if err != nil {
		t.Fatalf("keys producer: %v", err)
	}
	seed, err := os.ReadFile(filepath.Join(dir, producerKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.NewSigner(seed)
	if err != nil || s.Public() != strings.TrimSpace(out) {
		t.Errorf("the seed signs as %v (%v), printed %q", s, err, out)
	}
}
