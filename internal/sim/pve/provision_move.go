package simpve

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// moveDisk is POST /nodes/{node}/qemu/{vmid}/move_disk with storage (qemu-server
// move_vm_disk): the checks before the worker answer 500 ("disk 'x' does not exist", "you
// can't move a cdrom", "you can't move to the same storage with same format", locks); a
// qmmove task then points the disk at a new volume on the storage and, unless delete=1,
// keeps the old volume as the first free unusedN. The worker fails (nothing changes) when
// the storage is missing, disabled, not on the node or not online ("storage migration
// failed: …"), or with a FailMove / FailTask status.
func (s *Server) moveDisk(c *call, g *guest) answer {
	p := c.params
	disk, storage := p.Get("disk"), p.Get("storage")
	errs := map[string]string{}
	if !p.Has("disk") {
		errs["disk"] = "property is missing and it is not optional"
	} else if !diskKeyRe.MatchString(disk) && !unusedKeyRe.MatchString(disk) {
		errs["disk"] = fmt.Sprintf("value '%s' does not have a value in the enumeration", disk)
	}
	del := false
	if p.Has("delete") {
		b, valid := parseBool(p.Get("delete"))
		if !valid {
			errs["delete"] = fmt.Sprintf("type check ('boolean') failed - got '%s'", p.Get("delete"))
		}
		del = b
	}
	if p.Has("storage") {
		if msg := checkStorageID(storage); msg != "" {
			errs["storage"] = msg
		}
	}
	if len(errs) > 0 {
		return paramFail(errs)
	}
	if !p.Has("storage") {
		msg := "both 'storage' and 'target-vmid' missing, either needs to be set"
		return paramFail(map[string]string{"storage": msg, "target-vmid": msg})
	}
	if unusedKeyRe.MatchString(disk) {
		return fail(http.StatusInternalServerError, fmt.Sprintf("cannot move disk '%s', only configured disks can be moved to another storage", disk))
	}
	d, a, ok := configuredDrive(g, disk, false)
	if !ok {
		return a
	}
	if d.cdrom(false) {
		return fail(http.StatusInternalServerError, "you can't move a cdrom")
	}
	if d.storage() == storage {
		return fail(http.StatusInternalServerError, "you can't move to the same storage with same format")
	}
	failure := s.state.takeMoveFault(g.vmid, disk)
	if msg := s.state.storageUsable(storage, g.node); msg != "" && failure == "" {
		failure = "storage migration failed: " + msg
	}
	old := d.file
	effect := func(time.Time) {
		_, volname, _ := strings.Cut(old, ":")
		if d.cloudinit() {
			d.file = s.state.cloudinitVolume(storage, g.vmid)
		} else {
			d.file = s.state.newVolume(g.config, storage, g.vmid, volFormat(volname))
		}
		g.config[disk] = d.String()
		if !del {
			addUnused(g.config, old)
		}
	}
	return s.startTask(c, g, "qmmove", "", failure, effect)
}
