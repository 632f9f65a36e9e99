package handlers

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestVMMigrateDecode pins vm.migrate's data: online defaults to true and with_local_disks to
// false (spelled out, they are the same request); each rule break names its field.
func TestVMMigrateDecode(t *testing.T) {
	t.Parallel()
	fp := func(t *testing.T, data string) string {
		t.Helper()
		p, out := VMMigrate().prepare(json.RawMessage(data))
		if out != nil {
			t.Fatalf("prepare(%s) = %+v", data, out)
		}
		return p.fingerprint
	}
	if a, b := fp(t, `{"vm":100,"target_node":"pve2"}`), fp(t, `{"vm":"100","target_node":"pve2","online":true,"with_local_disks":false}`); a != b {
		t.Errorf("defaults spelled out change the fingerprint: %s vs %s", a, b)
	}
	if a, b := fp(t, `{"vm":100,"target_node":"pve2"}`), fp(t, `{"vm":100,"target_node":"pve2","with_local_disks":true}`); a == b {
		t.Error("with_local_disks true has the fingerprint of the default")
	}
	for data, field := range map[string]string{
		`{"vm":100}`:                                              "target_node",
		`{"vm":100,"target_node":"pve_2"}`:                        "target_node",
		`{"vm":100,"target_node":"pve2","online":"yes"}`:          "online",
		`{"vm":100,"target_node":"pve2","with_local_disks":1}`:    "with_local_disks",
		`{"vm":100,"target_node":"pve2","target_storage":"1bad"}`: "target_storage",
		`{"target_node":"pve2"}`:                                  "vm",
	} {
		_, out := VMMigrate().prepare(json.RawMessage(data))
		if out == nil || out.Status != 422 || out.Reason != ReasonInvalidBody || !slices.Equal(out.Fields, []string{field}) {
			t.Errorf("prepare(%s) = %+v, want 422 invalid_body naming %s", data, out, field)
		}
	}
}

// migrateResult handles one vm.migrate as a first delivery and returns its result.
func (e *rtEnv) migrateResult(t *testing.T, id, data string) events.Result {
	t.Helper()
	return e.resultOf(t, "vm.migrate", id, data)
}

// migratePOSTs returns the parameters of every migrate POST the simulator received.
func migratePOSTs(sim *simpve.Server) []map[string]string {
	var out []map[string]string
	for _, rec := range sim.RequestLog() {
		if rec.Method == "POST" && strings.HasSuffix(rec.Path, "/migrate") {
			p := map[string]string{"path": rec.Path}
			for k := range rec.Params {
				p[k] = rec.Params.Get(k)
			}
			out = append(out, p)
		}
	}
	return out
}

// TestVMMigrateOutcomes pins vm.migrate's outcomes against the simulator, each on a fresh demo
// cluster: a live migration and one with local disks (ok, with the node and the task), a
// guest already there, every precondition refusal (local disks, passthrough and a local
// CD-ROM, a storage the target lacks, a running VM with online false, a target storage that
// cannot hold disks), a node not in the cluster, an unknown guest, a running container
// (restart=1) and a container whose snapshots on local storage PVE cannot move (the task
// fails). Refusals send no migrate.
func TestVMMigrateOutcomes(t *testing.T) {
	t.Parallel()
	// a VM on a local storage only pve1 has
	pinned := func(sim *simpve.Server) {
		sim.AddStorage(proxmox.StorageConfig{"storage": "fast1", "type": "lvmthin", "thinpool": "fast", "vgname": "fast",
			"content": "images,rootdir", "nodes": "pve1"})
		sim.AddGuest(simpve.GuestSpec{VMID: 150, Node: "pve1", Name: "pinned", Status: "running",
			Config: map[string]string{"memory": "2048", "scsi0": "fast1:vm-150-disk-0,size=16G", "scsi1": "ceph:vm-150-disk-1,size=8G"}})
	}
	sharedCT := func(sim *simpve.Server) {
		sim.AddGuest(simpve.GuestSpec{VMID: 250, Type: proxmox.GuestLXC, Node: "pve1", Name: "ct-shared", Status: "running",
			Config: map[string]string{"memory": "512", "rootfs": "ceph:vm-250-disk-0,size=8G", "net0": "name=eth0,bridge=vmbr0,ip=dhcp,type=veth"}})
	}
	tests := []struct {
		name       string
		setup      func(*simpve.Server)
		data       string
		status     int
		result     string
		reason     string
		fields     []string
		inDetail   []string          // the detail holds each
		post       map[string]string // the one migrate POST's parameters (nil: none sent)
		wantNode   string            // where the guest is afterwards
		wantVMID   int64
		wantOutput map[string]string
	}{
		{name: "live migration on shared storage", data: `{"vm":"app-01","target_node":"pve1"}`, status: 200, result: ResultOK,
			post:     map[string]string{"path": "/nodes/pve3/qemu/102/migrate", "target": "pve1", "online": "1"},
			wantVMID: 102, wantNode: "pve1", wantOutput: map[string]string{"node": "pve1", "source_node": "pve3", "vmid": "102", "type": "qemu"}},
		{name: "live migration with local disks", data: `{"vm":100,"target_node":"pve2","with_local_disks":true}`, status: 200, result: ResultOK,
			post:     map[string]string{"path": "/nodes/pve1/qemu/100/migrate", "target": "pve2", "online": "1", "with-local-disks": "1"},
			wantVMID: 100, wantNode: "pve2", wantOutput: map[string]string{"node": "pve2", "source_node": "pve1"}},
		{name: "already on the target", data: `{"vm":101,"target_node":"pve2"}`, status: 200, result: ResultAlreadyPresent,
			inDetail: []string{"on node pve2 already"}, wantVMID: 101, wantNode: "pve2", wantOutput: map[string]string{"node": "pve2"}},
		{name: "local disks without with_local_disks", data: `{"vm":100,"target_node":"pve2"}`, status: 409, result: ResultRefused,
			reason: ReasonMigrationPreconditionFailed, fields: []string{"with_local_disks"},
			inDetail: []string{"virtio0 local-lvm:vm-100-disk-0 (32.0 GiB)", "set with_local_disks true"}, wantVMID: 100, wantNode: "pve1"},
		{name: "passthrough devices and a local CD-ROM image", data: `{"vm":"db-01","target_node":"pve1","with_local_disks":true}`,
			status: 409, result: ResultRefused, reason: ReasonMigrationPreconditionFailed,
			inDetail: []string{"local resources tie it to node pve2: hostpci1, usb0", "ide0 local:iso/ubuntu-24.04.2-live-server-amd64.iso"},
			wantVMID: 101, wantNode: "pve2"},
		{name: "a storage the target lacks", setup: pinned, data: `{"vm":150,"target_node":"pve2","with_local_disks":true}`,
			status: 409, result: ResultRefused, reason: ReasonMigrationPreconditionFailed, fields: []string{"target_node"},
			inDetail: []string{"storage fast1 of the VM is not available on node pve2"}, wantVMID: 150, wantNode: "pve1"},
		{name: "a storage the target lacks, mapped by target_storage", setup: pinned,
			data: `{"vm":150,"target_node":"pve2","with_local_disks":true,"target_storage":"local-lvm"}`, status: 200, result: ResultOK,
			post:     map[string]string{"path": "/nodes/pve1/qemu/150/migrate", "target": "pve2", "online": "1", "with-local-disks": "1", "targetstorage": "local-lvm"},
			wantVMID: 150, wantNode: "pve2"},
		{name: "a running VM with online false", data: `{"vm":102,"target_node":"pve1","online":false}`, status: 409, result: ResultRefused,
			reason: ReasonMigrationPreconditionFailed, fields: []string{"online"}, inDetail: []string{"online is false"}, wantVMID: 102, wantNode: "pve3"},
		{name: "a target storage without images", data: `{"vm":102,"target_node":"pve1","target_storage":"images"}`, status: 409,
			result: ResultRefused, reason: ReasonMigrationPreconditionFailed, fields: []string{"target_storage"},
			inDetail: []string{"target_storage images has no content images"}, wantVMID: 102, wantNode: "pve3"},
		{name: "a node not in the cluster", data: `{"vm":102,"target_node":"pve9"}`, status: 422, result: ResultRefused,
			reason: ReasonInvalidBody, fields: []string{"target_node"}, inDetail: []string{"pve1, pve2, pve3"}, wantVMID: 102, wantNode: "pve3"},
		{name: "an unknown guest", data: `{"vm":4242,"target_node":"pve1"}`, status: 404, result: ResultRefused, reason: ReasonVMNotFound},
		{name: "a running container restarts", setup: sharedCT, data: `{"vm":"ct-shared","target_node":"pve2"}`, status: 200, result: ResultOK,
			post:     map[string]string{"path": "/nodes/pve1/lxc/250/migrate", "target": "pve2", "restart": "1"},
			wantVMID: 250, wantNode: "pve2", wantOutput: map[string]string{"type": "lxc", "node": "pve2", "source_node": "pve1"}},
		{name: "a container on local storage without with_local_disks", data: `{"vm":200,"target_node":"pve2"}`, status: 409,
			result: ResultRefused, reason: ReasonMigrationPreconditionFailed, fields: []string{"with_local_disks"},
			inDetail: []string{"rootfs local-lvm:vm-200-disk-0"}, wantVMID: 200, wantNode: "pve1"},
		{name: "a container whose snapshots PVE cannot move", data: `{"vm":200,"target_node":"pve2","with_local_disks":true}`, status: 502,
			result: ResultFailed, reason: ReasonTaskFailed, inDetail: []string{"migration aborted", "its log: migration aborted (duration"},
			post:     map[string]string{"path": "/nodes/pve1/lxc/200/migrate", "target": "pve2", "restart": "1"},
			wantVMID: 200, wantNode: "pve1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newRTEnv(t)
			if tt.setup != nil {
				tt.setup(e.pve)
			}
			res := e.migrateResult(t, "migrate-"+strings.ReplaceAll(tt.name, " ", "-"), tt.data)
			t.Logf("%d %s %s: %s", res.Status, res.Result, res.Reason, res.Detail)
			if res.Status != tt.status || res.Result != tt.result || res.Reason != tt.reason {
				t.Fatalf("got %d %s %q (%s), want %d %s %q", res.Status, res.Result, res.Reason, res.Detail, tt.status, tt.result, tt.reason)
			}
			if tt.fields != nil && !slices.Equal(res.Fields, tt.fields) {
				t.Errorf("fields %v, want %v", res.Fields, tt.fields)
			}
			for _, s := range tt.inDetail {
				if !strings.Contains(res.Detail, s) {
					t.Errorf("detail %q lacks %q", res.Detail, s)
				}
			}
			posts := migratePOSTs(e.pve)
			switch {
			case tt.post == nil && len(posts) > 0:
				t.Errorf("migrate POSTs %v, want none", posts)
			case tt.post != nil && (len(posts) != 1 || !mapsEqual(posts[0], tt.post)):
				t.Errorf("migrate POSTs %v, want exactly %v", posts, tt.post)
			}
			if tt.wantVMID != 0 {
				if g, ok := e.pve.Guest(tt.wantVMID); !ok || g.Node != tt.wantNode {
					t.Errorf("guest %d on %q, want %q", tt.wantVMID, g.Node, tt.wantNode)
				}
			}
			if tt.wantOutput != nil {
				var out map[string]any
				if err := json.Unmarshal(res.Output, &out); err != nil {
					t.Fatalf("output %s: %v", res.Output, err)
				}
				for k, v := range tt.wantOutput {
					if out[k] != v {
						t.Errorf("output %s = %v, want %q (output %s)", k, out[k], v, res.Output)
					}
				}
				if tt.result == ResultOK {
					upid, _ := out["upid"].(string)
					typ, _ := out["type"].(string)
					if u, err := proxmox.ParseUPID(upid); err != nil || u.Type != proxmox.MigrateTaskType(proxmox.GuestType(typ)) || res.Status != 200 {
						t.Errorf("output upid %q is not the %s guest's migration task (%v)", upid, typ, err)
					}
				}
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestVMMigrateLostAnswerIsConfirmed: PVE started the migration but its answer was lost; the
// command confirms by reading where the guest is and its migration tasks, waiting for a
// task that still runs, and never sends a second migrate.
func TestVMMigrateLostAnswerIsConfirmed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		taskDur time.Duration
	}{{"the task already ended", -1}, {"the task still runs", 300 * time.Millisecond}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newRTEnv(t)
			e.pve.SetTaskDuration(tt.taskDur)
			e.pve.DropAnswerAfterApply("POST", "/nodes/pve3/qemu/102/migrate", 1)
			res := e.migrateResult(t, "migrate-lost", `{"vm":102,"target_node":"pve2"}`)
			if res.Status != 200 || res.Result != ResultOK {
				t.Fatalf("got %d %s %q (%s), want 200 ok", res.Status, res.Result, res.Reason, res.Detail)
			}
			if n := len(migratePOSTs(e.pve)); n != 1 {
				t.Errorf("migrate POSTs = %d, want 1", n)
			}
			if g, _ := e.pve.Guest(102); g.Node != "pve2" || g.Status != "running" {
				t.Errorf("guest 102 %s on %s, want running on pve2", g.Status, g.Node)
			}
			confirmed, waited := false, false
			for _, st := range e.pub.stepsOf(t, "migrate-lost") {
				confirmed = confirmed || (st.Step == "confirm" && st.Status == events.StepDone)
				waited = waited || (st.Step == "confirm" && st.Status == events.StepRunning && strings.Contains(st.UPID, ":qmigrate:102:"))
			}
			if !confirmed {
				t.Error("no confirm step done")
			}
			if waited != (tt.taskDur > 0) {
				t.Errorf("waited for the running migration task: %v, want %v", waited, tt.taskDur > 0)
			}
		})
	}
}
