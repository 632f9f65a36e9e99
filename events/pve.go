package events

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/internal/redact"
)

// Kinds of Proxmox's own events (contract §3a): the last token of their subject and of their
// type, proxbus.pve.<kind>.
const (
	PVEKindTask         = "task"
	PVEKindGuest        = "guest"
	PVEKindNotification = "notification"
)

// Statuses of a [PVETask].
const (
	PVETaskRunning = "running"
	PVETaskOK      = "ok"
	PVETaskError   = "error"
)

// PVETask is the data of a task event (type proxbus.pve.task), published at a Proxmox task's
// start (Status running) and at its end (ok or error, with ExitStatus and EndedAt), whoever
// started it. ByProxbus says proxbus's token started it, CommandID which command did, when
// the publishing replica knows it.
type PVETask struct {
	EndpointID int64      `json:"endpoint_id"`
	Node       string     `json:"node"`
	UPID       string     `json:"upid"`
	Type       string     `json:"type"`
	VMID       int64      `json:"vmid,omitempty"`
	User       string     `json:"user"`
	Status     string     `json:"status"`
	ExitStatus string     `json:"exit_status,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
	ByProxbus  bool       `json:"by_proxbus"`
	CommandID  string     `json:"command_id,omitempty"`
}

// PVEGuest is the data of a guest event (type proxbus.pve.guest): a guest was created,
// removed, started, stopped, paused, resumed, migrated (From and To are nodes) or renamed
// (From and To are names), as seen by the watch at At.
type PVEGuest struct {
	EndpointID int64     `json:"endpoint_id"`
	VMID       int64     `json:"vmid"`
	Name       string    `json:"name"`
	Node       string    `json:"node"`
	Type       string    `json:"type"`
	Change     string    `json:"change"`
	From       string    `json:"from,omitempty"`
	To         string    `json:"to,omitempty"`
	At         time.Time `json:"at"`
	// Key makes the event's id: the UPID of the task that made the change, else "" (the id
	// then carries At to the 10 s). It is not part of the data.
	Key string `json:"-"`
}

// PVENotification is the data of a notification event (type proxbus.pve.notification): one
// Proxmox VE notification (a backup job, replication, fencing, package updates) its webhook
// target sent. Body is the request's body as received: it only makes the event's id.
type PVENotification struct {
	EndpointID int64          `json:"endpoint_id"`
	Severity   string         `json:"severity"`
	Title      string         `json:"title"`
	Message    string         `json:"message"`
	Fields     map[string]any `json:"fields"`
	Body       []byte         `json:"-"`
}

// PVEPayload is the data of one of Proxmox's own events: a [PVETask], [PVEGuest] or
// [PVENotification]. No other type implements it.
type PVEPayload interface{ pveKind() string }

func (PVETask) pveKind() string         { return PVEKindTask }
func (PVEGuest) pveKind() string        { return PVEKindGuest }
func (PVENotification) pveKind() string { return PVEKindNotification }

// PVE is the subject of endpoint's events of kind, "proxbus.evt.pve.<endpoint id>.<kind>".
func (s Subjects) PVE(endpoint int64, kind string) string {
	return s.prefix() + ".evt.pve." + strconv.FormatInt(endpoint, 10) + "." + kind
}

// PVEFilter matches Proxmox's own events of every endpoint, "proxbus.evt.pve.>".
func (s Subjects) PVEFilter() string { return s.prefix() + ".evt.pve.>" }

// PVEEvent builds the event of p, with an id every replica derives alike, so the stream keeps
// one however many publish it:
//   - a task's "pve.<endpoint>.task.<UPID>.start" or ".end";
//   - a guest change's "pve.<endpoint>.guest.<vmid>.<change>.<UPID>", or, when no task made
//     it, ".<unix time of At to the 10 s>.<from>.<to>": replicas that see it in the same 10 s
//     publish it once;
//   - a notification's "pve.<endpoint>.notification.<first 32 hex digits of sha256(Body)>".
//
// Free text (exit status, title, message) is passed through [redact.Text].
func (e Emitter) PVEEvent(p PVEPayload) (*nats.Msg, error) {
	var ep int64
	var id string
	var at time.Time
	switch p := p.(type) {
	case PVETask:
		ep, at = p.EndpointID, p.StartedAt
		p.ExitStatus = redact.Text(p.ExitStatus)
		id = fmt.Sprintf("pve.%d.task.%s.start", ep, p.UPID)
		if p.Status != PVETaskRunning {
			id = fmt.Sprintf("pve.%d.task.%s.end", ep, p.UPID)
			if p.EndedAt != nil {
				at = *p.EndedAt
			}
		}
		return e.pveMsg(ep, id, PVEKindTask, at, p)
	case PVEGuest:
		ep, at = p.EndpointID, p.At
		id = fmt.Sprintf("pve.%d.guest.%d.%s.%s", ep, p.VMID, p.Change, p.Key)
		if p.Key == "" {
			id = fmt.Sprintf("pve.%d.guest.%d.%s.%d.%s.%s", ep, p.VMID, p.Change, p.At.Unix()/10*10, p.From, p.To)
		}
		return e.pveMsg(ep, id, PVEKindGuest, at, p)
	case PVENotification:
		sum := sha256.Sum256(p.Body)
		p.Title, p.Message = redact.Text(p.Title), redact.Text(p.Message)
		id = fmt.Sprintf("pve.%d.notification.%s", p.EndpointID, hex.EncodeToString(sum[:])[:32])
		return e.pveMsg(p.EndpointID, id, PVEKindNotification, e.now(), p)
	}
	return nil, fmt.Errorf("%w: %T is not a Proxmox event", ErrEncode, p)
}

// pveMsg builds one of Proxmox's own events.
func (e Emitter) pveMsg(endpoint int64, id, kind string, at time.Time, data any) (*nats.Msg, error) {
	if at.IsZero() {
		at = e.now()
	}
	return e.build(Origin{ID: id}, id, TypePrefix+"pve."+kind, e.Subjects.PVE(endpoint, kind), at.UTC(), data)
}
