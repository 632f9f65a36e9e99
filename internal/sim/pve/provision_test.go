package simpve_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// storageEntries returns GET /cluster/resources?type=storage keyed by id.
func storageEntries(t *testing.T, api string) map[string]map[string]any {
	t.Helper()
	r := mustDo(t, "GET", api+"/cluster/resources?type=storage", demoAuth, "", "")
	var list []map[string]any
	if r.status != 200 || json.Unmarshal(r.data, &list) != nil {
		t.Fatalf("resources = %d %s", r.status, r.raw)
	}
	out := map[string]map[string]any{}
	for _, e := range list {
		out[e["id"].(string)] = e
	}
	return out
}

// TestStorageResources pins the storage part of /cluster/resources as PVE builds it.
func TestStorageResources(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
	sim.AddStorage(proxmox.StorageConfig{"storage": "fast", "type": "zfspool", "pool": "fast", "content": "images,rootdir", "nodes": "pve2,pve3"})
	sim.AddStorage(proxmox.StorageConfig{"storage": "old", "type": "dir", "path": "/srv/old", "content": "images", "disable": "1"})
	sim.SetStorageStatus("ceph", "pve3", "unknown")
	got := storageEntries(t, api)
	if len(got) != 14 {
		t.Errorf("%d entries, want 4 x 3 + fast x 2", len(got))
	}
	lvm := got["storage/pve1/local-lvm"]
	if lvm["type"] != "storage" || lvm["storage"] != "local-lvm" || lvm["node"] != "pve1" || lvm["plugintype"] != "lvmthin" ||
		lvm["content"] != "images,rootdir" || lvm["shared"] != float64(0) || lvm["status"] != "available" || lvm["maxdisk"] == nil {
		t.Errorf("local-lvm on pve1 = %v", lvm)
	}
	if e := got["storage/pve2/ceph"]; e["shared"] != float64(1) || e["status"] != "available" {
		t.Errorf("ceph on pve2 = %v", e)
	}
	if e := got["storage/pve3/ceph"]; e["status"] != "unknown" || e["disk"] != nil || e["maxdisk"] != nil {
		t.Errorf("unavailable ceph on pve3 = %v, want status unknown without sizes", e)
	}
	for _, id := range []string{"storage/pve1/fast", "storage/pve1/old", "storage/pve2/old"} {
		if _, found := got[id]; found {
			t.Errorf("%s listed: disabled storages and nodes outside nodes= are left out", id)
		}
	}
	if _, found := got["storage/pve3/fast"]; !found {
		t.Error("fast missing on pve3")
	}
	sim.SetStorageStatus("ceph", "pve3", "")
	if e := storageEntries(t, api)["storage/pve3/ceph"]; e["status"] != "available" {
		t.Errorf("ceph on pve3 after reset = %v", e)
	}
}

// TestCloneWhileRunning pins the state during a clone: the new VM exists on the source
// node locked "clone", the source is not locked (other clones may run), the newid is taken.
func TestCloneWhileRunning(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: time.Hour})
	base := api + "/nodes/pve1/qemu/8000/clone"
	u := upidOf(t, mustDo(t, "POST", base, demoAuth, formType, "newid=600&target=pve2&full=1&name=web-600"))
	if u.Type != "qmclone" || u.Node != "pve1" || u.ID != "8000" {
		t.Errorf("upid = %+v, want qmclone of 8000 on pve1", u)
	}
	g, found := sim.Guest(600)
	if !found || g.Node != "pve1" || g.Lock != "clone" || !g.Busy || g.Name != "web-600" {
		t.Fatalf("VM 600 while cloning = %+v, want locked clone on pve1", g)
	}
	r := mustDo(t, "GET", api+"/nodes/pve1/qemu/600/config", demoAuth, "", "")
	if !strings.Contains(string(r.data), `"lock":"clone"`) {
		t.Errorf("config while cloning = %s", r.raw)
	}
	tests := []struct {
		method, path, body string
		status             int
		reason             string
	}{
		{"POST", "/nodes/pve1/qemu/600/config", "cores=4", 500, "VM is locked (clone)"},
		{"POST", "/nodes/pve1/qemu/600/move_disk", "disk=scsi0&storage=local-lvm", 500, "VM is locked (clone)"},
		{"PUT", "/nodes/pve1/qemu/600/resize", "disk=scsi0&size=10G", 500, "VM is locked (clone)"},
		{"GET", "/nodes/pve2/qemu/600/config", "", 500, "Configuration file 'nodes/pve2/qemu-server/600.conf' does not exist"},
		{"POST", "/nodes/pve1/qemu/8000/clone", "newid=600", 500, "unable to create VM 600: config file already exists"},
		{"POST", "/nodes/pve1/qemu/8000/clone", "newid=601", 200, "OK"},
	}
	for _, tt := range tests {
		r := mustDo(t, tt.method, api+tt.path, demoAuth, formType, tt.body)
		if r.status != tt.status || r.reason != tt.reason {
			t.Errorf("%s %s %s = %d %q, want %d %q", tt.method, tt.path, tt.body, r.status, r.reason, tt.status, tt.reason)
		}
	}
	if src, _ := sim.Guest(8000); src.Lock != "" || src.Busy {
		t.Errorf("template locked by its clones: %+v", src)
	}
}

// TestProvisionRefusals pins PVE's refusals of clone, move_disk, config and resize: none
// starts a task.
func TestProvisionRefusals(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
	audit := "PVEAPIToken=" + simpve.AuditTokenID + "=" + simpve.DemoSecret
	sim.AddStorage(proxmox.StorageConfig{"storage": "off", "type": "rbd", "pool": "off", "content": "images", "disable": "1"})
	tests := []struct {
		method, path, auth, body string
		status                   int
		reason                   string
	}{
		{"POST", "/nodes/pve1/qemu/9000/clone", demoAuth, "", 400, "Parameter verification failed."},
		{"POST", "/nodes/pve1/qemu/9000/clone", demoAuth, "newid=99", 400, "Parameter verification failed."},
		{"POST", "/nodes/pve1/qemu/9000/clone", demoAuth, "newid=700&full=maybe", 400, "Parameter verification failed."},
		{"POST", "/nodes/pve1/qemu/9000/clone", demoAuth, "newid=700&pool=x", 400, "Parameter verification failed."},
		{"POST", "/nodes/pve1/qemu/9000/clone", demoAuth, "newid=700&target=pve9", 500, "no such cluster node 'pve9'"},
		{"POST", "/nodes/pve1/qemu/9000/clone", demoAuth, "newid=700&storage=nowhere&full=1", 500, "storage 'nowhere' does not exist"},
		{"POST", "/nodes/pve1/qemu/9000/clone", demoAuth, "newid=700&storage=off&full=1", 500, "storage 'off' is disabled"},
		{"POST", "/nodes/pve1/qemu/9000/clone", demoAuth, "newid=700&target=pve2&storage=local-lvm&full=1", 500, "can't clone to non-shared storage 'local-lvm'"},
		{"POST", "/nodes/pve1/qemu/9000/clone", demoAuth, "newid=700&target=pve2", 500, "can't clone VM to node 'pve2' (VM uses local storage)"},
		{"POST", "/nodes/pve1/qemu/100/clone", demoAuth, "newid=700&full=0", 500, "Linked clone feature is not supported for drive 'virtio0'"},
		{"POST", "/nodes/pve1/qemu/100/clone", demoAuth, "newid=700&target=pve2", 500, "can't clone VM to node 'pve2' (VM uses local storage)"},
		{"POST", "/nodes/pve1/qemu/9000/clone", audit, "newid=700", 403, "Permission check failed (/vms/9000, VM.Clone)"},
		{"POST", "/nodes/pve2/qemu/101/move_disk", demoAuth, "disk=scsi1", 400, "Parameter verification failed."},
		{"POST", "/nodes/pve2/qemu/101/move_disk", demoAuth, "disk=ide0&storage=ceph", 500, "you can't move a cdrom"},
		{"POST", "/nodes/pve2/qemu/101/move_disk", demoAuth, "disk=scsi1&storage=ceph", 500, "you can't move to the same storage with same format"},
		{"POST", "/nodes/pve2/qemu/101/move_disk", audit, "disk=scsi1&storage=local-lvm", 403, "Permission check failed (/vms/101, VM.Config.Disk)"},
		{"PUT", "/nodes/pve2/qemu/101/resize", demoAuth, "disk=scsi0&size=abc", 400, "Parameter verification failed."},
		{"PUT", "/nodes/pve2/qemu/101/resize", demoAuth, "disk=scsi0&size=10G", 500, "shrinking disks is not supported"},
		{"PUT", "/nodes/pve2/qemu/101/resize", demoAuth, "disk=ide2&size=10G", 500, "you can't resize a cdrom"},
		{"POST", "/nodes/pve2/qemu/101/config", demoAuth, "net3=virtio%3D01:00:00:00:00:01,bridge%3Dvmbr0", 400, "Parameter verification failed."},
		{"POST", "/nodes/pve2/qemu/101/config", demoAuth, "net3=bridge%3Dvmbr0", 400, "Parameter verification failed."},
		{"POST", "/nodes/pve2/qemu/101/config", demoAuth, "sshkeys=ssh-ed25519 AAAA", 400, "Parameter verification failed."},
		{"POST", "/nodes/pve2/qemu/101/config", demoAuth, "memory=8", 400, "Parameter verification failed."},
		{"POST", "/nodes/pve2/qemu/101/config", demoAuth, "nameserver=dns.example", 400, "Parameter verification failed."},
		{"POST", "/nodes/pve2/qemu/101/config", demoAuth, "ide1=local-lvm:4", 400, "Parameter verification failed."},
		{"POST", "/nodes/pve2/qemu/101/config", audit, "cores=2", 403, "Permission check failed (/vms/101, VM.Config.Options)"},
	}
	for _, tt := range tests {
		r := mustDo(t, tt.method, api+tt.path, tt.auth, formType, tt.body)
		if r.status != tt.status || r.reason != tt.reason {
			t.Errorf("%s %s %s = %d %q (%v), want %d %q", tt.method, tt.path, tt.body, r.status, r.reason, r.errors, tt.status, tt.reason)
		}
	}
	if n := len(sim.Tasks()); n != 0 {
		t.Errorf("%d tasks started by refusals", n)
	}
	if _, found := sim.Guest(700); found {
		t.Error("a refused clone created VM 700")
	}
}

// TestProvisionEffects pins what the tasks leave: file-storage volume names, move_disk
// numbering, unusedN slots, delete=1, resize units, masked Cloud-Init passwords.
func TestProvisionEffects(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
	sim.AddStorage(proxmox.StorageConfig{"storage": "nfs-vm", "type": "nfs", "server": "10.0.0.60", "export": "/vm", "path": "/mnt/pve/nfs-vm", "content": "images"})
	steps := []struct {
		method, path, body string
		vmid               int64
		key, want          string
	}{
		{"POST", "/nodes/pve1/qemu/8000/clone", "newid=610&target=pve3&storage=nfs-vm&full=1", 610, "scsi0", "nfs-vm:610/vm-610-disk-0.raw,iothread=1,size=3584M"},
		{"POST", "/nodes/pve1/qemu/8000/clone", "newid=611&target=pve3&storage=nfs-vm&full=1", 611, "ide2", "nfs-vm:611/vm-611-cloudinit.qcow2,media=cdrom"},
		{"POST", "/nodes/pve2/qemu/101/move_disk", "disk=scsi1&storage=local-lvm", 101, "scsi1", "local-lvm:vm-101-disk-3,backup=0,iothread=1,size=500G"},
		{"GET", "", "", 101, "unused1", "ceph:vm-101-disk-3"},
		{"POST", "/nodes/pve3/qemu/610/move_disk", "disk=scsi0&storage=local-lvm&delete=1", 610, "scsi0", "local-lvm:vm-610-disk-0,iothread=1,size=3584M"},
		{"GET", "", "", 610, "unused0", ""},
		{"PUT", "/nodes/pve3/qemu/610/resize", "disk=scsi0&size=%2B512M", 610, "scsi0", "local-lvm:vm-610-disk-0,iothread=1,size=4G"},
		{"PUT", "/nodes/pve3/qemu/610/resize", "disk=scsi0&size=5000000000", 610, "scsi0", "local-lvm:vm-610-disk-0,iothread=1,size=5000000000"},
		{"POST", "/nodes/pve3/qemu/610/config", "cipassword=hunter2&ciuser=ops", 610, "cipassword", "**********"},
		{"POST", "/nodes/pve3/qemu/610/config", "net1=vmxnet3,bridge%3Dvmbr1,tag%3D40,firewall%3D0", 610, "net1", ",bridge=vmbr1,firewall=0,tag=40"},
	}
	for _, st := range steps {
		if st.method != "GET" {
			r := mustDo(t, st.method, api+st.path, demoAuth, formType, st.body)
			if u := upidOf(t, r); taskStatus(t, api, u)["exitstatus"] != "OK" {
				t.Fatalf("%s %s %s: task %v", st.method, st.path, st.body, taskStatus(t, api, u))
			}
		}
		g, _ := sim.Guest(st.vmid)
		got := g.Config[st.key]
		if st.key == "net1" {
			if !strings.HasPrefix(got, "vmxnet3=BC:24:11:") || !strings.HasSuffix(got, st.want) {
				t.Errorf("net1 = %q", got)
			}
			continue
		}
		if got != st.want {
			t.Errorf("after %s %s: %d %s = %q, want %q", st.path, st.body, st.vmid, st.key, got, st.want)
		}
	}
	if g, _ := sim.Guest(610); g.Node != "pve3" {
		t.Errorf("610 on %s, want pve3", g.Node)
	}
	if !sim.CheckCloudInitPassword(610, "hunter2") || sim.CheckCloudInitPassword(610, "hunter3") {
		t.Error("Cloud-Init password not kept")
	}
	r := mustDo(t, "GET", api+"/nodes/pve3/qemu/610/config", demoAuth, "", "")
	if strings.Contains(r.raw, "hunter2") || !strings.Contains(r.raw, `"cipassword":"**********"`) {
		t.Errorf("config shows %s", r.raw)
	}
	for _, rec := range sim.RequestLog() {
		if strings.Contains(rec.Params.Encode(), "hunter2") {
			t.Errorf("request log holds the password: %v", rec.Params)
		}
	}
}

// TestWorkerFailuresLeaveNothing: failing clone, move and config tasks change nothing.
func TestWorkerFailuresLeaveNothing(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
	sim.FailTask("pve1", 9000, "clone failed: lvcreate 'pve/vm-620-disk-0' error: out of space")
	sim.FailMove(101, "scsi1", "storage migration failed: copy failed")
	before, _ := sim.Guest(101)
	steps := []struct{ method, path, body, exit string }{
		{"POST", "/nodes/pve1/qemu/9000/clone", "newid=620&full=1", "clone failed: lvcreate 'pve/vm-620-disk-0' error: out of space"},
		{"POST", "/nodes/pve2/qemu/101/move_disk", "disk=scsi1&storage=local-lvm", "storage migration failed: copy failed"},
		{"POST", "/nodes/pve2/qemu/101/config", "net4=virtio,bridge%3Dvmbr7", "bridge 'vmbr7' does not exist"},
		{"POST", "/nodes/pve2/qemu/101/config", "ide3=gone:cloudinit", "storage 'gone' does not exist"},
	}
	for _, st := range steps {
		u := upidOf(t, mustDo(t, st.method, api+st.path, demoAuth, formType, st.body))
		if got := taskStatus(t, api, u)["exitstatus"]; got != st.exit {
			t.Errorf("%s %s: exit %v, want %q", st.path, st.body, got, st.exit)
		}
	}
	if _, found := sim.Guest(620); found {
		t.Error("failed clone left VM 620")
	}
	after, _ := sim.Guest(101)
	if len(after.Config) != len(before.Config) || after.Config["scsi1"] != before.Config["scsi1"] || after.Config["net4"] != "" || after.Lock != "" || after.Busy {
		t.Errorf("failed tasks changed 101: %v", after)
	}
}
