package simpve_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// logLine is one {n, t} of GET …/tasks/{upid}/log.
type logLine struct {
	N int    `json:"n"`
	T string `json:"t"`
}

// taskLog reads GET /nodes/{node}/tasks/{upid}/log with query (e.g. "start=2&limit=3") and
// returns its lines and the envelope's total.
func taskLog(t *testing.T, api string, u proxmox.UPID, query string) ([]logLine, int) {
	t.Helper()
	r := mustDo(t, "GET", api+"/nodes/"+u.Node+"/tasks/"+url.PathEscape(u.String())+"/log?"+query, demoAuth, "", "")
	var lines []logLine
	var env struct {
		Total int `json:"total"`
	}
	if r.status != 200 || json.Unmarshal(r.data, &lines) != nil || json.Unmarshal([]byte(r.raw), &env) != nil {
		t.Fatalf("task log = %d %s", r.status, r.raw)
	}
	return lines, env.Total
}

// TestTaskLog pins GET …/tasks/{upid}/log as PVE's read_task_log answers it: lines {n, t}
// numbered from 1, start skipping lines, limit bounding them (0: to the end), the line count
// as "total" beside "data", "no content" for an empty log, PVE's last line ("TASK OK", "TASK
// ERROR: …"), a disk move's qemu-img progress lines growing with the task, parameter checks
// and the simulator's count of reads and of lines answered twice.
func TestTaskLog(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: time.Hour})

	// a power task: an empty log while it runs
	start := upidOf(t, mustDo(t, "POST", api+"/nodes/pve2/qemu/101/status/start", demoAuth, formType, ""))
	if lines, total := taskLog(t, api, start, ""); len(lines) != 1 || lines[0] != (logLine{1, "no content"}) || total != 1 {
		t.Errorf("running task without log lines = %v (total %d), want PVE's no content", lines, total)
	}

	sim.SetTaskDuration(-1)
	web := upidOf(t, mustDo(t, "POST", api+"/nodes/pve1/qemu/100/status/shutdown", demoAuth, formType, ""))
	if lines, total := taskLog(t, api, web, ""); len(lines) != 1 || lines[0] != (logLine{1, "TASK OK"}) || total != 1 {
		t.Errorf("ended task without log lines = %v (total %d), want [TASK OK]", lines, total)
	}

	sim.FailTask("pve3", 102, "VM 102 qmp command 'system_reset' failed - got timeout")
	failed := upidOf(t, mustDo(t, "POST", api+"/nodes/pve3/qemu/102/status/reset", demoAuth, formType, ""))
	if lines, _ := taskLog(t, api, failed, ""); len(lines) != 1 || lines[0].T != "TASK ERROR: VM 102 qmp command 'system_reset' failed - got timeout" {
		t.Errorf("failed task's log = %v", lines)
	}

	// a finished disk move of the stopped dup (scsi0, 8G): head, 21 qemu-img lines, TASK OK
	moved := upidOf(t, mustDo(t, "POST", api+"/nodes/pve1/qemu/103/move_disk", demoAuth, formType, "disk=scsi0&storage=ceph"))
	all, total := taskLog(t, api, moved, "limit=0")
	if len(all) != 23 || total != 23 {
		t.Fatalf("move log: %d lines (total %d), want 23: %v", len(all), total, all)
	}
	for i, l := range all {
		if l.N != i+1 {
			t.Errorf("line %d numbered %d", i+1, l.N)
		}
	}
	want := []string{"create full clone of drive scsi0 (local-lvm:vm-103-disk-0)", "transferred 0.0 B of 8.0 GiB (0.00%)", "transferred 409.6 MiB of 8.0 GiB (5.00%)"}
	for i, w := range want {
		if all[i].T != w {
			t.Errorf("line %d = %q, want %q", i+1, all[i].T, w)
		}
	}
	if all[21].T != "transferred 8.0 GiB of 8.0 GiB (100.00%)" || all[22].T != "TASK OK" {
		t.Errorf("last lines = %q, %q", all[21].T, all[22].T)
	}
	if page, total := taskLog(t, api, moved, "start=2&limit=3"); total != 23 || len(page) != 3 || page[0] != all[2] || page[2] != all[4] {
		t.Errorf("start=2&limit=3 = %v (total %d), want lines 3–5", page, total)
	}
	if page, _ := taskLog(t, api, moved, "start=23"); len(page) != 0 {
		t.Errorf("start past the end = %v, want none", page)
	}
	if page, _ := taskLog(t, api, moved, ""); len(page) != 23 {
		t.Errorf("default limit 50: %d lines", len(page))
	}

	for _, tt := range []struct{ query, param, msg string }{
		{"start=-1", "start", "value must have a minimum value of 0"},
		{"limit=x", "limit", "type check ('integer') failed - got 'x'"},
		{"download=1", "download", ""},
	} {
		r := mustDo(t, "GET", api+"/nodes/pve1/tasks/"+url.PathEscape(moved.String())+"/log?"+tt.query, demoAuth, "", "")
		if r.status != 400 || !strings.Contains(r.errors[tt.param], tt.msg) {
			t.Errorf("%s = %d %v, want 400 on %s", tt.query, r.status, r.errors, tt.param)
		}
	}
	unknown := proxmox.UPID{Node: "pve1", PID: 1, PStart: 1, StartTime: time.Unix(1700000000, 0), Type: "qmstart", ID: "100", User: "root@pam"}
	if lines, _ := taskLog(t, api, unknown, ""); len(lines) != 1 || !strings.HasPrefix(lines[0].T, "unable to open file") {
		t.Errorf("unknown task's log = %v", lines)
	}

	var stat simpve.TaskStat
	for _, st := range sim.TaskStats() {
		if st.UPID == moved.String() {
			stat = st
		}
	}
	// 23 + 3 + 0 + 23 lines answered, 3 + 23 of them a second time (refused reads not counted)
	if stat.LogReads != 4 || stat.LogLinesServed != 49 || stat.LogRereads != 26 || stat.LogLines != 23 || stat.Running || stat.Type != "qmmove" {
		t.Errorf("stats = %+v", stat)
	}
	if st := statOf(t, sim, start.String()); st.StatusPolls != 0 || st.LogReads != 1 || st.LogLinesServed != 0 || !st.Running {
		t.Errorf("power task stats = %+v (the no-content placeholder is not a line)", st)
	}
}

// TestTaskLogGrows pins that a task's log lines appear as its run passes and only ever
// grow: a running VM's disk move logs drive mirror lines, a line once shown stays the same.
func TestTaskLogGrows(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: 400 * time.Millisecond})
	u := upidOf(t, mustDo(t, "POST", api+"/nodes/pve1/qemu/100/move_disk", demoAuth, formType, "disk=virtio0&storage=ceph"))
	var seen []logLine
	for {
		lines, _ := taskLog(t, api, u, fmt.Sprintf("start=%d", len(seen)))
		if len(seen) == 0 && len(lines) == 1 && lines[0].T == "no content" {
			lines = nil
		}
		seen = append(seen, lines...)
		if n := len(seen); n > 0 && strings.HasPrefix(seen[n-1].T, "TASK ") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := statOf(t, sim, u.String()); st.LogRereads != 0 || st.LogLinesServed != len(seen) {
		t.Errorf("stats after the incremental reads = %+v", st)
	}
	all, _ := taskLog(t, api, u, "limit=0")
	if len(all) != len(seen) {
		t.Fatalf("read incrementally %d lines, the whole log has %d", len(seen), len(all))
	}
	for i := range all {
		if all[i] != seen[i] {
			t.Errorf("line %d changed: %q then %q", i+1, seen[i].T, all[i].T)
		}
	}
	want := []string{"create full clone of drive virtio0 (local-lvm:vm-100-disk-0)", "drive mirror is starting for drive-virtio0",
		"drive-virtio0: transferred 0.0 B of 32.0 GiB (0.00%) in 0s", "drive-virtio0: transferred 1.6 GiB of 32.0 GiB (5.00%) in 0s"}
	for i, w := range want {
		if all[i].T != w {
			t.Errorf("line %d = %q, want %q", i+1, all[i].T, w)
		}
	}
	tail := []string{"drive-virtio0: transferred 32.0 GiB of 32.0 GiB (100.00%) in 0s, ready", "all 'mirror' jobs are ready",
		"drive-virtio0: Completing block job...", "drive-virtio0: Completed successfully.", "drive-virtio0: mirror-job finished", "TASK OK"}
	for i, w := range tail {
		if got := all[len(all)-len(tail)+i].T; got != w {
			t.Errorf("tail line %d = %q, want %q", i+1, got, w)
		}
	}
}

// statOf is the simulator's TaskStat of upid.
func statOf(t *testing.T, sim *simpve.Server, upid string) simpve.TaskStat {
	t.Helper()
	for _, st := range sim.TaskStats() {
		if st.UPID == upid {
			return st
		}
	}
	t.Fatalf("no task %s", upid)
	return simpve.TaskStat{}
}
