package proxmox_test

import (
	"errors"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// TestUPID pins PVE's task id format: parse, format and the round trip; malformed ids are
// ErrInvalidUPID.
func TestUPID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want proxmox.UPID
		err  bool
	}{
		{in: "UPID:pve1:0000ABCD:00123456:6745A0B1:qmstart:100:proxbus@pve!demo:",
			want: proxmox.UPID{Node: "pve1", PID: 0xABCD, PStart: 0x123456, StartTime: time.Unix(0x6745A0B1, 0).UTC(), Type: "qmstart", ID: "100", User: "proxbus@pve!demo"}},
		{in: "UPID:node-2:0001E240:1A2B3C4D5:6745A0B1:vzdump::root@pam:",
			want: proxmox.UPID{Node: "node-2", PID: 0x1E240, PStart: 0x1A2B3C4D5, StartTime: time.Unix(0x6745A0B1, 0).UTC(), Type: "vzdump", User: "root@pam"}},
		{in: "UPID:pve1:0000ABCD:00123456:6745A0B1:qmstart:100:proxbus@pve!demo", err: true}, // no trailing colon
		{in: "UPID:pve1:ABCD:00123456:6745A0B1:qmstart:100:root@pam:", err: true},            // short pid
		{in: "UPID:-bad:0000ABCD:00123456:6745A0B1:qmstart:100:root@pam:", err: true},
		{in: "", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := proxmox.ParseUPID(tt.in)
			if tt.err {
				if !errors.Is(err, proxmox.ErrInvalidUPID) {
					t.Fatalf("ParseUPID = %+v, %v; want ErrInvalidUPID", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseUPID = %+v, %v; want %+v", got, err, tt.want)
			}
			if got.String() != tt.in {
				t.Errorf("String() = %q, want %q", got.String(), tt.in)
			}
			again, err := proxmox.ParseUPID(got.String())
			if err != nil || again != got {
				t.Errorf("round trip = %+v, %v", again, err)
			}
		})
	}
}
