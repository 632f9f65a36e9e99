package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/proxbus/proxbus/store"
)

// TestSchedules pins the store's part of scheduled commands: a schedule is listed with what
// it may fire; a firing is recorded as its last unless an older firing comes after a newer
// one, or the schedule is gone; putting it again forgets its last firing; dropping it removes it.
func TestSchedules(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	made := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	sc := store.Schedule{Name: "nightly", Verb: "vm.backup", EndpointID: 1, DataSHA256: "ab", Actor: "alice", MadeAt: made,
		Pattern: "0 0 2 * * *", TZ: "Europe/Berlin", Window: 15 * time.Minute, Data: []byte(`{"vm":100}`)}
	if err := e.s.PutSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if err := e.s.PutSchedule(ctx, store.Schedule{Name: "another", Verb: "vm.list", EndpointID: 2, Pattern: "@every 1h"}); err != nil {
		t.Fatal(err)
	}
	night := time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC)
	if err := e.s.RecordFiring(ctx, "nightly", "nightly.20261203T010000Z", night, night.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := e.s.RecordFiring(ctx, "nightly", "nightly.20261202T010000Z", night.Add(-24*time.Hour), night); err != nil { // late and older
		t.Fatal(err)
	}
	if err := e.s.RecordFiring(ctx, "ghost", "ghost.20261203T010000Z", night, time.Time{}); err != nil {
		t.Fatal(err)
	}
	all, err := e.s.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Name != "another" || all[1].Name != "nightly" {
		t.Fatalf("Schedules = %+v, want another and nightly", all)
	}
	got := all[1]
	if got.Verb != "vm.backup" || got.EndpointID != 1 || got.DataSHA256 != "ab" || got.Actor != "alice" || !got.MadeAt.Equal(made) ||
		got.Pattern != sc.Pattern || got.TZ != sc.TZ || got.Window != sc.Window || string(got.Data) != `{"vm":100}` {
		t.Errorf("schedule = %+v, want %+v", got, sc)
	}
	if got.LastID != "nightly.20261203T010000Z" || !got.LastAt.Equal(night) || !got.Next.Equal(night.Add(24*time.Hour)) {
		t.Errorf("last firing %s at %v next %v, want the newer firing", got.LastID, got.LastAt, got.Next)
	}
	if _, ok, err := e.s.LookupSchedule(ctx, "ghost"); ok || err != nil {
		t.Errorf("a firing of an unknown schedule made it: %v %v", ok, err)
	}
	if err := e.s.PutSchedule(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if again, _, _ := e.s.LookupSchedule(ctx, "nightly"); again.LastID != "" {
		t.Errorf("a schedule put again keeps its last firing %s", again.LastID)
	}
	if err := e.s.DropSchedule(ctx, "nightly"); err != nil {
		t.Fatal(err)
	}
	if all, _ := e.s.Schedules(ctx); len(all) != 1 || all[0].Name != "another" {
		t.Errorf("after DropSchedule: %+v", all)
	}
}
