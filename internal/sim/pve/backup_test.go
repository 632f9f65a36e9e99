package simpve_test

import (
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// addPBS adds a PBS storage with content backup to the simulator.
func addPBS(sim *simpve.Server, id string) {
	sim.AddStorage(proxmox.StorageConfig{"storage": id, "type": "pbs", "server": "pbs.lan", "datastore": "store1",
		"content": "backup", "prune-backups": "keep-all=1", "username": "backup@pbs!proxbus"})
}

// contentOf reads GET /nodes/{node}/storage/{storage}/content?query.
func contentOf(t *testing.T, api, node, storage, query string) []map[string]any {
	t.Helper()
	r := mustDo(t, "GET", api+"/nodes/"+node+"/storage/"+storage+"/content?"+query, demoAuth, "", "")
	var items []map[string]any
	if r.status != 200 || json.Unmarshal(r.data, &items) != nil {
		t.Fatalf("content of %s on %s = %d %s", storage, node, r.status, r.raw)
	}
	return items
}

// logText is the whole log of task u, one line per line.
func logText(t *testing.T, api string, u proxmox.UPID) string {
	t.Helper()
	lines, _ := taskLog(t, api, u, "limit=0")
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.T + "\n")
	}
	return b.String()
}

// nodeTasks reads GET /nodes/{node}/tasks?query.
func nodeTasks(t *testing.T, api, node, query string) []map[string]any {
	t.Helper()
	r := mustDo(t, "GET", api+"/nodes/"+node+"/tasks?"+query, demoAuth, "", "")
	var items []map[string]any
	if r.status != 200 || json.Unmarshal(r.data, &items) != nil {
		t.Fatalf("tasks of %s = %d %s", node, r.status, r.raw)
	}
	return items
}

// vzdumpStatusLine is qemu-server's status loop line ("INFO:  42% (1.2 GiB of 3.0 GiB) in 3s,
// read: 400.0 MiB/s, write: 100.0 MiB/s").
var vzdumpStatusLine = regexp.MustCompile(`^INFO: +(\d{1,3})% \((\d+\.\d [KMGTP]?i?B) of (\d+\.\d [KMGTP]?i?B)\) in (\d+[wdhms]( \d+[wdhms])*), read: \d+(\.\d)? [KMGTP]?i?B/s, write: \d+(\.\d)? [KMGTP]?i?B/s$`)

// TestVzdumpPBS pins a vzdump of a running VM into a PBS storage: the task (vzdump, the
// guest's id, the guest locked "backup" while it runs, in the node's task list as RUNNING
// then OK), its log (the job's command line, the disks, the archive, the progress lines of
// qemu-server's status loop growing with the task, the job's end) and the backup it leaves
// in the content listing: "pbs1:backup/vm/100/<RFC 3339 UTC>" at the task's start, format
// pbs-vm, the disks' size, the notes' first line, protected; listed on every node (PBS is
// shared), left out by content or vmid filters that do not match.
func TestVzdumpPBS(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: 3 * time.Second})
	addPBS(sim, "pbs1")
	form := url.Values{"vmid": {"100"}, "storage": {"pbs1"}, "mode": {"snapshot"}, "remove": {"0"},
		"notes-template": {`{{guestname}} on {{node}}\nsecond line`}, "protected": {"1"}}
	u := upidOf(t, mustDo(t, "POST", api+"/nodes/pve1/vzdump", demoAuth, formType, form.Encode()))
	if u.Type != "vzdump" || u.ID != "100" || u.Node != "pve1" {
		t.Fatalf("upid %+v, want a vzdump of 100 on pve1", u)
	}
	if g, _ := sim.Guest(100); g.Lock != "backup" || !g.Busy {
		t.Errorf("guest while backing up: lock %q busy %v, want lock backup", g.Lock, g.Busy)
	}
	if got := contentOf(t, api, "pve1", "pbs1", "content=backup"); len(got) != 0 {
		t.Errorf("content while the backup runs = %v, want none", got)
	}
	running := nodeTasks(t, api, "pve1", "vmid=100&typefilter=vzdump&source=all")
	if len(running) != 1 || running[0]["status"] != "RUNNING" || running[0]["upid"] != u.String() ||
		running[0]["user"] != "proxbus@pve" || running[0]["tokenid"] != "demo" {
		t.Errorf("task list while running = %v", running)
	}
	if got := nodeTasks(t, api, "pve1", "vmid=100&typefilter=vzdump"); len(got) != 0 {
		t.Errorf("archive while running = %v, want none (source archive lists finished tasks)", got)
	}
	early := logText(t, api, u)
	for _, want := range []string{
		"INFO: starting new backup job: vzdump 100 --mode snapshot --node pve1 --notes-template '{{guestname}} on {{node}}\\nsecond line' --protected 1 --remove 0 --storage pbs1\n",
		"INFO: Starting Backup of VM 100 (qemu)\n", "INFO: status = running\n", "INFO: VM Name: web-01\n",
		"INFO: include disk 'virtio0' 'local-lvm:vm-100-disk-0' 32G\n", "INFO: include disk 'virtio1' 'ceph:vm-100-disk-1' 100G\n",
		"INFO: backup mode: snapshot\n",
		"INFO: creating Proxmox Backup Server archive 'vm/100/" + u.StartTime.Format("2006-01-02T15:04:05Z") + "'\n",
	} {
		if !strings.Contains(early, want) {
			t.Errorf("log while running lacks %q:\n%s", want, early)
		}
	}
	if strings.Contains(early, "100% (") || strings.Contains(early, "Backup job finished") {
		t.Errorf("log while running already ends:\n%s", early)
	}

	waitStopped(t, api, u)
	full := logText(t, api, u)
	if !strings.HasPrefix(full, early) {
		t.Errorf("the log changed what it had written:\nearly:\n%s\nfull:\n%s", early, full)
	}
	var pcts []string
	for _, line := range strings.Split(strings.TrimSpace(full), "\n") {
		if m := vzdumpStatusLine.FindStringSubmatch(line); m != nil {
			pcts = append(pcts, m[1])
			if m[3] != "132.0 GiB" {
				t.Errorf("status line %q: total %s, want the disks' 132.0 GiB", line, m[3])
			}
		} else if strings.Contains(line, "% (") {
			t.Errorf("malformed status line %q", line)
		}
	}
	if len(pcts) < 5 || pcts[0] != "0" || pcts[len(pcts)-1] != "100" {
		t.Errorf("status lines' percentages %v, want 0 … 100", pcts)
	}
	for _, want := range []string{"INFO: adding notes to backup\n", "INFO: marking backup as protected\n",
		"INFO: Finished Backup of VM 100 (", "INFO: Backup job finished successfully\nTASK OK\n"} {
		if !strings.Contains(full, want) {
			t.Errorf("final log lacks %q:\n%s", want, full)
		}
	}
	if g, _ := sim.Guest(100); g.Lock != "" || g.Busy {
		t.Errorf("guest after the backup: lock %q busy %v", g.Lock, g.Busy)
	}

	volid := "pbs1:backup/vm/100/" + u.StartTime.Format("2006-01-02T15:04:05Z")
	for _, node := range []string{"pve1", "pve3"} {
		got := contentOf(t, api, node, "pbs1", "content=backup&vmid=100")
		if len(got) != 1 {
			t.Fatalf("backups on %s = %v, want one", node, got)
		}
		b := got[0]
		want := map[string]any{"volid": volid, "content": "backup", "format": "pbs-vm", "vmid": float64(100),
			"ctime": float64(u.StartTime.Unix()), "size": float64(132 << 30), "notes": "web-01 on pve1", "protected": float64(1), "subtype": "qemu"}
		for k, v := range want {
			if b[k] != v {
				t.Errorf("backup on %s: %s = %v, want %v", node, k, b[k], v)
			}
		}
	}
	if got := contentOf(t, api, "pve1", "pbs1", "content=backup&vmid=101"); len(got) != 0 {
		t.Errorf("another guest's backups = %v, want none", got)
	}
	if got := contentOf(t, api, "pve1", "pbs1", "content=images"); len(got) != 0 {
		t.Errorf("content images = %v, want none", got)
	}
	if got := contentOf(t, api, "pve1", "pbs1", ""); len(got) != 1 {
		t.Errorf("all content = %v, want the backup", got)
	}
	done := nodeTasks(t, api, "pve1", "vmid=100&typefilter=vzdump")
	if len(done) != 1 || done[0]["status"] != "OK" || done[0]["endtime"] == nil {
		t.Errorf("task list after the backup = %v", done)
	}
	if got := nodeTasks(t, api, "pve1", "vmid=100&typefilter=vzdump&since="+strconv.FormatInt(u.StartTime.Unix()+1, 10)); len(got) != 0 {
		t.Errorf("tasks since after its start = %v, want none", got)
	}
	if r := mustDo(t, "GET", api+"/nodes/pve1/tasks?source=some", demoAuth, "", ""); r.status != 400 || r.errors["source"] == "" {
		t.Errorf("bad source = %d %s", r.status, r.raw)
	}
}

// waitStopped waits until task u has ended.
func waitStopped(t *testing.T, api string, u proxmox.UPID) {
	t.Helper()
	eventually(t, "task "+u.String()+" ends", func() bool { return taskStatus(t, api, u)["status"] == "stopped" })
}

// TestVzdumpDirStorage pins a container's vzdump into a directory storage: the archive
// "local:backup/vzdump-lxc-200-<YYYY_MM_DD-HH_MM_SS>.tar.zst" (format tar.zst) under the
// storage's dump directory, its mount points as vzdump includes or excludes them, no
// progress lines (a container's tar has none), and a local storage's backups seen only from
// their node (the demo cluster's own backups are left out).
func TestVzdumpDirStorage(t *testing.T) {
	t.Parallel()
	_, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
	form := url.Values{"vmid": {"200"}, "storage": {"local"}, "compress": {"zstd"}, "mode": {"stop"}, "remove": {"0"}}
	u := upidOf(t, mustDo(t, "POST", api+"/nodes/pve1/vzdump", demoAuth, formType, form.Encode()))
	stamp := u.StartTime.Format("2006_01_02-15_04_05")
	got := slices.DeleteFunc(contentOf(t, api, "pve1", "local", "content=backup&vmid=200"), func(m map[string]any) bool {
		return m["volid"] == simpve.DemoBackupCT // the demo cluster's own backup of CT 200
	})
	if len(got) != 1 || got[0]["volid"] != "local:backup/vzdump-lxc-200-"+stamp+".tar.zst" || got[0]["format"] != "tar.zst" ||
		got[0]["subtype"] != "lxc" || got[0]["notes"] != nil || got[0]["protected"] != nil {
		t.Fatalf("backups on local = %v", got)
	}
	if got := contentOf(t, api, "pve2", "local", "content=backup"); len(got) != 0 {
		t.Errorf("pve2's local lists pve1's backup: %v", got)
	}
	log := logText(t, api, u)
	for _, want := range []string{
		"INFO: Starting Backup of VM 200 (lxc)\n", "INFO: CT Name: ct-pve1\n",
		"INFO: including mount point rootfs ('/') in backup\n", "INFO: including mount point mp0 ('/srv/data') in backup\n",
		"INFO: backup mode: stop\n", "INFO: stopping virtual guest\n",
		"INFO: creating vzdump archive '/var/lib/vz/dump/vzdump-lxc-200-" + stamp + ".tar.zst'\n",
		"INFO: archive file size: ", "TASK OK\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "% (") {
		t.Errorf("a container's log has progress lines:\n%s", log)
	}
}

// TestVzdumpRefusals pins what PVE refuses and how: schema errors (400) and the storage
// permission (403) before any task; everything else in the worker, as PVE's vzdump finds it:
// a storage that does not exist, has no content backup, is disabled or is not available on
// the node fails the task with "could not get storage information for …"; a guest that does
// not exist or is busy fails the job ("job errors"); a guest on another node is skipped and the
// task ends OK with no backup; remove=0 on a storage that keeps a limited number refuses the
// backup past the limit. None leaves a backup.
func TestVzdumpRefusals(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
	addPBS(sim, "pbs1")
	sim.AddStorage(proxmox.StorageConfig{"storage": "pbs-off", "type": "pbs", "server": "pbs.lan", "datastore": "s", "content": "backup", "disable": "1"})
	sim.AddStorage(proxmox.StorageConfig{"storage": "pbs-pve2", "type": "pbs", "server": "pbs.lan", "datastore": "s", "content": "backup", "nodes": "pve2"})
	sim.AddStorage(proxmox.StorageConfig{"storage": "keep2", "type": "dir", "path": "/srv/keep2", "content": "backup", "prune-backups": "keep-last=2"})

	for _, tt := range []struct {
		name, form string
		errField   string
	}{
		{"no vmid", "storage=pbs1", "vmid"},
		{"bad mode", "vmid=100&storage=pbs1&mode=fast", "mode"},
		{"bad compress", "vmid=100&storage=pbs1&compress=xz", "compress"},
		{"bad storage id", "vmid=100&storage=1x", "storage"},
		{"bad protected", "vmid=100&storage=pbs1&protected=maybe", "protected"},
		{"long notes", "vmid=100&storage=pbs1&notes-template=" + strings.Repeat("n", 1025), "notes-template"},
	} {
		r := mustDo(t, "POST", api+"/nodes/pve1/vzdump", demoAuth, formType, tt.form)
		if r.status != 400 || r.errors[tt.errField] == "" {
			t.Errorf("%s: %d %s, want 400 naming %s", tt.name, r.status, r.raw, tt.errField)
		}
	}
	audit := "PVEAPIToken=" + simpve.AuditTokenID + "=" + simpve.DemoSecret
	if r := mustDo(t, "POST", api+"/nodes/pve1/vzdump", audit, formType, "vmid=100&storage=pbs1"); r.status != 403 {
		t.Errorf("auditor's vzdump = %d %s, want 403", r.status, r.raw)
	}

	for _, tt := range []struct {
		name, node, form, exit, logLine string
	}{
		{"missing storage", "pve1", "vmid=100&storage=nowhere", "could not get storage information for 'nowhere': storage 'nowhere' does not exist", ""},
		{"no backup content", "pve1", "vmid=100&storage=local-lvm", "could not get storage information for 'local-lvm': can't use storage 'local-lvm' for backups - wrong content type", ""},
		{"disabled", "pve1", "vmid=100&storage=pbs-off", "could not get storage information for 'pbs-off': storage 'pbs-off' is disabled", ""},
		{"not on the node", "pve1", "vmid=100&storage=pbs-pve2", "could not get storage information for 'pbs-pve2': storage 'pbs-pve2' is not available on node 'pve1'", ""},
		{"unknown guest", "pve1", "vmid=777&storage=pbs1", "job errors", "ERROR: Backup of VM 777 failed - unable to find VM '777'"},
		{"guest elsewhere", "pve2", "vmid=100&storage=pbs1", "OK", "INFO: skip external VMs: 100"},
	} {
		u := upidOf(t, mustDo(t, "POST", api+"/nodes/"+tt.node+"/vzdump", demoAuth, formType, tt.form))
		if st := taskStatus(t, api, u); st["status"] != "stopped" || st["exitstatus"] != tt.exit {
			t.Errorf("%s: task %v, want exit %q", tt.name, st, tt.exit)
		}
		if log := logText(t, api, u); !strings.Contains(log, tt.logLine) {
			t.Errorf("%s: log lacks %q:\n%s", tt.name, tt.logLine, log)
		}
	}
	if got := contentOf(t, api, "pve1", "pbs1", "content=backup"); len(got) != 0 {
		t.Errorf("backups after refusals = %v, want none", got)
	}
	if g, _ := sim.Guest(100); g.Node != "pve1" || g.Lock != "" {
		t.Errorf("guest 100 after refusals: %+v", g)
	}

	// a busy guest: the job fails, the other task keeps its lock
	sim.SetTaskDuration(2 * time.Second)
	snap := upidOf(t, mustDo(t, "POST", api+"/nodes/pve3/qemu/102/snapshot", demoAuth, formType, "snapname=s1"))
	busy := upidOf(t, mustDo(t, "POST", api+"/nodes/pve3/vzdump", demoAuth, formType, "vmid=102&storage=pbs1"))
	if g, _ := sim.Guest(102); g.Lock != "snapshot" {
		t.Errorf("the refused vzdump took the snapshot's lock: %q", g.Lock)
	}
	waitStopped(t, api, busy)
	waitStopped(t, api, snap)
	sim.SetTaskDuration(-1)
	if st := taskStatus(t, api, busy); st["exitstatus"] != "job errors" {
		t.Errorf("vzdump of a busy guest: %v, want job errors", st)
	}
	if log := logText(t, api, busy); !strings.Contains(log, "ERROR: Backup of VM 102 failed - VM is locked (snapshot)") {
		t.Errorf("busy guest's log:\n%s", log)
	}
	if st := taskStatus(t, api, snap); st["exitstatus"] != "OK" {
		t.Errorf("the snapshot task after the refused vzdump: %v", st)
	}

	// remove=0 on a storage keeping two: the third backup is refused (each in a second of its
	// own: a backup started in the second of the one before would replace it, as vzdump's does)
	for i := 0; i < 3; i++ {
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
		u := upidOf(t, mustDo(t, "POST", api+"/nodes/pve1/vzdump", demoAuth, formType, "vmid=103&storage=keep2&remove=0"))
		want := "OK"
		if i == 2 {
			want = "job errors"
		}
		if st := taskStatus(t, api, u); st["exitstatus"] != want {
			t.Errorf("backup %d into keep2: %v, want %s", i+1, st, want)
		}
		if i == 2 && !strings.Contains(logText(t, api, u), "There is a max backup limit of 2 enforced by the target storage") {
			t.Errorf("the refused backup's log does not say why")
		}
	}
	if got := contentOf(t, api, "pve1", "keep2", "content=backup&vmid=103"); len(got) != 2 {
		t.Errorf("backups in keep2 = %d, want 2", len(got))
	}
}
