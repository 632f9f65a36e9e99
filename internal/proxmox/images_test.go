package proxmox_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestImageFormat pins which URLs Proxmox can import through download-url and under which
// extension: .img is qcow2 inside; compressed, vhdx, iso and extension-less URLs cannot.
func TestImageFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url  string
		ext  string
		isOK bool
	}{
		{"https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img", "qcow2", true},
		{"https://example.net/debian-12-genericcloud-amd64.qcow2", "qcow2", true},
		{"https://example.net/disk.QCOW2?sig=abc#frag", "qcow2", true},
		{"http://example.net/disk.raw", "raw", true},
		{"https://example.net/appliance.vmdk", "vmdk", true},
		{"https://example.net/fedora.qcow2.xz", "", false},
		{"https://example.net/win.vhdx", "", false},
		{"https://example.net/installer.iso", "", false},
		{"https://example.net/image", "", false},
		{"https://example.net/dir.img/", "", false},
		{"://bad", "", false},
	}
	for _, tt := range tests {
		ext, ok := proxmox.ImageFormat(tt.url)
		if ext != tt.ext || ok != tt.isOK {
			t.Errorf("ImageFormat(%q) = %q, %v; want %q, %v", tt.url, ext, ok, tt.ext, tt.isOK)
		}
	}
}

// TestImportFileName pins the file name: hex sha256 of the full URL plus the extension,
// stable for one URL, different for another (query included).
func TestImportFileName(t *testing.T) {
	t.Parallel()
	const u = "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img"
	tests := []struct {
		url, ext, want string
	}{
		{u, "qcow2", sha256Hex([]byte(u)) + ".qcow2"},
		{u, ".qcow2", sha256Hex([]byte(u)) + ".qcow2"},
		{u + "?v=2", "raw", sha256Hex([]byte(u+"?v=2")) + ".raw"},
	}
	for _, tt := range tests {
		if got := proxmox.ImportFileName(tt.url, tt.ext); got != tt.want {
			t.Errorf("ImportFileName(%q, %q) = %q, want %q", tt.url, tt.ext, got, tt.want)
		}
	}
	if proxmox.ImportFileName(u, "qcow2") == proxmox.ImportFileName(u+"?v=2", "qcow2") {
		t.Error("different URLs share a file name")
	}
}

// TestStorageContent pins the listing: import files of a shared storage seen from every
// node, the content filter, guest disks as images, and PVE's refusals for missing and
// disabled storages.
func TestStorageContent(t *testing.T) {
	t.Parallel()
	sim, c := imageSim(t)
	img := qcow2Image(2<<30, "payload")
	sim.AddImportVolume("images", "pve1", "abc.qcow2", img)
	sim.AddStorage(proxmox.StorageConfig{"storage": "old", "type": "dir", "path": "/srv/old", "content": "import", "disable": "1"})
	sim.SetStorageStatus("images", "pve3", "unavailable")
	sim.AddStorage(proxmox.StorageConfig{"storage": "only1", "type": "dir", "path": "/srv/only1", "content": "import", "nodes": "pve1"})

	tests := []struct {
		name, node, storage, content string
		want                         []proxmox.Volume
		has                          string // a volid that must be listed (when want is nil)
		errText                      string
	}{
		{name: "import on shared storage from pve2", node: "pve2", storage: "images", content: "import",
			want: []proxmox.Volume{{VolID: "images:import/abc.qcow2", Format: "qcow2", Content: "import", Size: 2 << 30}}},
		{name: "iso filter hides import", node: "pve1", storage: "images", content: "iso", want: []proxmox.Volume{}},
		{name: "guest disks", node: "pve1", storage: "local-lvm", content: "images", has: "local-lvm:vm-100-disk-0"},
		{name: "missing storage", node: "pve1", storage: "nope", content: "import", errText: "storage 'nope' does not exist"},
		{name: "disabled storage", node: "pve1", storage: "old", content: "import", errText: "storage 'old' is disabled"},
		{name: "storage not on node", node: "pve2", storage: "only1", content: "import", errText: "storage 'only1' is not available on node 'pve2'"},
		{name: "storage offline on node", node: "pve3", storage: "images", content: "import", errText: "storage 'images' is not online"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vols, err := c.StorageContent(testCtx(t), tt.node, tt.storage, tt.content)
			if tt.errText != "" {
				var ae *proxmox.APIError
				if !errors.As(err, &ae) || ae.Message != tt.errText {
					t.Fatalf("err = %v, want APIError %q", err, tt.errText)
				}
				return
			}
			if err != nil {
				t.Fatalf("StorageContent: %v", err)
			}
			if tt.has != "" {
				if !slices.ContainsFunc(vols, func(v proxmox.Volume) bool { return v.VolID == tt.has && v.Content == "images" }) {
					t.Fatalf("volumes %+v lack %s", vols, tt.has)
				}
				return
			}
			if !slices.Equal(vols, tt.want) {
				t.Fatalf("volumes = %+v, want %+v", vols, tt.want)
			}
		})
	}
}

// TestDownloadURL pins download-url: Proxmox fetches the URL and verifies the checksum
// (sha256, sha512); a mismatch fails the task (*TaskError and ErrChecksumMismatch, UPID
// kept, nothing stored); a present file with the right checksum is reused without a
// fetch; storages without import content, without a file system and names without an
// importable extension are refused before any task.
func TestDownloadURL(t *testing.T) {
	t.Parallel()
	img := qcow2Image(3<<30, "ubuntu")
	srv := serveImages(t, map[string][]byte{"/noble.img": img, "/other.img": img})
	noble := srv.URL + "/noble.img"
	file := proxmox.ImportFileName(noble, "qcow2")

	tests := []struct {
		name      string
		storage   string
		req       proxmox.DownloadRequest
		taskErr   string // *TaskError exit status
		mismatch  bool
		apiStatus int
		apiText   string // APIError message, or the rejected parameter for 400
		stored    bool
	}{
		{name: "sha256 ok", storage: "images", req: proxmox.DownloadRequest{URL: noble, Filename: file, Checksum: strings.ToUpper(sha256Hex(img)), ChecksumAlgorithm: "SHA256"}, stored: true},
		{name: "sha512 ok", storage: "images", req: proxmox.DownloadRequest{URL: noble, Filename: file, Checksum: sha512Hex(img), ChecksumAlgorithm: "sha512"}, stored: true},
		{name: "checksum mismatch", storage: "images", req: proxmox.DownloadRequest{URL: noble, Filename: file, Checksum: strings.Repeat("0", 64), ChecksumAlgorithm: "sha256"},
			taskErr: "checksum mismatch: got '" + sha256Hex(img) + "' != expect '" + strings.Repeat("0", 64) + "'", mismatch: true},
		{name: "not found", storage: "images", req: proxmox.DownloadRequest{URL: srv.URL + "/missing.img", Filename: file, Checksum: sha256Hex(img), ChecksumAlgorithm: "sha256"},
			taskErr: "download failed: command 'wget"},
		{name: "no import content", storage: "local", req: proxmox.DownloadRequest{URL: noble, Filename: file, Checksum: sha256Hex(img), ChecksumAlgorithm: "sha256"},
			apiStatus: 500, apiText: "storage 'local' is not configured for content-type 'import'"},
		{name: "not file based", storage: "local-lvm", req: proxmox.DownloadRequest{URL: noble, Filename: file, Checksum: sha256Hex(img), ChecksumAlgorithm: "sha256"},
			apiStatus: 500, apiText: "can't upload to storage type 'lvmthin', not a file based storage!"},
		{name: "img extension refused", storage: "images", req: proxmox.DownloadRequest{URL: noble, Filename: "noble.img", Checksum: sha256Hex(img), ChecksumAlgorithm: "sha256"},
			apiStatus: 400, apiText: "filename"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim, c := imageSim(t)
			upid, err := c.DownloadURL(testCtx(t), "pve2", tt.storage, tt.req)
			switch {
			case tt.taskErr != "":
				var te *proxmox.TaskError
				if !errors.As(err, &te) || !strings.HasPrefix(te.ExitStatus, tt.taskErr) {
					t.Fatalf("err = %v, want task error %q", err, tt.taskErr)
				}
				if errors.Is(err, proxmox.ErrChecksumMismatch) != tt.mismatch {
					t.Errorf("errors.Is(err, ErrChecksumMismatch) = %v, want %v", !tt.mismatch, tt.mismatch)
				}
				if u, perr := proxmox.ParseUPID(upid); perr != nil || u.Type != "download" || u.Node != "pve2" {
					t.Errorf("UPID %q (%v): want a download task on pve2", upid, perr)
				}
			case tt.apiStatus != 0:
				var ae *proxmox.APIError
				if !errors.As(err, &ae) || ae.Status != tt.apiStatus {
					t.Fatalf("err = %v, want APIError %d", err, tt.apiStatus)
				}
				if tt.apiStatus == 400 {
					if _, found := ae.Params[tt.apiText]; !found {
						t.Errorf("params %v, want %s rejected", ae.Params, tt.apiText)
					}
				} else if ae.Message != tt.apiText {
					t.Errorf("message %q, want %q", ae.Message, tt.apiText)
				}
				if upid != "" || len(sim.Tasks()) != 0 {
					t.Errorf("a refused download started a task: %q %v", upid, sim.Tasks())
				}
			default:
				if err != nil {
					t.Fatalf("DownloadURL: %v", err)
				}
			}
			stored := slices.Contains(sim.ImportVolumes(tt.storage, "pve2"), tt.req.Filename)
			if stored != tt.stored {
				t.Errorf("file stored = %v, want %v", stored, tt.stored)
			}
		})
	}

	t.Run("present file is reused without a fetch", func(t *testing.T) {
		t.Parallel()
		sim, c := imageSim(t)
		other := srv.URL + "/other.img"
		name := proxmox.ImportFileName(other, "qcow2")
		req := proxmox.DownloadRequest{URL: other, Filename: name, Checksum: sha256Hex(img), ChecksumAlgorithm: "sha256"}
		for i := range 2 {
			if _, err := c.DownloadURL(testCtx(t), "pve1", "images", req); err != nil {
				t.Fatalf("download %d: %v", i+1, err)
			}
		}
		if n := srv.Hits("/other.img"); n != 1 {
			t.Errorf("URL fetched %d times, want 1", n)
		}
		if got := sim.ImportVolumes("images", "pve3"); !slices.Equal(got, []string{name}) {
			t.Errorf("import volumes seen from pve3 = %v, want [%s]", got, name)
		}
	})

	t.Run("sent parameters", func(t *testing.T) {
		t.Parallel()
		sim, c := imageSim(t)
		if _, err := c.DownloadURL(testCtx(t), "pve1", "images", proxmox.DownloadRequest{URL: noble, Filename: file, Checksum: sha256Hex(img), ChecksumAlgorithm: "sha256"}); err != nil {
			t.Fatal(err)
		}
		var sent url.Values
		for _, r := range sim.RequestLog() {
			if r.Method == http.MethodPost {
				sent = r.Params
			}
		}
		want := url.Values{"content": {"import"}, "filename": {file}, "url": {noble}, "checksum": {sha256Hex(img)}, "checksum-algorithm": {"sha256"}}
		if len(sent) != len(want) {
			t.Fatalf("sent %v, want %v", sent, want)
		}
		for k, v := range want {
			if !slices.Equal(sent[k], v) {
				t.Errorf("%s = %v, want %v", k, sent[k], v)
			}
		}
	})

	t.Run("unsupported algorithm is refused before sending", func(t *testing.T) {
		t.Parallel()
		sim, c := imageSim(t)
		_, err := c.DownloadURL(testCtx(t), "pve1", "images", proxmox.DownloadRequest{URL: noble, Filename: file, Checksum: "ab", ChecksumAlgorithm: "crc32"})
		if err == nil || writes(sim) != 0 {
			t.Fatalf("err = %v, writes = %d: want a refusal without a request", err, writes(sim))
		}
	})
}

// TestCreateVM pins VM creation with import-from: from a storage's import volume and from
// an absolute path on the node (disk vm-<vmid>-disk-0 on the target storage, sized from
// the image), PVE's special-syntax refusal, worker failures for missing sources (the VM
// does not exist afterwards), an existing vmid, undeclared parameters refused locally, a
// URL-encoded sshkeys and a cipassword that never reaches errors or logs.
func TestCreateVM(t *testing.T) {
	t.Parallel()
	const canary = "pw-canary-31337"
	img := qcow2Image(5<<30, "x")
	tests := []struct {
		name      string
		vmid      int64
		params    map[string]string
		nodeFile  string // file to place under the node root
		wantDisk  string // scsi0 afterwards
		apiStatus int
		param     string // rejected parameter of a 400
		taskErr   string
		sentinel  error
		reject    map[string]string // injected 400 per-parameter errors
	}{
		{name: "import volume", vmid: 500, params: map[string]string{"name": "img-vm", "scsi0": "local-lvm:0,import-from=images:import/abc.qcow2,discard=on", "ide2": "local-lvm:cloudinit", "net0": "virtio,bridge=vmbr0"},
			wantDisk: "local-lvm:vm-500-disk-0,discard=on,size=5G"},
		{name: "absolute path", vmid: 501, params: map[string]string{"scsi0": "ceph:0,import-from=/var/lib/vz/template/proxbus-images/x.img"},
			nodeFile: "/var/lib/vz/template/proxbus-images/x.img", wantDisk: "ceph:vm-501-disk-0,size=5G"},
		{name: "special syntax", vmid: 502, params: map[string]string{"scsi0": "local-lvm:32,import-from=images:import/abc.qcow2"}, apiStatus: 400, param: "scsi0"},
		{name: "missing import volume", vmid: 503, params: map[string]string{"scsi0": "local-lvm:0,import-from=images:import/none.qcow2"},
			taskErr: "unable to create VM 503 - cannot import from 'images:import/none.qcow2' - could not get size of images:import/none.qcow2"},
		{name: "missing path", vmid: 504, params: map[string]string{"scsi0": "local-lvm:0,import-from=/nowhere/x.qcow2"},
			taskErr: "unable to create VM 504 - can't find file '/nowhere/x.qcow2'"},
		{name: "disk storage not on node", vmid: 508, params: map[string]string{"scsi0": "only2:0,import-from=images:import/abc.qcow2"},
			taskErr: "unable to create VM 508 - storage 'only2' is not available on node 'pve1'"},
		{name: "storage without images", vmid: 505, params: map[string]string{"scsi0": "images:0,import-from=images:import/abc.qcow2"}, apiStatus: 400, param: "storage"},
		{name: "vmid in use", vmid: 100, params: map[string]string{"name": "dup"}, apiStatus: 500, sentinel: proxmox.ErrAlreadyExists},
		{name: "undeclared parameter", vmid: 506, params: map[string]string{"hookscript": "local:snippets/x.pl"}, sentinel: proxmox.ErrUndeclaredParam},
		{name: "cipassword canary", vmid: 507, params: map[string]string{"cipassword": canary, "ciuser": "ops"},
			reject: map[string]string{"cipassword": "value '" + canary + "' is too weak", "ciuser": "user '" + canary + "' unknown"}, apiStatus: 400, param: "cipassword"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim, c := imageSim(t)
			sim.AddImportVolume("images", "pve1", "abc.qcow2", img)
			sim.AddStorage(proxmox.StorageConfig{"storage": "only2", "type": "lvmthin", "vgname": "pve", "thinpool": "data", "content": "images", "nodes": "pve2"})
			if tt.nodeFile != "" {
				root := t.TempDir()
				writeNodeFile(t, root, tt.nodeFile, img)
				sim.SetNodeRoot("pve1", root)
			}
			if tt.reject != nil {
				sim.RejectNext("POST", "/nodes/{node}/qemu", 1, tt.reject)
			}
			var logs bytes.Buffer
			c = newClient(t, c.Endpoint(), simpve.DemoSecret, proxmox.WithTaskPollInterval(1), proxmox.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
			upid, err := c.CreateVM(testCtx(t), "pve1", tt.vmid, tt.params)
			if strings.Contains(logs.String(), canary) || (err != nil && strings.Contains(err.Error(), canary)) {
				t.Fatal("the cipassword reached a log or an error")
			}
			switch {
			case tt.apiStatus != 0:
				var ae *proxmox.APIError
				if !errors.As(err, &ae) || ae.Status != tt.apiStatus {
					t.Fatalf("err = %v, want APIError %d", err, tt.apiStatus)
				}
				if _, found := ae.Params[tt.param]; tt.param != "" && !found {
					t.Errorf("params %v, want %s rejected", ae.Params, tt.param)
				}
				if tt.param == "scsi0" && tt.name == "special syntax" && ae.Params["scsi0"] != "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>" {
					t.Errorf("scsi0 error %q", ae.Params["scsi0"])
				}
			case tt.taskErr != "":
				var te *proxmox.TaskError
				if !errors.As(err, &te) || te.ExitStatus != tt.taskErr {
					t.Fatalf("err = %v, want task error %q", err, tt.taskErr)
				}
				if u, _ := proxmox.ParseUPID(upid); u.Type != "qmcreate" {
					t.Errorf("UPID %q is not a qmcreate task", upid)
				}
			case tt.sentinel == nil && err != nil:
				t.Fatalf("CreateVM: %v", err)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Fatalf("err = %v, want %v", err, tt.sentinel)
			}
			if tt.sentinel == proxmox.ErrUndeclaredParam && writes(sim) != 0 {
				t.Error("an undeclared parameter was sent")
			}
			g, exists := sim.Guest(tt.vmid)
			if tt.wantDisk == "" {
				if exists && tt.vmid != 100 {
					t.Errorf("VM %d exists after a failed create: %+v", tt.vmid, g.Config)
				}
				return
			}
			if !exists {
				t.Fatalf("VM %d was not created", tt.vmid)
			}
			if g.Config["scsi0"] != tt.wantDisk || g.Node != "pve1" || g.Status != "stopped" || g.Busy {
				t.Errorf("VM = node %s status %s busy %v scsi0 %q; want pve1 stopped idle %q", g.Node, g.Status, g.Busy, g.Config["scsi0"], tt.wantDisk)
			}
			if tt.params["ide2"] != "" && g.Config["ide2"] != "local-lvm:vm-500-cloudinit,media=cdrom" {
				t.Errorf("ide2 = %q", g.Config["ide2"])
			}
			if tt.params["net0"] != "" && !strings.HasPrefix(g.Config["net0"], "virtio=BC:24:11:") {
				t.Errorf("net0 = %q, want a generated MAC", g.Config["net0"])
			}
		})
	}

	t.Run("sshkeys are sent URL-encoded", func(t *testing.T) {
		t.Parallel()
		sim, c := imageSim(t)
		key := "ssh-ed25519 AAAAC3Nza+/= user@host"
		if _, err := c.CreateVM(testCtx(t), "pve2", 600, map[string]string{"sshkeys": key}); err != nil {
			t.Fatal(err)
		}
		g, _ := sim.Guest(600)
		if got, err := url.PathUnescape(g.Config["sshkeys"]); err != nil || got != key || strings.ContainsAny(g.Config["sshkeys"], " +/=") {
			t.Errorf("sshkeys stored %q (decodes to %q)", g.Config["sshkeys"], got)
		}
	})
}
