package simpve

import (
	"fmt"
	"net/http"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// Privileges of the provisioning methods.
const (
	privClone      = "VM.Clone"
	privConfigDisk = "VM.Config.Disk"
	privConfig     = "VM.Config.Options"
)

// provisionEndpoints are the methods of clones, disk moves, configuration updates and
// resizes (QEMU only), modelled on qemu-server: checks PVE makes before forking answer 500
// with its texts, the rest runs as qmclone / qmmove / qmconfig / resize tasks whose
// effects apply when they end. Deliberate simplifications: volumes are names in the
// configuration only (no per-storage volume list, no capacity, no content-type check);
// a bridge the node lacks fails the qmconfig task ("bridge 'vmbrX' does not exist"), where
// PVE reports it when the NIC is plugged (hotplug or start); every node has vmbr0 and vmbr1;
// a second Cloud-Init drive is not refused; pending changes are not modelled (updates of a
// running VM apply at once).
func (s *Server) provisionEndpoints() map[string]endpoint {
	base := "/nodes/{node}/qemu/{vmid}"
	add := func(priv string, fn func(c *call, g *guest) answer) endpoint {
		return endpoint{perm: vmPerm(priv), fn: s.guestHandler(proxmox.GuestQEMU, fn)}
	}
	return map[string]endpoint{
		"POST " + base + "/clone":     add(privClone, s.cloneVM),
		"POST " + base + "/move_disk": add(privConfigDisk, s.moveDisk),
		"POST " + base + "/config":    add(privConfig, s.updateConfig),
		"PUT " + base + "/resize":     add(privConfigDisk, s.resizeDisk),
	}
}

// checkLock is qemu-server's check_lock plus the guest's flock: a config lock → "VM is
// locked (clone)", a running task holding the lock → the flock timeout.
func checkLock(g *guest) (answer, bool) {
	if g.lock != "" {
		return fail(http.StatusInternalServerError, fmt.Sprintf("VM is locked (%s)", g.lock)), false
	}
	if g.task != "" {
		return g.lockTimeout(), false
	}
	return answer{}, true
}
