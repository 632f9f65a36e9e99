package proxmox

import (
	"context"
	"net/http"
	"net/url"
	"slices"
)

// Bridges returns the names of node's Linux and OVS bridges, sorted (GET
// /nodes/{node}/network?type=any_bridge), e.g. ["vmbr0", "vmbr1"].
// Errors: see the package doc.
func (c *Client) Bridges(ctx context.Context, node string) ([]string, error) {
	r := request{method: http.MethodGet, path: "/nodes/" + url.PathEscape(node) + "/network", query: url.Values{"type": {"any_bridge"}}}
	names, err := getList(ctx, c, r, func(it map[string]string) string { return it["iface"] })
	if err != nil {
		return nil, err
	}
	names = slices.DeleteFunc(names, func(s string) bool { return s == "" })
	slices.Sort(names)
	return names, nil
}
