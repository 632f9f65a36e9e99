package proxmox

import (
	"context"
	"fmt"
	"net/http"
)

// NodeAddress returns the IP address of cluster node node as the cluster knows it (GET
// /cluster/status, the "ip" of the node's entry): the host to reach it over SSH (add
// ":22"). A node missing from the status or listed without an IP → an error matching
// [ErrNotFound]. Needs Sys.Audit on "/". Errors: see the package doc.
func (c *Client) NodeAddress(ctx context.Context, node string) (string, error) {
	r := request{method: http.MethodGet, path: "/cluster/status"}
	items, err := getList(ctx, c, r, func(it map[string]string) map[string]string { return it })
	if err != nil {
		return "", err
	}
	for _, it := range items {
		if it["type"] == "node" && it["name"] == node && it["ip"] != "" {
			return it["ip"], nil
		}
	}
	return "", fmt.Errorf("%w: node %q has no address in the cluster status", ErrNotFound, node)
}
