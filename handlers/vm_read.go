package handlers

import (
	"context"
	"strconv"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// VMConfigGet returns a guest's parsed configuration (contract §9 vm.config.get; a read).
func VMConfigGet() Verb {
	return Spec[GuestRef]{
		Name:     "vm.config.get",
		Access:   Read,
		Decode:   decodeGuestRef,
		Locate:   locateGuest,
		Resource: func(in GuestRef) string { return in.VM },
		Dispatch: func(ctx context.Context, x *Exec, in GuestRef) (Outcome, error) {
			cfg, err := x.Proxmox.VMConfig(ctx, in.guest)
			if err != nil {
				return Outcome{}, err
			}
			return Outcome{Status: 200, Result: ResultOK, Output: cfg}, nil
		},
	}
}

// VMListInput is the data of vm.list.
type VMListInput struct {
	Node string `json:"node,omitempty"`
}

// VMListEntry is one entry of vm.list's output (contract §9): `{vms: [VMListEntry…]}`,
// ordered numerically by vmid. Consumers of the result decode it with this type.
type VMListEntry struct {
	VMID     string `json:"vmid"`
	Name     string `json:"name"`
	Node     string `json:"node"`
	Type     string `json:"type"`
	Status   string `json:"status"`
	VCPUs    int    `json:"vcpus"`
	MemoryMB int64  `json:"memory_mb"`
	UptimeS  int64  `json:"uptime_s"`
	Template bool   `json:"template"`
}

// VMList lists the cluster's (or one node's) VMs and containers, ordered numerically by vmid
// (a read).
func VMList() Verb {
	return Spec[VMListInput]{
		Name:   "vm.list",
		Access: Read,
		Decode: func(f *Fields) VMListInput {
			return VMListInput{Node: f.String("node", false, nodeNamePattern.MatchString)}
		},
		Resource: func(in VMListInput) string { return in.Node },
		Dispatch: func(ctx context.Context, x *Exec, in VMListInput) (Outcome, error) {
			guests, err := x.Proxmox.Guests(ctx, in.Node)
			if err != nil {
				return Outcome{}, err
			}
			return Outcome{Status: 200, Result: ResultOK, Output: map[string]any{"vms": vmViews(guests)}}, nil
		},
	}
}

func vmViews(guests []proxmox.GuestSummary) []VMListEntry {
	out := make([]VMListEntry, len(guests))
	for i, g := range guests {
		out[i] = VMListEntry{VMID: strconv.FormatInt(g.VMID, 10), Name: g.Name, Node: g.Node, Type: string(g.Type),
			Status: g.Status, VCPUs: g.VCPUs, MemoryMB: g.MemoryMB, UptimeS: g.UptimeS, Template: g.Template}
	}
	return out
}
