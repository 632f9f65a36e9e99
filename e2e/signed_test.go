package e2e_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/sign"
)

// TestSignedCommands is contract §8a under --require-signed-commands: a command signed by a
// key of the producers file, within its rights, runs, with the verified producer in its
// result, its steps and its journal entry, and a second publication of it is only its own
// duplicate; an unsigned command, one outside the key's rights and one whose signature does
// not verify are answered 403 and dead-lettered, and nothing else is written for them (no
// journal entry, no Redis record, no Proxmox call).
func TestSignedCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	producer := newProducer(t)
	file := filepath.Join(t.TempDir(), "producers.yaml")
	if err := os.WriteFile(file, []byte("producers:\n  - key: "+producer.Public()+"\n    name: sync\n    endpoints: [1]\n    verbs: [\"vm.*\"]\n    actor_prefix: \"sync:\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.start(func(c *app.Config) { c.Trust = app.Trust{ProducersFile: file, RequireSignedCommands: true} })

	signed := func(verb, data, actor string) events.Command {
		t.Helper()
		c := e.guestCommand(verb, data)
		c.Actor, c.Time = actor, time.Now().UTC().Truncate(time.Second)
		c, err := producer.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	ok := signed("vm.start", `{"vm":"101"}`, "sync:alice")
	res := e.send(ok)
	if res.Status != 200 || res.Result != "ok" || res.Producer != producer.Public() {
		t.Fatalf("signed vm.start: %d %s %s %s, producer %q", res.Status, res.Result, res.Reason, res.Detail, res.Producer)
	}
	for _, st := range e.steps(ok) {
		if st.Producer != producer.Public() {
			t.Errorf("step %s without the verified producer", st.Step)
		}
	}
	var journaled bool
	for _, je := range e.netbox.JournalEntries() {
		if strings.Contains(je.Comments, ok.ID) {
			journaled = strings.Contains(je.Comments, "- producer: "+producer.Public()+"\n")
		}
	}
	if !journaled {
		t.Error("the journal entry does not name the verified producer")
	}
	// A replay of the signed command within its expiry, under a message id of its own so
	// that the stream's duplicate window does not drop it.
	publishCopy(e, ok, "replay-"+ok.ID)
	eventually(t, 20*time.Second, "the replay's result", func() bool {
		for _, m := range e.streamMessages(e.subjects.EventsStream(), e.subjects.Result(ok.Ref())) {
			if strings.Contains(string(m.Data), `"replayed":true`) {
				return true
			}
		}
		return false
	})
	if n := e.pve.Requests("POST", "/nodes/pve1/qemu/101/status/start"); n > 1 {
		t.Errorf("the replay started the guest again: %d start requests", n)
	}

	tampered := signed("vm.stop", `{"vm":"101"}`, "sync:alice")
	tampered.Data = []byte(`{"vm":"101","force":true}`)
	unsigned := e.guestCommand("vm.stop", `{"vm":"101"}`)
	tests := []struct {
		name   string
		cmd    events.Command
		reason string
	}{
		{"unsigned", unsigned, "producer_not_allowed"},
		{"another endpoint", signed("vm.stop", `{"vm":"101"}`, "sync:alice"), "producer_not_allowed"},
		{"another actor", signed("vm.stop", `{"vm":"101"}`, "admin"), "producer_not_allowed"},
		{"a verb outside its rights", signed("node.reboot", `{"node":"pve1"}`, "sync:alice"), "producer_not_allowed"},
		{"data changed after signing", tampered, "signature_invalid"},
	}
	tests[1].cmd.EndpointID = 2
	tests[1].cmd, _ = producer.Sign(tests[1].cmd)
	redisBefore := sortedLines(e.redisDump())
	for _, tt := range tests {
		res := e.send(tt.cmd)
		if res.Status != 403 || res.Reason != tt.reason || res.Detail == "" {
			t.Errorf("%s: %d %s %s, want 403 %s", tt.name, res.Status, res.Reason, res.Detail, tt.reason)
		}
		if res.Producer != "" {
			t.Errorf("%s: a refused command's result names a producer", tt.name)
		}
		eventually(t, 20*time.Second, tt.name+" dead-lettered", func() bool {
			for _, m := range e.streamMessages(e.subjects.DLQStream(), "") {
				if m.Header.Get("ce-id") == tt.cmd.ID {
					return true
				}
			}
			return false
		})
		for _, je := range e.netbox.JournalEntries() {
			if strings.Contains(je.Comments, tt.cmd.ID) {
				t.Errorf("%s: journaled", tt.name)
			}
		}
	}
	if after := sortedLines(e.redisDump()); after != redisBefore {
		t.Errorf("refused commands wrote to Redis:\nbefore %s\nafter  %s", redisBefore, after)
	}
	if n := e.pve.Requests("POST", "/nodes/pve1/qemu/101/status/stop"); n != 0 {
		t.Errorf("a refused command reached Proxmox: %d stop requests", n)
	}

	// A tampered copy of the admitted command is dead-lettered without a result of its own:
	// the admitted command's result stands.
	forged := ok
	forged.Data = []byte(`{"vm":"102"}`)
	publishCopy(e, forged, "forged-"+ok.ID)
	eventually(t, 20*time.Second, "the forged copy dead-lettered", func() bool {
		for _, m := range e.streamMessages(e.subjects.DLQStream(), "") {
			if m.Header.Get("ce-id") == ok.ID {
				return true
			}
		}
		return false
	})
	for _, m := range e.streamMessages(e.subjects.EventsStream(), e.subjects.Result(ok.Ref())) {
		if strings.Contains(string(m.Data), `"status":403`) {
			t.Errorf("the forged copy published a refusal under the admitted command's id: %s", m.Data)
		}
	}

	// The rights are withdrawn (the file is read again): a new command of the key is refused,
	// a copy of the admitted one still gets its result replayed, never a refusal.
	if err := os.WriteFile(file, []byte("producers:\n  - key: "+producer.Public()+"\n    endpoints: [1]\n    verbs: [node.reboot]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(file, later, later); err != nil {
		t.Fatal(err)
	}
	if res := e.send(signed("vm.start", `{"vm":"101"}`, "sync:alice")); res.Status != 403 || res.Reason != "producer_not_allowed" {
		t.Errorf("after the rights were withdrawn: %d %s, want 403 producer_not_allowed", res.Status, res.Reason)
	}
	publishCopy(e, ok, "again-"+ok.ID)
	eventually(t, 20*time.Second, "a second replay", func() bool {
		n := 0
		for _, m := range e.streamMessages(e.subjects.EventsStream(), e.subjects.Result(ok.Ref())) {
			if strings.Contains(string(m.Data), `"replayed":true`) {
				n++
			}
		}
		return n >= 2
	})
}

// publishCopy publishes cmd again under a message id of its own, so that the stream's
// duplicate window does not drop it: a replay, as anyone allowed to publish can make one.
func publishCopy(e *env, cmd events.Command, msgID string) {
	e.t.Helper()
	m, err := events.EncodeBinary(e.subjects, cmd)
	if err != nil {
		e.t.Fatal(err)
	}
	m.Header.Set("Nats-Msg-Id", msgID)
	e.publishMsg(m)
}

// sortedLines is s with its lines sorted (a hash's fields come in any order).
func sortedLines(s string) string {
	lines := strings.Split(s, "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func newProducer(t *testing.T) *sign.Signer {
	t.Helper()
	s, _, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
