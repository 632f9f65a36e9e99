package proxmox_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// preconditionServer answers every request with the JSON body.
func preconditionServer(t *testing.T, body string) *proxmox.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json;charset=UTF-8")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return newClient(t, endpoint(simpve.DemoTokenID, srv.URL), simpve.DemoSecret)
}

// TestMigrationPreconditionParse pins the reading of PVE's precondition answer in the shapes
// qemu-server sends: booleans as 0/1 or true/false, every other node in not_allowed_nodes
// (an empty object when nothing blocks it, left out), storages, missing mappings and HA rules
// that block a node, local disks (a Cloud-Init drive known by its attribute or its name), the
// mapped devices from mapped-resource-info or the older list, and the blocking resources.
func TestMigrationPreconditionParse(t *testing.T) {
	t.Parallel()
	vm := proxmox.Guest{VMID: 100, Node: "pve1", Type: proxmox.GuestQEMU}
	c := preconditionServer(t, `{"data":{"running":true,"allowed_nodes":["pve2"],
		"not_allowed_nodes":{"pve2":{},"pve3":{"unavailable_storages":["fast1"],"unavailable-resources":["hostpci0"],
			"blocking-ha-resources":[{"sid":"vm:101","cause":"resource-affinity"}]}},
		"local_disks":[{"volid":"local-lvm:vm-100-disk-0","drivename":"scsi0","size":"34359738368","cdrom":0,"is_unused":0},
			{"volid":"local-lvm:vm-100-cloudinit","cdrom":1},
			{"volid":"local:iso/x.iso","drivename":"ide0","cdrom":true,"is_cloudinit":false,"size":1024}],
		"local_resources":["hostpci0","usb0","usb1"],"mapped-resources":["hostpci0","usb1"],
		"mapped-resource-info":{"hostpci0":{"name":"gpu","live-migration":1}},"has-dbus-vmstate":1}}`)
	p, err := c.MigrationPrecondition(testCtx(t), vm, "pve3")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Running || !slices.Equal(p.AllowedNodes, []string{"pve2"}) {
		t.Errorf("running %v allowed %v", p.Running, p.AllowedNodes)
	}
	if _, listed := p.NotAllowed["pve2"]; listed || len(p.NotAllowed) != 1 {
		t.Errorf("not allowed %v, want only pve3", p.NotAllowed)
	}
	b := p.NotAllowed["pve3"]
	if !slices.Equal(b.UnavailableStorages, []string{"fast1"}) || !slices.Equal(b.UnavailableResources, []string{"hostpci0"}) ||
		!slices.Equal(b.BlockingHA, []string{"vm:101 (resource-affinity)"}) || b.Empty() {
		t.Errorf("pve3 blockers %+v", b)
	}
	want := []proxmox.LocalDisk{
		{VolID: "local-lvm:vm-100-cloudinit", CDROM: true, CloudInit: true},
		{VolID: "local-lvm:vm-100-disk-0", Drive: "scsi0", SizeBytes: 32 << 30},
		{VolID: "local:iso/x.iso", Drive: "ide0", SizeBytes: 1024, CDROM: true},
	}
	if !slices.Equal(p.LocalDisks, want) {
		t.Errorf("local disks %+v, want %+v", p.LocalDisks, want)
	}
	if p.Mapped["hostpci0"] != (proxmox.MappedResource{Name: "gpu", LiveMigration: true}) || p.Mapped["usb1"] != (proxmox.MappedResource{}) {
		t.Errorf("mapped %+v", p.Mapped)
	}
	if got := p.BlockingResources(); !slices.Equal(got, []string{"usb0"}) {
		t.Errorf("blocking %v, want usb0", got)
	}

	for name, body := range map[string]string{
		"not an object":    `{"data":["pve2"]}`,
		"a bad boolean":    `{"data":{"running":"perhaps"}}`,
		"a bad disk size":  `{"data":{"local_disks":[{"volid":"a:b","size":{}}]}}`,
		"a list of others": `{"data":{"local_resources":"hostpci0"}}`,
	} {
		_, err := preconditionServer(t, body).MigrationPrecondition(testCtx(t), vm, "pve3")
		if !errors.Is(err, proxmox.ErrAnswerLost) || !errors.Is(err, proxmox.ErrUndecodable) {
			t.Errorf("%s: err %v, want an unreadable answer", name, err)
		}
	}
	ct := proxmox.Guest{VMID: 200, Node: "pve1", Type: proxmox.GuestLXC}
	if _, err := c.MigrationPrecondition(testCtx(t), ct, "pve2"); !errors.Is(err, proxmox.ErrUnsupportedForContainer) {
		t.Errorf("container: err %v", err)
	}
}

// TestMigrateRequestForm pins the parameters each guest type's migrate is sent: QEMU's online,
// with-local-disks and targetstorage; LXC's restart and target-storage; false ones left out.
func TestMigrateRequestForm(t *testing.T) {
	t.Parallel()
	all := proxmox.MigrateRequest{Target: "pve2", Online: true, WithLocalDisks: true, TargetStorage: "local-lvm", Restart: true}
	tests := []struct {
		req  proxmox.MigrateRequest
		typ  proxmox.GuestType
		want string
	}{
		{all, proxmox.GuestQEMU, "online=1&target=pve2&targetstorage=local-lvm&with-local-disks=1"},
		{all, proxmox.GuestLXC, "restart=1&target=pve2&target-storage=local-lvm"},
		{proxmox.MigrateRequest{Target: "pve3"}, proxmox.GuestQEMU, "target=pve3"},
		{proxmox.MigrateRequest{Target: "pve3", Online: true}, proxmox.GuestLXC, "target=pve3"},
	}
	for _, tt := range tests {
		if got := tt.req.Form(tt.typ).Encode(); got != tt.want {
			t.Errorf("%s %+v: %s, want %s", tt.typ, tt.req, got, tt.want)
		}
	}
}

// TestMigrate migrates against the simulator: the UPID of the migration task (run by the
// source node) once the guest is on the target; a worker that refuses is a *TaskError with
// PVE's exit status; a guest gone from its node is ErrVMNotFound; the guest's migration
// tasks list it.
func TestMigrate(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, 20*time.Millisecond)
	app := resolve(t, c, "102")
	upid, err := c.Migrate(testCtx(t), app, proxmox.MigrateRequest{Target: "pve1", Online: true})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := proxmox.ParseUPID(upid); err != nil || u.Type != proxmox.MigrateTaskQEMU || u.Node != "pve3" {
		t.Errorf("upid %q (%v)", upid, err)
	}
	if g := resolve(t, c, "102"); g.Node != "pve1" || g.Status != proxmox.StatusRunning {
		t.Errorf("after: %+v", g)
	}
	tasks, err := c.GuestTasks(testCtx(t), "pve3", 102, proxmox.MigrateTaskType(proxmox.GuestQEMU), time.Time{})
	if err != nil || len(tasks) != 1 || tasks[0].UPID != upid || !tasks[0].OK() {
		t.Errorf("tasks %+v (%v)", tasks, err)
	}

	web := resolve(t, c, "100")
	_, err = c.Migrate(testCtx(t), web, proxmox.MigrateRequest{Target: "pve2", Online: true})
	var te *proxmox.TaskError
	if !errors.As(err, &te) || te.ExitStatus != "migration aborted" {
		t.Errorf("local disk without with-local-disks: %v", err)
	}
	if _, err := c.Migrate(testCtx(t), proxmox.Guest{VMID: 100, Node: "pve3", Type: proxmox.GuestQEMU}, proxmox.MigrateRequest{Target: "pve2"}); !errors.Is(err, proxmox.ErrVMNotFound) {
		t.Errorf("a guest not on its node: %v", err)
	}
	if g, _ := sim.Guest(100); g.Node != "pve1" {
		t.Errorf("web-01 moved to %s", g.Node)
	}
}
