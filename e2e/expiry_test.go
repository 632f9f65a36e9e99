package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/store"
)

// TestQueuedCommandsExpireOrAreCancelled is issue 20's incident: commands queued while no
// replica runs must not run whenever one comes up. One older than the command max age and one
// past its expires time are answered 410 command_expired, one cancelled (as `proxbus cancel`
// does) 410 command_cancelled; none of them starts its guest or writes a journal entry, while a
// fresh command queued with them runs.
func TestQueuedCommandsExpireOrAreCancelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := e.start()(); err != nil { // provisions the streams, then no replica runs
		t.Fatal(err)
	}
	old := e.guestCommand("vm.start", `{"vm":101}`)
	old.Time = time.Now().Add(-20 * time.Minute)
	expired := e.guestCommand("vm.start", `{"vm":101}`)
	expired.Expires = time.Now().Add(-time.Second)
	cancelled := e.guestCommand("vm.start", `{"vm":103}`)
	fresh := e.guestCommand("vm.start", `{"vm":201}`)
	fresh.Expires = time.Now().Add(time.Hour)
	e.publish(old)
	e.publish(expired)
	e.publish(cancelled)
	e.publish(fresh)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	queued, err := app.FindQueued(ctx, e.nats.JS, e.subjects, cancelled.Source, cancelled.ID)
	if err != nil || queued.Verb != "vm.start" || string(queued.Data) != `{"vm":103}` {
		t.Fatalf("FindQueued = %+v, %v; want the queued vm.start", queued, err)
	}
	if _, err := app.FindQueued(ctx, e.nats.JS, e.subjects, "/elsewhere", cancelled.ID); err == nil {
		t.Errorf("FindQueued found a command from another source")
	}
	if state, _, err := handlers.Cancel(ctx, e.store, queued, "cancelled by tester"); err != nil || state != store.Absent {
		t.Fatalf("Cancel = %v, %v; want cancelled", state, err)
	}

	e.start()
	for _, tc := range []struct {
		name   string
		res    func() (int, string, string)
		status int
		reason string
	}{
		{"older than the max age", func() (int, string, string) { r := e.result(old); return r.Status, r.Reason, r.Detail }, 410, handlers.ReasonCommandExpired},
		{"past its expires time", func() (int, string, string) { r := e.result(expired); return r.Status, r.Reason, r.Detail }, 410, handlers.ReasonCommandExpired},
		{"cancelled", func() (int, string, string) { r := e.result(cancelled); return r.Status, r.Reason, r.Detail }, 410, handlers.ReasonCommandCancelled},
		{"fresh", func() (int, string, string) { r := e.result(fresh); return r.Status, r.Reason, r.Detail }, 200, ""},
	} {
		if status, reason, detail := tc.res(); status != tc.status || reason != tc.reason {
			t.Errorf("%s: %d %s (%s), want %d %s", tc.name, status, reason, detail, tc.status, tc.reason)
		}
	}
	wantGuestStatus(101, "stopped")(t, e, events.Result{})
	wantGuestStatus(103, "stopped")(t, e, events.Result{})
	wantGuestStatus(201, "running")(t, e, events.Result{})
	for _, je := range e.netbox.JournalEntries() {
		for _, id := range []string{old.ID, expired.ID, cancelled.ID} {
			if strings.Contains(je.Comments, id) {
				t.Errorf("journal entry for %s, which did nothing: %s", id, je.Comments)
			}
		}
	}
}
