package simpve_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestRestoreAnswers pins what the simulator answers to restores, as qemu-server's and
// pve-container's create_vm do: a VM's backup restored into a new vmid (qmrestore) gets the
// backup's configuration with its disks renamed to the vmid on the storage asked, new MACs with
// unique, and starts with start; a container's (vzrestore) likewise; a vmid in use without
// force, a volume that is not a backup, an unknown storage, a container's storage without
// rootdir are refused before the worker; a missing archive, a VM's storage without images and
// the other guest type's backup fail the task; force over a running VM fails the task too.
func TestRestoreAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		path    string
		form    url.Values
		status  int    // of the POST
		message string // of a refused POST, or the failed task's exit status
		task    string // "": the POST is refused; else the task type
		vmid    int64  // the guest made (0: none)
	}{
		{name: "VM into a new vmid", path: "/nodes/pve1/qemu",
			form:   url.Values{"vmid": {"400"}, "archive": {simpve.DemoBackupWeb}, "storage": {"ceph"}, "unique": {"1"}, "start": {"1"}, "bwlimit": {"1024"}},
			status: 200, task: "qmrestore", vmid: 400},
		{name: "container into a new vmid", path: "/nodes/pve1/lxc",
			form:   url.Values{"vmid": {"401"}, "ostemplate": {simpve.DemoBackupCT}, "restore": {"1"}, "storage": {"local-lvm"}},
			status: 200, task: "vzrestore", vmid: 401},
		{name: "vmid in use", path: "/nodes/pve1/qemu", form: url.Values{"vmid": {"100"}, "archive": {simpve.DemoBackupWeb}},
			status: 500, message: "unable to restore VM 100 - VM 100 already exists on node 'pve1'"},
		{name: "container vmid in use", path: "/nodes/pve1/lxc", form: url.Values{"vmid": {"100"}, "ostemplate": {simpve.DemoBackupCT}, "restore": {"1"}, "storage": {"local-lvm"}},
			status: 500, message: "VM 100 already exists on node 'pve1'"},
		{name: "not a backup", path: "/nodes/pve1/qemu", form: url.Values{"vmid": {"400"}, "archive": {"local:iso/x.iso"}},
			status: 500, message: "unable to use volume local:iso/x.iso - content type needs to be 'backup'"},
		{name: "unknown storage", path: "/nodes/pve1/qemu", form: url.Values{"vmid": {"400"}, "archive": {"nope:backup/vzdump-qemu-1-2026_01_01-00_00_00.vma"}},
			status: 500, message: "storage 'nope' does not exist"},
		{name: "container storage without rootdir", path: "/nodes/pve1/lxc", form: url.Values{"vmid": {"401"}, "ostemplate": {simpve.DemoBackupCT}, "restore": {"1"}},
			status: 400, message: "storage 'local' does not support container directories"},
		{name: "missing archive", path: "/nodes/pve1/qemu", form: url.Values{"vmid": {"400"}, "archive": {"local:backup/vzdump-qemu-100-2020_01_01-00_00_00.vma"}},
			status: 200, task: "qmrestore", message: "unable to restore VM 400 - unable to open file '/var/lib/vz/dump/vzdump-qemu-100-2020_01_01-00_00_00.vma'", vmid: 400},
		{name: "VM storage without images", path: "/nodes/pve1/qemu", form: url.Values{"vmid": {"400"}, "archive": {simpve.DemoBackupWeb}, "storage": {"local"}},
			status: 200, task: "qmrestore", message: "Content type 'images' is not available on storage 'local'", vmid: 400},
		{name: "a container's backup as a VM", path: "/nodes/pve1/qemu", form: url.Values{"vmid": {"400"}, "archive": {simpve.DemoBackupCT}},
			status: 200, task: "qmrestore", message: "does not look like a QemuServer vzdump backup", vmid: 400},
		{name: "force over a running VM", path: "/nodes/pve1/qemu", form: url.Values{"vmid": {"100"}, "archive": {simpve.DemoBackupWeb}, "force": {"1"}},
			status: 200, task: "qmrestore", message: "unable to restore VM 100 - vm is running", vmid: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
			r := mustDo(t, "POST", api+tt.path, demoAuth, formType, tt.form.Encode())
			if tt.task == "" {
				if r.status != tt.status || !strings.Contains(r.message+strings.Join(mapValues(r.errors), ";"), tt.message) {
					t.Fatalf("answer %d %s %v, want %d saying %q", r.status, r.message, r.errors, tt.status, tt.message)
				}
				if _, made := sim.Guest(401); made {
					t.Error("a refused restore made a guest")
				}
				return
			}
			u := upidOf(t, r)
			st := taskStatus(t, api, u)
			if u.Type != tt.task || (tt.message == "") != (st["exitstatus"] == "OK") || !strings.Contains(st["exitstatus"].(string), tt.message) {
				t.Fatalf("task %s ended %v, want %s %q", u.Type, st["exitstatus"], tt.task, tt.message)
			}
			g, found := sim.Guest(tt.vmid)
			if tt.message != "" {
				return // PVE leaves a failed VM restore's configuration in place
			}
			if !found || g.Node != "pve1" {
				t.Fatalf("guest %d: %+v (found %v)", tt.vmid, g, found)
			}
			if tt.vmid == 400 {
				if g.Status != "running" || g.Name != "web-01" || !strings.HasPrefix(g.Config["virtio0"], "ceph:vm-400-disk-0") || strings.Contains(g.Config["net0"], "BC:24:11:00:") {
					t.Errorf("restored VM %+v", g)
				}
				if log := logText(t, api, u); !strings.Contains(log, "progress 100% (read") || !strings.Contains(log, "applying read rate limit: 1024") {
					t.Errorf("restore log:\n%s", log)
				}
			} else if g.Type != proxmox.GuestLXC || !strings.HasPrefix(g.Config["rootfs"], "local-lvm:vm-401-disk-0") || g.Status != "stopped" {
				t.Errorf("restored container %+v", g)
			}
		})
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestDeleteBackup pins DELETE /nodes/{node}/storage/{storage}/content/{volume} for backups
// (pve-storage's Content.pm delete): the imgdel task "<owner>@<storage>" removes it; a
// protected backup fails the task ("cannot remove protected volume …") and stays; a backup
// that is not there fails it (the file's unlink); another node's local storage does not have
// it.
func TestDeleteBackup(t *testing.T) {
	t.Parallel()
	_, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
	del := func(node, volid string) (proxmox.UPID, map[string]any) {
		t.Helper()
		u := upidOf(t, mustDo(t, "DELETE", api+"/nodes/"+node+"/storage/local/content/"+url.PathEscape(volid), demoAuth, "", ""))
		return u, taskStatus(t, api, u)
	}
	u, st := del("pve1", simpve.DemoBackupWeb)
	if u.Type != "imgdel" || u.ID != "100@local" || st["exitstatus"] != "OK" {
		t.Errorf("delete: %s %s %v", u.Type, u.ID, st["exitstatus"])
	}
	if got := contentOf(t, api, "pve1", "local", "content=backup"); len(got) != 1 || got[0]["volid"] != simpve.DemoBackupCT {
		t.Errorf("left on local: %v", got)
	}
	if _, st := del("pve1", simpve.DemoBackupCT); st["exitstatus"] != "cannot remove protected volume 'backup/vzdump-lxc-200-2026_11_30-02_10_00.tar.zst' on 'local'" {
		t.Errorf("protected: %v", st["exitstatus"])
	}
	if _, st := del("pve1", simpve.DemoBackupWeb); !strings.Contains(st["exitstatus"].(string), "No such file or directory") {
		t.Errorf("again: %v", st["exitstatus"])
	}
	if _, st := del("pve2", simpve.DemoBackupCT); !strings.Contains(st["exitstatus"].(string), "No such file or directory") {
		t.Errorf("on another node: %v", st["exitstatus"])
	}
	if got := contentOf(t, api, "pve1", "local", "content=backup"); len(got) != 1 {
		t.Errorf("the protected backup is gone: %v", got)
	}
}
