package proxmox_test

import (
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// taskStat is the simulator's record of task upid.
func taskStat(t *testing.T, sim *simpve.Server, upid string) simpve.TaskStat {
	t.Helper()
	for _, st := range sim.TaskStats() {
		if st.UPID == upid {
			return st
		}
	}
	t.Fatalf("the simulator has no task %s", upid)
	return simpve.TaskStat{}
}

// progressLog collects what a WithTaskProgress hook reports.
type progressLog struct {
	mu  sync.Mutex
	got []proxmox.TaskProgress
	ids []string
}

func (l *progressLog) hook(node, upid string, p proxmox.TaskProgress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, p)
	l.ids = append(l.ids, node+" "+upid)
}

// TestWaitTaskReadsLogIncrementally pins progress: under WithTaskProgress, a disk move's wait
// reads the task's log at its polls, each read starting after the lines already read (the
// simulator answers no line twice), never more often than the status polls, and reports a
// rising progress in bytes of the disk's size; without the hook no log is read.
func TestWaitTaskReadsLogIncrementally(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, 300*time.Millisecond)
	var log progressLog
	ctx := proxmox.WithTaskProgress(testCtx(t), log.hook)
	// db-01 is stopped: qemu-img convert's lines for its 64G scsi0
	upid, err := c.MoveDisk(ctx, "pve2", simpve.DemoDBVMID, "scsi0", "ceph")
	if err != nil {
		t.Fatalf("MoveDisk: %v", err)
	}
	st := taskStat(t, sim, upid)
	if st.LogReads < 2 || st.LogReads > st.StatusPolls {
		t.Errorf("%d log reads for %d status polls, want at least 2 and at most one per poll", st.LogReads, st.StatusPolls)
	}
	if st.LogRereads != 0 || st.LogLinesServed == 0 || st.LogLinesServed > st.LogLines {
		t.Errorf("log lines: %d answered, %d of them again, the log has %d; want each answered once", st.LogLinesServed, st.LogRereads, st.LogLines)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.got) < 2 {
		t.Fatalf("progress reported %d times: %v", len(log.got), log.got)
	}
	for i, p := range log.got {
		if p.Unit != proxmox.ProgressBytes || p.Total != 64<<30 || p.Done > p.Total || log.ids[i] != "pve2 "+upid {
			t.Errorf("report %d = %+v of %s, want bytes of 64 GiB of pve2 %s", i, p, log.ids[i], upid)
		}
		if i > 0 && p.Done < log.got[i-1].Done {
			t.Errorf("progress went back: %+v after %+v", p, log.got[i-1])
		}
	}
	if first, last := log.got[0], log.got[len(log.got)-1]; last.Done <= first.Done {
		t.Errorf("progress did not rise: first %+v, last %+v", first, last)
	}

	// the same wait without the hook reads no log
	plain, err := c.MoveDisk(testCtx(t), "pve1", simpve.DemoWebVMID, "virtio0", "ceph")
	if err != nil {
		t.Fatalf("MoveDisk: %v", err)
	}
	if st := taskStat(t, sim, plain); st.LogReads != 0 || st.StatusPolls < 2 {
		t.Errorf("without a progress hook: %d log reads, %d status polls; want none, several", st.LogReads, st.StatusPolls)
	}
}

// TestWaitTaskAdaptivePolling pins the default curve by counting polls, not time: a 0.3 s task
// is seen stopped at the 3rd or 4th poll (0, 100, 200, 300 ms into the wait: pauses are never
// shorter, so the 4th poll always sees it; the 3rd only when the requests were slow), where a
// fixed 500 ms sees it at the 2nd poll, 0.5 s in; and its log is not read while it is young,
// even under WithTaskProgress. (The lower bounds hold unless a request to the local simulator
// takes 200 ms.)
func TestWaitTaskAdaptivePolling(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name               string
		opts               []proxmox.ClientOption
		minPolls, maxPolls int
	}{
		{"adaptive", nil, 3, 4},
		{"fixed 500 ms", []proxmox.ClientOption{proxmox.WithTaskPollInterval(500 * time.Millisecond)}, 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim := simpve.New(simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: 300 * time.Millisecond})
			url, err := sim.Start("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sim.Close() })
			c := newClient(t, endpoint(simpve.DemoTokenID, url), simpve.DemoSecret, tt.opts...)
			var log progressLog
			res, err := c.Start(proxmox.WithTaskProgress(testCtx(t), log.hook), resolve(t, c, "db-01"))
			if err != nil || len(res.UPIDs) != 1 {
				t.Fatalf("Start = %+v, %v", res, err)
			}
			st := taskStat(t, sim, res.UPIDs[0])
			if st.StatusPolls < tt.minPolls || st.StatusPolls > tt.maxPolls {
				t.Errorf("%d status polls, want %d to %d", st.StatusPolls, tt.minPolls, tt.maxPolls)
			}
			if tt.opts == nil && st.LogReads != 0 {
				t.Errorf("%d log reads of a young task, want none", st.LogReads)
			}
		})
	}
}
