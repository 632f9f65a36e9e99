package events

import (
	"encoding/json"
	"testing"
	"time"
)

// TestPVEEventIDs pins Proxmox's own events (contract §3a): subject, type, and an id (and
// Nats-Msg-Id) that two replicas derive alike from what they saw, so the stream keeps one.
func TestPVEEventIDs(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	end := start.Add(time.Minute)
	upid := "UPID:pve1:0001A2B3:00123456:6745A0B1:qmstart:100:root@pam:"
	tests := []struct {
		name        string
		p           PVEPayload
		id, subject string
	}{
		{"task start", PVETask{EndpointID: 3, UPID: upid, Status: PVETaskRunning, StartedAt: start},
			"pve.3.task." + upid + ".start", "proxbus.evt.pve.3.task"},
		{"task end", PVETask{EndpointID: 3, UPID: upid, Status: PVETaskOK, StartedAt: start, EndedAt: &end},
			"pve.3.task." + upid + ".end", "proxbus.evt.pve.3.task"},
		{"guest change by a task", PVEGuest{EndpointID: 3, VMID: 100, Change: "paused", At: end, Key: upid},
			"pve.3.guest.100.paused." + upid, "proxbus.evt.pve.3.guest"},
		{"guest change seen in the resources", PVEGuest{EndpointID: 3, VMID: 100, Change: "migrated", From: "pve1", To: "pve2", At: end.Add(7 * time.Second)},
			"pve.3.guest.100.migrated.1796119260.pve1.pve2", "proxbus.evt.pve.3.guest"},
		{"notification", PVENotification{EndpointID: 3, Severity: "info", Title: "t", Body: []byte("{}")},
			"pve.3.notification.44136fa355b3678a1146ad16f7e8649e", "proxbus.evt.pve.3.notification"},
	}
	em := NewEmitter(NewSubjects(""), "a")
	other := NewEmitter(NewSubjects(""), "b")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := em.PVEEvent(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			m2, _ := other.PVEEvent(tt.p)
			var ev struct{ ID, Type string }
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.ID != tt.id || m.Header.Get(HeaderMsgID) != tt.id || m2.Header.Get(HeaderMsgID) != tt.id {
				t.Errorf("id %q (Nats-Msg-Id %q, other replica %q), want %q", ev.ID, m.Header.Get(HeaderMsgID), m2.Header.Get(HeaderMsgID), tt.id)
			}
			if m.Subject != tt.subject || ev.Type != "proxbus.pve."+tt.p.pveKind() {
				t.Errorf("subject %q type %q", m.Subject, ev.Type)
			}
		})
	}
}
