package netbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/proxbus/proxbus/internal/netbox"
)

// TestFindJournalEntry pins that the command's newest entry on the object is found through
// the q search, and that a hit is trusted only with the exact command_id bullet.
func TestFindJournalEntry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, "")
	create := func(objectID int64, comments string) netbox.JournalRef {
		t.Helper()
		ref, err := f.client.CreateJournalEntry(ctx, netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: objectID, Comments: comments})
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	create(1, "- verb: vm.start\n- command_id: cmd-1\n- result: ok\n")
	newest := create(1, "- verb: vm.start\n- command_id: cmd-1\n- result: in_progress\n")
	create(1, "- verb: vm.start\n- command_id: cmd-10\n")              // a substring hit, not this command
	create(1, "- note: see command_id: cmd-2\n")                       // mentions the id, no bullet
	create(2, "- verb: vm.start\n- command_id: cmd-3\n- result: ok\n") // another object
	tests := []struct {
		name     string
		objectID int64
		id       string
		want     netbox.JournalRef
		wantErr  error
	}{
		{"newest exact bullet", 1, "cmd-1", newest, nil},
		{"substring of another id only", 1, "cmd-", netbox.JournalRef{}, netbox.ErrNotFound},
		{"mentioned without the bullet", 1, "cmd-2", netbox.JournalRef{}, netbox.ErrNotFound},
		{"entry on another object", 1, "cmd-3", netbox.JournalRef{}, netbox.ErrNotFound},
		{"found on its object", 2, "cmd-3", netbox.JournalRef{ID: 5, URL: f.url + "/api/extras/journal-entries/5/"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.client.FindJournalEntry(ctx, netbox.ObjectTypeEndpoint, tt.objectID, tt.id)
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) || tt.wantErr == nil && err != nil {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("ref %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestFindJournalEntryFailures pins the error classes: invalid input without a request,
// transient server failures as ErrUnavailable.
func TestFindJournalEntryFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, "")
	if _, err := f.client.FindJournalEntry(ctx, "Not A Type", 1, ""); !errors.Is(err, netbox.ErrRejected) {
		t.Fatalf("invalid input: %v", err)
	}
	if n := len(f.rec.requests()); n != 0 {
		t.Fatalf("%d requests for invalid input, want 0", n)
	}
	f.sim.FailRequests(1, 503)
	if _, err := f.client.FindJournalEntry(ctx, netbox.ObjectTypeEndpoint, 1, "cmd-1"); !netbox.IsTransient(err) || !errors.Is(err, netbox.ErrUnavailable) {
		t.Fatalf("503: err = %v", err)
	}
}

func TestOneLine(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain":                             "plain",
		"":                                  "",
		"two\nlines":                        "two lines",
		"crlf\r\n- injected: yes":           "crlf  - injected: yes",
		"ünïcødé\rwith\ncontrols":           "ünïcødé with controls",
		"[click](https://evil.example)":     `[click]\(https://evil.example)`,
		"![img](https://evil.example/x)":    `![img]\(https://evil.example/x)`,
		"[ref][1]":                          `[ref]\[1]`,
		`[pre-escaped]\(https://e.example)`: `[pre-escaped]\(https://e.example)`,
		"<https://evil.example>":            "&lt;https://evil.example&gt;",
		`<img src=x onerror=alert(1)>`:      `&lt;img src=x onerror=alert(1)&gt;`,
		"bad value [redacted]":              "bad value [redacted]",
		"fields: (a, b)":                    "fields: (a, b)",
	} {
		if got := netbox.OneLine(in); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
	}
}
