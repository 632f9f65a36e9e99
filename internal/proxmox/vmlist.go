package proxmox

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/proxbus/proxbus/internal/guestconfig"
)

// GuestSummary is one VM or container in [Client.Guests].
type GuestSummary struct {
	VMID     int64
	Name     string
	Node     string
	Type     GuestType
	Status   string // running, stopped or unknown (node offline), as /cluster/resources says
	VCPUs    int    // maxcpu
	MemoryMB int64  // maxmem in MiB
	UptimeS  int64  // seconds; 0 when not running
	Template bool
}

// Guests lists the cluster's VMs and containers (GET /cluster/resources?type=vm), only
// those on node when node is not empty (an unknown node gives an empty list), ordered
// numerically by vmid. Errors: see the package doc.
func (c *Client) Guests(ctx context.Context, node string) ([]GuestSummary, error) {
	res, err := c.ClusterResources(ctx, ResourceVM)
	if err != nil {
		return nil, err
	}
	out := make([]GuestSummary, 0, len(res))
	for _, r := range res {
		if (r.Type != string(GuestQEMU) && r.Type != string(GuestLXC)) || (node != "" && r.Node != node) {
			continue
		}
		out = append(out, GuestSummary{
			VMID: r.VMID, Name: r.Name, Node: r.Node, Type: GuestType(r.Type), Status: r.Status,
			VCPUs: int(r.MaxCPU), MemoryMB: r.MaxMem / (1 << 20), UptimeS: r.Uptime, Template: r.Template,
		})
	}
	slices.SortStableFunc(out, func(a, b GuestSummary) int { return cmp.Compare(a.VMID, b.VMID) })
	return out, nil
}

// VMConfig reads g's configuration (GET /nodes/{node}/{qemu|lxc}/{vmid}/config), flattens
// it to strings as PVE's config file holds them, and parses it with [guestconfig.Parse].
// Errors: [ErrVMNotFound] when g is gone from its node, the parser's error (matching
// [guestconfig.ErrMalformed]), or the request's error.
func (c *Client) VMConfig(ctx context.Context, g Guest) (guestconfig.Config, error) {
	if err := g.check(); err != nil {
		return guestconfig.Config{}, err
	}
	r := request{method: http.MethodGet, path: g.basePath() + "/config"}
	var m flatMap
	if err := c.do(ctx, r, &m); err != nil {
		return guestconfig.Config{}, guestNotFound(g, err)
	}
	return guestconfig.Parse(string(g.Type), m, g.Node, g.VMID)
}

// isNotFound reports whether err is a refusal meaning "does not exist".
func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
