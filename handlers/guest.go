package handlers

import (
	"context"
	"regexp"
	"strconv"

	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

// GuestRef is the `vm` field every guest verb takes: a name or a vmid (string or number),
// resolved to the guest by Locate. Its JSON form (the request fingerprint) is the vmid once
// resolved, so a name and the vmid it names are the same request.
type GuestRef struct {
	VM    string        `json:"vm"`
	guest proxmox.Guest // set by locateGuest
}

// Guest is the resolved guest (valid after Locate).
func (g GuestRef) Guest() proxmox.Guest { return g.guest }

var guestNamePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,61}[A-Za-z0-9])?$`)

// decodeGuestRef reads `vm`: a vmid (100–999999999, as a number or a numeric string) or a
// guest name.
func decodeGuestRef(f *Fields) GuestRef {
	raw := f.Raw("vm")
	if raw == nil {
		f.Fail("vm")
		return GuestRef{}
	}
	if raw[0] != '"' {
		id := f.Int("vm", true, 0, 100, 999999999)
		return GuestRef{VM: strconv.FormatInt(id, 10)}
	}
	return GuestRef{VM: f.String("vm", true, guestNamePattern.MatchString)}
}

// onGuest completes s as a verb on one guest, the input's GuestRef (ref returns it): the
// guest is the Idempotency-Key's resource, the command holds it alone while it runs, and it
// journals on the guest's NetBox VM. Without a Locate of s's own the guest is resolved through
// the cluster's resources.
func onGuest[In any](s Spec[In], ref func(*In) *GuestRef) Spec[In] {
	if s.Locate == nil {
		s.Locate = func(ctx context.Context, c *proxmox.Client, in In) (In, error) {
			r, err := locateGuest(ctx, c, *ref(&in))
			*ref(&in) = r
			return in, err
		}
	}
	s.Resource = func(in In) string { return ref(&in).VM }
	s.JournalVMID = func(in In) int64 { return ref(&in).guest.VMID }
	s.Exclusive = func(in In) (string, string) { return store.KindGuest, ref(&in).VM }
	return s
}

// locateGuest resolves the reference through one read of the cluster's resources: the
// guest's Status is theirs (a paused VM is "running"), which is all a verb needs before it
// holds the guest; the power operations and vm.delete read the live status themselves once
// they do.
func locateGuest(ctx context.Context, c *proxmox.Client, ref GuestRef) (GuestRef, error) {
	return findGuest(ctx, c.LocateGuest, ref)
}

// resolveGuest is locateGuest that also reads a running VM's live status (paused, or
// stopped since the cluster's resources last heard of it), for a verb that decides from it.
func resolveGuest(ctx context.Context, c *proxmox.Client, ref GuestRef) (GuestRef, error) {
	return findGuest(ctx, c.ResolveGuest, ref)
}

func findGuest(ctx context.Context, find func(context.Context, string) (proxmox.Guest, error), ref GuestRef) (GuestRef, error) {
	g, err := find(ctx, ref.VM)
	if err != nil {
		return ref, err
	}
	return GuestRef{VM: strconv.FormatInt(g.VMID, 10), guest: g}, nil
}

// guestBullets are the journal bullets of every guest verb.
func guestBullets(g proxmox.Guest) []Bullet {
	return []Bullet{{"vmid", strconv.FormatInt(g.VMID, 10)}, {"vm_name", g.Name}, {"node", g.Node}, {"vm_type", string(g.Type)}}
}

// guestOutput is the common part of guest verbs' output.
func guestOutput(g proxmox.Guest, upids []string) map[string]any {
	out := map[string]any{"vmid": strconv.FormatInt(g.VMID, 10), "name": g.Name, "node": g.Node, "type": string(g.Type)}
	if len(upids) > 0 {
		out["upids"] = upids
	}
	return out
}

func lastUPID(upids []string) string {
	if len(upids) == 0 {
		return ""
	}
	return upids[len(upids)-1]
}
