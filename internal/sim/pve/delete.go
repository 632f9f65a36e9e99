package simpve

import (
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// privVMAllocate is the privilege PVE's destroy_vm checks on /vms/{vmid}.
const privVMAllocate = "VM.Allocate"

// destroyedLock is the configuration lock PVE's worker leaves on the guest while it removes
// it ("lock: destroyed"), until the configuration file itself is gone.
const destroyedLock = "destroyed"

// lxcVolumeKeyRe matches the container keys that hold volumes (rootfs, mpN, unusedN).
var lxcVolumeKeyRe = regexp.MustCompile(`^(?:rootfs|mp\d+|unused\d+)$`)

// deleteGuest is DELETE /nodes/{node}/{qemu|lxc}/{vmid}, qemu-server's and pve-container's
// destroy_vm. The checks PVE makes before it forks the worker answer 500 at once, with PVE's
// texts and in its order: protection ("can't remove VM 100 - protection mode enabled"), then
// a running guest ("VM 100 is running - destroy failed", "unable to destroy CT 200 -
// container is running"; a paused VM runs). The worker (qmdestroy, vzdestroy) holds the
// guest, shown with lock "destroyed", while it runs; it fails when the guest is a template
// whose base volume a linked clone still uses. When it ends, the guest is gone from its node
// and from /cluster/resources, and so are the volumes it owned (its configuration referenced
// them; the simulator holds no others, so destroy-unreferenced-disks finds nothing more).
// purge would remove the vmid from backup jobs, replication and HA, which the simulator does
// not model; its worker says so in its log, as PVE's does.
func (s *Server) deleteGuest(c *call, g *guest) answer {
	purge := flag(c, "purge")
	kind := "VM"
	if g.typ == proxmox.GuestLXC {
		kind = "CT"
	}
	if on, _ := parseBool(g.config["protection"]); on {
		return fail(http.StatusInternalServerError, fmt.Sprintf("can't remove %s %d - protection mode enabled", kind, g.vmid))
	}
	if g.status == stateRunning {
		if g.typ == proxmox.GuestLXC {
			return fail(http.StatusInternalServerError, fmt.Sprintf("unable to destroy CT %d - container is running", g.vmid))
		}
		return fail(http.StatusInternalServerError, fmt.Sprintf("VM %d is running - destroy failed", g.vmid))
	}
	if g.task != "" {
		return g.lockTimeout()
	}
	vols := ownedVolumes(g)
	failure := ""
	if g.template() {
		failure = s.baseVolumeInUse(g, vols)
	}
	typ := "qmdestroy"
	if g.typ == proxmox.GuestLXC {
		typ = "vzdestroy"
	}
	lines := s.destroyLog(g, kind, vols, purge)
	return s.startLoggedTask(c, g, typ, destroyedLock, failure, func(time.Time) {
		if s.state.guests[g.vmid] == g {
			delete(s.state.guests, g.vmid)
			delete(s.state.ciPasswords, g.vmid)
		}
	}, func(frac float64) []string {
		// the volumes go one after the other, the purge note comes last
		n := min(len(lines), int(frac*float64(len(lines))))
		return slices.Clone(lines[:n])
	})
}

// ownedVolumes returns the volumes g's configuration references that g owns (named for its
// vmid: vm-<vmid>-…, base-<vmid>-…, a linked clone's own part after the base's "/"), in key
// order (a container's rootfs first): QEMU disks, Cloud-Init drives and unusedN (not CD-ROMs), a container's rootfs, mount
// point volumes and unusedN. These are what PVE's destroy frees.
func ownedVolumes(g *guest) []string {
	var out []string
	keys := slices.Sorted(maps.Keys(g.config))
	if g.typ == proxmox.GuestLXC { // pve-container's order: rootfs, then the mount points
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == "rootfs" })
		if _, has := g.config["rootfs"]; has {
			keys = append([]string{"rootfs"}, keys...)
		}
	}
	for _, k := range keys {
		var file string
		switch {
		case g.typ == proxmox.GuestLXC && lxcVolumeKeyRe.MatchString(k):
			file = parseDrive(g.config[k]).file
		case g.typ == proxmox.GuestQEMU && (diskKeyRe.MatchString(k) || unusedKeyRe.MatchString(k)):
			d := parseDrive(g.config[k])
			if d.cdrom(false) {
				continue
			}
			file = d.file
		default:
			continue
		}
		if volumeOwner(file) == g.vmid && !slices.Contains(out, file) {
			out = append(out, file)
		}
	}
	return out
}

// volumeOwnerRe reads the owner vmid of a volume name (vm-100-disk-0, base-9000-disk-0,
// 100/vm-100-disk-0.qcow2, vm-100-cloudinit), after any linked-clone base part.
var volumeOwnerRe = regexp.MustCompile(`(?:^|/)(?:vm|base)-(\d+)-[^/]*$`)

// volumeOwner is the vmid that owns volid ("storage:name"), 0 when none (a path, "none").
func volumeOwner(volid string) int64 {
	sid, name, found := strings.Cut(volid, ":")
	if !found || sid == "" || strings.HasPrefix(volid, "/") {
		return 0
	}
	m := volumeOwnerRe.FindStringSubmatch(name)
	if m == nil {
		return 0
	}
	vmid, _ := strconv.ParseInt(m[1], 10, 64)
	return vmid
}

// baseVolumeInUse is qemu-server's check before destroying a template: the exit status
// "base volume '…' is still in use by linked cloned" when another guest's configuration uses
// one of the template's volumes as its base, else "". Server.mu is held.
func (s *Server) baseVolumeInUse(g *guest, vols []string) string {
	for _, vmid := range s.state.guestIDs() {
		other := s.state.guests[vmid]
		if other == g {
			continue
		}
		for _, v := range other.config {
			file := parseDrive(v).file
			for _, base := range vols {
				if strings.HasPrefix(file, base+"/") {
					return fmt.Sprintf("base volume '%s' is still in use by linked cloned", base)
				}
			}
		}
	}
	return ""
}

// destroyLog is the worker's log as PVE writes it: a line per freed volume where its storage
// type prints one (LVM's lvremove, RBD's progress; file storages unlink silently), then the
// purge note. Server.mu is held.
func (s *Server) destroyLog(g *guest, kind string, vols []string, purge bool) []string {
	var lines []string
	for _, v := range vols {
		sid, name, _ := strings.Cut(v, ":")
		switch s.state.storages[sid]["type"] {
		case "lvmthin", "lvm":
			lines = append(lines, fmt.Sprintf("  Logical volume \"%s\" successfully removed.", name))
		case "rbd":
			lines = append(lines, "Removing image: 100% complete...done.")
		}
	}
	if purge {
		lines = append(lines, fmt.Sprintf("purging %s %d from related configurations..", kind, g.vmid))
	}
	return lines
}
