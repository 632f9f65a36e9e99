package proxmox

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Node is one cluster node as GET /nodes lists it.
type Node struct {
	Node   string // node name, e.g. "pve1"
	Status string // "online", "offline" or "unknown"
}

// Nodes lists the cluster's nodes (GET /nodes), in PVE's order. Errors: see the package doc.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	return getList(ctx, c, request{method: http.MethodGet, path: "/nodes"}, func(it map[string]string) Node {
		return Node{Node: it["node"], Status: it["status"]}
	})
}

// Version is PVE's version information (GET /version).
type Version struct {
	Version string // e.g. "9.2.0"
	Release string // e.g. "9.2"
	RepoID  string // git commit of pve-manager
}

// Version returns the version of the API server (GET /version); a cheap authenticated
// readiness probe. Errors: see the package doc.
func (c *Client) Version(ctx context.Context) (Version, error) {
	r := request{method: http.MethodGet, path: "/version"}
	var m flatMap
	if err := c.do(ctx, r, &m); err != nil {
		return Version{}, err
	}
	return Version{Version: m["version"], Release: m["release"], RepoID: m["repoid"]}, nil
}

// Resource types accepted by [Client.ClusterResources].
const (
	ResourceVM      = "vm"
	ResourceStorage = "storage"
)

// ClusterResource is one entry of GET /cluster/resources. Which fields are set depends on
// Type: "node" (Node, Status), "storage" (one entry per storage and node: Storage, Node,
// PluginType, Content, Shared, Status "available"/…, Disk, MaxDisk), "qemu"/"lxc" (VMID,
// Name, Node, Status, Template, MaxCPU, MaxMem, …).
type ClusterResource struct {
	ID         string // "node/pve1", "storage/pve1/local", "qemu/100"
	Type       string // node, storage, qemu, lxc, pool, sdn
	Node       string
	Status     string
	Name       string
	VMID       int64
	Storage    string
	PluginType string
	Content    string
	Shared     bool
	Template   bool
	Disk       int64
	MaxDisk    int64
	Mem        int64
	MaxMem     int64
	MaxCPU     float64
	Uptime     int64
}

// ClusterResources returns GET /cluster/resources, filtered by typ (one of the Resource*
// constants) when not empty. Errors: see the package doc.
//
// The answer lists the whole cluster, and every guest command reads it to find its guest, so
// callers asking at the same time share one read, never one that started before they asked
// (see coalescer). The returned slice may be shared with other callers: do not modify it.
func (c *Client) ClusterResources(ctx context.Context, typ string) ([]ClusterResource, error) {
	co := c.resources.of(typ)
	return co.do(ctx, func(ctx context.Context) ([]ClusterResource, error) {
		start := time.Now()
		list, err := c.readClusterResources(ctx, typ)
		if err == nil && typ == ResourceVM {
			c.resources.keep(start, list)
		}
		return list, err
	})
}

// readClusterResources is one GET /cluster/resources.
func (c *Client) readClusterResources(ctx context.Context, typ string) ([]ClusterResource, error) {
	r := request{method: http.MethodGet, path: "/cluster/resources"}
	if typ != "" {
		r.query = url.Values{"type": {typ}}
	}
	return getList(ctx, c, r, func(it map[string]string) ClusterResource {
		return ClusterResource{
			ID: it["id"], Type: it["type"], Node: it["node"], Status: it["status"], Name: it["name"],
			VMID: flatInt(it, "vmid"), Storage: it["storage"], PluginType: it["plugintype"],
			Content: it["content"], Shared: flatBool(it, "shared"), Template: flatBool(it, "template"),
			Disk: flatInt(it, "disk"), MaxDisk: flatInt(it, "maxdisk"), Mem: flatInt(it, "mem"),
			MaxMem: flatInt(it, "maxmem"), MaxCPU: flatFloat(it, "maxcpu"), Uptime: flatInt(it, "uptime"),
		}
	})
}

// resourceReads holds one coalescer of /cluster/resources reads per type filter, and the
// newest read of the guests (type vm), which the client's watch diffs instead of reading
// them itself (see watcher.pass).
type resourceReads struct {
	mu       sync.Mutex
	byTyp    map[string]*coalescer[[]ClusterResource]
	vmAt     time.Time // when the newest read of the guests started; zero: none yet
	vmNewest []ClusterResource
}

// keep records list, a read of the guests that started at start, when it is the newest.
func (r *resourceReads) keep(start time.Time, list []ClusterResource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if start.After(r.vmAt) {
		r.vmAt, r.vmNewest = start, list
	}
}

// newestVM is the newest read of the guests and when it started (zero: none yet).
func (r *resourceReads) newestVM() (time.Time, []ClusterResource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.vmAt, r.vmNewest
}

// of returns the coalescer of reads filtered by typ.
func (r *resourceReads) of(typ string) *coalescer[[]ClusterResource] {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byTyp == nil {
		r.byTyp = map[string]*coalescer[[]ClusterResource]{}
	}
	co, ok := r.byTyp[typ]
	if !ok {
		co = &coalescer[[]ClusterResource]{}
		r.byTyp[typ] = co
	}
	return co
}
