package simpve_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

const auditAuth = "PVEAPIToken=" + simpve.AuditTokenID + "=" + simpve.DemoSecret

// TestDownloadURLRules pins download-url's checks and effects on the wire: schema errors
// (400), permission (403), the file name normalised as PVE does, import content per node
// for a local storage and cluster-wide for a shared one, an injected failure.
func TestDownloadURLRules(t *testing.T) {
	t.Parallel()
	body := []byte("image bytes")
	sum := sha256.Sum256(body)
	hexSum := hex.EncodeToString(sum[:])
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	t.Cleanup(img.Close)

	form := func(kv ...string) string {
		v := url.Values{"content": {"import"}, "url": {img.URL + "/x.img"}, "filename": {"x.qcow2"}, "checksum": {hexSum}, "checksum-algorithm": {"sha256"}}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				v.Del(kv[i])
			} else {
				v.Set(kv[i], kv[i+1])
			}
		}
		return v.Encode()
	}
	tests := []struct {
		name     string
		storage  string
		node     string
		auth     string
		body     string
		fault    string
		status   int
		param    string // rejected parameter of a 400
		message  string // 403/500 message
		exit     string // task exit status
		stored   string // file stored (as seen from node)
		notOn    string // a node that must not see it
		sharedOn string // another node that must see it
	}{
		{name: "checksum without algorithm", storage: "images", node: "pve1", auth: demoAuth, body: form("checksum-algorithm", ""), status: 400, param: "checksum-algorithm"},
		{name: "ftp url", storage: "images", node: "pve1", auth: demoAuth, body: form("url", "ftp://example.net/x.img"), status: 400, param: "url"},
		{name: "unknown algorithm", storage: "images", node: "pve1", auth: demoAuth, body: form("checksum-algorithm", "crc32"), status: 400, param: "checksum-algorithm"},
		{name: "auditor", storage: "images", node: "pve1", auth: auditAuth, body: form(), status: 403, message: "Permission check failed (/storage/images, Datastore.AllocateTemplate)"},
		{name: "normalised name", storage: "images", node: "pve1", auth: demoAuth, body: form("filename", "../dir/my image.qcow2"), status: 200, exit: "OK", stored: "my_image.qcow2", sharedOn: "pve3"},
		{name: "local storage", storage: "vz", node: "pve2", auth: demoAuth, body: form(), status: 200, exit: "OK", stored: "x.qcow2", notOn: "pve1"},
		{name: "injected failure", storage: "images", node: "pve1", auth: demoAuth, body: form(), fault: "download failed: out of space", status: 200, exit: "download failed: out of space"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
			sim.AddStorage(proxmox.StorageConfig{"storage": "vz", "type": "dir", "path": "/var/lib/vz", "content": "import,images"})
			if tt.fault != "" {
				sim.FailDownload(tt.node, tt.storage, tt.fault)
			}
			r := mustDo(t, "POST", api+"/nodes/"+tt.node+"/storage/"+tt.storage+"/download-url", tt.auth, formType, tt.body)
			if r.status != tt.status {
				t.Fatalf("status %d %s, want %d", r.status, r.raw, tt.status)
			}
			switch {
			case tt.param != "":
				if _, found := r.errors[tt.param]; !found {
					t.Errorf("errors %v, want %s", r.errors, tt.param)
				}
			case tt.message != "":
				if strings.TrimSpace(r.message) != tt.message {
					t.Errorf("message %q, want %q", r.message, tt.message)
				}
			}
			if tt.exit != "" {
				u := upidOf(t, r)
				st := taskStatus(t, api, u)
				if st["exitstatus"] != tt.exit || u.Type != "download" {
					t.Errorf("task %s ended %v, want %q", u.Type, st["exitstatus"], tt.exit)
				}
			}
			if tt.stored != "" && !slices.Contains(sim.ImportVolumes(tt.storage, tt.node), tt.stored) {
				t.Errorf("%s not stored: %v", tt.stored, sim.ImportVolumes(tt.storage, tt.node))
			}
			if tt.notOn != "" && len(sim.ImportVolumes(tt.storage, tt.notOn)) != 0 {
				t.Errorf("local file visible on %s", tt.notOn)
			}
			if tt.sharedOn != "" && !slices.Contains(sim.ImportVolumes(tt.storage, tt.sharedOn), tt.stored) {
				t.Errorf("shared file not visible on %s", tt.sharedOn)
			}
			if tt.stored == "" && len(sim.ImportVolumes(tt.storage, tt.node)) != 0 {
				t.Errorf("a refused or failed download stored %v", sim.ImportVolumes(tt.storage, tt.node))
			}
		})
	}
}

// TestCreateVMTask pins VM creation as a task: the config exists with lock "create" while
// qmcreate runs, start=1 starts the VM at the end, a cloud-init drive on a file storage is
// a qcow2 under the vmid's directory, and an injected task failure leaves no VM.
func TestCreateVMTask(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: 50 * time.Millisecond})
	sim.AddStorage(proxmox.StorageConfig{"storage": "vz", "type": "dir", "path": "/var/lib/vz", "content": "images"})
	body := url.Values{"vmid": {"800"}, "name": {"new"}, "scsi0": {"local-lvm:8"}, "ide2": {"vz:cloudinit"}, "start": {"1"}}.Encode()
	u := upidOf(t, mustDo(t, "POST", api+"/nodes/pve2/qemu", demoAuth, formType, body))
	if u.Type != "qmcreate" || u.ID != "800" {
		t.Fatalf("task %s:%s, want qmcreate:800", u.Type, u.ID)
	}
	if g, found := sim.Guest(800); !found || !g.Busy || g.Lock != "create" {
		t.Fatalf("while creating: found %v busy %v lock %q", found, g.Busy, g.Lock)
	}
	eventually(t, "the create task ends", func() bool { g, _ := sim.Guest(800); return !g.Busy })
	g, _ := sim.Guest(800)
	want := map[string]string{"scsi0": "local-lvm:vm-800-disk-0,size=8G", "ide2": "vz:800/vm-800-cloudinit.qcow2,media=cdrom", "name": "new"}
	for k, v := range want {
		if g.Config[k] != v {
			t.Errorf("%s = %q, want %q", k, g.Config[k], v)
		}
	}
	if g.Status != "running" {
		t.Errorf("status %s, want running (start=1)", g.Status)
	}

	sim.FailTask("pve2", 801, "unable to create VM 801 - out of space")
	u = upidOf(t, mustDo(t, "POST", api+"/nodes/pve2/qemu", demoAuth, formType, url.Values{"vmid": {"801"}}.Encode()))
	eventually(t, "the failing task ends", func() bool { return taskStatus(t, api, u)["status"] == "stopped" })
	if _, found := sim.Guest(801); found {
		t.Error("a failed create left a VM")
	}
}

// TestClusterStatus pins GET /cluster/status: one cluster entry, one entry per node with
// id, nodeid, ip and online as 0/1.
func TestClusterStatus(t *testing.T) {
	t.Parallel()
	sim, api := startOpts(t, simpve.Options{Scenario: simpve.ScenarioDemo})
	sim.SetNodeAddress("pve3", "192.0.2.3")
	r := mustDo(t, "GET", api+"/cluster/status", demoAuth, "", "")
	var items []map[string]any
	if r.status != 200 || json.Unmarshal(r.data, &items) != nil {
		t.Fatalf("status %d %s", r.status, r.raw)
	}
	if len(items) != 4 || items[0]["type"] != "cluster" {
		t.Fatalf("items %v, want a cluster entry and three nodes", items)
	}
	want := map[string]string{"pve1": "10.0.0.11", "pve2": "10.0.0.12", "pve3": "192.0.2.3"}
	for _, it := range items[1:] {
		if it["type"] != "node" || it["ip"] != want[it["name"].(string)] || it["online"] != float64(1) || it["id"] != "node/"+it["name"].(string) {
			t.Errorf("node entry %v", it)
		}
	}
	if r := mustDo(t, "GET", api+"/cluster/status", "PVEAPIToken=nobody@pve!x=y", "", ""); r.status != 401 {
		t.Errorf("unauthenticated status %d", r.status)
	}
}
