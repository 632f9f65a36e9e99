package simpve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

const formType = "application/x-www-form-urlencoded"

// startOpts runs a simulator with opts on a free port for the test.
func startOpts(t *testing.T, opts simpve.Options) (*simpve.Server, string) {
	t.Helper()
	sim := simpve.New(opts)
	base, err := sim.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	return sim, base + "/api2/json"
}

// upidOf decodes a task-starting answer, failing the test when it is not a UPID.
func upidOf(t *testing.T, r reply) proxmox.UPID {
	t.Helper()
	var s string
	if r.status != 200 || json.Unmarshal(r.data, &s) != nil {
		t.Fatalf("answer = %d %s, want a UPID", r.status, r.raw)
	}
	u, err := proxmox.ParseUPID(s)
	if err != nil {
		t.Fatalf("answer %q: %v", s, err)
	}
	return u
}

// taskStatus reads GET /nodes/{node}/tasks/{upid}/status.
func taskStatus(t *testing.T, api string, u proxmox.UPID) map[string]any {
	t.Helper()
	r := mustDo(t, "GET", api+"/nodes/"+u.Node+"/tasks/"+url.PathEscape(u.String())+"/status", demoAuth, "", "")
	var m map[string]any
	if r.status != 200 || json.Unmarshal(r.data, &m) != nil {
		t.Fatalf("task status = %d %s", r.status, r.raw)
	}
	return m
}

// eventually polls cond every few milliseconds until it holds or the test's patience ends.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("never happened: %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestGuestWire pins the wire format of guest reads: numbers where PVE's schema says
// integer/boolean, QEMU memory as a string, LXC memory as a number, qmpstatus for a paused
// VM, the template flag, a digest.
func TestGuestWire(t *testing.T) {
	t.Parallel()
	_, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo})
	tests := []struct {
		path string
		want []string
	}{
		{"/cluster/resources?type=vm", []string{`"id":"qemu/9000"`, `"template":1`, `"vmid":101`, `"type":"lxc"`, `"maxmem":17179869184`, `"maxcpu":8`}},
		{"/nodes/pve2/qemu/105/status/current", []string{`"status":"running"`, `"qmpstatus":"paused"`, `"vmid":105`}},
		{"/nodes/pve2/qemu/101/status/current", []string{`"status":"stopped"`, `"qmpstatus":"stopped"`, `"uptime":0`}},
		{"/nodes/pve2/qemu/101/config", []string{`"sockets":2`, `"numa":1`, `"memory":"16384"`, `"bios":"ovmf"`, `"hostpci0":"mapping=gpu-a40,pcie=1,x-vga=1"`, `"digest":"`}},
		{"/nodes/pve1/lxc/200/config", []string{`"memory":512`, `"unprivileged":1`, `"hostname":"ct-pve1"`, `"parent":"before-update"`}},
		{"/nodes/pve1/qemu/9000/config", []string{`"template":1`, `"ide2":"local-lvm:vm-9000-cloudinit,media=cdrom"`, `"net0":"virtio=BC:24:11:00:90:00,bridge=vmbr0"`}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			r := mustDo(t, "GET", api+tt.path, demoAuth, "", "")
			if r.status != 200 {
				t.Fatalf("status %d %s", r.status, r.raw)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(r.data), w) {
					t.Errorf("%s lacks %s", r.data, w)
				}
			}
		})
	}
}

// TestGuestRefusals pins PVE's synchronous refusals and their texts, and that nothing is
// started by them.
func TestGuestRefusals(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
	audit := "PVEAPIToken=" + simpve.AuditTokenID + "=" + simpve.DemoSecret
	tests := []struct {
		method, path, auth, body string
		status                   int
		reason                   string
	}{
		{"POST", "/nodes/pve1/lxc/200/status/start", demoAuth, "", 500, "CT 200 already running"},
		{"POST", "/nodes/pve2/lxc/201/status/stop", demoAuth, "", 500, "CT 201 not running"},
		{"POST", "/nodes/pve2/lxc/201/status/shutdown", demoAuth, "", 500, "CT 201 not running"},
		{"POST", "/nodes/pve2/lxc/201/status/reboot", demoAuth, "", 500, "VM 201 not running"},
		{"POST", "/nodes/pve2/qemu/101/status/suspend", demoAuth, "", 500, "VM 101 not running"},
		{"POST", "/nodes/pve2/qemu/101/status/reset", demoAuth, "", 500, "VM 101 not running"},
		{"POST", "/nodes/pve2/qemu/101/status/resume", demoAuth, "", 500, "VM 101 not running"},
		{"POST", "/nodes/pve2/qemu/101/status/reboot", demoAuth, "", 500, "VM 101 not running"},
		{"POST", "/nodes/pve2/qemu/105/status/shutdown", demoAuth, "", 500, "VM is paused - cannot shutdown"},
		{"POST", "/nodes/pve2/qemu/105/status/reboot", demoAuth, "", 500, "VM is paused - cannot shutdown"},
		{"POST", "/nodes/pve1/qemu/999/status/start", demoAuth, "", 500, "Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist"},
		{"POST", "/nodes/pve2/qemu/100/status/start", demoAuth, "", 500, "Configuration file 'nodes/pve2/qemu-server/100.conf' does not exist"},
		{"GET", "/nodes/pve1/lxc/100/config", demoAuth, "", 500, "Configuration file 'nodes/pve1/lxc/100.conf' does not exist"},
		{"GET", "/nodes/pve1/qemu/abc/config", demoAuth, "", 400, "Parameter verification failed."},
		{"GET", "/nodes/pve9/qemu/100/config", demoAuth, "", 500, "hostname lookup 'pve9' failed - failed to get address info for: pve9: Name or service not known"},
		{"POST", "/nodes/pve1/lxc/200/status/suspend", demoAuth, "", 501, "Method 'POST /nodes/pve1/lxc/200/status/suspend' not implemented"},
		{"POST", "/nodes/pve1/qemu/100/status/stop", audit, "", 403, "Permission check failed (/vms/100, VM.PowerMgmt)"},
		{"POST", "/nodes/pve1/qemu/100/snapshot", audit, "snapname=x", 403, "Permission check failed (/vms/100, VM.Snapshot)"},
		{"POST", "/nodes/pve1/status", audit, "command=reboot", 403, "Permission check failed (/nodes/pve1, Sys.PowerMgmt)"},
		{"POST", "/nodes/pve1/qemu/100/snapshot", demoAuth, "snapname=current", 500, "unable to use snapshot name 'current' (reserved name)"},
		{"POST", "/nodes/pve1/qemu/100/snapshot", demoAuth, "snapname=1abc", 400, "Parameter verification failed."},
		{"POST", "/nodes/pve1/lxc/200/snapshot", demoAuth, "snapname=x&vmstate=1", 400, "Parameter verification failed."},
		{"POST", "/nodes/pve1/qemu/100/status/stop", demoAuth, "timeout=3", 400, "Parameter verification failed."},
		{"POST", "/nodes/pve1/status", demoAuth, "", 400, "Parameter verification failed."},
		{"POST", "/nodes/pve1/status", demoAuth, "command=halt", 400, "Parameter verification failed."},
	}
	for _, tt := range tests {
		r := mustDo(t, tt.method, api+tt.path, tt.auth, formType, tt.body)
		if r.status != tt.status || r.reason != tt.reason {
			t.Errorf("%s %s %s = %d %q, want %d %q", tt.method, tt.path, tt.body, r.status, r.reason, tt.status, tt.reason)
		}
	}
	if n := len(sim.Tasks()); n != 0 {
		t.Errorf("%d tasks started by refusals", n)
	}
	if st, _ := sim.NodeStatus("pve1"); st != "online" {
		t.Errorf("pve1 = %s", st)
	}
}

// TestTaskFailuresInWorker pins the checks PVE runs inside the worker: the request
// answers a UPID, the task ends with the error as exit status, the guest is unchanged;
// WARNINGS from FailTask is a success that applies the effect.
func TestTaskFailuresInWorker(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
	sim.FailTask("pve2", 101, "WARNINGS: 3")
	tests := []struct {
		path, body, exit string
		vmid             int64
		status           string
	}{
		{"/nodes/pve1/qemu/100/status/start", "", "VM 100 already running", 100, "running"},
		{"/nodes/pve1/qemu/9000/status/start", "", "you can't start a vm if it's a template", 9000, "stopped"},
		{"/nodes/pve1/lxc/200/snapshot", "snapname=base", "snapshot name 'base' already used", 200, "running"},
		{"/nodes/pve1/lxc/200/snapshot/nope/rollback", "", "snapshot 'nope' does not exist", 200, "running"},
		{"/nodes/pve2/qemu/101/status/start", "", "WARNINGS: 3", 101, "running"},
	}
	for _, tt := range tests {
		u := upidOf(t, mustDo(t, "POST", api+tt.path, demoAuth, formType, tt.body))
		st := taskStatus(t, api, u)
		if st["status"] != "stopped" || st["exitstatus"] != tt.exit || st["user"] != simpve.DemoTokenID || st["id"] != u.ID {
			t.Errorf("%s task = %v, want exit %q", tt.path, st, tt.exit)
		}
		if g, _ := sim.Guest(tt.vmid); g.Status != tt.status || g.Busy {
			t.Errorf("%d = %s busy=%v, want %s", tt.vmid, g.Status, g.Busy, tt.status)
		}
	}
	r := mustDo(t, "DELETE", api+"/nodes/pve1/lxc/200/snapshot/nope", demoAuth, "", "")
	if st := taskStatus(t, api, upidOf(t, r)); st["exitstatus"] != "snapshot 'nope' does not exist" {
		t.Errorf("delete of a missing snapshot = %v", st)
	}
	bad := mustDo(t, "GET", api+"/nodes/pve1/tasks/not-a-upid/status", demoAuth, "", "")
	if bad.status != 400 || bad.errors["upid"] == "" {
		t.Errorf("malformed upid = %d %v", bad.status, bad.errors)
	}
	missing := mustDo(t, "GET", api+"/nodes/pve1/tasks/"+url.PathEscape("UPID:pve1:0000ABCD:00123456:6745A0B1:qmstart:100:root@pam:")+"/status", demoAuth, "", "")
	if missing.status != 400 || missing.reason != "Parameter verification failed." || missing.errors["upid"] != "no such task\n" {
		t.Errorf("unknown upid = %d %q %v, want PVE's 400 with upid: no such task", missing.status, missing.reason, missing.errors)
	}
}

// TestTaskLifecycleAndLocks pins tasks that take time: the task is "running" and holds the
// guest's lock (a second operation is PVE's lock timeout, for VMs and containers), the
// effect appears when it ends with OK, and UPIDs are real (node, type, vmid, token).
func TestTaskLifecycleAndLocks(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: time.Hour})
	u := upidOf(t, mustDo(t, "POST", api+"/nodes/pve2/qemu/101/status/start", demoAuth, formType, ""))
	if u.Node != "pve2" || u.Type != "qmstart" || u.ID != "101" || u.User != simpve.DemoTokenID {
		t.Errorf("UPID = %+v", u)
	}
	if st := taskStatus(t, api, u); st["status"] != "running" || st["exitstatus"] != nil {
		t.Errorf("task = %v, want running", st)
	}
	if g, _ := sim.Guest(101); g.Status != "stopped" || !g.Busy {
		t.Errorf("guest during the task = %+v", g)
	}
	r := mustDo(t, "POST", api+"/nodes/pve2/qemu/101/status/stop", demoAuth, formType, "")
	if r.status != 500 || r.reason != "can't lock file '/var/lock/qemu-server/lock-101.conf' - got timeout" {
		t.Errorf("second operation = %d %q", r.status, r.reason)
	}
	upidOf(t, mustDo(t, "POST", api+"/nodes/pve1/lxc/200/snapshot", demoAuth, formType, "snapname=snap1&description=d"))
	if g, _ := sim.Guest(200); g.Lock != "snapshot" || !g.Busy {
		t.Errorf("ct during a snapshot = %+v", g)
	}
	r = mustDo(t, "POST", api+"/nodes/pve1/lxc/200/status/stop", demoAuth, formType, "")
	if r.status != 500 || r.reason != "can't lock file '/run/lock/lxc/pve-config-200.lock' - got timeout" {
		t.Errorf("ct operation during a snapshot = %d %q", r.status, r.reason)
	}
	if r := mustDo(t, "GET", api+"/cluster/resources?type=vm", demoAuth, "", ""); !strings.Contains(string(r.data), `"lock":"snapshot"`) {
		t.Errorf("resources do not show the lock: %s", r.data)
	}

	sim.SetTaskDuration(20 * time.Millisecond)
	u = upidOf(t, mustDo(t, "POST", api+"/nodes/pve3/qemu/102/status/suspend", demoAuth, formType, ""))
	eventually(t, "the suspend task ends", func() bool { return taskStatus(t, api, u)["status"] == "stopped" })
	if st := taskStatus(t, api, u); st["exitstatus"] != "OK" {
		t.Errorf("task = %v", st)
	}
	if g, _ := sim.Guest(102); g.Status != "paused" || g.Busy {
		t.Errorf("guest after suspend = %+v", g)
	}
	tasks := sim.Tasks()
	if len(tasks) != 3 || tasks[0].Type != "qmstart" || !tasks[0].Running || tasks[2].Type != "qmsuspend" || tasks[2].ExitStatus != "OK" {
		t.Errorf("Tasks = %+v", tasks)
	}
}

// TestSnapshotTree pins the snapshot list with the "current" entry and the tree changes
// of create (vmstate only for a running VM), delete (children re-parented) and rollback.
func TestSnapshotTree(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
	r := mustDo(t, "GET", api+"/nodes/pve1/lxc/200/snapshot", demoAuth, "", "")
	var list []map[string]any
	if err := json.Unmarshal(r.data, &list); err != nil || len(list) != 4 {
		t.Fatalf("snapshot list = %s", r.data)
	}
	cur := list[len(list)-1]
	if cur["name"] != "current" || cur["description"] != "You are here!" || cur["parent"] != "before-update" || cur["running"] != float64(1) {
		t.Errorf("current = %v", cur)
	}
	if _, has := list[0]["vmstate"]; has {
		t.Errorf("container snapshot with vmstate: %v", list[0])
	}
	upidOf(t, mustDo(t, "POST", api+"/nodes/pve1/qemu/100/snapshot", demoAuth, formType, "snapname=hot&vmstate=1"))
	upidOf(t, mustDo(t, "POST", api+"/nodes/pve2/qemu/101/snapshot", demoAuth, formType, "snapname=cold&vmstate=1"))
	if g, _ := sim.Guest(100); len(g.VMState) != 1 || g.Parent != "hot" {
		t.Errorf("running VM snapshot = %+v", g)
	}
	if g, _ := sim.Guest(101); len(g.VMState) != 0 || g.Parent != "cold" {
		t.Errorf("stopped VM snapshot kept RAM: %+v", g)
	}
	r = mustDo(t, "GET", api+"/nodes/pve1/qemu/100/snapshot", demoAuth, "", "")
	if !strings.Contains(string(r.data), `"vmstate":1`) || !strings.Contains(string(r.data), `"snaptime":`) {
		t.Errorf("VM snapshot list = %s", r.data)
	}
	upidOf(t, mustDo(t, "DELETE", api+"/nodes/pve1/lxc/200/snapshot/base", demoAuth, "", ""))
	upidOf(t, mustDo(t, "POST", api+"/nodes/pve1/lxc/200/snapshot/experiment/rollback", demoAuth, formType, "start=1"))
	g, _ := sim.Guest(200)
	if g.Snapshots["experiment"] != "" || g.Snapshots["before-update"] != "" || g.Parent != "experiment" || g.Status != "running" {
		t.Errorf("tree after delete and rollback = %+v", g)
	}
}

// TestNodeReboot pins POST /nodes/{node}/status command=reboot: data null, the node
// unreachable through pveproxy (595) and offline in the lists meanwhile, then back with
// its guests stopped.
func TestNodeReboot(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1, NodeRebootDuration: time.Hour})
	r := mustDo(t, "POST", api+"/nodes/pve2/status", demoAuth, formType, "command=reboot")
	if r.status != 200 || string(r.data) != "null" {
		t.Fatalf("reboot = %d %s, want data null", r.status, r.raw)
	}
	r = mustDo(t, "GET", api+"/nodes/pve2/qemu/105/status/current", demoAuth, "", "")
	if r.status != 595 || r.reason != "No route to host" {
		t.Errorf("request to the rebooting node = %d %q", r.status, r.reason)
	}
	var nodes []map[string]any
	if r := mustDo(t, "GET", api+"/nodes", demoAuth, "", ""); json.Unmarshal(r.data, &nodes) != nil || len(nodes) != 3 || nodes[1]["node"] != "pve2" || nodes[1]["status"] != "offline" || nodes[0]["status"] != "online" {
		t.Errorf("nodes = %s", r.data)
	}
	if r := mustDo(t, "GET", api+"/cluster/resources?type=vm", demoAuth, "", ""); !strings.Contains(string(r.data), `"id":"qemu/105"`) || !strings.Contains(string(r.data), `"status":"unknown"`) {
		t.Errorf("resources while rebooting = %s", r.data)
	}
	if r := mustDo(t, "GET", api+"/nodes/pve1/qemu/100/status/current", demoAuth, "", ""); r.status != 200 {
		t.Errorf("another node = %d", r.status)
	}

	sim.SetNodeRebootDuration(20 * time.Millisecond)
	r = mustDo(t, "POST", api+"/nodes/pve3/status", demoAuth, formType, "command=reboot")
	if r.status != 200 {
		t.Fatalf("reboot pve3 = %d", r.status)
	}
	eventually(t, "pve3 is back", func() bool { st, _ := sim.NodeStatus("pve3"); return st == "online" })
	for _, vmid := range []int64{102, 104, 202} {
		if g, _ := sim.Guest(vmid); g.Status != "stopped" {
			t.Errorf("%d after the reboot = %s, want stopped", vmid, g.Status)
		}
	}
	if r := mustDo(t, "GET", api+"/nodes/pve3/qemu/102/status/current", demoAuth, "", ""); r.status != 200 || !strings.Contains(string(r.data), `"status":"stopped"`) {
		t.Errorf("after the reboot = %d %s", r.status, r.data)
	}
}

// TestNetwork pins GET /nodes/{node}/network: vmbr0 and vmbr1 on every node, the type filter.
func TestNetwork(t *testing.T) {
	t.Parallel()
	_, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo})
	for _, n := range []string{"pve1", "pve2", "pve3"} {
		r := mustDo(t, "GET", api+"/nodes/"+n+"/network?type=any_bridge", demoAuth, "", "")
		var list []map[string]any
		if err := json.Unmarshal(r.data, &list); err != nil || len(list) != 2 || list[0]["iface"] != "vmbr0" || list[1]["iface"] != "vmbr1" || list[0]["bridge_vlan_aware"] != float64(1) {
			t.Errorf("%s bridges = %s", n, r.data)
		}
	}
	if r := mustDo(t, "GET", api+"/nodes/pve1/network", demoAuth, "", ""); strings.Count(string(r.data), `"iface"`) != 4 {
		t.Errorf("all interfaces = %s", r.data)
	}
	if r := mustDo(t, "GET", api+"/nodes/pve1/network?type=wifi", demoAuth, "", ""); r.status != 400 || r.errors["type"] == "" {
		t.Errorf("bad type = %d %v", r.status, r.errors)
	}
}

// TestTaskSpread pins Options.TaskSpread: the API's tasks last between TaskDuration × (1 ±
// spread), no two in a row alike, and on average TaskDuration.
func TestTaskSpread(t *testing.T) {
	t.Parallel()
	const nominal, spread, n = time.Hour, 0.15, 40
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: nominal, TaskSpread: spread})
	for i := range n {
		// snapshots of one guest are refused while one runs: each task its own guest name
		sim.AddGuest(simpve.GuestSpec{VMID: int64(1000 + i), Node: "pve1", Name: fmt.Sprintf("spread-%d", i), Status: "running"})
		upidOf(t, mustDo(t, "POST", fmt.Sprintf("%s/nodes/pve1/qemu/%d/snapshot", api, 1000+i), demoAuth, formType, "snapname=spread"))
	}
	var sum, last time.Duration
	for _, st := range sim.TaskStats() {
		d := st.End.Sub(st.Begun)
		if f := float64(d) / float64(nominal); f < 1-spread || f > 1+spread {
			t.Errorf("task %s lasts %v, want within %v ± %.0f %%", st.UPID, d, nominal, spread*100)
		}
		if d == last {
			t.Errorf("task %s lasts %v as the one before it", st.UPID, d)
		}
		sum, last = sum+d, d
	}
	if mean := sum / n; mean < nominal*98/100 || mean > nominal*102/100 {
		t.Errorf("mean duration %v, want %v within 2 %%", mean, nominal)
	}
}
