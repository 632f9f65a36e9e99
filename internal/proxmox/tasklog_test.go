package proxmox

import (
	"math"
	"testing"
	"time"
)

// Samples of PVE 9.2 task logs, as the workers print them (the printf formats of
// PVE::VZDump::QemuServer, PVE::QemuServer::BlockJob, PVE::QemuServer::QemuImage,
// PVE::QemuMigrate and wget --progress=dot:giga under PVE::Tools::download_file_from_url).
var (
	vzdumpLog = []string{
		"INFO: starting new backup job: vzdump 100 --storage pbs1 --mode snapshot --node pve1 --remove 0 --notes-template '{{guestname}}'",
		"INFO: Starting Backup of VM 100 (qemu)",
		"INFO: Backup started at 2026-03-02 10:15:01",
		"INFO: status = running",
		"INFO: VM Name: web-01",
		"INFO: include disk 'virtio0' 'local-lvm:vm-100-disk-0' 32G",
		"INFO: backup mode: snapshot",
		"INFO: creating Proxmox Backup Server archive 'vm/100/2026-03-02T09:15:01Z'",
		"INFO: started backup task 'a6f1c3b2-7e1d-4f4e-9c1e-0d9b1a2c3d4e'",
		"INFO: resuming VM again",
		"INFO: virtio0: dirty-bitmap status: created new",
		"INFO:   0% (0.0 B of 32.0 GiB) in 0s, read: 0 B/s, write: 0 B/s",
		"INFO:   3% (1.2 GiB of 32.0 GiB) in 3s, read: 409.6 MiB/s, write: 401.3 MiB/s",
		"INFO:  12% (3.9 GiB of 32.0 GiB) in 10s, read: 396.0 MiB/s, write: 390.2 MiB/s",
	}
	vzdumpEnd = []string{
		"INFO: 100% (32.0 GiB of 32.0 GiB) in 1m 21s, read: 402.1 MiB/s, write: 0 B/s",
		"INFO: backup is sparse: 20.12 GiB (62%) total zero data",
		"INFO: backup was done incrementally, reused 20.87 GiB (65%)",
		"INFO: transferred 32.00 GiB in 81 seconds (404.5 MiB/s)",
		"INFO: Finished Backup of VM 100 (00:01:22)",
		"TASK OK",
	}
	moveStoppedLog = []string{
		"create full clone of drive scsi0 (local-lvm:vm-101-disk-2)",
		"transferred 0.0 B of 64.0 GiB (0.00%)",
		"transferred 655.4 MiB of 64.0 GiB (1.00%)",
		"transferred 20.5 GiB of 64.0 GiB (32.05%)",
	}
	mirrorLog = []string{
		"create full clone of drive virtio0 (local-lvm:vm-100-disk-0)",
		"drive mirror is starting for drive-virtio0",
		"drive-virtio0: transferred 0.0 B of 32.0 GiB (0.00%) in 0s",
		"drive-virtio0: transferred 1.0 GiB of 32.0 GiB (3.12%) in 1s",
		"drive-virtio0: transferred 8.1 GiB of 32.0 GiB (25.31%) in 8s",
	}
	mirrorEnd = []string{
		"drive-virtio0: transferred 32.0 GiB of 32.0 GiB (100.00%) in 31s, ready",
		"all 'mirror' jobs are ready",
		"drive-virtio0: Completing block job...",
		"drive-virtio0: Completed successfully.",
		"drive-virtio0: mirror-job finished",
		"TASK OK",
	}
	migrateLog = []string{
		"2026-03-02 10:20:01 starting migration of VM 100 to node 'pve2' (10.0.0.12)",
		"2026-03-02 10:20:01 starting VM 100 on remote node 'pve2'",
		"2026-03-02 10:20:03 start remote tunnel",
		"2026-03-02 10:20:04 ssh tunnel ver 1",
		"2026-03-02 10:20:04 starting online/live migration on unix:/run/qemu-server/100.migrate",
		"2026-03-02 10:20:04 set migration capabilities",
		"2026-03-02 10:20:04 migration downtime limit: 100 ms",
		"2026-03-02 10:20:04 migration cachesize: 512.0 MiB",
		"2026-03-02 10:20:04 set migration parameters",
		"2026-03-02 10:20:04 start migrate command to unix:/run/qemu-server/100.migrate",
		"2026-03-02 10:20:05 migration active, transferred 112.3 MiB of 4.0 GiB VM-state, 111.9 MiB/s",
		"2026-03-02 10:20:06 migration active, transferred 1.1 GiB of 4.0 GiB VM-state, 1.0 GiB/s",
	}
	migrateEnd = []string{
		"2026-03-02 10:20:09 average migration speed: 1.0 GiB/s - downtime 45 ms",
		"2026-03-02 10:20:09 migration completed, transferred 4.1 GiB VM-state",
		"2026-03-02 10:20:09 migration status: completed",
		"2026-03-02 10:20:12 migration finished successfully (duration 00:00:11)",
		"TASK OK",
	}
	downloadLog = []string{
		"downloading https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img to /var/lib/vz/import/noble-server-cloudimg-amd64.qcow2",
		"--2026-03-02 10:30:00--  https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img",
		"Resolving cloud-images.ubuntu.com (cloud-images.ubuntu.com)... 185.125.190.40, 185.125.190.37",
		"Connecting to cloud-images.ubuntu.com (cloud-images.ubuntu.com)|185.125.190.40|:443... connected.",
		"HTTP request sent, awaiting response... 200 OK",
		"Length: 104857600 (100M) [application/octet-stream]",
		"Saving to: '/var/lib/vz/import/noble-server-cloudimg-amd64.qcow2.tmp_dwnl.81234'",
		"",
		"     0K ........ ........ ........ ........ 32% 40.1M 2s",
		" 32768K ........ ........ ........ ........ 64% 45.3M 1s",
	}
	downloadEnd = []string{
		" 65536K ........ ........ ........ ........ 96% 44.0M 0s",
		" 98304K ....                               100% 42.2M=2.3s",
		"",
		"2026-03-02 10:30:03 (43.1 MB/s) - '/var/lib/vz/import/noble-server-cloudimg-amd64.qcow2.tmp_dwnl.81234' saved [104857600/104857600]",
		"",
		"calculating checksum...OK, checksum verified",
		"download of 'https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img' to '/var/lib/vz/import/noble-server-cloudimg-amd64.qcow2' finished",
		"TASK OK",
	}
)

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

// TestProgressParser pins the progress read from real PVE task logs: the newest progress
// line wins, sizes are render_bytes values converted to bytes, lines after the last progress
// line change nothing, and a log without progress lines gives none.
func TestProgressParser(t *testing.T) {
	t.Parallel()
	b := func(done, total int64) TaskProgress {
		return TaskProgress{Done: done, Total: total, Unit: ProgressBytes}
	}
	rb := func(v float64, unit int64) int64 { return int64(math.Round(v * float64(unit))) } // a rendered size
	tests := []struct {
		name  string
		lines []string
		want  TaskProgress
		ok    bool
	}{
		{"vzdump running", vzdumpLog, b(rb(3.9, gib), 32*gib), true},
		{"vzdump done", append(append([]string{}, vzdumpLog...), vzdumpEnd...), b(32*gib, 32*gib), true},
		{"vzdump before any status", vzdumpLog[:11], TaskProgress{}, false},
		{"vzdump of an empty disk: only the percentage", []string{"INFO: 100% (0.0 B of 0.0 B) in 0s, read: 0 B/s, write: 0 B/s"}, TaskProgress{Done: 100, Total: 100, Unit: ProgressPercent}, true},
		{"move_disk of a stopped VM (qemu-img)", moveStoppedLog, b(rb(20.5, gib), 64*gib), true},
		{"move_disk of a running VM (drive mirror)", mirrorLog, b(rb(8.1, gib), 32*gib), true},
		{"drive mirror done", append(append([]string{}, mirrorLog...), mirrorEnd...), b(32*gib, 32*gib), true},
		{"drive mirror before PVE 8", []string{"drive-scsi0: transferred: 1073741824 bytes remaining: 33285996544 bytes total: 34359738368 bytes progression: 3.12 % busy: 1 ready: 0"}, b(gib, 32*gib), true},
		{"live migration", migrateLog, b(rb(1.1, gib), 4*gib), true},
		{"live migration done: the completion line has no total", append(append([]string{}, migrateLog...), migrateEnd...), b(rb(1.1, gib), 4*gib), true},
		{"migration retransmits more than the RAM: capped", []string{"2026-03-02 10:20:08 migration active, transferred 4.3 GiB of 4.0 GiB VM-state, 1.0 GiB/s"}, b(4*gib, 4*gib), true},
		{"download-url (wget dot:giga)", downloadLog, b(64*mib, 100*mib), true},
		{"download-url done", append(append([]string{}, downloadLog...), downloadEnd...), b(100*mib, 100*mib), true},
		{"download-url of a small file: one row, no whole MiB", []string{"Length: 524288 (512K) [application/octet-stream]",
			"     0K                                   100%  120M=0.004s"}, b(512*kib, 512*kib), true},
		{"wget without a Length: the percentage", []string{"     0K ........ ........ ........ ........ 32% 40.1M 2s"}, TaskProgress{Done: 32, Total: 100, Unit: ProgressPercent}, true},
		{"KiB sizes", []string{"transferred 512.0 KiB of 2.0 MiB (25.00%)"}, b(512*kib, 2*mib), true},
		{"TiB sizes", []string{"drive-scsi0: transferred 1.5 TiB of 2.0 TiB (75.00%) in 1h 3s"}, b(1536*gib, 2048*gib), true},
		{"restore of a vma archive", []string{"restore vma archive: zstd -q -d -c /var/lib/vz/dump/vzdump-qemu-100.vma.zst | vma extract -v -r /var/tmp/vzdumptmp1.fifo - /var/tmp/vzdumptmp1",
			"progress 1% (read 343932928 bytes, duration 1 sec)", "progress 12% (read 4127195136 bytes, duration 9 sec)"}, TaskProgress{Done: 12, Total: 100, Unit: ProgressPercent}, true},
		{"restore from PBS (pbs-restore)", []string{"progress 40% (read 13743895347 bytes, zeroes = 62% (8589934592 bytes), duration 20 sec)"},
			TaskProgress{Done: 40, Total: 100, Unit: ProgressPercent}, true},
		{"no progress lines", []string{"VM 100 qmp command 'guest-ping' failed", "TASK OK"}, TaskProgress{}, false},
		{"unknown unit", []string{"transferred 1.0 XB of 2.0 XB (50.00%)"}, TaskProgress{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var p progressParser
			for _, l := range tt.lines {
				p.line(l)
			}
			got, ok := p.progress()
			if ok != tt.ok || got != tt.want {
				t.Errorf("progress = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestPollCurve pins the adaptive schedule: each pause a twentieth of the time waited, from
// 100 ms to 2 s, so that a task is seen stopped at most 5 % (or 100 ms) after its end — a
// 0.3 s task at the poll 0.3 s into the wait (a fixed 500 ms needs 0.5 s), a 2 s task at 2 s —
// and a 60 s task costs 93 polls (121 at a fixed 500 ms); the log is read from the first
// second on at most every 2 s, and with a fixed interval at every poll.
func TestPollCurve(t *testing.T) {
	t.Parallel()
	// polls returns when each poll of a wait happens (requests taking no time) until the
	// first at or after end.
	polls := func(c pollCurve, end time.Duration) []time.Duration {
		at := time.Duration(0)
		out := []time.Duration{0}
		for at < end {
			at += c.next(at)
			out = append(out, at)
		}
		return out
	}
	fixed := pollCurve{floor: 500 * time.Millisecond, limit: 500 * time.Millisecond}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	tests := []struct {
		name      string
		curve     pollCurve
		task      time.Duration
		wantPolls int
		wantSeen  time.Duration // when the poll that sees the task stopped happens
	}{
		{"adaptive 0.3 s", adaptiveCurve(), ms(300), 4, ms(300)},
		{"fixed 500 ms 0.3 s", fixed, ms(300), 2, ms(500)},
		{"adaptive 2 s", adaptiveCurve(), 2 * time.Second, 21, 2 * time.Second},
		{"adaptive 3 s", adaptiveCurve(), 3 * time.Second, 30, ms(3103)},
		{"fixed 500 ms 3 s", fixed, 3 * time.Second, 7, 3 * time.Second},
		{"adaptive 60 s", adaptiveCurve(), time.Minute, 93, ms(61188)},
		{"fixed 500 ms 60 s", fixed, time.Minute, 121, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := polls(tt.curve, tt.task)
			if len(got) != tt.wantPolls || got[len(got)-1].Round(time.Millisecond) != tt.wantSeen {
				t.Errorf("%d polls, the last at %s; want %d, at %s (%v)", len(got), got[len(got)-1], tt.wantPolls, tt.wantSeen, got)
			}
		})
	}
	for _, p := range []struct{ age, want time.Duration }{
		{0, ms(100)}, {ms(1999), ms(100)}, {ms(3000), ms(150)}, {ms(10000), ms(500)}, {ms(40000), ms(2000)}, {time.Hour, ms(2000)},
	} {
		if got := adaptiveCurve().next(p.age); got != p.want {
			t.Errorf("pause at %s = %s, want %s", p.age, got, p.want)
		}
	}
	c := adaptiveCurve()
	if c.readsLog(ms(999), -1) || !c.readsLog(time.Second, -1) || c.readsLog(ms(2900), ms(1000)) || !c.readsLog(ms(3000), ms(1000)) || !fixed.readsLog(0, -1) || !fixed.readsLog(ms(500), 0) {
		t.Error("the log is read from the first second on at most every 2 s (adaptive), at every poll (fixed)")
	}
}
