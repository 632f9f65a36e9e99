package proxmox_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestCloneVM pins clones against the simulator's qemu-server rules: same node, cross-node
// onto shared storage, cross-node without a storage override, and PVE's refusals.
func TestCloneVM(t *testing.T) {
	t.Parallel()
	tmpl, shared := simpve.DemoTemplateVMID, simpve.DemoSharedTemplateVMID
	tests := []struct {
		name  string
		setup func(sim *simpve.Server)
		req   proxmox.CloneRequest
		// success: the new VM's node and disk lines
		node, scsi0, ide2 string
		// failure
		apiMsg, taskExit string
		sentinel         error
	}{
		{name: "same node onto local-lvm", req: proxmox.CloneRequest{Node: "pve1", VMID: tmpl, NewVMID: 300, Name: "web-300", Storage: "local-lvm", Full: true},
			node: "pve1", scsi0: "local-lvm:vm-300-disk-0,iothread=1,size=3584M", ide2: "local-lvm:vm-300-cloudinit,media=cdrom"},
		{name: "same node, target given as the node", req: proxmox.CloneRequest{Node: "pve1", VMID: tmpl, NewVMID: 301, Target: "pve1", Full: true},
			node: "pve1", scsi0: "local-lvm:vm-301-disk-0,iothread=1,size=3584M", ide2: "local-lvm:vm-301-cloudinit,media=cdrom"},
		{name: "linked clone of a template", req: proxmox.CloneRequest{Node: "pve1", VMID: tmpl, NewVMID: 302},
			node: "pve1", scsi0: "local-lvm:base-9000-disk-0/vm-302-disk-0,iothread=1,size=3584M", ide2: "local-lvm:vm-302-cloudinit,media=cdrom"},
		{name: "cross-node onto shared storage", req: proxmox.CloneRequest{Node: "pve1", VMID: shared, NewVMID: 303, Target: "pve2", Storage: "ceph", Full: true},
			node: "pve2", scsi0: "ceph:vm-303-disk-0,iothread=1,size=3584M", ide2: "ceph:vm-303-cloudinit,media=cdrom"},
		{name: "cross-node without storage override keeps the shared storage", req: proxmox.CloneRequest{Node: "pve1", VMID: shared, NewVMID: 304, Target: "pve3", Full: true},
			node: "pve3", scsi0: "ceph:vm-304-disk-0,iothread=1,size=3584M", ide2: "ceph:vm-304-cloudinit,media=cdrom"},
		{name: "cross-node onto non-shared storage", req: proxmox.CloneRequest{Node: "pve1", VMID: shared, NewVMID: 305, Target: "pve2", Storage: "local-lvm", Full: true},
			apiMsg: "can't clone to non-shared storage 'local-lvm'"},
		{name: "cross-node of a template on local storage", req: proxmox.CloneRequest{Node: "pve1", VMID: tmpl, NewVMID: 306, Target: "pve2", Storage: "ceph", Full: true},
			apiMsg: "can't clone VM to node 'pve2' (VM uses local storage)"},
		{name: "storage not on the node", setup: func(sim *simpve.Server) {
			sim.AddStorage(proxmox.StorageConfig{"storage": "fast2", "type": "rbd", "pool": "fast", "content": "images", "nodes": "pve2"})
		}, req: proxmox.CloneRequest{Node: "pve1", VMID: shared, NewVMID: 307, Target: "pve2", Storage: "fast2", Full: true},
			apiMsg: "storage 'fast2' is not available on node 'pve1'"},
		{name: "storage for a linked clone", req: proxmox.CloneRequest{Node: "pve1", VMID: tmpl, NewVMID: 308, Storage: "ceph"},
			apiMsg: "parameter 'storage' not allowed for linked clones"},
		{name: "newid in use", req: proxmox.CloneRequest{Node: "pve1", VMID: tmpl, NewVMID: simpve.DemoDBVMID, Full: true},
			apiMsg: "unable to create VM 101: config file already exists", sentinel: proxmox.ErrAlreadyExists},
		{name: "template not on the node", req: proxmox.CloneRequest{Node: "pve2", VMID: tmpl, NewVMID: 309, Full: true},
			apiMsg: "Configuration file 'nodes/pve2/qemu-server/9000.conf' does not exist", sentinel: proxmox.ErrNotFound},
		{name: "worker fails", setup: func(sim *simpve.Server) { sim.FailTask("pve1", shared, "clone failed: rbd error: out of space") },
			req: proxmox.CloneRequest{Node: "pve1", VMID: shared, NewVMID: 310, Target: "pve2", Full: true}, taskExit: "clone failed: rbd error: out of space"},
		{name: "destination storage not online", setup: func(sim *simpve.Server) { sim.SetStorageStatus("ceph", "pve1", "unknown") },
			req: proxmox.CloneRequest{Node: "pve1", VMID: shared, NewVMID: 311, Target: "pve2", Full: true}, taskExit: "clone failed: storage 'ceph' is not online"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim, c := guestSim(t, -1)
			if tt.setup != nil {
				tt.setup(sim)
			}
			var started []string
			ctx := proxmox.WithTaskStarted(testCtx(t), func(node, upid string) { started = append(started, node) })
			upid, err := c.CloneVM(ctx, tt.req)
			g, exists := sim.Guest(tt.req.NewVMID)
			switch {
			case tt.apiMsg != "":
				var ae *proxmox.APIError
				if !errors.As(err, &ae) || ae.Status != 500 || ae.Message != tt.apiMsg || upid != "" {
					t.Fatalf("CloneVM = %q, %v; want *APIError %q", upid, err, tt.apiMsg)
				}
				if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
					t.Errorf("%v does not match %v", err, tt.sentinel)
				}
				if len(sim.Tasks()) != 0 || (exists && tt.sentinel != proxmox.ErrAlreadyExists) {
					t.Errorf("a refused clone started %d tasks / created %+v", len(sim.Tasks()), g)
				}
			case tt.taskExit != "":
				var te *proxmox.TaskError
				if !errors.As(err, &te) || te.ExitStatus != tt.taskExit || te.UPID != upid || upid == "" {
					t.Fatalf("CloneVM = %q, %v; want *TaskError %q with the UPID", upid, err, tt.taskExit)
				}
				if exists {
					t.Errorf("failed clone left VM %+v", g)
				}
			default:
				if err != nil {
					t.Fatalf("CloneVM: %v", err)
				}
				if types := taskTypes(t, []string{upid}); types[0] != "qmclone" || !strings.Contains(upid, ":pve1:") || len(started) != 1 || started[0] != "pve1" {
					t.Errorf("upid %s (hook %v), want a qmclone on the template's node", upid, started)
				}
				if !exists || g.Node != tt.node || g.Template || g.Lock != "" || g.Busy || g.Status != "stopped" {
					t.Fatalf("new VM = %+v, want stopped, unlocked, on %s", g, tt.node)
				}
				if g.Config["scsi0"] != tt.scsi0 || g.Config["ide2"] != tt.ide2 {
					t.Errorf("disks scsi0=%q ide2=%q, want %q %q", g.Config["scsi0"], g.Config["ide2"], tt.scsi0, tt.ide2)
				}
				src, _ := sim.Guest(tt.req.VMID)
				if g.Config["net0"] == src.Config["net0"] || !strings.HasPrefix(g.Config["net0"], "virtio=BC:24:11:") || !strings.HasSuffix(g.Config["net0"], ",bridge=vmbr0") {
					t.Errorf("net0 = %q (template %q), want a new MAC on vmbr0", g.Config["net0"], src.Config["net0"])
				}
				if want := tt.req.Name; want != "" && g.Name != want {
					t.Errorf("name = %q, want %q", g.Name, want)
				}
				if src.Lock != "" || !src.Template {
					t.Errorf("template changed: %+v", src)
				}
			}
		})
	}
}

// TestCloneVMInvalid: incomplete requests fail without a request.
func TestCloneVMInvalid(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	for _, req := range []proxmox.CloneRequest{{VMID: 9000, NewVMID: 300}, {Node: "pve1", NewVMID: 300}, {Node: "pve1", VMID: 9000}} {
		if _, err := c.CloneVM(testCtx(t), req); !errors.Is(err, proxmox.ErrInvalidRequest) {
			t.Errorf("CloneVM(%+v) = %v, want ErrInvalidRequest", req, err)
		}
	}
	if n := len(sim.RequestLog()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestMoveDisk pins move_disk with delete=0: the disk points at the new storage and the
// old volume stays as unusedN; refusals and worker failures change nothing.
func TestMoveDisk(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	ctx := testCtx(t)
	if _, err := c.CloneVM(ctx, proxmox.CloneRequest{Node: "pve1", VMID: simpve.DemoSharedTemplateVMID, NewVMID: 400, Target: "pve2", Full: true}); err != nil {
		t.Fatalf("CloneVM: %v", err)
	}
	upid, err := c.MoveDisk(ctx, "pve2", 400, "scsi0", "local-lvm")
	if err != nil || taskTypes(t, []string{upid})[0] != "qmmove" {
		t.Fatalf("MoveDisk = %q, %v", upid, err)
	}
	g, _ := sim.Guest(400)
	if g.Config["scsi0"] != "local-lvm:vm-400-disk-0,iothread=1,size=3584M" || g.Config["unused0"] != "ceph:vm-400-disk-0" {
		t.Errorf("after move scsi0=%q unused0=%q", g.Config["scsi0"], g.Config["unused0"])
	}
	sim.AddStorage(proxmox.StorageConfig{"storage": "off", "type": "lvmthin", "vgname": "off", "thinpool": "data", "content": "images", "disable": "1"})
	sim.SetStorageStatus("local-lvm", "pve2", "unknown")
	sim.FailMove(400, "scsi0", "storage migration failed: mirroring error: VM 400 qmp command 'block-job-complete' failed")
	tests := []struct {
		disk, storage    string
		apiMsg, taskExit string
	}{
		{"scsi0", "local-lvm", "you can't move to the same storage with same format", ""},
		{"ide2", "local-lvm", "", "storage migration failed: storage 'local-lvm' is not online"},
		{"scsi7", "ceph", "disk 'scsi7' does not exist", ""},
		{"unused0", "local-lvm", "cannot move disk 'unused0', only configured disks can be moved to another storage", ""},
		{"scsi0", "off", "", "storage migration failed: mirroring error: VM 400 qmp command 'block-job-complete' failed"},
		{"scsi0", "off", "", "storage migration failed: storage 'off' is disabled"},
	}
	for _, tt := range tests {
		before, _ := sim.Guest(400)
		upid, err := c.MoveDisk(ctx, "pve2", 400, tt.disk, tt.storage)
		var ae *proxmox.APIError
		var te *proxmox.TaskError
		switch {
		case tt.apiMsg != "" && (!errors.As(err, &ae) || ae.Message != tt.apiMsg || upid != ""):
			t.Errorf("move %s to %s = %q, %v; want *APIError %q", tt.disk, tt.storage, upid, err, tt.apiMsg)
		case tt.taskExit != "" && (!errors.As(err, &te) || te.ExitStatus != tt.taskExit || upid == ""):
			t.Errorf("move %s to %s = %q, %v; want *TaskError %q", tt.disk, tt.storage, upid, err, tt.taskExit)
		}
		if after, _ := sim.Guest(400); !sameConfig(before.Config, after.Config) {
			t.Errorf("move %s to %s changed the config: %v → %v", tt.disk, tt.storage, before.Config, after.Config)
		}
	}
	web, _ := sim.Guest(simpve.DemoWebVMID)
	if _, err := c.MoveDisk(ctx, "pve1", simpve.DemoWebVMID, "ide2", "ceph"); err == nil || !strings.Contains(err.Error(), "you can't move a cdrom") {
		t.Errorf("moving a CD-ROM = %v", err)
	}
	if after, _ := sim.Guest(simpve.DemoWebVMID); !sameConfig(web.Config, after.Config) {
		t.Error("refused CD-ROM move changed the config")
	}
	if _, err := c.MoveDisk(ctx, "pve2", 400, "", "ceph"); !errors.Is(err, proxmox.ErrInvalidRequest) {
		t.Errorf("empty disk = %v, want ErrInvalidRequest", err)
	}
}

// sameConfig compares two configurations.
func sameConfig(a, b map[string]string) bool {
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
