package proxmox_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestResolveGuest pins resolution by vmid and by name over VMs and containers: a numeric
// string is a vmid, a name matching several guests is ambiguous, paused VMs are reported.
func TestResolveGuest(t *testing.T) {
	t.Parallel()
	_, c := guestSim(t, -1)
	tests := []struct {
		ref  string
		want proxmox.Guest
		err  error
	}{
		{ref: "100", want: proxmox.Guest{VMID: 100, Name: "web-01", Node: "pve1", Type: proxmox.GuestQEMU, Status: "running"}},
		{ref: " web-01 ", want: proxmox.Guest{VMID: 100, Name: "web-01", Node: "pve1", Type: proxmox.GuestQEMU, Status: "running"}},
		{ref: "db-01", want: proxmox.Guest{VMID: 101, Name: "db-01", Node: "pve2", Type: proxmox.GuestQEMU, Status: "stopped"}},
		{ref: "105", want: proxmox.Guest{VMID: 105, Name: "batch-01", Node: "pve2", Type: proxmox.GuestQEMU, Status: "paused"}},
		{ref: "ubuntu-template", want: proxmox.Guest{VMID: 9000, Name: "ubuntu-template", Node: "pve1", Type: proxmox.GuestQEMU, Status: "stopped", Template: true}},
		{ref: "ct-pve2", want: proxmox.Guest{VMID: 201, Name: "ct-pve2", Node: "pve2", Type: proxmox.GuestLXC, Status: "stopped"}},
		{ref: "200", want: proxmox.Guest{VMID: 200, Name: "ct-pve1", Node: "pve1", Type: proxmox.GuestLXC, Status: "running"}},
		{ref: "dup", err: proxmox.ErrVMAmbiguous},
		{ref: "no-such-vm", err: proxmox.ErrVMNotFound},
		{ref: "999", err: proxmox.ErrVMNotFound},
		{ref: "Web-01", err: proxmox.ErrVMNotFound}, // names are exact
		{ref: "", err: proxmox.ErrVMNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			t.Parallel()
			got, err := c.ResolveGuest(testCtx(t), tt.ref)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("ResolveGuest = %+v, %v; want %v", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ResolveGuest = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestGuests pins vm.list's source: VMs and containers ordered numerically by vmid
// ("99" before "100"), with vCPUs, memory, uptime and the template flag; a node filter.
func TestGuests(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	sim.AddGuest(simpve.GuestSpec{VMID: 99, Node: "pve2", Name: "legacy", Status: "running", Config: map[string]string{"cores": "3", "memory": "1536"}})
	all, err := c.Guests(testCtx(t), "")
	if err != nil {
		t.Fatalf("Guests: %v", err)
	}
	var ids []int64
	byID := map[int64]proxmox.GuestSummary{}
	for _, g := range all {
		ids = append(ids, g.VMID)
		byID[g.VMID] = g
	}
	if want := []int64{99, 100, 101, 102, 103, 104, 105, 200, 201, 202, 8000, 9000}; !slices.Equal(ids, want) {
		t.Errorf("vmids = %v, want %v", ids, want)
	}
	if g := byID[99]; g.VCPUs != 3 || g.MemoryMB != 1536 || g.Status != "running" || g.Type != proxmox.GuestQEMU {
		t.Errorf("99 = %+v", g)
	}
	if g := byID[101]; g.VCPUs != 8 || g.MemoryMB != 16384 || g.Status != "stopped" || g.UptimeS != 0 || g.Node != "pve2" {
		t.Errorf("101 = %+v", g)
	}
	if g := byID[100]; g.UptimeS <= 0 || g.Name != "web-01" {
		t.Errorf("100 = %+v, want a positive uptime", g)
	}
	if g := byID[9000]; !g.Template || g.Name != "ubuntu-template" {
		t.Errorf("9000 = %+v", g)
	}
	if g := byID[200]; g.Type != proxmox.GuestLXC || g.VCPUs != 1 || g.MemoryMB != 512 {
		t.Errorf("200 = %+v", g)
	}
	one, err := c.Guests(testCtx(t), "pve1")
	if err != nil {
		t.Fatalf("Guests(pve1): %v", err)
	}
	ids = nil
	for _, g := range one {
		ids = append(ids, g.VMID)
	}
	if want := []int64{100, 103, 200, 8000, 9000}; !slices.Equal(ids, want) {
		t.Errorf("pve1 vmids = %v, want %v", ids, want)
	}
	if none, err := c.Guests(testCtx(t), "pve9"); err != nil || len(none) != 0 {
		t.Errorf("Guests(pve9) = %v, %v; want empty", none, err)
	}
}

// TestVMConfig pins the config read: GET .../config flattened and parsed, QEMU and LXC; a
// guest that is gone is ErrVMNotFound.
func TestVMConfig(t *testing.T) {
	t.Parallel()
	_, c := guestSim(t, -1)
	db := resolve(t, c, "db-01")
	cfg, err := c.VMConfig(testCtx(t), db)
	if err != nil {
		t.Fatalf("VMConfig(db-01): %v", err)
	}
	if cfg.VMID != "101" || cfg.Name != "db-01" || cfg.Node != "pve2" || cfg.Type != "qemu" || cfg.Firmware != "ovmf" ||
		cfg.Machine != "q35" || cfg.MemoryMB != 16384 || cfg.CPU.Sockets != 2 || cfg.CPU.Cores != 4 ||
		len(cfg.NICs) != 3 || len(cfg.PCI) != 2 || len(cfg.USB) != 2 {
		t.Errorf("db-01 config = %+v", cfg)
	}
	ct := resolve(t, c, "ct-pve1")
	cfg, err = c.VMConfig(testCtx(t), ct)
	if err != nil || cfg.Type != "lxc" || cfg.Name != "ct-pve1" || len(cfg.Disks) != 2 || len(cfg.NICs) != 2 {
		t.Errorf("ct-pve1 config = %+v, %v", cfg, err)
	}
	moved := db
	moved.Node = "pve1" // the config is not on that node
	if _, err := c.VMConfig(testCtx(t), moved); !errors.Is(err, proxmox.ErrVMNotFound) || !errors.Is(err, proxmox.ErrNotFound) {
		t.Errorf("VMConfig(wrong node) = %v, want ErrVMNotFound", err)
	}
}

// TestBridges pins the bridge list of a node.
func TestBridges(t *testing.T) {
	t.Parallel()
	_, c := guestSim(t, -1)
	got, err := c.Bridges(testCtx(t), "pve2")
	if err != nil || !slices.Equal(got, []string{"vmbr0", "vmbr1"}) {
		t.Errorf("Bridges = %v, %v", got, err)
	}
}

// TestResolveGuestLookupError pins what a failed lookup says: where it looked (by vmid or by
// name, how many guests, on which nodes) and, for an ambiguous name, the candidates by vmid.
func TestResolveGuestLookupError(t *testing.T) {
	t.Parallel()
	_, c := guestSim(t, -1)
	tests := []struct {
		ref        string
		byVMID     bool
		candidates []int64
		is         error
	}{
		{ref: "dup", candidates: []int64{simpve.DemoDupStopped, simpve.DemoDupRunning}, is: proxmox.ErrVMAmbiguous},
		{ref: "nope", is: proxmox.ErrVMNotFound},
		{ref: "4242", byVMID: true, is: proxmox.ErrVMNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			t.Parallel()
			_, err := c.ResolveGuest(testCtx(t), tt.ref)
			var le *proxmox.GuestLookupError
			if !errors.As(err, &le) || !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want a *GuestLookupError matching %v", err, tt.is)
			}
			if le.Ref != tt.ref || le.ByVMID != tt.byVMID || le.Guests == 0 || !slices.Equal(le.Nodes, []string{"pve1", "pve2", "pve3"}) {
				t.Errorf("lookup error = %+v", le)
			}
			var ids []int64
			for _, g := range le.Candidates {
				if g.Node == "" || g.Type == "" {
					t.Errorf("candidate %+v lacks node or type", g)
				}
				ids = append(ids, g.VMID)
			}
			if !slices.Equal(ids, tt.candidates) {
				t.Errorf("candidates %v, want %v", ids, tt.candidates)
			}
		})
	}
}

// TestLocateGuest pins the two lookups' cost and status: LocateGuest reads /cluster/resources
// alone and reports its status (a paused VM is running there); ResolveGuest also reads a
// running VM's status/current and reports the live one.
func TestLocateGuest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ref                   string
		locateSt, resolveSt   string
		locateReq, resolveReq int
	}{
		{ref: "web-01", locateSt: "running", resolveSt: "running", locateReq: 1, resolveReq: 2},
		{ref: "batch-01", locateSt: "running", resolveSt: "paused", locateReq: 1, resolveReq: 2},
		{ref: "db-01", locateSt: "stopped", resolveSt: "stopped", locateReq: 1, resolveReq: 1},
		{ref: "ct-pve1", locateSt: "running", resolveSt: "running", locateReq: 1, resolveReq: 1},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			t.Parallel()
			sim, c := guestSim(t, -1)
			for _, look := range []struct {
				name string
				find func() (proxmox.Guest, error)
				st   string
				reqs int
			}{
				{"LocateGuest", func() (proxmox.Guest, error) { return c.LocateGuest(testCtx(t), tt.ref) }, tt.locateSt, tt.locateReq},
				{"ResolveGuest", func() (proxmox.Guest, error) { return c.ResolveGuest(testCtx(t), tt.ref) }, tt.resolveSt, tt.resolveReq},
			} {
				before := len(sim.RequestLog())
				g, err := look.find()
				if err != nil || g.Status != look.st {
					t.Fatalf("%s = %+v, %v; want status %s", look.name, g, err, look.st)
				}
				if n := len(sim.RequestLog()) - before; n != look.reqs {
					t.Errorf("%s sent %d requests %+v, want %d", look.name, n, sim.RequestLog()[before:], look.reqs)
				}
			}
		})
	}
}
