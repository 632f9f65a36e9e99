package proxmox_test

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
	"github.com/proxbus/proxbus/internal/testenv"
)

// clonedVM clones the demo template to vmid on pve1 and returns it.
func clonedVM(t *testing.T, c *proxmox.Client, vmid int64) {
	t.Helper()
	if _, err := c.CloneVM(testCtx(t), proxmox.CloneRequest{Node: "pve1", VMID: simpve.DemoTemplateVMID, NewVMID: vmid, Storage: "local-lvm", Full: true}); err != nil {
		t.Fatalf("CloneVM: %v", err)
	}
}

// TestUpdateVMConfig applies every supported key in one update and reads it back.
func TestUpdateVMConfig(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	clonedVM(t, c, 500)
	ctx := testCtx(t)
	raw, err := c.RawVMConfig(ctx, "pve1", 500)
	if err != nil {
		t.Fatalf("RawVMConfig: %v", err)
	}
	if raw["cores"] != "2" || raw["name"] != "Copy-of-VM-ubuntu-template" || raw["template"] != "" {
		t.Errorf("clone config = %v", raw)
	}
	mac := strings.TrimPrefix(strings.Split(raw["net0"], ",")[0], "virtio=")
	keys := "ssh-ed25519 AAAAC3Nza+C1/lZDI1NTE5= admin@example.net\nssh-rsa AAAAB3Nz== ops@example.net"
	params := map[string]string{
		"memory": "4096", "cores": "4", "sockets": "2", "agent": "1",
		"ciuser": "admin", "cipassword": "s3cret-Passw0rd", "sshkeys": keys,
		"ipconfig0": "ip=10.0.0.5/24,gw=10.0.0.1", "nameserver": "10.0.0.53 10.0.0.54", "searchdomain": "example.net",
		"net0": "virtio=" + mac + ",bridge=vmbr1,tag=20",
		"net1": "model=e1000,bridge=vmbr0,firewall=1,tag=30",
		"net7": "virtio,bridge=vmbr1",
	}
	upid, err := c.UpdateVMConfig(ctx, "pve1", 500, params)
	if err != nil || taskTypes(t, []string{upid})[0] != "qmconfig" {
		t.Fatalf("UpdateVMConfig = %q, %v", upid, err)
	}
	got, err := c.RawVMConfig(ctx, "pve1", 500)
	if err != nil {
		t.Fatalf("RawVMConfig: %v", err)
	}
	for k, want := range map[string]string{
		"memory": "4096", "cores": "4", "sockets": "2", "agent": "1", "ciuser": "admin", "cipassword": "**********",
		"ipconfig0": "ip=10.0.0.5/24,gw=10.0.0.1", "nameserver": "10.0.0.53 10.0.0.54", "searchdomain": "example.net",
		"net0": "virtio=" + mac + ",bridge=vmbr1,tag=20",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	if !strings.HasPrefix(got["net1"], "e1000=BC:24:11:") || !strings.HasSuffix(got["net1"], ",bridge=vmbr0,firewall=1,tag=30") {
		t.Errorf("net1 = %q, want a generated MAC, model e1000", got["net1"])
	}
	if !strings.HasPrefix(got["net7"], "virtio=") || !strings.HasSuffix(got["net7"], ",bridge=vmbr1") {
		t.Errorf("net7 = %q", got["net7"])
	}
	if dec, err := url.PathUnescape(got["sshkeys"]); err != nil || dec != keys || strings.ContainsAny(got["sshkeys"], " +=/@\n") {
		t.Errorf("sshkeys stored %q (decoded %q, %v), want the keys URL-encoded", got["sshkeys"], dec, err)
	}
	if !sim.CheckCloudInitPassword(500, "s3cret-Passw0rd") {
		t.Error("Cloud-Init password not applied")
	}

	// A Cloud-Init drive on a free IDE slot of a VM without one.
	if _, err := c.UpdateVMConfig(ctx, "pve1", simpve.DemoDupStopped, map[string]string{"ide0": "local-lvm:cloudinit"}); err != nil {
		t.Fatalf("cloudinit drive: %v", err)
	}
	if g, _ := sim.Guest(simpve.DemoDupStopped); g.Config["ide0"] != "local-lvm:vm-103-cloudinit,media=cdrom" {
		t.Errorf("ide0 = %q", g.Config["ide0"])
	}
}

// TestUpdateVMConfigRefusals: malformed values, missing bridges, locks and unsupported keys.
func TestUpdateVMConfigRefusals(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	clonedVM(t, c, 510)
	tests := []struct {
		name     string
		params   map[string]string
		sentinel error
		badParam string // 400 naming this parameter
		taskExit string
	}{
		{name: "unsupported key", params: map[string]string{"scsi1": "local-lvm:8"}, sentinel: proxmox.ErrInvalidRequest},
		{name: "empty", params: map[string]string{}, sentinel: proxmox.ErrInvalidRequest},
		{name: "bad NIC model", params: map[string]string{"net1": "model=rtl9999,bridge=vmbr0"}, badParam: "net1"},
		{name: "VLAN out of range", params: map[string]string{"net1": "virtio,bridge=vmbr0,tag=4095"}, badParam: "net1"},
		{name: "cloudinit syntax", params: map[string]string{"ide0": "local-lvm:cloud-init"}, badParam: "ide0"},
		{name: "bad ipconfig", params: map[string]string{"ipconfig0": "ip=10.0.0.300/24"}, badParam: "ipconfig0"},
		{name: "missing bridge", params: map[string]string{"net1": "virtio,bridge=vmbr9"}, taskExit: "bridge 'vmbr9' does not exist"},
		{name: "cloudinit storage not on the node", params: map[string]string{"ide0": "nowhere:cloudinit"}, taskExit: "storage 'nowhere' does not exist"},
	}
	for _, tt := range tests {
		before, _ := sim.Guest(510)
		reqs := len(sim.RequestLog())
		upid, err := c.UpdateVMConfig(testCtx(t), "pve1", 510, tt.params)
		var ae *proxmox.APIError
		var te *proxmox.TaskError
		switch {
		case tt.sentinel != nil:
			if !errors.Is(err, tt.sentinel) || len(sim.RequestLog()) != reqs {
				t.Errorf("%s: %v, want %v without a request", tt.name, err, tt.sentinel)
			}
		case tt.badParam != "":
			if !errors.As(err, &ae) || ae.Status != 400 || !slices.Equal(ae.ParamNames(), []string{tt.badParam}) {
				t.Errorf("%s: %v, want 400 on %s", tt.name, err, tt.badParam)
			}
		default:
			if !errors.As(err, &te) || te.ExitStatus != tt.taskExit || upid == "" {
				t.Errorf("%s: %q, %v; want *TaskError %q", tt.name, upid, err, tt.taskExit)
			}
		}
		if after, _ := sim.Guest(510); !sameConfig(before.Config, after.Config) {
			t.Errorf("%s changed the config", tt.name)
		}
	}
	if _, err := c.UpdateVMConfig(testCtx(t), "pve3", 510, map[string]string{"cores": "2"}); !errors.Is(err, proxmox.ErrNotFound) {
		t.Errorf("wrong node = %v, want ErrNotFound", err)
	}
}

// TestCloudInitPasswordNeverLeaks sends a canary password through success and every kind of
// failure and checks it appears in no error and no log line (debug level included).
func TestCloudInitPasswordNeverLeaks(t *testing.T) {
	t.Parallel()
	const canary = "CANARY-pw-7f3a9e"
	sim, url := startSim(t, simpve.ScenarioDemo)
	sim.SetTaskDuration(-1)
	var logs testenv.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newClient(t, endpoint(simpve.DemoTokenID, url), simpve.DemoSecret, proxmox.WithLogger(log), proxmox.WithTaskPollInterval(1))
	clonedVM(t, c, 520)
	path := "/nodes/{node}/qemu/{vmid}/config"
	faults := []struct {
		name   string
		inject func()
	}{
		{"success", func() {}},
		{"400 quoting the value", func() {
			sim.RejectNext("POST", path, 1, map[string]string{"cipassword": "value '" + canary + "' is too weak", "cores": "echo " + canary})
		}},
		{"500 quoting the value", func() { sim.FailNext("POST", path, 1, 500, "cannot set password '"+canary+"'") }},
		{"worker quoting the value", func() { sim.FailTask("pve1", 520, "chpasswd failed for "+canary) }},
	}
	for _, f := range faults {
		f.inject()
		_, err := c.UpdateVMConfig(testCtx(t), "pve1", 520, map[string]string{"ciuser": "admin", "cipassword": canary})
		if f.name == "success" {
			if err != nil {
				t.Fatalf("success case: %v", err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error", f.name)
			continue
		}
		if strings.Contains(err.Error(), canary) {
			t.Errorf("%s: error leaks the password: %v", f.name, err)
		}
		var ae *proxmox.APIError
		if errors.As(err, &ae) {
			for k, v := range ae.Params {
				if strings.Contains(v, canary) {
					t.Errorf("%s: Params[%s] leaks the password", f.name, k)
				}
			}
		}
	}
	if strings.Contains(logs.String(), canary) {
		t.Errorf("logs leak the password:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "/qemu/520/config") {
		t.Error("no request was logged: the canary check saw nothing")
	}
	for _, r := range sim.RequestLog() {
		if strings.Contains(r.Params.Encode(), canary) {
			t.Errorf("simulator log holds the password: %v", r.Params)
		}
	}
}

// TestResizeDisk grows disks, refuses shrinking and CD-ROMs.
func TestResizeDisk(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	clonedVM(t, c, 530)
	ctx := testCtx(t)
	tests := []struct {
		disk, size, want string // want: the size option after, or PVE's refusal
		ok               bool
	}{
		{"scsi0", "32G", "32G", true},
		{"scsi0", "+1G", "33G", true},
		{"scsi0", "33G", "33G", true},
		{"scsi0", "2G", "shrinking disks is not supported", false},
		{"ide2", "1G", "you can't resize a cdrom", false},
		{"scsi3", "1G", "disk 'scsi3' does not exist", false},
	}
	for _, tt := range tests {
		upid, err := c.ResizeDisk(ctx, "pve1", 530, tt.disk, tt.size)
		g, _ := sim.Guest(530)
		if tt.ok {
			if err != nil || upid == "" || taskTypes(t, []string{upid})[0] != "resize" {
				t.Errorf("resize %s %s = %q, %v", tt.disk, tt.size, upid, err)
			}
			if want := "local-lvm:vm-530-disk-0,iothread=1,size=" + tt.want; g.Config[tt.disk] != want {
				t.Errorf("after %s: %s = %q, want %q", tt.size, tt.disk, g.Config[tt.disk], want)
			}
			continue
		}
		var ae *proxmox.APIError
		if !errors.As(err, &ae) || ae.Message != tt.want || upid != "" {
			t.Errorf("resize %s %s = %q, %v; want *APIError %q", tt.disk, tt.size, upid, err, tt.want)
		}
	}
	if _, err := c.ResizeDisk(ctx, "pve1", 530, "scsi0", ""); !errors.Is(err, proxmox.ErrInvalidRequest) {
		t.Errorf("empty size = %v", err)
	}
}

// TestRawVMConfig: numbers and booleans flattened; a VM elsewhere is ErrVMNotFound.
func TestRawVMConfig(t *testing.T) {
	t.Parallel()
	_, c := guestSim(t, -1)
	raw, err := c.RawVMConfig(testCtx(t), "pve1", simpve.DemoTemplateVMID)
	if err != nil {
		t.Fatalf("RawVMConfig: %v", err)
	}
	if raw["template"] != "1" || raw["cores"] != "2" || raw["scsi0"] != "local-lvm:base-9000-disk-0,iothread=1,size=3584M" || raw["digest"] == "" {
		t.Errorf("config = %v", raw)
	}
	if _, err := c.RawVMConfig(testCtx(t), "pve2", simpve.DemoTemplateVMID); !errors.Is(err, proxmox.ErrVMNotFound) {
		t.Errorf("wrong node = %v, want ErrVMNotFound", err)
	}
}

// TestNICModels pins Proxmox's NIC model list.
func TestNICModels(t *testing.T) {
	t.Parallel()
	m := proxmox.NICModels()
	want := []string{"e1000", "e1000-82540em", "e1000-82544gc", "e1000-82545em", "e1000e", "i82551", "i82557b",
		"i82559er", "ne2k_isa", "ne2k_pci", "pcnet", "rtl8139", "virtio", "vmxnet3"}
	if !slices.Equal(m, want) || !slices.IsSorted(m) {
		t.Errorf("NICModels = %v", m)
	}
	m[0] = "changed"
	if proxmox.NICModels()[0] != "e1000" {
		t.Error("NICModels returned shared state")
	}
}

// TestOptionalTaskNullAnswer: PVE versions that resize (or update a config) synchronously
// answer {"data": null}; that is success without a task.
func TestOptionalTaskNullAnswer(t *testing.T) {
	t.Parallel()
	var calls []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":null}`))
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, endpoint(simpve.DemoTokenID, srv.URL), simpve.DemoSecret)
	if upid, err := c.ResizeDisk(testCtx(t), "pve1", 100, "scsi0", "40G"); upid != "" || err != nil {
		t.Errorf("ResizeDisk = %q, %v; want \"\", nil", upid, err)
	}
	if upid, err := c.UpdateVMConfig(testCtx(t), "pve1", 100, map[string]string{"cores": "2"}); upid != "" || err != nil {
		t.Errorf("UpdateVMConfig = %q, %v; want \"\", nil", upid, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"PUT /api2/json/nodes/pve1/qemu/100/resize", "POST /api2/json/nodes/pve1/qemu/100/config"}; !slices.Equal(calls, want) {
		t.Errorf("calls = %v, want %v (no task polling)", calls, want)
	}
}
