package proxmox

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// ContainerRequest is a new LXC container made from an OS template (a vztmpl volume), as
// POST /nodes/{node}/lxc creates it (pve-container PVE::API2::LXC create_vm). Zero numbers
// and empty strings are not sent (PVE's defaults: 512 MiB memory and swap, all host cores,
// the host's DNS settings).
type ContainerRequest struct {
	Node         string
	VMID         int64
	OSTemplate   string // "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"
	Storage      string // the root disk's storage (content rootdir)
	RootfsGB     int64  // the root disk's size in GiB
	Hostname     string
	MemoryMB     int64
	SwapMB       int64 // -1 → not sent; 0 → swap 0
	Cores        int64
	Unprivileged bool
	Nesting      bool   // features nesting=1
	Password     Secret // root's password in the container; "" → not sent
	SSHKeys      string // authorized keys for root, one a line; "" → not sent
	Nets         []ContainerNet
	Nameserver   string
	Searchdomain string
}

// ContainerNet is one network interface of a container, rendered into net<Index>.
type ContainerNet struct {
	Index    int64  // 0–9: net<Index>, eth<Index> inside the container
	Bridge   string // vmbr0
	VLANTag  int64  // 0 → untagged
	IP       string // "dhcp" or an IPv4 CIDR
	Gateway  string // "" → none
	Firewall bool
}

// Value renders n as PVE's net[n] property string: name=eth<Index>,bridge=…,tag=…,ip=…,gw=…,
// firewall=1. PVE adds the MAC (hwaddr) itself.
func (n ContainerNet) Value() string {
	parts := []string{"name=eth" + strconv.FormatInt(n.Index, 10), "bridge=" + n.Bridge}
	if n.VLANTag != 0 {
		parts = append(parts, "tag="+strconv.FormatInt(n.VLANTag, 10))
	}
	if n.IP != "" {
		parts = append(parts, "ip="+n.IP)
	}
	if n.Gateway != "" {
		parts = append(parts, "gw="+n.Gateway)
	}
	if n.Firewall {
		parts = append(parts, "firewall=1")
	}
	return strings.Join(parts, ",")
}

// containerParams are the POST /nodes/{node}/lxc parameters [Client.CreateContainer] can
// send, with PVE's schema names ("net[n]" stands for net0…net9). UsedAPI declares them.
var containerParams = []string{
	"vmid", "ostemplate", "storage", "rootfs", "hostname", "memory", "swap", "cores", "unprivileged", "features",
	"password", "ssh-public-keys", "net[n]", "nameserver", "searchdomain",
}

// Form returns the POST /nodes/{node}/lxc parameters for r. The root disk is rootfs =
// "<storage>:<size in GiB>" (PVE allocates a new volume of that size). The result holds the
// password: never log it.
func (r ContainerRequest) Form() url.Values {
	f := url.Values{}
	f.Set("vmid", strconv.FormatInt(r.VMID, 10))
	f.Set("ostemplate", r.OSTemplate)
	f.Set("storage", r.Storage)
	f.Set("rootfs", r.Storage+":"+strconv.FormatInt(r.RootfsGB, 10))
	f.Set("hostname", r.Hostname)
	f.Set("unprivileged", boolParam(r.Unprivileged))
	setPositive := func(k string, v int64) {
		if v > 0 {
			f.Set(k, strconv.FormatInt(v, 10))
		}
	}
	setPositive("memory", r.MemoryMB)
	setPositive("cores", r.Cores)
	if r.SwapMB >= 0 {
		f.Set("swap", strconv.FormatInt(r.SwapMB, 10))
	}
	if r.Nesting {
		f.Set("features", "nesting=1")
	}
	if r.Password != "" {
		f.Set("password", r.Password.Reveal())
	}
	if r.SSHKeys != "" {
		f.Set("ssh-public-keys", r.SSHKeys)
	}
	for _, n := range r.Nets {
		f.Set("net"+strconv.FormatInt(n.Index, 10), n.Value())
	}
	if r.Nameserver != "" {
		f.Set("nameserver", r.Nameserver)
	}
	if r.Searchdomain != "" {
		f.Set("searchdomain", r.Searchdomain)
	}
	return f
}

// CreateContainer sends exactly one POST /nodes/{node}/lxc creating the container r and
// waits for its task (vzcreate: the root disk is allocated, the template unpacked, the
// password and SSH keys set); it returns the task's UPID, also with a task error. It is never
// retried: after [ErrAnswerLost] read the container before creating it again. Errors:
// *[APIError] (400 with Params, e.g. storage "storage 'x' does not support container
// directories"; 500 "CT 123 already exists on node 'pve1'" matching [ErrAlreadyExists];
// 500 "unable to use volume x - content type needs to be 'vztmpl'"; 403), *[TaskError]
// (e.g. "unable to create CT 123 - volume 'local:vztmpl/x' does not exist"), or the package's
// transport errors. The password is scrubbed from every error.
func (c *Client) CreateContainer(ctx context.Context, r ContainerRequest) (string, error) {
	req := request{method: http.MethodPost, path: "/nodes/" + url.PathEscape(r.Node) + "/lxc", form: r.Form()}
	if r.Password != "" {
		req.secrets = []string{r.Password.Reveal()}
	}
	return c.runTask(ctx, r.Node, req)
}

// containerAPI is the PVE API ct.provision uses besides the reads and power methods declared
// with the guests and vm.provision: the container create.
func containerAPI() []APIUse {
	return []APIUse{{Method: "POST", Path: "/nodes/{node}/lxc", Params: append([]string(nil), containerParams...)}}
}
