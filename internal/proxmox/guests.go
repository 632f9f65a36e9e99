package proxmox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// GuestType is the kind of a guest: a QEMU virtual machine or an LXC container.
type GuestType string

// Guest types, as PVE names them in paths and in /cluster/resources.
const (
	GuestQEMU GuestType = "qemu"
	GuestLXC  GuestType = "lxc"
)

// Guest statuses reported in [Guest.Status] and [GuestSummary.Status]. PVE may also report
// "unknown" (the guest's node is offline).
const (
	StatusRunning = "running"
	StatusStopped = "stopped"
	StatusPaused  = "paused" // QEMU only: the process runs, the VM is paused (qmpstatus)
)

// Guest is one QEMU VM or LXC container as found by [Client.LocateGuest] or
// [Client.ResolveGuest].
type Guest struct {
	VMID     int64
	Name     string
	Node     string    // node the guest is on
	Type     GuestType // GuestQEMU or GuestLXC
	Status   string    // running, stopped, paused (QEMU qmpstatus, ResolveGuest only) or unknown
	Template bool
}

// Guest errors; they are returned wrapped, match them with errors.Is.
var (
	// ErrVMNotFound: no VM or container has that vmid or name (or it vanished from its node).
	ErrVMNotFound = errors.New("proxmox: vm not found")
	// ErrVMAmbiguous: a name matches several guests; address it by vmid.
	ErrVMAmbiguous = errors.New("proxmox: vm name is ambiguous")
	// ErrVMNotRunning: the operation needs a running guest (reboot, suspend, resume).
	ErrVMNotRunning = errors.New("proxmox: vm not running")
	// ErrUnsupportedForContainer: the operation exists only for QEMU VMs (suspend).
	ErrUnsupportedForContainer = errors.New("proxmox: unsupported for containers")
	// ErrReservedSnapshotName: PVE's pseudo-snapshot "current" cannot be created, deleted
	// or rolled back to.
	ErrReservedSnapshotName = errors.New("proxmox: snapshot name is reserved")
)

// basePath is the guest's API path, "/nodes/pve1/qemu/100".
func (g Guest) basePath() string {
	return "/nodes/" + url.PathEscape(g.Node) + "/" + string(g.Type) + "/" + strconv.FormatInt(g.VMID, 10)
}

// check refuses guests that cannot be addressed (no request is made for them).
func (g Guest) check() error {
	if g.VMID <= 0 || g.Node == "" || (g.Type != GuestQEMU && g.Type != GuestLXC) {
		return fmt.Errorf("%w: incomplete guest (vmid %d, node %q, type %q)", ErrVMNotFound, g.VMID, g.Node, g.Type)
	}
	return nil
}

// ResolveGuest finds a QEMU VM or LXC container as [Client.LocateGuest] does and, for a
// running QEMU VM, also reads GET .../status/current, so that its Status is the node's live
// one: "paused" for a paused VM, "stopped" for one stopped since /cluster/resources last
// heard of it. Errors: those of LocateGuest, or the status read's.
func (c *Client) ResolveGuest(ctx context.Context, ref string) (Guest, error) {
	g, err := c.LocateGuest(ctx, ref)
	if err != nil {
		return Guest{}, err
	}
	if g.Type == GuestQEMU && g.Status == StatusRunning {
		st, err := c.guestStatus(ctx, g)
		if err != nil {
			return Guest{}, err
		}
		g.Status = st
	}
	return g, nil
}

// LocateGuest finds a QEMU VM or LXC container through one GET /cluster/resources?type=vm.
// ref is a vmid when it is all digits ("100"), else a guest name (exact match). Status is
// the one /cluster/resources reports: a paused VM is "running" there, and the status may lag
// the node's by the status daemon's interval; use [Client.ResolveGuest] where the live status
// matters. Errors: no match → [ErrVMNotFound]; a name matching several guests →
// [ErrVMAmbiguous]; both as a *[GuestLookupError] saying where it looked and what matched;
// otherwise the request's error (see the package doc).
func (c *Client) LocateGuest(ctx context.Context, ref string) (Guest, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return Guest{}, fmt.Errorf("%w: empty reference", ErrVMNotFound)
	}
	if ctx.Value(provisionalKey{}) != nil {
		if _, res := c.resources.newestVM(); res != nil {
			if g, err := guestIn(res, ref); err == nil {
				return g, nil
			}
		}
		return Guest{}, errProvisional
	}
	res, err := c.ClusterResources(ctx, ResourceVM)
	if err != nil {
		return Guest{}, err
	}
	return guestIn(res, ref)
}

// provisionalKey marks a context of [WithProvisionalLocate].
type provisionalKey struct{}

// errProvisional is the failure of any request under a [WithProvisionalLocate] context, and
// of a locate there that the newest read cannot answer.
var errProvisional = errors.New("proxmox: a provisional locate sends no request")

// WithProvisionalLocate returns a context under which the client sends no request:
// [Client.LocateGuest] (and so ResolveGuest) answers from the client's newest read of the
// guests, however old, when the guest is found there, and everything else fails (with an
// error of its own, not one of the package doc's). It is for a caller that locates the guest
// again, without it, before it acts on what it found, which may be out of date, and that does
// its work again without it when it fails.
func WithProvisionalLocate(ctx context.Context) context.Context {
	return context.WithValue(ctx, provisionalKey{}, true)
}

// guestIn finds the guest ref (a vmid or a name) in res, a read of the guests.
func guestIn(res []ClusterResource, ref string) (Guest, error) {
	vmid, numErr := strconv.ParseInt(ref, 10, 64)
	byID := numErr == nil && isDigits(ref)
	var found []Guest
	for _, r := range res {
		if r.Type != string(GuestQEMU) && r.Type != string(GuestLXC) {
			continue
		}
		if (byID && r.VMID == vmid) || (!byID && r.Name == ref) {
			found = append(found, Guest{VMID: r.VMID, Name: r.Name, Node: r.Node, Type: GuestType(r.Type), Status: r.Status, Template: r.Template})
		}
	}
	if len(found) != 1 {
		return Guest{}, lookupError(ref, byID, res, found)
	}
	return found[0], nil
}

// GuestLookupError is a [Client.LocateGuest] (or ResolveGuest) that found no guest or
// several. It says where the lookup looked (the endpoint's /cluster/resources, by vmid or by
// exact name, and the nodes that listed guests there) and, when ambiguous, the candidates
// ordered by vmid. errors.Is matches it with [ErrVMAmbiguous] when it has candidates, else
// [ErrVMNotFound]. It carries names, vmids and node names only, never a credential.
type GuestLookupError struct {
	Ref        string   // the reference as given (trimmed)
	ByVMID     bool     // ref was read as a vmid; else as an exact guest name
	Guests     int      // how many VMs and containers the cluster resources listed
	Nodes      []string // the nodes those guests are on, sorted
	Candidates []Guest  // the guests a name matched when there were several
}

func (e *GuestLookupError) Error() string {
	what := fmt.Sprintf("name %q", e.Ref)
	if e.ByVMID {
		what = "vmid " + e.Ref
	}
	if len(e.Candidates) > 1 {
		ids := make([]string, len(e.Candidates))
		for i, g := range e.Candidates {
			ids[i] = strconv.FormatInt(g.VMID, 10)
		}
		return fmt.Sprintf("%v: %s matches vmids %s", ErrVMAmbiguous, what, strings.Join(ids, ", "))
	}
	return fmt.Sprintf("%v: %s among %d guests on nodes [%s] in /cluster/resources", ErrVMNotFound, what, e.Guests, strings.Join(e.Nodes, ", "))
}

// Is matches ErrVMAmbiguous (several candidates) or ErrVMNotFound (none).
func (e *GuestLookupError) Is(target error) bool {
	if len(e.Candidates) > 1 {
		return target == ErrVMAmbiguous
	}
	return target == ErrVMNotFound
}

// lookupError describes a lookup of ref over res that matched found (zero or several).
func lookupError(ref string, byID bool, res []ClusterResource, found []Guest) *GuestLookupError {
	e := &GuestLookupError{Ref: ref, ByVMID: byID}
	nodes := map[string]bool{}
	for _, r := range res {
		if r.Type == string(GuestQEMU) || r.Type == string(GuestLXC) {
			e.Guests++
			if r.Node != "" {
				nodes[r.Node] = true
			}
		}
	}
	e.Nodes = slices.Sorted(maps.Keys(nodes))
	if len(found) > 1 {
		e.Candidates = slices.SortedFunc(slices.Values(found), func(a, b Guest) int { return cmp.Compare(a.VMID, b.VMID) })
	}
	return e
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// guestStatus reads GET .../status/current: "running", "stopped" or (QEMU) "paused".
// A guest whose configuration is not on its node → ErrVMNotFound (wrapping the *APIError).
func (c *Client) guestStatus(ctx context.Context, g Guest) (string, error) {
	if err := g.check(); err != nil {
		return "", err
	}
	r := request{method: http.MethodGet, path: g.basePath() + "/status/current"}
	var m flatMap
	if err := c.do(ctx, r, &m); err != nil {
		if errors.Is(err, ErrNotFound) {
			return "", fmt.Errorf("%w: %s %d on %s: %w", ErrVMNotFound, g.Type, g.VMID, g.Node, err)
		}
		return "", err
	}
	st := m["status"]
	if g.Type == GuestQEMU && st == StatusRunning && m["qmpstatus"] == StatusPaused {
		st = StatusPaused
	}
	return st, nil
}
