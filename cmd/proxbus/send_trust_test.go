package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/embedded"
	"github.com/proxbus/proxbus/seal"
	"github.com/proxbus/proxbus/sign"
)

// TestSendSealsAndSigns: proxbus send seals every secret field to the key published in the
// keys bucket (or given with --seal-public-key), leaves the data as it is when no key is
// published, and signs the command with --sign-key-file.
func TestSendSealsAndSigns(t *testing.T) {
	t.Parallel()
	key, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	opener, _ := seal.NewOpener(key.Identity)
	signer, seed, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	seedFile, pubFile := filepath.Join(dir, "p.nk"), filepath.Join(dir, "seal.pub")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubFile, []byte(key.Public+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const data = `{"source":{"template_vmid":9000},"new_vmid":341,"new_name":"web-341","target_node":"pve1","cloud_init":{"user":"ops","password":"ci-canary"}}`
	tests := []struct {
		name      string
		publish   bool
		args      []string
		wantSeal  bool
		wantSigns bool
	}{
		{"no key anywhere", false, nil, false, false},
		{"key in the keys bucket", true, nil, true, false},
		{"key file", false, []string{"--seal-public-key", pubFile}, true, false},
		{"signed", true, []string{"--sign-key-file", seedFile}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := natsWithStreams(t, embedded.NATSOptions{})
			if tt.publish {
				if err := seal.PublishPublicKeys(context.Background(), n.JS, events.NewSubjects(""), []string{key.Public}); err != nil {
					t.Fatal(err)
				}
			}
			args := append([]string{"vm.provision", "--endpoint", "1", "--data", data, "--id", "seal-1", "--no-wait", "--nats-url", n.URL}, tt.args...)
			if code, out, errOut := sendCLI(context.Background(), "", args...); code != 0 {
				t.Fatalf("code %d\n%s\n%s", code, out, errOut)
			}
			cmds := storedCommands(t, n)
			if len(cmds) != 1 {
				t.Fatalf("%d commands stored, want 1", len(cmds))
			}
			c := cmds[0]
			sealed := !strings.Contains(string(c.Data), "canary")
			if sealed != tt.wantSeal {
				t.Fatalf("data %s: sealed %v, want %v", c.Data, sealed, tt.wantSeal)
			}
			if sealed {
				if names := seal.PlainSecrets(c.Data); len(names) != 0 {
					t.Errorf("plain secrets left: %v", names)
				}
				var doc struct {
					CloudInit struct {
						Password json.RawMessage `json:"password"`
					} `json:"cloud_init"`
				}
				_ = json.Unmarshal(c.Data, &doc)
				armored, _ := seal.Parse(doc.CloudInit.Password)
				if plain, err := opener.Open(armored); err != nil || plain != "ci-canary" {
					t.Errorf("the sealed password opens to %q, %v", plain, err)
				}
			}
			if signed := sign.Verify(c) == nil && c.Producer == signer.Public(); signed != tt.wantSigns {
				t.Errorf("signed %v, want %v (producer %q)", signed, tt.wantSigns, c.Producer)
			}
		})
	}
}
