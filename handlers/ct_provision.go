package handlers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

// ReasonTemplateNotFound: ct.provision's ostemplate is not on the target node's view of its
// storage (404); nothing was written.
const ReasonTemplateNotFound = "template_not_found"

// Steps of ct.provision, in order (contract §9); storage_inventory is vm.provision's.
const (
	stepCreateContainer = "create_container"
	stepStartContainer  = "start_container"
)

// CTProvisionInput is the validated data of ct.provision (contract §9). Password is
// write-only.
type CTProvisionInput struct {
	NewVMID      int64   `json:"new_vmid"`
	Hostname     string  `json:"hostname"`
	TargetNode   string  `json:"target_node"`
	OSTemplate   string  `json:"ostemplate"`
	Storage      string  `json:"storage"`
	RootfsGB     int64   `json:"rootfs_gb"`
	MemoryMB     int64   `json:"memory_mb,omitempty"`
	SwapMB       *int64  `json:"swap_mb,omitempty"`
	Cores        int64   `json:"cores,omitempty"`
	Unprivileged bool    `json:"unprivileged"`
	Nesting      bool    `json:"nesting,omitempty"`
	Password     string  `json:"password,omitempty"`
	SSHKeys      string  `json:"ssh_keys,omitempty"`
	Net          []CTNet `json:"net,omitempty"`
	Nameserver   string  `json:"nameserver,omitempty"`
	Searchdomain string  `json:"searchdomain,omitempty"`
	Start        bool    `json:"start"`
}

// CTNet is one network interface of a new container: net<Index>, eth<Index> inside it.
type CTNet struct {
	Index    int64  `json:"index"`
	Bridge   string `json:"bridge"`
	VLANTag  int64  `json:"vlan_tag,omitempty"`
	IP       string `json:"ip"`
	GW       string `json:"gw,omitempty"`
	Firewall bool   `json:"firewall,omitempty"`
}

// ctOutput is ct.provision's output; on failure it carries what was done so far.
type ctOutput struct {
	NewVMID    string `json:"new_vmid"`
	Node       string `json:"node"`
	CreateUPID string `json:"create_upid,omitempty"`
	StartUPID  string `json:"start_upid,omitempty"`
	Status     string `json:"status,omitempty"` // started | stopped
}

var (
	// vztmplPattern is a vztmpl volume id, "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst".
	vztmplPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]*[A-Za-z0-9]:vztmpl/[^/\s]+$`)
	maxCTNets     = 10
)

// CTProvision is the ct.provision verb (contract §9): an LXC container from an OS template
// (a vztmpl volume) on the target node — POST /nodes/{node}/lxc, waiting for its vzcreate
// task — then started (a step of its own, not PVE's start=1, so a start failure is told
// apart from a create failure). Before anything is written: the bridges of every net exist
// on the target node (422 invalid_body naming net, since PVE takes any bridge into a
// container's configuration and fails only at start); the root disk's storage is enabled,
// active and holds rootdir on the node (409 target_storage_unavailable); the template is
// listed in its storage's vztmpl content as the node sees it (404 template_not_found).
// Nesting on a privileged container is refused in validation (PVE allows its feature flags
// to root@pam only). A lost create answer, or an attempt that stopped after sending it, is
// confirmed by reading the container and its vzcreate task, never by a second create: a
// container being created is waited for, then started; no container and no vzcreate task
// since the command arrived means the create never reached Proxmox and it runs as new; a
// failed vzcreate is 502 task_failed. Exclusive on the new vmid; journals on its NetBox VM.
func CTProvision() Verb {
	return Spec[CTProvisionInput]{
		Name:        "ct.provision",
		Access:      Write,
		Decode:      decodeCTProvision,
		Locate:      locateCTProvision,
		Resource:    func(in CTProvisionInput) string { return strconv.FormatInt(in.NewVMID, 10) },
		JournalVMID: func(in CTProvisionInput) int64 { return in.NewVMID },
		Exclusive:   func(in CTProvisionInput) (string, string) { return store.KindGuest, strconv.FormatInt(in.NewVMID, 10) },
		Secrets:     func(in CTProvisionInput) []string { return []string{in.Password} },
		Describe: func(in CTProvisionInput) []Bullet {
			return []Bullet{{"vmid", strconv.FormatInt(in.NewVMID, 10)}, {"hostname", in.Hostname}, {"target_node", in.TargetNode},
				{"ostemplate", in.OSTemplate}, {"storage", in.Storage}, {"rootfs_gb", strconv.FormatInt(in.RootfsGB, 10)},
				{"unprivileged", boolWord(in.Unprivileged)}, {"start", boolWord(in.Start)}}
		},
		Dispatch: dispatchCTProvision,
		Confirm:  confirmCTProvision,
	}
}

func decodeCTProvision(f *Fields) CTProvisionInput {
	in := CTProvisionInput{
		NewVMID:    f.Int("new_vmid", true, 0, 100, 999999999),
		Hostname:   f.String("hostname", true, validDNSName),
		TargetNode: f.String("target_node", true, nodeNamePattern.MatchString),
		OSTemplate: f.String("ostemplate", true, func(s string) bool { return len(s) <= 255 && vztmplPattern.MatchString(s) }),
		Storage:    f.String("storage", true, storageIDPattern.MatchString),
		RootfsGB:   f.Int("rootfs_gb", true, 0, 1, 131072),
		MemoryMB:   f.Int("memory_mb", false, 0, 16, 4194304),
		Cores:      f.Int("cores", false, 0, 1, 8192),
		// PVE's schema: at least 5 characters.
		Password:     f.String("password", false, func(s string) bool { return len([]rune(s)) >= 5 && len(s) <= 256 }),
		Unprivileged: f.Bool("unprivileged", true),
		Nesting:      f.Bool("nesting", false),
		Nameserver:   f.String("nameserver", false, validNameservers),
		Searchdomain: f.String("searchdomain", false, validDNSName),
		Start:        f.Bool("start", true),
	}
	if f.Has("swap_mb") {
		swap := f.Int("swap_mb", false, 0, 0, 4194304)
		in.SwapMB = &swap
	}
	if in.Nesting && !in.Unprivileged {
		f.Fail("nesting") // PVE lets only root@pam set a privileged container's feature flags
	}
	in.SSHKeys = decodeSSHKeys(f)
	seen := map[int64]bool{}
	f.Objects("net", maxCTNets, func(_ int, n *Fields) {
		nic := CTNet{
			Index:    n.Int("index", true, 0, 0, 9),
			Bridge:   n.String("bridge", true, bridgePattern.MatchString),
			VLANTag:  n.Int("vlan_tag", false, 0, 1, 4094),
			IP:       n.String("ip", true, validCTIP),
			GW:       n.String("gw", false, func(s string) bool { ip := net.ParseIP(s); return ip != nil && ip.To4() != nil }),
			Firewall: n.Bool("firewall", false),
		}
		if nic.GW != "" && nic.IP == "dhcp" {
			n.Fail("gw") // a gateway goes with a static address
		}
		if seen[nic.Index] {
			n.Fail("index")
		}
		seen[nic.Index] = true
		in.Net = append(in.Net, nic)
	})
	return in
}

// validCTIP is a container NIC's ip: "dhcp" or an IPv4 address with its prefix length.
func validCTIP(s string) bool {
	if s == "dhcp" {
		return true
	}
	ip, _, err := net.ParseCIDR(s)
	return err == nil && ip.To4() != nil && strings.Contains(s, ".")
}

// locateCTProvision checks the bridges of the target node before anything is journaled.
func locateCTProvision(ctx context.Context, c *proxmox.Client, in CTProvisionInput) (CTProvisionInput, error) {
	if len(in.Net) == 0 {
		return in, nil
	}
	bridges, err := c.Bridges(ctx, in.TargetNode)
	if err != nil {
		return in, err
	}
	for _, n := range in.Net {
		if !slices.Contains(bridges, n.Bridge) {
			return in, fieldError{"net"}
		}
	}
	return in, nil
}

// request is the container create for in.
func (in CTProvisionInput) request() proxmox.ContainerRequest {
	r := proxmox.ContainerRequest{
		Node: in.TargetNode, VMID: in.NewVMID, OSTemplate: in.OSTemplate, Storage: in.Storage, RootfsGB: in.RootfsGB,
		Hostname: in.Hostname, MemoryMB: in.MemoryMB, SwapMB: -1, Cores: in.Cores, Unprivileged: in.Unprivileged,
		Nesting: in.Nesting, Password: proxmox.Secret(in.Password), SSHKeys: in.SSHKeys,
		Nameserver: in.Nameserver, Searchdomain: in.Searchdomain,
	}
	if in.SwapMB != nil {
		r.SwapMB = *in.SwapMB
	}
	for _, n := range in.Net {
		r.Nets = append(r.Nets, proxmox.ContainerNet{Index: n.Index, Bridge: n.Bridge, VLANTag: n.VLANTag, IP: n.IP, Gateway: n.GW, Firewall: n.Firewall})
	}
	return r
}

// dispatchCTProvision checks the storages and the template, creates the container and starts
// it.
func dispatchCTProvision(ctx context.Context, x *Exec, in CTProvisionInput) (Outcome, error) {
	out := ctOutput{NewVMID: strconv.FormatInt(in.NewVMID, 10), Node: in.TargetNode}
	if refusal, err := ctInventory(ctx, x, in); err != nil || refusal != nil {
		return derefOutcome(refusal), err
	}
	var upid string
	_, err := x.Write(ctx, stepCreateContainer, "from "+in.OSTemplate, func(ctx context.Context) (Sent, error) {
		var err error
		upid, err = x.Proxmox.CreateContainer(ctx, in.request())
		return Sent{UPID: upid}, err
	})
	out.CreateUPID = upid
	if err != nil {
		return Outcome{}, err
	}
	return startContainer(ctx, x, in, out, false)
}

// ctInventory is the storage_inventory step: one read of the cluster's storages, then the
// template's storage's vztmpl content as the target node sees it.
func ctInventory(ctx context.Context, x *Exec, in CTProvisionInput) (*Outcome, error) {
	x.Step(ctx, stepStorageInventory, events.StepStarted, "", "")
	refuse := func(out Outcome) (*Outcome, error) {
		x.Step(ctx, stepStorageInventory, events.StepError, "", out.Detail)
		out.Output = ctOutput{NewVMID: strconv.FormatInt(in.NewVMID, 10), Node: in.TargetNode}
		return &out, nil
	}
	inv, err := x.Proxmox.StorageInventory(ctx)
	if err != nil {
		return refuse(Outcome{Status: 502, Result: ResultFailed, Reason: ReasonStorageLookupFailed, Detail: "the cluster storage inventory could not be read"})
	}
	if st, ok := findStorage(inv, in.Storage, in.TargetNode); !ok || !st.Active || !slices.Contains(st.Content, "rootdir") {
		return refuse(Outcome{Status: 409, Result: ResultRefused, Reason: ReasonTargetStorageUnavailable, Fields: []string{"storage"},
			Detail: fmt.Sprintf("storage %s is missing, disabled, unavailable or without content rootdir on node %s; "+
				"choose a storage that holds container root disks there", in.Storage, in.TargetNode)})
	}
	tstorage, _, _ := strings.Cut(in.OSTemplate, ":")
	notFound := Outcome{Status: 404, Result: ResultRefused, Reason: ReasonTemplateNotFound, Fields: []string{"ostemplate"},
		Detail: fmt.Sprintf("the template is not on storage %s as node %s sees it; download it there first (pveam download %s <template>) "+
			"or name one that `pveam list %s` shows", tstorage, in.TargetNode, tstorage, tstorage)}
	if st, ok := findStorage(inv, tstorage, in.TargetNode); !ok || !st.Active {
		return refuse(notFound)
	}
	vols, err := x.Proxmox.StorageContent(ctx, in.TargetNode, tstorage, "vztmpl")
	switch {
	case errors.Is(err, proxmox.ErrNotFound):
		return refuse(notFound)
	case err != nil:
		x.Step(ctx, stepStorageInventory, events.StepError, "", "")
		return nil, err
	case !slices.ContainsFunc(vols, func(v proxmox.Volume) bool { return v.VolID == in.OSTemplate }):
		return refuse(notFound)
	}
	x.Step(ctx, stepStorageInventory, events.StepDone, "", "")
	return nil, nil
}

// startContainer is the start_container step: the container this command created is stopped
// (running, when resumed: skipped).
func startContainer(ctx context.Context, x *Exec, in CTProvisionInput, out ctOutput, running bool) (Outcome, error) {
	switch {
	case !in.Start:
		x.Step(ctx, stepStartContainer, events.StepSkipped, "", "start: false")
		out.Status = "stopped"
	case running:
		x.Step(ctx, stepStartContainer, events.StepSkipped, "", "already running")
		out.Status = "started"
	default:
		var res proxmox.TaskResult
		_, err := x.Write(ctx, stepStartContainer, "", func(ctx context.Context) (Sent, error) {
			var err error
			res, err = x.Proxmox.StartKnown(ctx, proxmox.Guest{VMID: in.NewVMID, Name: in.Hostname, Node: in.TargetNode,
				Type: proxmox.GuestLXC, Status: proxmox.StatusStopped})
			return Sent{UPID: lastUPID(res.UPIDs)}, err
		})
		out.StartUPID = lastUPID(res.UPIDs)
		if err != nil {
			failed, class := classify(err)
			if class != final {
				return Outcome{}, err
			}
			failed.Output = out
			return failed, nil
		}
		out.Status = "started"
	}
	return Outcome{Status: 201, Result: ResultCreated, UPID: out.CreateUPID, Output: out}, nil
}

// confirmCTProvision tells by reading what an interrupted ct.provision left, and finishes it;
// the create is never sent twice. An attempt that never sent it runs as new. A container found
// with the new vmid is this command's only when a vzcreate of it ended OK since the command
// arrived; otherwise it is left alone (502 proxmox_create_unconfirmed).
func confirmCTProvision(ctx context.Context, x *Exec, in CTProvisionInput) (Outcome, error) {
	if !x.MaySent(stepCreateContainer) {
		return dispatchCTProvision(ctx, x, in)
	}
	vmid := strconv.FormatInt(in.NewVMID, 10)
	out := ctOutput{NewVMID: vmid, Node: in.TargetNode}
	for range maxProvisionWaits {
		g, err := x.Proxmox.ResolveGuest(ctx, vmid)
		switch {
		case errors.Is(err, proxmox.ErrVMNotFound):
			if out, done, err := ctCreateTask(ctx, x, in); done || err != nil {
				return out, err
			}
			continue // its create task was running and has ended: look again
		case err != nil:
			return Outcome{}, err
		}
		if g.Type != proxmox.GuestLXC || g.Node != in.TargetNode {
			return Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxCreateUnconfirmed, Output: out,
				Detail: fmt.Sprintf("the create was sent but its answer was lost, and vmid %s is now %s; it is left as it is and not created twice",
					vmid, guestLabel(g))}, nil
		}
		running, err := x.Proxmox.ActiveGuestTasks(ctx, g.Node, in.NewVMID)
		if err != nil {
			return Outcome{}, err
		}
		if len(running) == 0 {
			created, err := x.Proxmox.GuestTasks(ctx, g.Node, in.NewVMID, "vzcreate", x.CommandSince())
			switch {
			case err != nil:
				return Outcome{}, err
			case len(created) == 0 || !created[0].OK():
				return Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxCreateUnconfirmed, Output: out,
					Detail: fmt.Sprintf("the create was sent but its answer was lost, and %s was not made by a create since this command arrived; "+
						"it is left as it is and not created twice", guestLabel(g))}, nil
			}
			out.CreateUPID = created[0].UPID
			x.Step(ctx, "confirm", events.StepDone, created[0].UPID, "CT "+vmid+" exists on "+g.Node+"; the provisioning resumes after its create")
			return startContainer(ctx, x, in, out, g.Status == proxmox.StatusRunning)
		}
		for _, t := range running {
			x.Step(ctx, "confirm", events.StepRunning, t.UPID, "waiting for the new container's "+t.Type+" task to end")
			if err := x.Proxmox.WaitTask(x.runningHook(ctx, "confirm"), g.Node, t.UPID); err != nil && !isTaskError(err) {
				return Outcome{}, err
			}
		}
	}
	return Outcome{}, fmt.Errorf("%w: the new container's tasks kept running", errTransient)
}

// ctCreateTask answers a confirmation that found no container (done), from the vzcreate
// tasks of the vmid since the command arrived: none → the create never reached Proxmox and
// runs as new; a failed one → 502 task_failed; one that ended OK → the container was removed
// since, 502 proxmox_create_unconfirmed. A running one is waited for (not done: look again).
func ctCreateTask(ctx context.Context, x *Exec, in CTProvisionInput) (out Outcome, done bool, err error) {
	tasks, err := x.Proxmox.GuestTasks(ctx, in.TargetNode, in.NewVMID, "vzcreate", x.CommandSince())
	switch {
	case err != nil:
		return Outcome{}, true, err
	case len(tasks) == 0:
		out, err := dispatchCTProvision(ctx, x, in)
		return out, true, err
	}
	t := tasks[0]
	if t.Running {
		x.Step(ctx, "confirm", events.StepRunning, t.UPID, "waiting for the new container's vzcreate task to end")
		if err := x.Proxmox.WaitTask(x.runningHook(ctx, "confirm"), in.TargetNode, t.UPID); err != nil && !isTaskError(err) {
			return Outcome{}, true, err
		}
		return Outcome{}, false, nil
	}
	output := ctOutput{NewVMID: strconv.FormatInt(in.NewVMID, 10), Node: in.TargetNode, CreateUPID: t.UPID}
	if !t.OK() {
		return Outcome{Status: 502, Result: ResultFailed, Reason: ReasonTaskFailed, UPID: t.UPID, Output: output,
			Detail: "task exit status: " + t.Status}, true, nil
	}
	return Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxCreateUnconfirmed, UPID: t.UPID, Output: output,
		Detail: "the create's task ended OK but the container is gone; it is not created twice"}, true, nil
}
