package proxmox_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// TestSnapshotsList pins the list: "current" is never listed, snapshots come oldest first
// with their parents, descriptions, creation times and (QEMU) RAM flag.
func TestSnapshotsList(t *testing.T) {
	t.Parallel()
	_, c := guestSim(t, -1)
	list, err := c.Snapshots(testCtx(t), resolve(t, c, "ct-pve1"))
	if err != nil {
		t.Fatalf("Snapshots: %v", err)
	}
	var names, parents []string
	for _, s := range list {
		names = append(names, s.Name)
		parents = append(parents, s.Parent)
		if s.Created.IsZero() || s.Created.Location() != time.UTC || s.HasMemory {
			t.Errorf("snapshot %+v", s)
		}
	}
	if !slices.Equal(names, []string{"base", "experiment", "before-update"}) || !slices.Equal(parents, []string{"", "base", "base"}) {
		t.Errorf("snapshots = %v (parents %v)", names, parents)
	}
	if list[0].Description != "fresh install" {
		t.Errorf("description = %q", list[0].Description)
	}
	list, err = c.Snapshots(testCtx(t), resolve(t, c, "app-01"))
	if err != nil || len(list) != 1 || list[0].Name != "pre-upgrade" || !list[0].HasMemory {
		t.Errorf("app-01 snapshots = %+v, %v", list, err)
	}
	list, err = c.Snapshots(testCtx(t), resolve(t, c, "web-01"))
	if err != nil || list == nil || len(list) != 0 {
		t.Errorf("web-01 snapshots = %#v, %v; want an empty list", list, err)
	}
}

// TestSnapshotCreate pins create: vmstate=1 is sent only for QEMU VMs asked to include
// memory (PVE keeps RAM only of a running VM), description when given, the snapshot
// becomes the parent of "current"; a name in use is a failed task matching ErrAlreadyExists.
func TestSnapshotCreate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, ref, snap, desc string
		memory                bool
		wantParam             string // vmstate parameter sent
		wantRAM               bool
		task                  string
	}{
		{name: "running vm with memory", ref: "web-01", snap: "s1", desc: "with RAM", memory: true, wantParam: "1", wantRAM: true, task: "qmsnapshot"},
		{name: "running vm without memory", ref: "web-01", snap: "s1", task: "qmsnapshot"},
		{name: "stopped vm with memory", ref: "db-01", snap: "s1", memory: true, wantParam: "1", task: "qmsnapshot"},
		{name: "container ignores memory", ref: "ct-pve1", snap: "s1", desc: "ct", memory: true, task: "vzsnapshot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim, c := guestSim(t, -1)
			g := resolve(t, c, tt.ref)
			before, _ := sim.Guest(g.VMID)
			res, err := c.CreateSnapshot(testCtx(t), g, tt.snap, tt.desc, tt.memory)
			if err != nil || res.NoOp || !slices.Equal(taskTypes(t, res.UPIDs), []string{tt.task}) {
				t.Fatalf("CreateSnapshot = %+v, %v", res, err)
			}
			log := sim.RequestLog()
			post := log[len(log)-2] // the POST, then the task poll
			if post.Method != "POST" || post.Params.Get("vmstate") != tt.wantParam || post.Params.Get("description") != tt.desc || post.Params.Has("description") != (tt.desc != "") {
				t.Errorf("request = %+v", post)
			}
			after, _ := sim.Guest(g.VMID)
			if after.Parent != tt.snap || after.Snapshots[tt.snap] != before.Parent || slices.Contains(after.VMState, tt.snap) != tt.wantRAM {
				t.Errorf("guest after = %+v", after)
			}
			list, _ := c.Snapshots(testCtx(t), g)
			if i := slices.IndexFunc(list, func(s proxmox.Snapshot) bool { return s.Name == tt.snap }); i < 0 || list[i].Description != tt.desc || list[i].HasMemory != tt.wantRAM {
				t.Errorf("listed = %+v", list)
			}
			_, err = c.CreateSnapshot(testCtx(t), g, tt.snap, "", false)
			if !errors.Is(err, proxmox.ErrAlreadyExists) {
				t.Errorf("second CreateSnapshot = %v, want ErrAlreadyExists", err)
			}
		})
	}
}

// TestSnapshotDeleteRollback pins delete (children re-parented) and rollback (the
// snapshot becomes the parent; the guest is stopped unless start or the snapshot has RAM),
// and a missing snapshot as a failed task matching ErrNotFound.
func TestSnapshotDeleteRollback(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	ct := resolve(t, c, "ct-pve1")
	res, err := c.DeleteSnapshot(testCtx(t), ct, "base")
	if err != nil || !slices.Equal(taskTypes(t, res.UPIDs), []string{"vzdelsnapshot"}) {
		t.Fatalf("DeleteSnapshot = %+v, %v", res, err)
	}
	st, _ := sim.Guest(ct.VMID)
	if len(st.Snapshots) != 2 || st.Snapshots["experiment"] != "" || st.Snapshots["before-update"] != "" {
		t.Errorf("after delete = %v", st.Snapshots)
	}
	res, err = c.RollbackSnapshot(testCtx(t), ct, "experiment", false)
	if err != nil || !slices.Equal(taskTypes(t, res.UPIDs), []string{"vzrollback"}) {
		t.Fatalf("RollbackSnapshot = %+v, %v", res, err)
	}
	if st, _ = sim.Guest(ct.VMID); st.Parent != "experiment" || st.Status != "stopped" {
		t.Errorf("after rollback = %s %s, want experiment, stopped", st.Parent, st.Status)
	}
	if log := sim.RequestLog(); log[len(log)-2].Params.Has("start") {
		t.Errorf("start sent without being asked: %+v", log[len(log)-2])
	}
	if _, err = c.RollbackSnapshot(testCtx(t), ct, "before-update", true); err != nil {
		t.Fatalf("RollbackSnapshot(start): %v", err)
	}
	if st, _ = sim.Guest(ct.VMID); st.Parent != "before-update" || st.Status != "running" {
		t.Errorf("after rollback with start = %s %s", st.Parent, st.Status)
	}
	app := resolve(t, c, "app-01")
	if _, err = c.Stop(testCtx(t), app, true); err != nil {
		t.Fatal(err)
	}
	if _, err = c.RollbackSnapshot(testCtx(t), app, "pre-upgrade", false); err != nil {
		t.Fatal(err)
	}
	if st, _ = sim.Guest(app.VMID); st.Status != "running" {
		t.Errorf("rollback to a RAM snapshot = %s, want running", st.Status)
	}
	for _, op := range []func() error{
		func() error { _, err := c.DeleteSnapshot(testCtx(t), ct, "gone"); return err },
		func() error { _, err := c.RollbackSnapshot(testCtx(t), ct, "gone", false); return err },
	} {
		var te *proxmox.TaskError
		if err := op(); !errors.Is(err, proxmox.ErrNotFound) || !errors.As(err, &te) || te.ExitStatus != "snapshot 'gone' does not exist" {
			t.Errorf("missing snapshot = %v, want ErrNotFound", err)
		}
	}
	sim.FailTask("pve1", ct.VMID, "snapshot feature is not available")
	_, err = c.CreateSnapshot(testCtx(t), ct, "nope", "", false)
	var te *proxmox.TaskError
	if !errors.As(err, &te) || te.ExitStatus != "snapshot feature is not available" {
		t.Errorf("failed snapshot task = %v", err)
	}
	if st, _ = sim.Guest(ct.VMID); st.Snapshots["nope"] != "" || len(st.Snapshots) != 2 {
		t.Errorf("a failed snapshot task changed the tree: %v", st.Snapshots)
	}
}

// TestSnapshotCurrentReserved pins that "current" is refused before any request.
func TestSnapshotCurrentReserved(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	g := resolve(t, c, "web-01")
	before := len(sim.RequestLog())
	for name, op := range map[string]func() error{
		"create":   func() error { _, err := c.CreateSnapshot(testCtx(t), g, "current", "", true); return err },
		"delete":   func() error { _, err := c.DeleteSnapshot(testCtx(t), g, "current"); return err },
		"rollback": func() error { _, err := c.RollbackSnapshot(testCtx(t), g, "current", true); return err },
	} {
		if err := op(); !errors.Is(err, proxmox.ErrReservedSnapshotName) {
			t.Errorf("%s current = %v, want ErrReservedSnapshotName", name, err)
		}
	}
	if after := len(sim.RequestLog()); after != before {
		t.Errorf("%d requests sent, want none", after-before)
	}
}
