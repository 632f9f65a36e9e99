package simpve_test

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// precondition reads GET /nodes/{node}/qemu/{vmid}/migrate?target=….
func precondition(t *testing.T, api, node string, vmid, target string) map[string]any {
	t.Helper()
	r := mustDo(t, "GET", api+"/nodes/"+node+"/qemu/"+vmid+"/migrate?target="+target, demoAuth, "", "")
	var m map[string]any
	if r.status != 200 || json.Unmarshal(r.data, &m) != nil {
		t.Fatalf("precondition of %s = %d %s", vmid, r.status, r.raw)
	}
	return m
}

// migrationLog reads a task's whole log (GET …/log?limit=0).
func migrationLog(t *testing.T, api string, u proxmox.UPID) []string {
	t.Helper()
	r := mustDo(t, "GET", api+"/nodes/"+u.Node+"/tasks/"+url.PathEscape(u.String())+"/log?limit=0", demoAuth, "", "")
	var lines []struct {
		T string `json:"t"`
	}
	if r.status != 200 || json.Unmarshal(r.data, &lines) != nil {
		t.Fatalf("task log = %d %s", r.status, r.raw)
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.T
	}
	return out
}

// localDisk finds volid in a precondition's local_disks.
func localDisk(m map[string]any, volid string) map[string]any {
	disks, _ := m["local_disks"].([]any)
	for _, d := range disks {
		if dm, _ := d.(map[string]any); dm["volid"] == volid {
			return dm
		}
	}
	return nil
}

func strList(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestMigratePrecondition pins GET /nodes/{node}/qemu/{vmid}/migrate as qemu-server answers
// it: every other node in not_allowed_nodes (empty when allowed), local disks with their
// attributes (local CD-ROMs and the Cloud-Init drive included, volumes on shared storage
// not), local resources (mapped USB included, a mapped PCI device of a stopped VM not), the
// mapped devices, and the storages a node lacks.
func TestMigratePrecondition(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})

	web := precondition(t, api, "pve1", "100", "pve2")
	if web["running"] != float64(1) || !slices.Equal(strList(web["allowed_nodes"]), []string{"pve2", "pve3"}) {
		t.Errorf("web-01: running %v, allowed %v", web["running"], web["allowed_nodes"])
	}
	if na, _ := web["not_allowed_nodes"].(map[string]any); len(na) != 2 || len(na["pve2"].(map[string]any)) != 0 {
		t.Errorf("web-01: not_allowed_nodes %v, want pve2 and pve3 with nothing against them", web["not_allowed_nodes"])
	}
	disks, _ := web["local_disks"].([]any)
	d := localDisk(web, "local-lvm:vm-100-disk-0")
	if len(disks) != 1 || d == nil || d["drivename"] != "virtio0" || d["size"] != float64(32<<30) || d["cdrom"] != float64(0) || d["is_unused"] != float64(0) {
		t.Errorf("web-01: local_disks %v, want only virtio0 on local-lvm (the ceph disk is shared)", web["local_disks"])
	}
	if res := strList(web["local_resources"]); len(res) != 0 {
		t.Errorf("web-01: local_resources %v", res)
	}

	db := precondition(t, api, "pve2", "101", "pve1")
	if got := strList(db["local_resources"]); !slices.Equal(got, []string{"hostpci1", "usb0", "usb1"}) {
		t.Errorf("db-01: local_resources %v, want hostpci1 usb0 usb1 (hostpci0 is mapped and the VM stopped)", got)
	}
	if got := strList(db["mapped-resources"]); !slices.Equal(got, []string{"hostpci0", "usb1"}) {
		t.Errorf("db-01: mapped-resources %v", got)
	}
	if info, _ := db["mapped-resource-info"].(map[string]any); info["hostpci0"].(map[string]any)["name"] != "gpu-a40" {
		t.Errorf("db-01: mapped-resource-info %v", db["mapped-resource-info"])
	}
	for volid, want := range map[string][2]float64{ // cdrom, is_cloudinit
		"local-lvm:vm-101-disk-0": {0, 0}, "local-lvm:vm-101-disk-1": {0, 0}, "local-lvm:vm-101-disk-2": {0, 0},
		"local-lvm:vm-101-cloudinit": {1, 1}, "local:iso/ubuntu-24.04.2-live-server-amd64.iso": {1, 0},
	} {
		if d := localDisk(db, volid); d == nil || d["cdrom"] != want[0] || d["is_cloudinit"] != want[1] {
			t.Errorf("db-01: local disk %s = %v, want cdrom %v is_cloudinit %v", volid, d, want[0], want[1])
		}
	}
	if localDisk(db, "ceph:vm-101-disk-4") != nil || localDisk(db, "local-lvm:vm-101-disk-1")["is_tpmstate"] != float64(1) {
		t.Errorf("db-01: local_disks %v", db["local_disks"])
	}

	sim.AddStorage(proxmox.StorageConfig{"storage": "fast1", "type": "lvmthin", "thinpool": "fast", "vgname": "fast", "content": "images", "nodes": "pve1"})
	sim.AddGuest(simpve.GuestSpec{VMID: 150, Node: "pve1", Name: "pinned", Config: map[string]string{"scsi0": "fast1:vm-150-disk-0,size=16G"}})
	pinned := precondition(t, api, "pve1", "150", "pve2")
	na, _ := pinned["not_allowed_nodes"].(map[string]any)
	if len(strList(pinned["allowed_nodes"])) != 0 || !slices.Equal(strList(na["pve2"].(map[string]any)["unavailable_storages"]), []string{"fast1"}) {
		t.Errorf("pinned: allowed %v, not allowed %v", pinned["allowed_nodes"], na)
	}

	// through the driver: the same answer, parsed
	c, err := proxmox.NewClient(proxmox.EndpointConfig{ID: 1, URLs: []string{strings.TrimSuffix(api, "/api2/json")}, TokenID: simpve.DemoTokenID,
		TokenSecretEnv: "X", Timeout: 5 * time.Second}, simpve.DemoSecret)
	if err != nil {
		t.Fatal(err)
	}
	pre, err := c.MigrationPrecondition(t.Context(), proxmox.Guest{VMID: 101, Node: "pve2", Type: proxmox.GuestQEMU}, "pve1")
	if err != nil {
		t.Fatal(err)
	}
	if got := pre.BlockingResources(); !slices.Equal(got, []string{"hostpci1", "usb0"}) || len(pre.NotAllowed) != 0 || pre.Running {
		t.Errorf("parsed: blocking %v, not allowed %v, running %v", got, pre.NotAllowed, pre.Running)
	}
}

// TestMigrateRefusals pins the checks PVE's migrate API runs before the worker: no task.
func TestMigrateRefusals(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
	audit := "PVEAPIToken=" + simpve.AuditTokenID + "=" + simpve.DemoSecret
	tests := []struct {
		path, auth, body string
		status           int
		reason           string
		param            string // the parameter a 400 names
	}{
		{"/nodes/pve1/qemu/100/migrate", demoAuth, "", 400, "Parameter verification failed.", "target"},
		{"/nodes/pve1/qemu/100/migrate", demoAuth, "target=pve1&online=1", 400, "Parameter verification failed.", "target"},
		{"/nodes/pve1/qemu/100/migrate", demoAuth, "target=pve2&online=maybe", 400, "Parameter verification failed.", "online"},
		{"/nodes/pve1/qemu/100/migrate", demoAuth, "target=pve2&targetstorage=a:b:c", 400, "Parameter verification failed.", "targetstorage"},
		{"/nodes/pve1/qemu/100/migrate", demoAuth, "target=pve9&online=1", 500, "no such cluster node 'pve9'", ""},
		{"/nodes/pve1/qemu/100/migrate", demoAuth, "target=pve2", 500, "can't migrate running VM without --online", ""},
		{"/nodes/pve1/qemu/100/migrate", demoAuth, "target=pve2&online=1&targetstorage=images", 500, "storage 'images' does not support vm images", ""},
		{"/nodes/pve1/qemu/100/migrate", demoAuth, "target=pve2&online=1&targetstorage=nope", 500, "storage 'nope' does not exist", ""},
		{"/nodes/pve1/qemu/100/migrate", audit, "target=pve2&online=1", 403, "Permission check failed (/vms/100, VM.Migrate)", ""},
		{"/nodes/pve2/qemu/100/migrate", demoAuth, "target=pve3&online=1", 500, "Configuration file 'nodes/pve2/qemu-server/100.conf' does not exist", ""},
		{"/nodes/pve1/lxc/200/migrate", demoAuth, "target=pve2", 500, "can't migrate running container without --online or --restart", ""},
		{"/nodes/pve1/lxc/200/migrate", demoAuth, "target=pve2&restart=1&target-storage=images", 500, "storage 'images' does not support CT rootdirs", ""},
		{"/nodes/pve1/lxc/200/migrate", demoAuth, "target=pve2&with-local-disks=1", 400, "Parameter verification failed.", "with-local-disks"},
	}
	for _, tt := range tests {
		r := mustDo(t, "POST", api+tt.path, tt.auth, formType, tt.body)
		if r.status != tt.status || r.reason != tt.reason || (tt.param != "" && r.errors[tt.param] == "") {
			t.Errorf("POST %s %s = %d %q %v, want %d %q naming %q", tt.path, tt.body, r.status, r.reason, r.errors, tt.status, tt.reason, tt.param)
		}
	}
	if r := mustDo(t, "GET", api+"/nodes/pve1/qemu/100/migrate?target=bad_node", demoAuth, "", ""); r.status != 400 || r.errors["target"] == "" {
		t.Errorf("precondition with a malformed target = %d %v", r.status, r.errors)
	}
	if n := len(sim.Tasks()); n != 0 {
		t.Errorf("%d tasks started by refusals", n)
	}
}

// TestMigrateTasks pins the migration workers: their exit status, the log lines PVE writes
// (drive mirror and live RAM progress, an offline copy, the reasons of a failure) and what a
// migration that ends OK changes (the guest's node and config path, its volumes on a target
// storage, a restarted container running again); a failed one changes nothing.
func TestMigrateTasks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, path, body string
		exit             string
		inLog            []string
		vmid             int64
		node, status     string
		config           map[string]string // config keys afterwards
	}{
		{name: "live on shared storage", path: "/nodes/pve3/qemu/102/migrate", body: "target=pve1&online=1", exit: "OK",
			inLog: []string{"starting migration of VM 102 to node 'pve1' (10.0.0.11)", "migration active, transferred 819.2 MiB of 8.0 GiB VM-state, 1.0 GiB/s",
				"migration cachesize: 1.0 GiB", "migration finished successfully (duration ", "TASK OK"},
			vmid: 102, node: "pve1", status: "running"},
		{name: "live with local disks", path: "/nodes/pve1/qemu/100/migrate", body: "target=pve2&online=1&with-local-disks=1", exit: "OK",
			inLog: []string{"found local disk 'local-lvm:vm-100-disk-0' (attached)", "drive mirror is starting for drive-virtio0",
				"drive-virtio0: transferred 0.0 B of 32.0 GiB (0.00%) in 0s", "drive-virtio0: transferred 32.0 GiB of 32.0 GiB (100.00%) in 2m 44s, ready",
				"all 'mirror' jobs are ready", "migration completed, transferred 4.0 GiB VM-state"},
			vmid: 100, node: "pve2", status: "running"},
		{name: "live with local disks but without with-local-disks", path: "/nodes/pve1/qemu/100/migrate", body: "target=pve2&online=1",
			exit: "migration aborted",
			inLog: []string{"can't migrate local disk 'local-lvm:vm-100-disk-0': can't live migrate attached local disks without with-local-disks option",
				"ERROR: migration aborted (duration 00:00:02): Problem found while scanning volumes - can't migrate VM - check log", "TASK ERROR: migration aborted"},
			vmid: 100, node: "pve1", status: "running"},
		{name: "passthrough devices", path: "/nodes/pve2/qemu/101/migrate", body: "target=pve1&with-local-disks=1", exit: "migration aborted",
			inLog: []string{"can't migrate VM which uses local devices: hostpci1, usb0"}, vmid: 101, node: "pve2", status: "stopped"},
		{name: "offline with a local disk", path: "/nodes/pve1/qemu/103/migrate", body: "target=pve2", exit: "OK",
			inLog: []string{"copying local disk images", `  Logical volume "vm-103-disk-0" created.`, "131072+0 records in",
				"8589934592 bytes (8.6 GB, 8.0 GiB) copied, 40.960 s, 210 MB/s", "successfully imported 'local-lvm:vm-103-disk-0'"},
			vmid: 103, node: "pve2", status: "stopped", config: map[string]string{"scsi0": "local-lvm:vm-103-disk-0,size=8G"}},
		{name: "offline to a target storage", path: "/nodes/pve1/qemu/103/migrate", body: "target=pve2&targetstorage=ceph", exit: "OK",
			inLog: []string{"volume 'local-lvm:vm-103-disk-0' is 'ceph:vm-103-disk-0' on the target"},
			vmid:  103, node: "pve2", status: "stopped", config: map[string]string{"scsi0": "ceph:vm-103-disk-0,size=8G"}},
		{name: "container with snapshots on local storage", path: "/nodes/pve1/lxc/200/migrate", body: "target=pve2&restart=1", exit: "migration aborted",
			inLog: []string{"shutdown CT 200", "can't migrate local volume 'local-lvm:vm-200-disk-0': non-migratable snapshot exists", "start container on source node"},
			vmid:  200, node: "pve1", status: "running"},
		{name: "running container restarted", path: "/nodes/pve1/lxc/250/migrate", body: "target=pve2&restart=1", exit: "OK",
			inLog: []string{"shutdown CT 250", "volume 'ceph:vm-250-disk-0' is on shared storage 'ceph'", "start container on target node"},
			vmid:  250, node: "pve2", status: "running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
			sim.AddGuest(simpve.GuestSpec{VMID: 250, Type: proxmox.GuestLXC, Node: "pve1", Name: "ct-shared", Status: "running",
				Config: map[string]string{"rootfs": "ceph:vm-250-disk-0,size=8G"}})
			u := upidOf(t, mustDo(t, "POST", api+tt.path, demoAuth, formType, tt.body))
			if st := taskStatus(t, api, u); st["exitstatus"] != tt.exit {
				t.Errorf("exit status %v, want %q", st["exitstatus"], tt.exit)
			}
			log := strings.Join(migrationLog(t, api, u), "\n")
			for _, want := range tt.inLog {
				if !strings.Contains(log, want) {
					t.Errorf("log lacks %q:\n%s", want, log)
				}
			}
			g, _ := sim.Guest(tt.vmid)
			if g.Node != tt.node || g.Status != tt.status || g.Busy || g.Lock != "" {
				t.Errorf("guest %d %s on %s (busy %v, lock %q), want %s on %s", tt.vmid, g.Status, g.Node, g.Busy, g.Lock, tt.status, tt.node)
			}
			for k, v := range tt.config {
				if g.Config[k] != v {
					t.Errorf("config %s = %q, want %q", k, g.Config[k], v)
				}
			}
			typ := "qemu"
			if g.Type == proxmox.GuestLXC {
				typ = "lxc"
			}
			if r := mustDo(t, "GET", api+"/nodes/"+tt.node+"/"+typ+"/"+u.ID+"/config", demoAuth, "", ""); r.status != 200 {
				t.Errorf("config on %s = %d %s", tt.node, r.status, r.reason)
			}
		})
	}
}

// TestMigrationRunning pins a migration while it runs: the guest is locked "migrate" and
// still on its node, the task is listed RUNNING among the node's tasks of the guest, its log
// has PVE's first lines but not the last; once it ends the guest is on the target and the
// config is gone from the source.
func TestMigrationRunning(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: 300 * time.Millisecond})
	u := upidOf(t, mustDo(t, "POST", api+"/nodes/pve3/qemu/102/migrate", demoAuth, formType, "target=pve2&online=1"))
	if u.Type != "qmigrate" || u.Node != "pve3" || u.ID != "102" {
		t.Fatalf("upid %v", u)
	}
	if g, _ := sim.Guest(102); g.Node != "pve3" || g.Lock != "migrate" || !g.Busy {
		t.Errorf("while running: guest on %s lock %q busy %v", g.Node, g.Lock, g.Busy)
	}
	r := mustDo(t, "GET", api+"/nodes/pve3/tasks?vmid=102&typefilter=qmigrate&source=all", demoAuth, "", "")
	var tasks []map[string]any
	if r.status != 200 || json.Unmarshal(r.data, &tasks) != nil || len(tasks) != 1 || tasks[0]["upid"] != u.String() || tasks[0]["status"] != "RUNNING" {
		t.Errorf("task list = %d %s", r.status, r.raw)
	}
	if log := strings.Join(migrationLog(t, api, u), "\n"); !strings.Contains(log, "starting migration of VM 102") || strings.Contains(log, "migration finished") {
		t.Errorf("log while running:\n%s", log)
	}
	eventually(t, "the migration ends", func() bool { g, _ := sim.Guest(102); return g.Node == "pve2" })
	if r := mustDo(t, "GET", api+"/nodes/pve3/qemu/102/config", demoAuth, "", ""); r.status != 500 || r.reason != "Configuration file 'nodes/pve3/qemu-server/102.conf' does not exist" {
		t.Errorf("config on the source after = %d %q", r.status, r.reason)
	}
	if log := migrationLog(t, api, u); log[len(log)-1] != "TASK OK" {
		t.Errorf("log after: %v", log)
	}
}
