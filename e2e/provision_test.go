package e2e_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/internal/guestconfig"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/internal/sim/nodeshell"
)

// provisionOut is vm.provision's output as a subscriber reads it.
type provisionOut struct {
	NewVMID       string            `json:"new_vmid"`
	VMID          string            `json:"vmid"`
	TargetNode    string            `json:"target_node"`
	CloneUPID     string            `json:"clone_upid"`
	ImportUPID    string            `json:"import_upid"`
	DownloadUPID  string            `json:"download_upid"`
	RelocateUPIDs map[string]string `json:"relocate_upids"`
	RelocateTasks []struct {
		Disk, UPID, State string
	} `json:"relocate_tasks"`
	UnusedSourceDisks    []string `json:"unused_source_disks"`
	TemplateLocalVolumes []string `json:"template_local_volumes"`
	ConfigUPID           string   `json:"config_upid"`
	ResizeUPID           string   `json:"resize_upid"`
	StartUPID            string   `json:"start_upid"`
	Status               string   `json:"status"`
}

func provisionOutput(t *testing.T, res events.Result) provisionOut {
	t.Helper()
	var out provisionOut
	if err := json.Unmarshal(res.Output, &out); err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	return out
}

// stepTrail renders a command's steps as "name:status" in order.
func (e *env) stepTrail(cmd events.Command) []string {
	var trail []string
	for _, st := range e.steps(cmd) {
		trail = append(trail, st.Step+":"+string(st.Status))
	}
	return trail
}

// vmConfig reads a guest's parsed configuration through vm.config.get.
func (e *env) vmConfig(t *testing.T, vmid int64) guestconfig.Config {
	t.Helper()
	res := e.send(e.guestCommand("vm.config.get", fmt.Sprintf(`{"vm":%d}`, vmid)))
	if res.Status != 200 {
		t.Fatalf("vm.config.get %d: %d %s", vmid, res.Status, res.Reason)
	}
	var cfg guestconfig.Config
	if err := json.Unmarshal(res.Output, &cfg); err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// TestProvisionFromTemplate pins the template paths: a direct clone (same node, or shared
// destination), and a cross-node clone onto local storage followed by relocate_disk, with the
// exact step sequence, Cloud-Init, NICs, resize and start.
func TestProvisionFromTemplate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()

	t.Run("same node, local storage: direct clone", func(t *testing.T) {
		cmd := e.guestCommand("vm.provision", `{"source":{"template_vmid":9000},"new_vmid":300,"new_name":"web-300","target_node":"pve1","storage":"local-lvm","memory_mb":4096,"cores":2}`)
		res := e.send(cmd)
		if res.Status != 201 || res.Result != "created" {
			t.Fatalf("%d %s %s %s", res.Status, res.Result, res.Reason, res.Detail)
		}
		out := provisionOutput(t, res)
		if out.NewVMID != "300" || out.CloneUPID == "" || out.ConfigUPID == "" || out.StartUPID == "" || out.Status != "started" || len(out.RelocateUPIDs) != 0 {
			t.Errorf("output %+v", out)
		}
		want := []string{"storage_inventory:started", "storage_inventory:done", "import_image:skipped", "clone_template:started", "clone_template:done",
			"relocate_disk:skipped", "configure_cloud_init:started", "configure_cloud_init:done", "resize_disk:skipped", "start_vm:started", "start_vm:done"}
		if got := e.stepTrail(cmd); !slices.Equal(got, want) {
			t.Errorf("steps %v\nwant  %v", got, want)
		}
		if g, ok := e.pve.Guest(300); !ok || g.Node != "pve1" || g.Status != "running" || g.Config["memory"] != "4096" {
			t.Errorf("guest %+v", g)
		}
	})

	t.Run("a configuration that changes nothing is not sent", func(t *testing.T) {
		cmd := e.guestCommand("vm.provision", `{"source":{"template_vmid":9000},"new_vmid":309,"new_name":"web-309","target_node":"pve1","storage":"local-lvm","memory_mb":2048,"cores":2}`)
		res := e.send(cmd)
		if out := provisionOutput(t, res); res.Status != 201 || out.ConfigUPID != "" {
			t.Fatalf("%d %s, output %+v; want created without a configuration update", res.Status, res.Reason, out)
		}
		if n := e.pve.Requests("POST", "/nodes/pve1/qemu/309/config"); n != 0 {
			t.Errorf("configuration updates = %d, want 0: the template's memory and cores are the ones asked", n)
		}
	})

	t.Run("cross-node onto local storage: clone then relocate_disk", func(t *testing.T) {
		cmd := e.guestCommand("vm.provision", `{"source":{"template_vmid":8000},"new_vmid":301,"new_name":"web-301","target_node":"pve2","storage":"local-lvm",
			"disk_gb":20,"bridge":"vmbr1","vlan_tag":30,"start_after_provision":false,
			"cloud_init":{"user":"ops","password":"`+canary+`","ssh_keys":["ssh-ed25519 AAAA ops@lab"],"ipconfig0":"ip=dhcp","nameserver":"10.0.0.53","searchdomain":"lab.example"},
			"extra_networks":[{"index":1,"bridge":"vmbr1","vlan_tag":20,"firewall":true},{"index":3,"bridge":"vmbr0","model":"e1000"}]}`)
		res := e.send(cmd)
		if res.Status != 201 {
			t.Fatalf("%d %s %s %s", res.Status, res.Result, res.Reason, res.Detail)
		}
		out := provisionOutput(t, res)
		if out.RelocateUPIDs["scsi0"] == "" || len(out.RelocateUPIDs) != 1 || out.ResizeUPID == "" || out.Status != "stopped" || out.StartUPID != "" {
			t.Errorf("output %+v (the Cloud-Init drive is not a data disk)", out)
		}
		want := []string{"storage_inventory:started", "storage_inventory:done", "import_image:skipped", "clone_template:started", "clone_template:done",
			"relocate_disk:started", "relocate_disk:started", "relocate_disk:done", "configure_cloud_init:started", "configure_cloud_init:done",
			"resize_disk:started", "resize_disk:done", "start_vm:skipped"}
		if got := e.stepTrail(cmd); !slices.Equal(got, want) {
			t.Errorf("steps %v\nwant  %v", got, want)
		}
		cfg := e.vmConfig(t, 301)
		var scsi0 guestconfig.Disk
		for _, d := range cfg.Disks {
			if d.Device == "scsi0" {
				scsi0 = d
			}
		}
		if scsi0.Storage != "local-lvm" || scsi0.SizeBytes != 20<<30 {
			t.Errorf("scsi0 %+v, want on local-lvm with 20 GiB", scsi0)
		}
		if len(cfg.Unused) != 1 || cfg.Unused[0].Storage != "ceph" {
			t.Errorf("unused %+v: the source copy must stay as an unused disk", cfg.Unused)
		} else if want := cfg.Unused[0].Storage + ":" + cfg.Unused[0].Volume; !slices.Equal(out.UnusedSourceDisks, []string{want}) {
			t.Errorf("output unused_source_disks %v, want the unused source copy [%s]", out.UnusedSourceDisks, want)
		}
		nics := map[string]guestconfig.NIC{}
		for _, n := range cfg.NICs {
			nics[n.Device] = n
		}
		if n := nics["net0"]; n.Bridge != "vmbr1" || n.VLAN != 30 || n.Model != "virtio" || n.MAC == "" {
			t.Errorf("net0 %+v", n)
		}
		if n := nics["net1"]; n.Bridge != "vmbr1" || n.VLAN != 20 || !n.Firewall || n.Model != "virtio" {
			t.Errorf("net1 %+v", n)
		}
		if n := nics["net3"]; n.Bridge != "vmbr0" || n.Model != "e1000" || n.VLAN != 0 {
			t.Errorf("net3 %+v", n)
		}
		if !e.pve.CheckCloudInitPassword(301, canary) {
			t.Error("the Cloud-Init password was not set")
		}
		raw, _ := json.Marshal(res)
		if strings.Contains(string(raw), canary) {
			t.Error("the Cloud-Init password is in the result")
		}
		for _, je := range e.netbox.JournalEntries() {
			if strings.Contains(je.Comments, canary) {
				t.Error("the Cloud-Init password is in the journal")
			}
		}
	})

	t.Run("cross-node onto shared storage: direct clone", func(t *testing.T) {
		cmd := e.guestCommand("vm.provision", `{"source":{"template_vmid":8000},"new_vmid":302,"new_name":"web-302","target_node":"pve3","storage":"ceph"}`)
		res := e.send(cmd)
		if res.Status != 201 {
			t.Fatalf("%d %s %s", res.Status, res.Reason, res.Detail)
		}
		if got := e.stepTrail(cmd); !slices.Contains(got, "relocate_disk:skipped") {
			t.Errorf("steps %v", got)
		}
	})
}

// TestProvisionRefusals pins every refusal that must happen before anything is cloned, and
// the relocation failure that stops configuration and start.
func TestProvisionRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.pve.SetStorageStatus("local-lvm", "pve3", "unavailable")
	cases := []struct {
		name       string
		data       string
		wantStatus int
		wantReason string
		wantFields []string
	}{
		{"destination storage missing", `{"source":{"template_vmid":8000},"new_vmid":400,"new_name":"x","target_node":"pve2","storage":"nope"}`, 409, "target_storage_unavailable", []string{"storage"}},
		{"destination storage unavailable on the node", `{"source":{"template_vmid":8000},"new_vmid":401,"new_name":"x","target_node":"pve3","storage":"local-lvm"}`, 409, "target_storage_unavailable", []string{"storage"}},
		{"extra NICs with the cloud network enforced", `{"source":{"template_vmid":8000},"new_vmid":402,"new_name":"x","target_node":"pve2","enforce_cloud_network":true,"extra_networks":[{"index":1,"bridge":"vmbr1"}]}`, 422, "extra_networks_locked", nil},
		{"an extra NIC's bridge missing on the node", `{"source":{"template_vmid":8000},"new_vmid":403,"new_name":"x","target_node":"pve2","extra_networks":[{"index":1,"bridge":"vmbr9"}]}`, 422, "invalid_body", []string{"extra_networks"}},
		{"duplicate NIC index", `{"source":{"template_vmid":8000},"new_vmid":404,"new_name":"x","target_node":"pve2","extra_networks":[{"index":1,"bridge":"vmbr1"},{"index":1,"bridge":"vmbr0"}]}`, 422, "invalid_body", []string{"extra_networks"}},
		{"nine extra NICs", `{"source":{"template_vmid":8000},"new_vmid":405,"new_name":"x","target_node":"pve2","extra_networks":[` + strings.TrimSuffix(strings.Repeat(`{"index":1,"bridge":"vmbr1"},`, 9), ",") + `]}`, 422, "invalid_body", []string{"extra_networks"}},
		{"both sources", `{"source":{"template_vmid":8000,"image":{"url":"http://x/y.img","checksum":"` + strings.Repeat("a", 64) + `"}},"new_vmid":406,"new_name":"x","target_node":"pve2"}`, 422, "invalid_body", []string{"source"}},
		{"bad model and vlan", `{"source":{"template_vmid":8000},"new_vmid":407,"new_name":"x","target_node":"pve2","vlan_tag":5000,"extra_networks":[{"index":2,"bridge":"vmbr1","model":"ne3000"}]}`, 422, "invalid_body", []string{"extra_networks", "vlan_tag"}},
		{"unknown template", `{"source":{"template_vmid":7777},"new_vmid":408,"new_name":"x","target_node":"pve2"}`, 404, "vm_not_found", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := e.send(e.guestCommand("vm.provision", tc.data))
			if res.Status != tc.wantStatus || res.Reason != tc.wantReason || !slices.Equal(res.Fields, tc.wantFields) {
				t.Fatalf("got %d %s %v (%s), want %d %s %v", res.Status, res.Reason, res.Fields, res.Detail, tc.wantStatus, tc.wantReason, tc.wantFields)
			}
		})
	}
	if n := e.pve.Requests("POST", "/nodes/pve1/qemu/8000/clone"); n != 0 {
		t.Errorf("clones sent after refusals: %d", n)
	}

	t.Run("cross-node from a template on local storage: refused before cloning", func(t *testing.T) {
		cmd := e.guestCommand("vm.provision", `{"source":{"template_vmid":9000},"new_vmid":411,"new_name":"x","target_node":"pve2","storage":"local-lvm"}`)
		res := e.send(cmd)
		if res.Status != 409 || res.Reason != "template_storage_not_shared" || !slices.Equal(res.Fields, []string{"target_node"}) {
			t.Fatalf("%d %s %v %s", res.Status, res.Reason, res.Fields, res.Detail)
		}
		out := provisionOutput(t, res)
		if len(out.TemplateLocalVolumes) == 0 || !strings.Contains(res.Detail, "local-lvm:") || !strings.Contains(res.Detail, "Provision it on pve1") {
			t.Errorf("the refusal does not name the disks and what to do: %s %+v", res.Detail, out)
		}
		if n := e.pve.Requests("POST", "/nodes/pve1/qemu/9000/clone"); n != 0 {
			t.Errorf("%d clone requests reached Proxmox", n)
		}
		if _, ok := e.pve.Guest(411); ok {
			t.Error("a VM was created")
		}
	})

	t.Run("a failed move stops configuration and start", func(t *testing.T) {
		e.pve.FailMove(410, "scsi0", "storage migration failed: no space left")
		cmd := e.guestCommand("vm.provision", `{"source":{"template_vmid":8000},"new_vmid":410,"new_name":"x","target_node":"pve2","storage":"local-lvm"}`)
		res := e.send(cmd)
		if res.Status != 502 || res.Reason != "relocate_disk_failed" {
			t.Fatalf("%d %s %s", res.Status, res.Reason, res.Detail)
		}
		out := provisionOutput(t, res)
		if out.VMID != "410" || out.TargetNode != "pve2" || out.CloneUPID == "" || len(out.RelocateTasks) != 1 ||
			out.RelocateTasks[0].Disk != "scsi0" || out.RelocateTasks[0].State != "failed" || out.RelocateTasks[0].UPID == "" {
			t.Errorf("output %+v", out)
		}
		for _, s := range e.stepTrail(cmd) {
			if strings.HasPrefix(s, "configure_cloud_init") || strings.HasPrefix(s, "start_vm") || strings.HasPrefix(s, "resize_disk") {
				t.Errorf("step after the failed relocation: %s", s)
			}
		}
		if g, _ := e.pve.Guest(410); g.Status != "stopped" {
			t.Errorf("guest status %q", g.Status)
		}
		for _, rec := range e.pve.RequestLog() {
			if rec.Method != "GET" && (strings.HasSuffix(rec.Path, "/qemu/410/config") || strings.Contains(rec.Path, "/qemu/410/status") || strings.HasSuffix(rec.Path, "/qemu/410/resize")) {
				t.Errorf("a Proxmox write after the failed relocation: %s %s", rec.Method, rec.Path)
			}
		}
	})
}

// imageServer serves one image on loopback and returns its URL and sha256.
func imageServer(t *testing.T, name string) (string, string) {
	t.Helper()
	body := []byte("QFI\xfb" + strings.Repeat("cloud-image", 1000))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/"+name {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	sum := sha256.Sum256(body)
	return srv.URL + "/" + name, hex.EncodeToString(sum[:])
}

// TestProvisionFromImage pins cloud images: Proxmox downloads an .img into the import storage
// as .qcow2 named after the URL's sha256, a second provision reuses it, a checksum mismatch
// fails, and a type Proxmox cannot import goes over SSH.
func TestProvisionFromImage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	shell, err := nodeshell.New(t.TempDir(), nodeshell.Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := shell.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shell.Close() })
	sshCfg, err := shell.ClientFiles(t.TempDir(), "root", addr)
	if err != nil {
		t.Fatal(err)
	}
	e.pve.SetNodeRoot("pve2", shell.Root())
	e.pve.SetNodeAddress("pve2", addr)
	e.start(func(c *app.Config) { c.Endpoints[0].SSH = sshCfg })

	url, sum := imageServer(t, "noble-server-cloudimg-amd64.img")
	data := func(vmid int, url, sum string) string {
		return fmt.Sprintf(`{"source":{"image":{"url":%q,"checksum":%q,"checksum_algorithm":"sha256"}},"new_vmid":%d,"new_name":"img-%d","target_node":"pve2","storage":"local-lvm"}`, url, sum, vmid, vmid)
	}
	t.Run("downloaded by Proxmox", func(t *testing.T) {
		cmd := e.guestCommand("vm.provision", data(500, url, sum))
		res := e.send(cmd)
		if res.Status != 201 {
			t.Fatalf("%d %s %s", res.Status, res.Reason, res.Detail)
		}
		out := provisionOutput(t, res)
		if out.DownloadUPID == "" || out.ImportUPID == "" || out.CloneUPID != "" {
			t.Errorf("output %+v", out)
		}
		file := proxmox.ImportFileName(url, "qcow2")
		if got := e.pve.ImportVolumes("images", "pve2"); !slices.Contains(got, file) && !slices.Contains(got, "import/"+file) {
			t.Errorf("import volumes %v, want %s", got, file)
		}
		trail := e.stepTrail(cmd)
		if !slices.Contains(trail, "clone_template:skipped") || !slices.Contains(trail, "relocate_disk:skipped") {
			t.Errorf("steps %v", trail)
		}
	})
	t.Run("reused when already imported", func(t *testing.T) {
		res := e.send(e.guestCommand("vm.provision", data(501, url, sum)))
		if res.Status != 201 || provisionOutput(t, res).DownloadUPID != "" {
			t.Fatalf("%d %s %s", res.Status, res.Reason, res.Output)
		}
		if n := e.pve.Requests("POST", "/nodes/pve2/storage/images/download-url"); n != 1 {
			t.Errorf("downloads = %d, want 1", n)
		}
	})
	t.Run("checksum mismatch", func(t *testing.T) {
		other, _ := imageServer(t, "other.qcow2")
		res := e.send(e.guestCommand("vm.provision", data(502, other, strings.Repeat("0", 64))))
		if res.Status != 502 || res.Reason != "task_failed" {
			t.Fatalf("%d %s %s", res.Status, res.Reason, res.Detail)
		}
		if _, ok := e.pve.Guest(502); ok {
			t.Error("a VM was created from an unverified image")
		}
	})
	t.Run("a type Proxmox cannot import goes over SSH", func(t *testing.T) {
		vhd, vhdSum := imageServer(t, "disk.vhdx")
		res := e.send(e.guestCommand("vm.provision", data(503, vhd, vhdSum)))
		if res.Status != 201 {
			t.Fatalf("%d %s %s", res.Status, res.Reason, res.Detail)
		}
		var sawDownload bool
		for _, c := range shell.Commands() {
			sawDownload = sawDownload || strings.Contains(c, proxmox.FallbackImageDir)
		}
		if !sawDownload {
			t.Errorf("no download into %s over SSH: %v", proxmox.FallbackImageDir, shell.Commands())
		}
	})
}

// TestProvisionReadFailures pins the two read failures: the storage inventory (502
// storage_lookup_failed, nothing created) and the configuration before the update (502
// config_read_failed).
func TestProvisionReadFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// the endpoint's watch reads /cluster/resources beside the command and could take the
	// failure meant for the command's inventory
	e.start(func(c *app.Config) { c.NoTaskWatch = true })
	url, sum := imageServer(t, "jammy.img")
	e.pve.FailNext("GET", "/cluster/resources", 1, 500, "cluster resources unavailable")
	res := e.send(e.guestCommand("vm.provision", fmt.Sprintf(`{"source":{"image":{"url":%q,"checksum":%q}},"new_vmid":600,"new_name":"x","target_node":"pve1"}`, url, sum)))
	if res.Status != 502 || res.Reason != "storage_lookup_failed" {
		t.Fatalf("inventory: %d %s %s", res.Status, res.Reason, res.Detail)
	}
	if _, ok := e.pve.Guest(600); ok {
		t.Error("a VM was created without an inventory")
	}
	e.pve.FailNext("GET", "/nodes/pve1/qemu/601/config", 1, 500, "config unreadable")
	res = e.send(e.guestCommand("vm.provision", `{"source":{"template_vmid":9000},"new_vmid":601,"new_name":"x","target_node":"pve1"}`))
	if res.Status != 502 || res.Reason != "config_read_failed" || provisionOutput(t, res).CloneUPID == "" {
		t.Fatalf("config read: %d %s %s", res.Status, res.Reason, res.Output)
	}
}
