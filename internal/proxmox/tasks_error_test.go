package proxmox

import "testing"

// TestTaskLogErrorLine pins which log lines say why a task failed: a worker's "ERROR: …",
// also after a migration's time stamp, and never the task's own "TASK ERROR: …".
func TestTaskLogErrorLine(t *testing.T) {
	t.Parallel()
	tests := []struct{ line, want string }{
		{"ERROR: Backup of VM 102 failed - VM is locked (snapshot)", "Backup of VM 102 failed - VM is locked (snapshot)"},
		{"2026-12-01 10:00:02 ERROR: migration aborted (duration 00:00:02): can't migrate VM", "migration aborted (duration 00:00:02): can't migrate VM"},
		{"TASK ERROR: migration aborted", ""},
		{"INFO: ERROR: is not at the start", ""},
	}
	for _, tt := range tests {
		got := ""
		if m := taskLogErrorLine.FindStringSubmatch(tt.line); m != nil {
			got = m[1]
		}
		if got != tt.want {
			t.Errorf("%q: %q, want %q", tt.line, got, tt.want)
		}
	}
	e := &TaskError{UPID: "U", Node: "pve1", ExitStatus: "migration aborted", LogError: "no space left"}
	if got := e.Error(); got != "proxmox: task U on pve1 failed: migration aborted (log: no space left)" {
		t.Errorf("Error() = %q", got)
	}
}
