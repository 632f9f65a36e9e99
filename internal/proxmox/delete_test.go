package proxmox_test

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestDeleteGuest pins DeleteGuest against the simulator: the DELETE it sends (purge and
// destroy-unreferenced-disks always, 1 or 0; never LXC's force), the task it waits for, the
// guest gone afterwards, and PVE's refusals as sentinels with nothing started.
func TestDeleteGuest(t *testing.T) {
	t.Parallel()
	all := proxmox.DeleteOptions{Purge: true, DestroyUnreferencedDisks: true}
	tests := []struct {
		name   string
		ref    string
		opts   proxmox.DeleteOptions
		fault  string // FailTask exit status for the guest's next task
		task   string // worker type run, "" none
		err    error  // sentinel
		exit   string // *TaskError exit status
		params map[string]string
		gone   bool
	}{
		{name: "stopped vm without purge", ref: "103", task: "qmdestroy", params: map[string]string{"purge": "0", "destroy-unreferenced-disks": "0"}, gone: true},
		{name: "stopped vm with both", ref: "103", opts: all, task: "qmdestroy", params: map[string]string{"purge": "1", "destroy-unreferenced-disks": "1"}, gone: true},
		{name: "stopped ct", ref: "ct-pve2", opts: all, task: "vzdestroy", params: map[string]string{"purge": "1", "destroy-unreferenced-disks": "1"}, gone: true},
		{name: "template", ref: "9000", opts: all, task: "qmdestroy", gone: true},
		{name: "running vm", ref: "web-01", opts: all, err: proxmox.ErrVMRunning},
		{name: "paused vm", ref: "batch-01", opts: all, err: proxmox.ErrVMRunning},
		{name: "running ct", ref: "ct-pve1", opts: all, err: proxmox.ErrVMRunning},
		{name: "protected vm", ref: "db-01", opts: all, err: proxmox.ErrVMProtected},
		{name: "the task fails", ref: "103", opts: all, fault: "can't lock file '/var/lock/qemu-server/lock-103.conf' - got timeout", task: "qmdestroy",
			exit: "can't lock file '/var/lock/qemu-server/lock-103.conf' - got timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim, c := guestSim(t, -1)
			g := resolve(t, c, tt.ref)
			if tt.fault != "" {
				sim.FailTask(g.Node, g.VMID, tt.fault)
			}
			res, err := c.DeleteGuest(testCtx(t), g, tt.opts)
			var te *proxmox.TaskError
			var ae *proxmox.APIError
			switch {
			case tt.err != nil:
				if !errors.Is(err, tt.err) || !errors.As(err, &ae) || ae.Status != http.StatusInternalServerError || len(res.UPIDs) != 0 {
					t.Fatalf("err = %v (res %+v), want %v wrapping PVE's 500", err, res, tt.err)
				}
			case tt.exit != "":
				if !errors.As(err, &te) || te.ExitStatus != tt.exit || len(res.UPIDs) != 1 || te.UPID != res.UPIDs[0] {
					t.Fatalf("err = %v (res %+v), want *TaskError %q", err, res, tt.exit)
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			}
			if got := taskTypes(t, res.UPIDs); tt.task != "" && !slices.Equal(got, []string{tt.task}) {
				t.Errorf("tasks = %v, want [%s]", got, tt.task)
			}
			var deletes []simpve.RequestRecord
			for _, r := range sim.RequestLog() {
				if r.Method == http.MethodDelete {
					deletes = append(deletes, r)
				}
			}
			if len(deletes) != 1 {
				t.Fatalf("DELETEs = %+v, want one", deletes)
			}
			if want := "/nodes/" + g.Node + "/" + string(g.Type) + "/" + strconv.FormatInt(g.VMID, 10); deletes[0].Path != want || deletes[0].Params.Has("force") {
				t.Errorf("DELETE %s %v, want %s without force", deletes[0].Path, deletes[0].Params, want)
			}
			for k, v := range tt.params {
				if got := deletes[0].Params.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if _, exists := sim.Guest(g.VMID); exists == tt.gone {
				t.Errorf("guest exists afterwards = %v, want %v", exists, !tt.gone)
			}
		})
	}
}

// TestDeleteGuestGone pins a guest whose configuration is not on its node: ErrVMNotFound,
// for the delete and for the protection read, nothing started.
func TestDeleteGuestGone(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	ghost := proxmox.Guest{VMID: 999, Node: "pve1", Type: proxmox.GuestQEMU}
	if _, err := c.DeleteGuest(testCtx(t), ghost, proxmox.DeleteOptions{}); !errors.Is(err, proxmox.ErrVMNotFound) {
		t.Errorf("DeleteGuest of a missing guest: %v, want ErrVMNotFound", err)
	}
	if _, err := c.GuestProtected(testCtx(t), ghost); !errors.Is(err, proxmox.ErrVMNotFound) {
		t.Errorf("GuestProtected of a missing guest: %v, want ErrVMNotFound", err)
	}
	if n := len(sim.Tasks()); n != 0 {
		t.Errorf("%d tasks started", n)
	}
}

// TestGuestProtected pins the protection read for VMs and containers.
func TestGuestProtected(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	sim.AddGuest(simpve.GuestSpec{VMID: 300, Type: proxmox.GuestLXC, Node: "pve2", Name: "ct-protected", Config: map[string]string{"protection": "1"}})
	for ref, want := range map[string]bool{"db-01": true, "web-01": false, "ct-protected": true, "ct-pve1": false} {
		got, err := c.GuestProtected(testCtx(t), resolve(t, c, ref))
		if err != nil || got != want {
			t.Errorf("GuestProtected(%s) = %v, %v; want %v", ref, got, err, want)
		}
	}
}
