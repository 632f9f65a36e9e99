package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/proxbus/proxbus/events"
)

// pveKept is how many of Proxmox's own events the console keeps, the newest.
const pveKept = 200

// PVEEvent is one of Proxmox's own events (contract §3a) as the Proxmox page lists it.
type PVEEvent struct {
	At       time.Time
	Endpoint int64
	Kind     string // events.PVEKind…
	// Subject is what it is about: a task's type and vmid, a guest's vmid and name, a
	// notification's title; What what happened: a task's status (its exit status when it
	// failed), a guest's change (from → to), a notification's severity; Who who did it: a
	// task's user and, for proxbus's, its command.
	Subject, What, Who string
	Command            string // the command's id, when proxbus's and the id is its ref
	UPID               string
}

// applyPVE keeps ev when it is one of Proxmox's own events; it reports whether it was.
// ix.mu is held.
func (ix *index) applyPVE(ev events.Received) bool {
	kind, ok := strings.CutPrefix(ev.Type, events.TypePrefix+"pve.")
	if !ok {
		return false
	}
	e := PVEEvent{At: ev.Time, Kind: kind}
	switch kind {
	case events.PVEKindTask:
		var t events.PVETask
		if json.Unmarshal(ev.Data, &t) != nil {
			return true
		}
		e.Endpoint, e.UPID, e.Subject, e.What, e.Who = t.EndpointID, t.UPID, t.Type, t.Status, t.User
		if t.VMID != 0 {
			e.Subject += fmt.Sprintf(" %d", t.VMID)
		}
		if t.Status == events.PVETaskError {
			e.What += ": " + t.ExitStatus
		}
		switch {
		case t.CommandID == "":
		case events.Ref("", t.CommandID) == t.CommandID: // its page is at its id
			e.Command = t.CommandID
		default:
			e.Who += " for " + t.CommandID
		}
	case events.PVEKindGuest:
		var g events.PVEGuest
		if json.Unmarshal(ev.Data, &g) != nil {
			return true
		}
		e.Endpoint, e.Subject, e.What = g.EndpointID, fmt.Sprintf("%d %s", g.VMID, g.Name), g.Change
		if g.From != "" || g.To != "" {
			e.What += " " + g.From + " → " + g.To
		}
	case events.PVEKindNotification:
		var n events.PVENotification
		if json.Unmarshal(ev.Data, &n) != nil {
			return true
		}
		e.Endpoint, e.Subject, e.What = n.EndpointID, n.Title, n.Severity
	default:
		return true
	}
	ix.pve = append(ix.pve, e)
	if len(ix.pve) > pveKept {
		ix.pve = ix.pve[len(ix.pve)-pveKept:]
	}
	return true
}

// PVEEvents are the kept events of Proxmox, the newest first.
func (ix *index) PVEEvents() []PVEEvent {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]PVEEvent, len(ix.pve))
	for i, e := range ix.pve {
		out[len(ix.pve)-1-i] = e
	}
	return out
}

// proxmoxPage lists the latest of Proxmox's own events.
func (c *Console) proxmoxPage(w http.ResponseWriter, r *http.Request, s session) {
	c.render(w, http.StatusOK, "proxmox", c.view(s, "proxmox", "Proxmox", c.ix.PVEEvents()))
}
