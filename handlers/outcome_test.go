package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/proxbus/proxbus/internal/netbox"
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

// TestRefusedTokenWaits pins that a token refused before any write is waited out, not
// answered: Proxmox's 401 and NetBox's 401/403 are `unavailable` with a step detail naming
// what to fix, while Proxmox's 403 (a missing privilege) stays the command's outcome.
func TestRefusedTokenWaits(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"detail":"Invalid v1 token"}`))
	}))
	t.Cleanup(srv.Close)
	nb, err := netbox.New(netbox.Config{URL: srv.URL, Token: "0123456789abcdef0123456789abcdef01234567"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = nb.CreateJournalEntry(context.Background(), netbox.JournalEntry{ObjectType: netbox.ObjectTypeEndpoint, ObjectID: 1, Kind: netbox.KindInfo, Comments: "x"})
	if !errors.Is(err, netbox.ErrUnauthorized) {
		t.Fatalf("the stub's answer: %v, want ErrUnauthorized", err)
	}
	nb403 := fmt.Errorf("journal: %w", err)
	tests := []struct {
		name       string
		err        error
		wantClass  failure
		wantDetail string
	}{
		{
			name:       "Proxmox 401",
			err:        fmt.Errorf("locate: %w", &proxmox.APIError{Method: "GET", Path: "/cluster/resources", Status: 401, Message: "invalid token value!"}),
			wantClass:  unavailable,
			wantDetail: "Proxmox refused the endpoint's API token (HTTP 401); fix token_id or its secret in the endpoints file; nothing was written; waiting",
		},
		{
			name:       "NetBox 403",
			err:        nb403,
			wantClass:  unavailable,
			wantDetail: "NetBox refused the token (HTTP 403); fix --netbox-token (PROXBUS_NETBOX_TOKEN) or its permissions in NetBox; waiting",
		},
		{
			name:       "NetBox unavailable",
			err:        fmt.Errorf("locate: %w", netbox.ErrUnavailable),
			wantClass:  unavailable,
			wantDetail: "NetBox is unavailable; nothing was written; waiting",
		},
		{
			name:       "Proxmox 403 is an outcome",
			err:        &proxmox.APIError{Method: "POST", Path: "/storage", Status: 403, Message: "Permission check failed (/storage, Datastore.Allocate)"},
			wantClass:  final,
			wantDetail: "fallback",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, class := classify(tt.err)
			if class != tt.wantClass {
				t.Fatalf("classify = %+v (%v), want class %v", out, class, tt.wantClass)
			}
			if tt.wantClass == final && (out.Reason != ReasonProxmoxRefused || out.ProxmoxStatus != 403) {
				t.Errorf("outcome %+v, want 502 proxmox_refused 403", out)
			}
			if got := waitDetail(tt.err, "fallback"); got != tt.wantDetail {
				t.Errorf("waitDetail\n got %q\nwant %q", got, tt.wantDetail)
			}
		})
	}
}
