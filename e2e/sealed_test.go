package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/seal"
)

// TestSealedSecretsCanary is contract §8's sealed secrets, end to end: commands carrying a
// canary secret (a PBS password and a Cloud-Init password) run, one dead-lettered command
// carries it too, and then every file under the JetStream store directory, every Redis key
// of the test, every dead letter and every journal entry is searched for the canary. Sealed by
// the producer, it is found nowhere (and the Cloud-Init password still reached Proxmox);
// sent plain, it is found in the store directory, so the search can fail.
func TestSealedSecretsCanary(t *testing.T) {
	t.Parallel()
	for _, sealed := range []bool{true, false} {
		t.Run(fmt.Sprintf("sealed=%v", sealed), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cur, old := newSealKey(t), newSealKey(t)
			e.start(func(c *app.Config) {
				// a rotation: the new key first, the old one still accepted
				c.Trust = app.Trust{SealKeyFiles: []string{cur.file, old.file}, RequireSealedSecrets: sealed}
				c.Endpoints = slices.Clone(c.Endpoints)
				c.Endpoints[0].Approval.Verbs = []string{"storage.pbs.create"}
			})
			secret := "CANARY-" + randomHex(t)
			prepare := func(data string, to seal.Key) string {
				if !sealed {
					return data
				}
				out, err := seal.SealData(json.RawMessage(data), to.Public)
				if err != nil {
					t.Fatalf("SealData: %v", err)
				}
				return string(out)
			}

			if got, err := seal.LookupPublicKey(context.Background(), e.nats.JS, e.subjects); err != nil || got != cur.Public {
				t.Errorf("published key = %q, %v; want the current key %q", got, err, cur.Public)
			}
			prov := e.guestCommand("vm.provision", prepare(`{"source":{"template_vmid":9000},"new_vmid":341,"new_name":"web-341","target_node":"pve1","storage":"local-lvm",`+
				`"cloud_init":{"user":"ops","password":"`+secret+`"}}`, cur.Key))
			if res := e.send(prov); res.Status != 201 {
				t.Fatalf("vm.provision: %d %s %s %v", res.Status, res.Reason, res.Detail, res.Fields)
			}
			if !e.pve.CheckCloudInitPassword(341, secret) {
				t.Error("Proxmox did not get the opened Cloud-Init password")
			}
			// A poison command (its type names another verb) is dead-lettered as it came.
			poison := e.command(prepare(strings.ReplaceAll(pbs("sealed2"), canary, secret), cur.Key))
			msg, err := events.EncodeBinary(e.subjects, events.Command{ID: poison.ID, Source: poison.Source, Verb: "vm.start", EndpointID: 1, HasEndpointID: true, Data: poison.Data})
			if err != nil {
				t.Fatal(err)
			}
			msg.Subject = e.subjects.Command("storage.pbs.create")
			e.publishMsg(msg)
			eventually(t, 20*time.Second, "the dead letter", func() bool { return len(e.streamMessages(e.subjects.DLQStream(), "")) > 0 })
			if sealed {
				plain := e.command(pbs("sealed3")) // the harness's canary, not this test's secret
				res := e.send(plain)
				if res.Status != 422 || res.Reason != "secret_not_sealed" || !slices.Equal(res.Fields, []string{"password"}) {
					t.Errorf("a plain secret under --require-sealed-secrets: %d %s %v, want 422 secret_not_sealed [password]", res.Status, res.Reason, res.Fields)
				}
			}
			// A command awaiting approval rests in the commands stream: its message is on disk.
			// Sealed to the old key, it was opened (validated) before it waits.
			waiting := e.command(prepare(strings.ReplaceAll(pbs("sealed1"), canary, secret), old.Key))
			e.publish(waiting)
			eventually(t, 20*time.Second, "the approval wait", func() bool {
				for _, st := range e.steps(waiting) {
					if st.Status == events.StepWaiting {
						return true
					}
				}
				return false
			})

			hits := map[string]int{}
			for _, m := range e.streamMessages(e.subjects.DLQStream(), "") {
				hits["dead letters"] += bytes.Count(m.Data, []byte(secret))
				// a sealed secret is kept in the dead letter, so that it can be replayed
				if sealed && !bytes.Contains(m.Data, []byte(`"password":{"sealed":"-----BEGIN AGE ENCRYPTED FILE-----`)) {
					t.Errorf("the dead letter lost its sealed password: %s", m.Data)
				}
			}
			hits["redis"] = strings.Count(e.redisDump(), secret)
			for _, je := range e.netbox.JournalEntries() {
				hits["journal"] += strings.Count(je.Comments, secret)
			}
			// The store is read once the waiting command's id is on disk: its data is then too.
			dir := e.nats.Server.StoreDir()
			eventually(t, 20*time.Second, "the waiting command on disk", func() bool { return storeCount(t, dir, waiting.ID) > 0 })
			hits["store"] = storeCount(t, dir, secret)

			approve := e.guestCommand("command.approve", fmt.Sprintf(`{"command_id":%q,"command_source":%q}`, waiting.ID, waiting.Source))
			approve.Actor, approve.HasEndpointID = "approver", false
			e.publish(approve)
			if res := e.result(waiting); res.Status != 201 {
				t.Errorf("storage.pbs.create sealed to the old key, approved: %d %s %s %v", res.Status, res.Reason, res.Detail, res.Fields)
			}
			total := 0
			for _, n := range hits {
				total += n
			}
			switch {
			case sealed && total != 0:
				t.Errorf("the sealed canary is in the clear: %v", hits)
			case !sealed && total == 0:
				t.Errorf("the plain canary was found nowhere: the search cannot see a secret (%v)", hits)
			case !sealed:
				t.Logf("plain canary found: %v", hits)
			}
		})
	}
}

// sealKey is a proxbus sealing key written to a file.
type sealKey struct {
	seal.Key
	file string
}

func newSealKey(t *testing.T) sealKey {
	t.Helper()
	k, err := seal.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "seal.key")
	if err := os.WriteFile(file, []byte("# public key: "+k.Public+"\n"+k.Identity+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return sealKey{Key: k, file: file}
}

// storeCount counts the occurrences of s in the files under dir.
func storeCount(t *testing.T, dir, s string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil // a block compacted or removed meanwhile
		}
		n += bytes.Count(b, []byte(s))
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return n
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
