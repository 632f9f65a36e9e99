package simpve

import (
	"fmt"
	"strconv"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// Demo guest vmids (contract §10), for tests that address them.
const (
	DemoTemplateVMID int64 = 9000 // ubuntu-template on pve1, a template on local-lvm
	// DemoSharedTemplateVMID is ubuntu-template-shared on pve1, a template whose disk and
	// Cloud-Init drive are on the shared ceph storage: Proxmox clones a template to another
	// node only when every volume of it is on shared storage.
	DemoSharedTemplateVMID int64 = 8000
	DemoWebVMID            int64 = 100 // web-01 on pve1, running, SeaBIOS/i440fx
	DemoDBVMID             int64 = 101 // db-01 on pve2, stopped, OVMF/q35 with passthrough, protection: 1
	DemoAppVMID            int64 = 102 // app-01 on pve3, running, one snapshot with RAM
	DemoDupStopped         int64 = 103 // "dup" on pve1, stopped
	DemoDupRunning         int64 = 104 // "dup" on pve3, running
	DemoPausedVMID         int64 = 105 // batch-01 on pve2, paused
	DemoCT1                int64 = 200 // ct-pve1, running, snapshot tree
	DemoCT2                int64 = 201 // ct-pve2, stopped, snapshot tree
	DemoCT3                int64 = 202 // ct-pve3, running, snapshot tree
)

// demoGuests is the demo cluster's guests, created at now.
func demoGuests(now time.Time) []*guest {
	up := now.Add(-36 * time.Hour)
	base := now.Add(-30 * 24 * time.Hour).Unix()
	qemu := func(vmid int64, node, status string, cfg map[string]string) *guest {
		g := &guest{vmid: vmid, typ: proxmox.GuestQEMU, node: node, config: cfg, status: stateStopped, snapshots: map[string]*snapshot{}}
		if status != stateStopped {
			g.start(up)
			g.paused = status == "paused"
		}
		return g
	}
	lxc := func(vmid int64, node string, running bool) *guest {
		name := map[int64]string{DemoCT1: "ct-pve1", DemoCT2: "ct-pve2", DemoCT3: "ct-pve3"}[vmid]
		id := strconv.FormatInt(vmid, 10)
		hw := fmt.Sprintf("BC:24:11:00:%02X:", 0x20+vmid-DemoCT1)
		ip := fmt.Sprintf("10.20.0.%d/24", 21+vmid-DemoCT1)
		cfg := map[string]string{
			"hostname": name, "arch": "amd64", "ostype": "debian", "cores": "1", "memory": "512", "swap": "512",
			"rootfs":       "local-lvm:vm-" + id + "-disk-0,size=8G",
			"mp0":          "ceph:vm-" + id + "-disk-1,mp=/srv/data,backup=1,size=20G",
			"net0":         "name=eth0,bridge=vmbr0,firewall=1,hwaddr=" + hw + "00,ip=dhcp,type=veth",
			"net1":         "name=eth1,bridge=vmbr1,hwaddr=" + hw + "01,ip=" + ip + ",tag=20,type=veth",
			"unprivileged": "1", "features": "nesting=1", "onboot": "1", "tags": "ct",
			"description": "Demo container on " + node + "\n",
		}
		g := &guest{vmid: vmid, typ: proxmox.GuestLXC, node: node, config: cfg, status: stateStopped, snapshots: map[string]*snapshot{}}
		if running {
			g.start(up)
		}
		// base ── before-update ── (current)
		//     └── experiment
		g.snapshots["base"] = &snapshot{name: "base", description: "fresh install", snaptime: base, config: cloneMap(cfg)}
		g.snapshots["experiment"] = &snapshot{name: "experiment", description: "trying nginx", snaptime: base + 86400, parent: "base", config: cloneMap(cfg)}
		g.snapshots["before-update"] = &snapshot{name: "before-update", description: "before apt full-upgrade", snaptime: base + 2*86400, parent: "base", config: cloneMap(cfg)}
		g.parent = "before-update"
		return g
	}

	web := qemu(DemoWebVMID, "pve1", stateRunning, map[string]string{
		"name": "web-01", "ostype": "l26", "memory": "4096", "cores": "2", "sockets": "1", "cpu": "x86-64-v2-AES",
		"scsihw":  "virtio-scsi-single",
		"virtio0": "local-lvm:vm-100-disk-0,iothread=1,size=32G",
		"virtio1": "ceph:vm-100-disk-1,iothread=1,size=100G",
		"ide2":    "none,media=cdrom",
		"boot":    "order=virtio0;ide2;net0",
		"net0":    "virtio=BC:24:11:00:01:00,bridge=vmbr0,firewall=1",
		"net1":    "e1000=BC:24:11:00:01:01,bridge=vmbr1,tag=20",
		"agent":   "1", "onboot": "1", "tags": "prod;web",
		"smbios1":     "uuid=5f0b6c1e-2d43-4a8e-9b1a-0c7d1e2f3a41",
		"vmgenid":     "0f4f7a52-5c39-4c3f-8d7e-1d2b3c4d5e6f",
		"description": "Public web server\n",
	})
	db := qemu(DemoDBVMID, "pve2", stateStopped, map[string]string{
		"name": "db-01", "ostype": "l26", "bios": "ovmf", "machine": "pc-q35-9.2+pve1",
		"memory": "16384", "balloon": "0", "sockets": "2", "cores": "4", "numa": "1", "cpu": "host",
		"efidisk0":  "local-lvm:vm-101-disk-0,efitype=4m,pre-enrolled-keys=1,size=4M",
		"tpmstate0": "local-lvm:vm-101-disk-1,size=4M,version=v2.0",
		"scsihw":    "virtio-scsi-single",
		"scsi0":     "local-lvm:vm-101-disk-2,discard=on,iothread=1,ssd=1,size=64G",
		"scsi1":     "ceph:vm-101-disk-3,backup=0,iothread=1,size=500G",
		"ide0":      "local:iso/ubuntu-24.04.2-live-server-amd64.iso,media=cdrom,size=3034M",
		"ide2":      "local-lvm:vm-101-cloudinit,media=cdrom",
		"boot":      "order=scsi0;ide0;net0",
		"net0":      "model=virtio,macaddr=BC:24:11:00:02:00,bridge=vmbr0,firewall=1",
		"net1":      "virtio=BC:24:11:00:02:01,bridge=vmbr1,firewall=1,tag=30",
		"net2":      "vmxnet3=BC:24:11:00:02:02,bridge=vmbr1,tag=40",
		"hostpci0":  "mapping=gpu-a40,pcie=1,x-vga=1",
		"hostpci1":  "0000:41:00.0,pcie=1",
		"usb0":      "host=0951:1666,usb3=1",
		"usb1":      "mapping=yubikey",
		"unused0":   "ceph:vm-101-disk-4",
		"ciuser":    "dbadmin", "ipconfig0": "ip=10.30.0.11/24,gw=10.30.0.1",
		"agent": "1", "tags": "db;prod", "protection": "1",
		"smbios1":     "uuid=7a1c2e3f-4b5d-4e6f-8a9b-0c1d2e3f4a52",
		"description": "PostgreSQL primary\n",
	})
	app := qemu(DemoAppVMID, "pve3", stateRunning, map[string]string{
		"name": "app-01", "ostype": "l26", "memory": "8192", "cores": "4", "sockets": "1", "cpu": "x86-64-v3",
		"scsihw": "virtio-scsi-single",
		"scsi0":  "ceph:vm-102-disk-0,iothread=1,size=40G",
		"boot":   "order=scsi0;net0",
		"net0":   "virtio=BC:24:11:00:03:00,bridge=vmbr0,firewall=1,tag=10",
		"agent":  "1", "tags": "app",
	})
	app.snapshots["pre-upgrade"] = &snapshot{name: "pre-upgrade", description: "before the 2.0 upgrade", snaptime: base + 5*86400, vmstate: true, config: cloneMap(app.config)}
	app.parent = "pre-upgrade"
	dup1 := qemu(DemoDupStopped, "pve1", stateStopped, map[string]string{
		"name": "dup", "ostype": "l26", "memory": "1024", "cores": "1", "sockets": "1",
		"scsi0": "local-lvm:vm-103-disk-0,size=8G", "boot": "order=scsi0",
		"net0": "virtio=BC:24:11:00:04:00,bridge=vmbr0",
	})
	dup2 := qemu(DemoDupRunning, "pve3", stateRunning, map[string]string{
		"name": "dup", "ostype": "l26", "memory": "1024", "cores": "1", "sockets": "1",
		"scsi0": "local-lvm:vm-104-disk-0,size=8G", "boot": "order=scsi0",
		"net0": "virtio=BC:24:11:00:05:00,bridge=vmbr0",
	})
	paused := qemu(DemoPausedVMID, "pve2", "paused", map[string]string{
		"name": "batch-01", "ostype": "l26", "memory": "2048", "cores": "2", "sockets": "1",
		"virtio0": "local-lvm:vm-105-disk-0,size=16G", "bootdisk": "virtio0",
		"net0": "virtio=BC:24:11:00:06:00,bridge=vmbr1,tag=50",
	})
	tmpl := qemu(DemoTemplateVMID, "pve1", stateStopped, map[string]string{
		"name": "ubuntu-template", "template": "1", "ostype": "l26", "memory": "2048", "cores": "2", "sockets": "1",
		"cpu":         "x86-64-v2-AES",
		"scsihw":      "virtio-scsi-single",
		"scsi0":       "local-lvm:base-9000-disk-0,iothread=1,size=3584M",
		"ide2":        "local-lvm:vm-9000-cloudinit,media=cdrom",
		"boot":        "order=scsi0",
		"net0":        "virtio=BC:24:11:00:90:00,bridge=vmbr0",
		"serial0":     "socket",
		"vga":         "serial0",
		"agent":       "1",
		"ciuser":      "ubuntu",
		"ipconfig0":   "ip=dhcp",
		"description": "Ubuntu 24.04 cloud image\n",
	})
	shared := qemu(DemoSharedTemplateVMID, "pve1", stateStopped, map[string]string{
		"name": "ubuntu-template-shared", "template": "1", "ostype": "l26", "memory": "2048", "cores": "2", "sockets": "1",
		"cpu":         "x86-64-v2-AES",
		"scsihw":      "virtio-scsi-single",
		"scsi0":       "ceph:base-8000-disk-0,iothread=1,size=3584M",
		"ide2":        "ceph:vm-8000-cloudinit,media=cdrom",
		"boot":        "order=scsi0",
		"net0":        "virtio=BC:24:11:00:80:00,bridge=vmbr0",
		"serial0":     "socket",
		"vga":         "serial0",
		"agent":       "1",
		"ciuser":      "ubuntu",
		"ipconfig0":   "ip=dhcp",
		"description": "Ubuntu 24.04 cloud image on shared storage\n",
	})
	return []*guest{web, db, app, dup1, dup2, paused, tmpl, shared, lxc(DemoCT1, "pve1", true), lxc(DemoCT2, "pve2", false), lxc(DemoCT3, "pve3", true)}
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
