package proxmox

import (
	"testing"
	"time"
)

// TestBusyPauseTakesTurns pins how the watches of one endpoint share it: each busy round of
// the watch ranked rank of n falls in its slot of the wall-clock grid of Busy, so the
// replicas look in turn; alone a watch pauses Busy.
func TestBusyPauseTakesTurns(t *testing.T) {
	t.Parallel()
	const busy = 200 * time.Millisecond
	base := time.Unix(1_800_000_000, 0) // a multiple of 3 × 200 ms
	tests := []struct {
		name    string
		n, rank int
		now     time.Duration // after base
		want    time.Duration
	}{
		{"alone", 1, 0, 50 * time.Millisecond, busy},
		{"rank 0, just after its slot", 3, 0, 10 * time.Millisecond, 590 * time.Millisecond},
		{"rank 1, before its slot", 3, 1, 10 * time.Millisecond, 190 * time.Millisecond},
		{"rank 2, before its slot", 3, 2, 10 * time.Millisecond, 390 * time.Millisecond},
		{"rank 1, too close to its slot: the next one", 3, 1, 150 * time.Millisecond, 650 * time.Millisecond},
		{"rank beyond n wraps", 3, 4, 10 * time.Millisecond, 190 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := &watcher{cfg: WatchConfig{Busy: busy, Share: func() (int, int) { return tt.n, tt.rank }}}
			if got := w.busyPause(base.Add(tt.now)); got != tt.want {
				t.Errorf("pause %s, want %s", got, tt.want)
			}
		})
	}
}
