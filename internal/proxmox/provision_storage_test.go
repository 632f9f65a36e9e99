package proxmox_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// TestStorageInventory pins the per-node inventory: shared, node-local (nodes=), disabled
// (absent) and unavailable (not active) storages, from one request.
func TestStorageInventory(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	sim.AddStorage(proxmox.StorageConfig{"storage": "fast", "type": "lvmthin", "vgname": "fast", "thinpool": "data", "content": "images", "nodes": "pve2"})
	sim.AddStorage(proxmox.StorageConfig{"storage": "old", "type": "dir", "path": "/srv/old", "content": "images", "disable": "1"})
	sim.SetStorageStatus("images", "pve3", "unknown")
	before := len(sim.RequestLog())

	inv, err := c.StorageInventory(testCtx(t))
	if err != nil {
		t.Fatalf("StorageInventory: %v", err)
	}
	if n := len(sim.RequestLog()) - before; n != 1 {
		t.Errorf("%d requests, want exactly one", n)
	}
	by := map[string]proxmox.StorageStatus{}
	for _, s := range inv {
		by[s.Storage+"@"+s.Node] = s
		if !s.Enabled {
			t.Errorf("%s@%s not enabled: PVE lists only enabled storages", s.Storage, s.Node)
		}
	}
	// 4 demo storages on 3 nodes + fast on pve2; old is disabled and absent.
	if len(inv) != 13 {
		t.Errorf("%d entries, want 13: %+v", len(inv), inv)
	}
	tests := []struct {
		key     string
		present bool
		want    proxmox.StorageStatus
	}{
		{"ceph@pve2", true, proxmox.StorageStatus{Storage: "ceph", Node: "pve2", Type: "rbd", Content: []string{"images", "rootdir"}, Shared: true, Enabled: true, Active: true}},
		{"local-lvm@pve3", true, proxmox.StorageStatus{Storage: "local-lvm", Node: "pve3", Type: "lvmthin", Content: []string{"images", "rootdir"}, Enabled: true, Active: true}},
		{"images@pve1", true, proxmox.StorageStatus{Storage: "images", Node: "pve1", Type: "nfs", Content: []string{"import", "iso"}, Shared: true, Enabled: true, Active: true}},
		{"images@pve3", true, proxmox.StorageStatus{Storage: "images", Node: "pve3", Type: "nfs", Content: []string{"import", "iso"}, Shared: true, Enabled: true, Active: false}},
		{"fast@pve2", true, proxmox.StorageStatus{Storage: "fast", Node: "pve2", Type: "lvmthin", Content: []string{"images"}, Enabled: true, Active: true}},
		{"fast@pve1", false, proxmox.StorageStatus{}},
		{"old@pve1", false, proxmox.StorageStatus{}},
	}
	for _, tt := range tests {
		got, found := by[tt.key]
		if found != tt.present {
			t.Errorf("%s present = %v, want %v", tt.key, found, tt.present)
			continue
		}
		if found && (got.Storage != tt.want.Storage || got.Node != tt.want.Node || got.Type != tt.want.Type ||
			!slices.Equal(got.Content, tt.want.Content) || got.Shared != tt.want.Shared || got.Active != tt.want.Active) {
			t.Errorf("%s = %+v, want %+v", tt.key, got, tt.want)
		}
	}
}

// TestStorageInventoryFailure: a refused inventory read is an *APIError.
func TestStorageInventoryFailure(t *testing.T) {
	t.Parallel()
	sim, c := guestSim(t, -1)
	sim.FailNext("GET", "/cluster/resources", 1, 500, "cluster not ready - no quorum?")
	inv, err := c.StorageInventory(testCtx(t))
	var ae *proxmox.APIError
	if !errors.As(err, &ae) || ae.Status != 500 || ae.Message != "cluster not ready - no quorum?" || inv != nil {
		t.Fatalf("StorageInventory = %v, %v; want the 500 as *APIError", inv, err)
	}
}
