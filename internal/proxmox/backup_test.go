package proxmox_test

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// addBackupStorages adds a PBS storage and storages that cannot take backups of a guest on
// pve1 for one reason each.
func addBackupStorages(sim *simpve.Server) {
	pbs := func(id string, extra map[string]string) {
		cfg := proxmox.StorageConfig{"storage": id, "type": "pbs", "server": "pbs.lan", "datastore": "store1", "content": "backup"}
		for k, v := range extra {
			cfg[k] = v
		}
		sim.AddStorage(cfg)
	}
	pbs("pbs1", nil)
	pbs("pbs-off", map[string]string{"disable": "1"})
	pbs("pbs-pve2", map[string]string{"nodes": "pve2,pve3"})
	pbs("pbs-none", map[string]string{"content": "none"})
	pbs("pbs-down", nil)
	sim.SetStorageStatus("pbs-down", "pve1", "unknown")
}

// TestCheckBackupStorage pins the storage check of vm.backup: a PBS or directory storage with
// content backup, active on the guest's node, passes; each other storage is a
// *BackupStorageError matching ErrBackupStorageUnavailable that says why, and no write is made.
func TestCheckBackupStorage(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	addBackupStorages(sim)
	for _, ok := range []struct{ storage, typ string }{{"pbs1", "pbs"}, {"local", "dir"}} {
		got, err := c.CheckBackupStorage(testCtx(t), ok.storage, "pve1")
		if err != nil || got.Storage != ok.storage || got.Node != "pve1" || got.Type != ok.typ {
			t.Errorf("CheckBackupStorage(%s) = %+v, %v", ok.storage, got, err)
		}
	}
	for _, tt := range []struct{ storage, why string }{
		{"nowhere", "storage 'nowhere' does not exist"},
		{"pbs-off", "storage 'pbs-off' is disabled"},
		{"pbs-pve2", "storage 'pbs-pve2' is not available on node 'pve1', where the guest is (its nodes: pve2,pve3)"},
		{"pbs-none", "storage 'pbs-none' has no content 'backup' (its content: none)"},
		{"local-lvm", "storage 'local-lvm' has no content 'backup' (its content: images,rootdir)"},
		{"pbs-down", "storage 'pbs-down' is not active on node 'pve1'"},
	} {
		_, err := c.CheckBackupStorage(testCtx(t), tt.storage, "pve1")
		var bse *proxmox.BackupStorageError
		if !errors.Is(err, proxmox.ErrBackupStorageUnavailable) || !errors.As(err, &bse) || !strings.HasPrefix(bse.Why, tt.why) ||
			bse.Storage != tt.storage || bse.Node != "pve1" {
			t.Errorf("CheckBackupStorage(%s) = %v, want a refusal starting %q", tt.storage, err, tt.why)
		}
	}
	if n := writes(sim); n != 0 {
		t.Errorf("the checks wrote %d times", n)
	}
}

// TestBackup pins Backup and the reads that find its volume: one POST /nodes/{node}/vzdump on
// the guest's node with vmid, storage, mode, compress, notes-template, protected=1 and always
// remove=0, the task waited for; GuestBackups then lists the guest's backup (volid, format,
// size, creation time, notes, protection), BackupArchive reads the archive from the task's log
// and BackupOfArchive finds the backup by it; GuestTasks lists the vzdump task. A failed job is a *TaskError.
func TestBackup(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	addBackupStorages(sim)
	g := resolve(t, c, "web-01")
	upid, err := c.Backup(testCtx(t), g, proxmox.BackupRequest{Storage: "pbs1", Mode: proxmox.BackupModeSnapshot, Compress: "zstd",
		NotesTemplate: "{{guestname}}", Protected: true})
	if err != nil {
		t.Fatalf("Backup: %v", err)
	}
	u, err := proxmox.ParseUPID(upid)
	if err != nil || u.Type != proxmox.BackupTaskType || u.ID != "100" || u.Node != "pve1" {
		t.Fatalf("upid %q (%v)", upid, err)
	}
	var sent url.Values
	for _, r := range sim.RequestLog() {
		if r.Method == "POST" {
			if r.Path != "/nodes/pve1/vzdump" || sent != nil {
				t.Fatalf("writes: %s %s after %v", r.Method, r.Path, sent)
			}
			sent = r.Params
		}
	}
	want := url.Values{"vmid": {"100"}, "storage": {"pbs1"}, "mode": {"snapshot"}, "compress": {"zstd"},
		"notes-template": {"{{guestname}}"}, "protected": {"1"}, "remove": {"0"}}
	if sent.Encode() != want.Encode() {
		t.Errorf("vzdump parameters %v, want %v", sent, want)
	}

	backups, err := c.GuestBackups(testCtx(t), "pve2", "pbs1", 100)
	if err != nil || len(backups) != 1 {
		t.Fatalf("GuestBackups = %+v, %v", backups, err)
	}
	b := backups[0]
	if b.VolID != "pbs1:backup/vm/100/"+u.StartTime.Format(time.RFC3339) || b.VMID != 100 || b.Format != "pbs-vm" ||
		b.Size != 132<<30 || !b.Created.Equal(u.StartTime) || b.Notes != "web-01" || !b.Protected {
		t.Errorf("backup %+v", b)
	}
	archive, err := c.BackupArchive(testCtx(t), "pve1", upid)
	if want := "vm/100/" + u.StartTime.Format(time.RFC3339); err != nil || archive != want {
		t.Fatalf("BackupArchive = %q, %v; want %q", archive, err, want)
	}
	if got, ok := proxmox.BackupOfArchive(backups, archive); !ok || got.VolID != b.VolID {
		t.Errorf("BackupOfArchive(%q) = %+v, %v; want the backup", archive, got, ok)
	}
	if other, err := c.GuestBackups(testCtx(t), "pve1", "pbs1", 101); err != nil || len(other) != 0 {
		t.Errorf("another guest's backups = %+v, %v", other, err)
	}
	tasks, err := c.GuestTasks(testCtx(t), "pve1", 100, proxmox.BackupTaskType, u.StartTime)
	if err != nil || len(tasks) != 1 || tasks[0].UPID != upid || tasks[0].Running || !tasks[0].OK() || !tasks[0].Start.Equal(u.StartTime) {
		t.Errorf("GuestTasks = %+v, %v", tasks, err)
	}
	if later, err := c.GuestTasks(testCtx(t), "pve1", 100, proxmox.BackupTaskType, u.StartTime.Add(time.Second)); err != nil || len(later) != 0 {
		t.Errorf("GuestTasks since after its start = %+v, %v", later, err)
	}

	sim.FailTask("pve1", 100, "job errors")
	upid, err = c.Backup(testCtx(t), g, proxmox.BackupRequest{Storage: "pbs1"})
	var te *proxmox.TaskError
	if !errors.As(err, &te) || te.ExitStatus != "job errors" || te.UPID != upid || upid == "" {
		t.Errorf("failed job: %q, %v", upid, err)
	}
	if _, err := c.Backup(testCtx(t), proxmox.Guest{VMID: 100}, proxmox.BackupRequest{Storage: "pbs1"}); !errors.Is(err, proxmox.ErrVMNotFound) {
		t.Errorf("incomplete guest: %v", err)
	}
}

// TestGuestTasksRunning pins that a running vzdump is listed (source=all) as running, and
// as finished OK once Backup has waited for it.
func TestGuestTasksRunning(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, time.Second)
	addBackupStorages(sim)
	g := resolve(t, c, "ct-pve1")
	ctx := testCtx(t)
	since := time.Now()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Backup(ctx, g, proxmox.BackupRequest{Storage: "local"})
		errc <- err
	}()
	var running []proxmox.TaskSummary
	for len(running) == 0 && ctx.Err() == nil {
		var err error
		if running, err = c.GuestTasks(ctx, "pve1", 200, proxmox.BackupTaskType, since); err != nil {
			t.Fatal(err)
		}
	}
	if len(running) != 1 || !running[0].Running || running[0].Status != "" || running[0].OK() {
		t.Errorf("running vzdump = %+v", running)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Backup: %v", err)
	}
	done, err := c.GuestTasks(ctx, "pve1", 200, proxmox.BackupTaskType, since)
	if err != nil || len(done) != 1 || done[0].Running || !done[0].OK() {
		t.Errorf("finished vzdump = %+v, %v", done, err)
	}
}

// TestBackupOfArchive pins how a vzdump task's archive names its volume: a file path by its
// base name under "storage:backup/", a PBS snapshot by its name; two backups of one guest made
// in one second (one compressed, one not) are told apart.
func TestBackupOfArchive(t *testing.T) {
	t.Parallel()
	backups := []proxmox.BackupVolume{
		{VolID: "local:backup/vzdump-qemu-100-2026_12_02-23_27_58.vma"},
		{VolID: "local:backup/vzdump-qemu-100-2026_12_02-23_27_58.vma.zst"},
		{VolID: "pbs1:backup/vm/100/2026-12-02T23:27:58Z"},
	}
	tests := []struct{ archive, want string }{
		{"/var/lib/vz/dump/vzdump-qemu-100-2026_12_02-23_27_58.vma", "local:backup/vzdump-qemu-100-2026_12_02-23_27_58.vma"},
		{"/var/lib/vz/dump/vzdump-qemu-100-2026_12_02-23_27_58.vma.zst", "local:backup/vzdump-qemu-100-2026_12_02-23_27_58.vma.zst"},
		{"vm/100/2026-12-02T23:27:58Z", "pbs1:backup/vm/100/2026-12-02T23:27:58Z"},
		{"/var/lib/vz/dump/vzdump-qemu-100-2026_12_02-23_27_59.vma", ""},
		{"", ""},
	}
	for _, tc := range tests {
		got, ok := proxmox.BackupOfArchive(backups, tc.archive)
		if got.VolID != tc.want || ok != (tc.want != "") {
			t.Errorf("BackupOfArchive(%q) = %q, %v; want %q", tc.archive, got.VolID, ok, tc.want)
		}
	}
}

// TestStopTask pins StopTask against the simulator (modelled on pve-manager's stop_task): a
// running vzdump stopped ends at once with "interrupted by signal" and makes no backup, and
// waiting for it reports that as a *TaskError; stopping it again, now ended, changes nothing
// and is no error; an unknown UPID is PVE's 400.
func TestStopTask(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, time.Minute)
	addBackupStorages(sim)
	g := resolve(t, c, "web-01")
	ctx := testCtx(t)
	done := make(chan error, 1)
	started := make(chan string, 1)
	go func() {
		_, err := c.Backup(proxmox.WithTaskStarted(ctx, func(_, upid string) { started <- upid }), g, proxmox.BackupRequest{Storage: "pbs1"})
		done <- err
	}()
	upid := <-started
	if err := c.StopTask(ctx, "pve1", upid); err != nil {
		t.Fatalf("StopTask: %v", err)
	}
	var te *proxmox.TaskError
	if err := <-done; !errors.As(err, &te) || te.ExitStatus != "interrupted by signal" {
		t.Fatalf("the stopped vzdump's wait: %v, want a TaskError interrupted by signal", err)
	}
	if backups, err := c.GuestBackups(ctx, "pve1", "pbs1", 100); err != nil || len(backups) != 0 {
		t.Errorf("backups after the stop = %+v, %v; want none", backups, err)
	}
	if err := c.StopTask(ctx, "pve1", upid); err != nil {
		t.Errorf("stopping an ended task: %v, want no error", err)
	}
	unknown := strings.Replace(upid, ":vzdump:", ":qmstart:", 1)
	var apiErr *proxmox.APIError
	if err := c.StopTask(ctx, "pve1", unknown); !errors.As(err, &apiErr) || apiErr.Status != 400 || !slices.Contains(apiErr.ParamNames(), "upid") {
		t.Errorf("an unknown task: %v, want 400 no such task", err)
	}
}
