package e2e_test

import (
	"strings"
	"testing"
	"time"
)

// TestResumeAfterCrashUsesTheJournal pins how a command whose replica crashed is resumed: its
// write-ahead journal entry is reused, and its record's marks say what may have left. No entry
// → nothing was written: the command runs as new (one POST, one entry). An entry but no mark →
// nothing was sent: the command runs (one POST) on that entry. A marked write → it may have
// been sent: the command confirms by reading (no POST), without searching NetBox (the mark holds
// the entry), and finalizes that same
// entry instead of writing a second one.
func TestResumeAfterCrashUsesTheJournal(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		wroteEntry bool
		marked     []string
		wantStatus int
		wantReason string
		wantPOSTs  int
	}{
		{"crash before the journal entry", false, nil, 201, "", 1},
		{"crash after the journal entry, before the write", true, nil, 201, "", 1},
		{"crash after marking the write, which never arrived", true, []string{"create_storage"}, 502, "proxmox_create_unconfirmed", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cmd := e.command(pbs("pbs-resume"))
			e.deadReplica(cmd, 200*time.Millisecond, tc.wroteEntry, tc.marked...)
			time.Sleep(300 * time.Millisecond) // the dead replica's lease runs out
			e.start()
			res := e.send(cmd)
			if res.Status != tc.wantStatus || res.Reason != tc.wantReason || !res.Finalized() {
				t.Fatalf("got %d %s %q (finalized %v), want %d %q", res.Status, res.Result, res.Reason, res.Finalized(), tc.wantStatus, tc.wantReason)
			}
			if n := e.pve.Requests("POST", "/storage"); n != tc.wantPOSTs {
				t.Errorf("POSTs = %d, want %d", n, tc.wantPOSTs)
			}
			entries := e.netbox.JournalEntries()
			if len(entries) != 1 {
				t.Fatalf("journal entries = %d, want exactly 1", len(entries))
			}
			if c := entries[0].Comments; strings.Contains(c, "result: in_progress") || !strings.Contains(c, "- command_id: "+cmd.ID+"\n") {
				t.Errorf("entry not finalized for the command: %q", c)
			}
			searches := 1 // a record without marks does not know the entry: NetBox is asked once
			if len(tc.marked) > 0 {
				searches = 0 // the mark holds the entry
			}
			if n := e.netbox.Requests("GET", "/api/extras/journal-entries/"); n != searches {
				t.Errorf("journal searches = %d, want %d", n, searches)
			}
		})
	}
}
