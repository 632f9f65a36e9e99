package proxmox

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// ErrInvalidUPID: a string is not a Proxmox task id (UPID).
var ErrInvalidUPID = errors.New("proxmox: invalid UPID")

// UPID is a Proxmox task id, "UPID:node:PID:PSTART:STARTTIME:type:id:user:", e.g.
// "UPID:pve1:0000ABCD:00123456:6745A0B1:qmstart:100:proxbus@pve!demo:". PID, PStart and
// StartTime are hexadecimal on the wire.
type UPID struct {
	Node      string    // node that runs the task
	PID       int64     // worker process id
	PStart    int64     // process start time in clock ticks since boot
	StartTime time.Time // task start (second precision, UTC)
	Type      string    // worker type, e.g. "qmstart", "vzsnapshot"
	ID        string    // worker id, usually the vmid; may be empty
	User      string    // user or token that started it, e.g. "proxbus@pve!demo"
}

// upidRe is PVE's UPID pattern (PVE::Tools::upid_decode).
var upidRe = regexp.MustCompile(`^UPID:([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?):([0-9A-Fa-f]{8}):([0-9A-Fa-f]{8,9}):([0-9A-Fa-f]{8}):([^:\s]+):([^:\s]*):([^:\s]+):$`)

// ParseUPID decodes s. It fails with an error wrapping [ErrInvalidUPID] when s does not
// have PVE's UPID format.
func ParseUPID(s string) (UPID, error) {
	m := upidRe.FindStringSubmatch(s)
	if m == nil {
		return UPID{}, fmt.Errorf("%w: %q", ErrInvalidUPID, s)
	}
	pid, err1 := strconv.ParseInt(m[3], 16, 64)
	pstart, err2 := strconv.ParseInt(m[4], 16, 64)
	start, err3 := strconv.ParseInt(m[5], 16, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return UPID{}, fmt.Errorf("%w: %q: %w", ErrInvalidUPID, s, err)
	}
	return UPID{Node: m[1], PID: pid, PStart: pstart, StartTime: time.Unix(start, 0).UTC(), Type: m[6], ID: m[7], User: m[8]}, nil
}

// String formats u as PVE does: eight upper-case hex digits for PID, PStart and StartTime
// (more when a value needs them). ParseUPID(u.String()) returns u for any u with a valid
// node, type and user and non-negative numbers.
func (u UPID) String() string {
	return fmt.Sprintf("UPID:%s:%08X:%08X:%08X:%s:%s:%s:", u.Node, u.PID, u.PStart, u.StartTime.Unix(), u.Type, u.ID, u.User)
}
