package producers_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/producers"
	"github.com/proxbus/proxbus/sign"
)

func newSigner(t *testing.T) *sign.Signer {
	t.Helper()
	s, _, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func command(verb string, endpoint int64, actor string) events.Command {
	return events.Command{ID: "c-1", Source: "urn:test", Verb: verb, Type: "proxbus." + verb, EndpointID: endpoint, HasEndpointID: endpoint > 0,
		Actor: actor, Time: time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC), Data: json.RawMessage(`{"vm":"web1"}`)}
}

func TestGateCheck(t *testing.T) {
	t.Parallel()
	allowed, stranger := newSigner(t), newSigner(t)
	path := filepath.Join(t.TempDir(), "producers.yaml")
	writeFile(t, path, "producers:\n  - key: "+allowed.Public()+"\n    name: sync\n    endpoints: [1, 2]\n    verbs: [vm.start, \"vm.snapshot.*\", schedule.add]\n    actor_prefix: \"sync:\"\n")
	signed := func(t *testing.T, s *sign.Signer, c events.Command) events.Command {
		t.Helper()
		c, err := s.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tests := []struct {
		name    string
		require bool
		cmd     func(t *testing.T) events.Command
		want    string // "" : allowed
		rights  bool   // the refusal comes from the producers file
	}{
		{"signed, within its rights", true, func(t *testing.T) events.Command { return signed(t, allowed, command("vm.start", 1, "sync:alice")) }, "", false},
		{"a verb prefix", true, func(t *testing.T) events.Command {
			return signed(t, allowed, command("vm.snapshot.create", 2, "sync:bob"))
		}, "", false},
		{"unsigned, not required", false, func(*testing.T) events.Command { return command("vm.stop", 9, "anyone") }, "", false},
		{"unsigned, required", true, func(*testing.T) events.Command { return command("vm.start", 1, "sync:alice") }, producers.ReasonNotAllowed, false},
		{"another verb", true, func(t *testing.T) events.Command { return signed(t, allowed, command("vm.delete", 1, "sync:alice")) }, producers.ReasonNotAllowed, true},
		{"another endpoint", true, func(t *testing.T) events.Command { return signed(t, allowed, command("vm.start", 3, "sync:alice")) }, producers.ReasonNotAllowed, true},
		{"another actor", true, func(t *testing.T) events.Command { return signed(t, allowed, command("vm.start", 1, "admin")) }, producers.ReasonNotAllowed, true},
		{"a schedule of a verb it may send", true, func(t *testing.T) events.Command {
			c := command("schedule.add", 0, "sync:alice")
			c.Data = json.RawMessage(`{"name":"n","every":"1h","verb":"vm.snapshot.create","endpoint_id":"2","data":{}}`)
			return signed(t, allowed, c)
		}, "", false},
		{"a schedule of another verb", true, func(t *testing.T) events.Command {
			c := command("schedule.add", 0, "sync:alice")
			c.Data = json.RawMessage(`{"name":"n","every":"1h","verb":"vm.delete","endpoint_id":1,"data":{}}`)
			return signed(t, allowed, c)
		}, producers.ReasonNotAllowed, true},
		{"a schedule on another endpoint", true, func(t *testing.T) events.Command {
			c := command("schedule.add", 0, "sync:alice")
			c.Data = json.RawMessage(`{"name":"n","every":"1h","verb":"vm.start","endpoint_id":3,"data":{}}`)
			return signed(t, allowed, c)
		}, producers.ReasonNotAllowed, true},
		{"a key not in the file", false, func(t *testing.T) events.Command { return signed(t, stranger, command("vm.start", 1, "sync:alice")) }, producers.ReasonNotAllowed, true},
		{"without time", true, func(t *testing.T) events.Command {
			c := command("vm.start", 1, "sync:alice")
			c.Time = time.Time{}
			return signed(t, allowed, c)
		}, producers.ReasonNotAllowed, false},
		{"tampered after signing", false, func(t *testing.T) events.Command {
			c := signed(t, allowed, command("vm.start", 1, "sync:alice"))
			c.EndpointID = 2
			return c
		}, producers.ReasonSignatureInvalid, false},
		{"signed by one key, claiming another", false, func(t *testing.T) events.Command {
			c := signed(t, stranger, command("vm.start", 1, "sync:alice"))
			c.Producer = allowed.Public()
			return c
		}, producers.ReasonSignatureInvalid, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, err := producers.New(path, tt.require)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			got := g.Check(tt.cmd(t))
			switch {
			case tt.want == "" && got != nil:
				t.Errorf("Check = %+v, want allowed", got)
			case tt.want != "" && (got == nil || got.Reason != tt.want || got.Detail == ""):
				t.Errorf("Check = %+v, want %s with a detail", got, tt.want)
			case got != nil && got.Rights != tt.rights:
				t.Errorf("Rights = %v, want %v: only the producers file's refusals may change while a command runs", got.Rights, tt.rights)
			}
		})
	}
}

// TestGateReloads: rights change with the file, without a new Gate; a file that breaks
// keeps the last rights and is reported.
func TestGateReloads(t *testing.T) {
	t.Parallel()
	s := newSigner(t)
	path := filepath.Join(t.TempDir(), "producers.yaml")
	writeFile(t, path, "producers:\n  - key: "+s.Public()+"\n    endpoints: [1]\n    verbs: [vm.start]\n")
	g, err := producers.New(path, true)
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := s.Sign(command("vm.stop", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	if r := g.Check(cmd); r == nil || r.Reason != producers.ReasonNotAllowed {
		t.Fatalf("before the change: %+v, want producer_not_allowed", r)
	}
	writeFile(t, path, "producers:\n  - key: "+s.Public()+"\n    endpoints: [1]\n    verbs: [vm.start, vm.stop]   # granted\n")
	bump(t, path, time.Minute)
	if r := g.Check(cmd); r != nil {
		t.Fatalf("after vm.stop was granted: %+v", r)
	}
	writeFile(t, path, "producers: [\n")
	bump(t, path, 2*time.Minute)
	if r := g.Check(cmd); r != nil {
		t.Errorf("a broken file must keep the last rights: %+v", r)
	}
	if err := g.Err(); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), path) {
		t.Errorf("Err = %v, want config.ErrInvalid naming the file", err)
	}
}

// bump moves the file's modification time, so a rewrite within the same clock tick is seen.
func bump(t *testing.T, path string, by time.Duration) {
	t.Helper()
	at := time.Now().Add(by)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	user := newSigner(t).Public()
	tests := []struct {
		name, body, want string
		require          bool
		noFile           bool
	}{
		{name: "required without a file", noFile: true, require: true, want: "--producers-file"},
		{name: "a missing file", want: "producers file"},
		{name: "not a user key", body: "producers:\n  - key: NAKEY\n    verbs: [vm.start]\n", want: "producers[0]: key"},
		{name: "no verbs", body: "producers:\n  - key: " + user + "\n", want: "verbs is empty"},
		{name: "a bad pattern", body: "producers:\n  - key: " + user + "\n    verbs: [\"vm*\"]\n", want: `verb "vm*"`},
		{name: "an unknown setting", body: "producers:\n  - key: " + user + "\n    verbs: [vm.start]\n    actor: x\n", want: "actor"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := ""
			if !tt.noFile {
				path = filepath.Join(dir, "p"+string(rune('a'+i))+".yaml")
				if tt.body != "" {
					writeFile(t, path, tt.body)
				}
			}
			_, err := producers.New(path, tt.require)
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want config.ErrInvalid naming %q", err, tt.want)
			}
		})
	}
}
