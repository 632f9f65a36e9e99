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
	del := flag(c, "delete") // the schema checked disk, storage and delete
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
	var log func(float64) []string
	if failure == "" {
		log = s.moveLog(g, disk, old, d)
	}
	return s.startLoggedTask(c, g, "qmmove", "", failure, effect, log)
}

// moveLogSteps is how many progress lines a simulated disk move writes.
const moveLogSteps = 20

// moveLog is a qmmove task's log as qemu-server writes it: "create full clone of drive …",
// then for a stopped VM qemu-img convert's "transferred 1.0 GiB of 32.0 GiB (3.12%)" lines
// (PVE::QemuServer::QemuImage), for a running one the drive mirror's "drive-scsi0:
// transferred … (3.12%) in 10s" lines and its completion (PVE::QemuServer::BlockJob).
func (s *Server) moveLog(g *guest, disk, volid string, d drive) func(float64) []string {
	size, _ := diskBytes(d)
	head := []string{fmt.Sprintf("create full clone of drive %s (%s)", disk, volid)}
	at := func(i int) (int64, float64) {
		return size * int64(i) / moveLogSteps, 100 * float64(i) / moveLogSteps
	}
	convert := func(i int) string {
		done, pct := at(i)
		return fmt.Sprintf("transferred %s of %s (%.2f%%)", taskLogBytes(done), taskLogBytes(size), pct)
	}
	if g.status != stateRunning {
		return progressLog(append(head, convert(0)), moveLogSteps, convert, nil)
	}
	run, job := s.taskDur, "drive-"+disk
	mirror := func(i int) string {
		done, pct := at(i)
		line := fmt.Sprintf("%s: transferred %s of %s (%.2f%%) in %s", job, taskLogBytes(done), taskLogBytes(size), pct, taskLogDuration(run*time.Duration(i)/moveLogSteps))
		if i == moveLogSteps {
			line += ", ready"
		}
		return line
	}
	return progressLog(append(head, "drive mirror is starting for "+job, mirror(0)), moveLogSteps, mirror,
		[]string{"all 'mirror' jobs are ready", job + ": Completing block job...", job + ": Completed successfully.", job + ": mirror-job finished"})
}
