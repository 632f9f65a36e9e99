package simpve

import (
	"fmt"
	"net/http"
)

// configuredDrive makes the checks qemu-server's move_vm_disk and resize_vm share before
// their worker, in their order: g is not locked (else checkLock's answer), g.config holds
// disk (else 500 "disk 'X' does not exist") and the drive has a volume (else 500 "disk 'X'
// has no associated volume"; with noneIsNoVolume a file "none" counts as no volume too).
// It returns the parsed drive and true, or the failure answer and false.
func configuredDrive(g *guest, disk string, noneIsNoVolume bool) (drive, answer, bool) {
	if a, free := checkLock(g); !free {
		return drive{}, a, false
	}
	value, found := g.config[disk]
	if !found {
		return drive{}, fail(http.StatusInternalServerError, fmt.Sprintf("disk '%s' does not exist", disk)), false
	}
	d := parseDrive(value)
	if d.file == "" || (noneIsNoVolume && d.file == "none") {
		return drive{}, fail(http.StatusInternalServerError, fmt.Sprintf("disk '%s' has no associated volume", disk)), false
	}
	return d, answer{}, true
}
