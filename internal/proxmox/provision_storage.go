package proxmox

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

// StorageStatus is one storage as seen on one node (cluster inventory).
type StorageStatus struct {
	Storage, Node, Type string
	// Content lists the storage's content types, e.g. images, rootdir, import, iso.
	Content []string
	// Shared: the storage is shared between nodes (PVE's "shared").
	Shared bool
	// Enabled: not disabled in /storage config and the node is in its nodes list. PVE's
	// inventory lists a storage on a node only when both hold, so every entry
	// [Client.StorageInventory] returns is Enabled; a disabled storage, or a node outside
	// its nodes list, has no entry at all.
	Enabled bool
	// Active: status "available" on that node (pvestatd reports it online); "unknown" (an
	// unreachable NFS server, an offline node, …) is not active.
	Active bool
}

// StorageInventory reads the cluster storage inventory ONCE with a single request, GET
// /cluster/resources?type=storage, which answers one entry per storage and node (status
// available/unknown, shared, content, plugintype). GET /storage is not needed: PVE leaves
// out disabled storages and nodes outside a storage's nodes list (its storage_check_enabled
// filter), so "missing" already covers them. It returns one StorageStatus per (storage,
// node), in PVE's order. Errors: see the package doc (an *APIError, ErrUnreachable,
// ErrAnswerLost); an unreadable answer is ErrAnswerLost.
func (c *Client) StorageInventory(ctx context.Context) ([]StorageStatus, error) {
	r := request{method: http.MethodGet, path: "/cluster/resources", query: url.Values{"type": {ResourceStorage}}}
	items, err := getList(ctx, c, r, func(it map[string]string) StorageStatus {
		return StorageStatus{
			Storage: it["storage"], Node: it["node"], Type: it["plugintype"],
			Content: splitContent(it["content"]),
			Shared:  flatBool(it, "shared"),
			Enabled: true,
			Active:  it["status"] == "available",
		}
	})
	if err != nil {
		return nil, err
	}
	out := items[:0]
	for _, s := range items {
		if s.Storage != "" && s.Node != "" { // defensive: only storage entries
			out = append(out, s)
		}
	}
	return out, nil
}

// splitContent splits PVE's comma-separated content list; never nil.
func splitContent(v string) []string {
	out := []string{}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
