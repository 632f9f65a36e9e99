package handlers

import (
	"fmt"
	"testing"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// TestGuestLookupOutcome pins vm_not_found and vm_ambiguous: their status and reason, and a
// detail saying where the lookup looked (by vmid or name, which nodes) or which guests an
// ambiguous name matched (vmid, type, node); other not-found errors keep an empty detail.
func TestGuestLookupOutcome(t *testing.T) {
	t.Parallel()
	nodes := []string{"pve1", "pve2", "pve3"}
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantReason string
		wantDetail string
	}{
		{
			name:       "unknown vmid",
			err:        fmt.Errorf("locate: %w", &proxmox.GuestLookupError{Ref: "4242", ByVMID: true, Guests: 12, Nodes: nodes}),
			wantStatus: 404, wantReason: ReasonVMNotFound,
			wantDetail: "no guest with vmid 4242 in the endpoint's cluster resources (/cluster/resources?type=vm: 12 VMs and containers on nodes pve1, pve2, pve3)",
		},
		{
			name:       "unknown name",
			err:        &proxmox.GuestLookupError{Ref: "nope", Guests: 3, Nodes: []string{"pve1"}},
			wantStatus: 404, wantReason: ReasonVMNotFound,
			wantDetail: `no guest named "nope" (names match exactly) in the endpoint's cluster resources (/cluster/resources?type=vm: 3 VMs and containers on nodes pve1)`,
		},
		{
			name:       "empty cluster",
			err:        &proxmox.GuestLookupError{Ref: "100", ByVMID: true},
			wantStatus: 404, wantReason: ReasonVMNotFound,
			wantDetail: "no guest with vmid 100 in the endpoint's cluster resources (/cluster/resources?type=vm lists no VM or container)",
		},
		{
			name: "ambiguous name",
			err: &proxmox.GuestLookupError{Ref: "dup", Guests: 12, Nodes: nodes, Candidates: []proxmox.Guest{
				{VMID: 103, Name: "dup", Node: "pve1", Type: proxmox.GuestQEMU},
				{VMID: 207, Name: "dup", Node: "pve3", Type: proxmox.GuestLXC},
			}},
			wantStatus: 409, wantReason: ReasonVMAmbiguous,
			wantDetail: `name "dup" matches 2 guests: 103 (qemu on pve1), 207 (lxc on pve3); address one by vmid`,
		},
		{
			name:       "gone from its node",
			err:        fmt.Errorf("%w: qemu 100 on pve1", proxmox.ErrVMNotFound),
			wantStatus: 404, wantReason: ReasonVMNotFound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, class := classify(tt.err)
			if class != final || out.Status != tt.wantStatus || out.Result != ResultRefused || out.Reason != tt.wantReason {
				t.Fatalf("classify = %+v (%v), want %d refused %s", out, class, tt.wantStatus, tt.wantReason)
			}
			if out.Detail != tt.wantDetail {
				t.Errorf("detail\n got %q\nwant %q", out.Detail, tt.wantDetail)
			}
		})
	}
}
