package app

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/seal"
	"github.com/proxbus/proxbus/sign"
)

// TestTrustRefusals: a sealing or signing setting that cannot work stops serve with an error
// naming its flag.
func TestTrustRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	good, junk := filepath.Join(dir, "seal.key"), filepath.Join(dir, "junk")
	if err := os.WriteFile(good, []byte("# public key: "+k.Public+"\n"+k.Identity+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(junk, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		trust Trust
		want  string
	}{
		{"sealing required without a key", Trust{RequireSealedSecrets: true}, "--seal-key-file"},
		{"three keys", Trust{SealKeyFiles: []string{good, good, good}}, "at most two"},
		{"a missing key file", Trust{SealKeyFiles: []string{filepath.Join(dir, "nope")}}, "--seal-key-file"},
		{"not a key", Trust{SealKeyFiles: []string{junk}}, "proxbus keys create"},
		{"a front key that is not a seed", Trust{FrontKeyFile: junk}, "--front-key-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := tt.trust.opener()
			if err == nil {
				_, err = tt.trust.frontPrepare(o, time.Now)
			}
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want config.ErrInvalid naming %q", err, tt.want)
			}
		})
	}
}

// TestFrontPrepare: the fronts seal secret fields to the current key and sign, giving the
// command its time when it has none.
func TestFrontPrepare(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k, _ := seal.GenerateKey()
	keyFile, seedFile := filepath.Join(dir, "seal.key"), filepath.Join(dir, "front.nk")
	signer, seed, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte(k.Identity), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	tr := Trust{SealKeyFiles: []string{keyFile}, FrontKeyFile: seedFile}
	o, err := tr.opener()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	prepare, err := tr.frontPrepare(o, func() time.Time { return at })
	if err != nil || prepare == nil {
		t.Fatalf("frontPrepare = %v", err)
	}
	c, err := prepare(events.Command{ID: "f-1", Source: "/proxbox-api", Verb: "storage.pbs.create", Data: []byte(`{"storage":"s","password":"pw"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(c.Data), `"pw"`) || len(seal.PlainSecrets(c.Data)) > 0 {
		t.Errorf("not sealed: %s", c.Data)
	}
	if err := sign.Verify(c); err != nil || c.Producer != signer.Public() || !c.Time.Equal(at) {
		t.Errorf("signed %v by %q at %v", err, c.Producer, c.Time)
	}
	if none, err := (Trust{}).frontPrepare(nil, time.Now); none != nil || err != nil {
		t.Errorf("without keys: %v, %v; want nothing to do", none != nil, err)
	}
}
