package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/guestconfig"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

// Steps of vm.provision, in order (contract §9).
const (
	stepStorageInventory = "storage_inventory"
	stepCloneTemplate    = "clone_template"
	stepImportImage      = "import_image"
	stepRelocateDisk     = "relocate_disk"
	stepConfigure        = "configure_cloud_init"
	stepResizeDisk       = "resize_disk"
	stepStartVM          = "start_vm"
)

// VMProvision creates a VM from a template (across nodes, relocating disks when the destination
// storage is not shared) or from a cloud image imported by Proxmox (or over SSH), configures
// it, grows its disk and starts it (contract §9 vm.provision).
func VMProvision() Verb {
	return Spec[ProvisionInput]{
		Name:        "vm.provision",
		Access:      Write,
		Decode:      decodeProvision,
		Locate:      locateProvision,
		Resource:    func(in ProvisionInput) string { return strconv.FormatInt(in.NewVMID, 10) },
		JournalVMID: func(in ProvisionInput) int64 { return in.NewVMID },
		Exclusive:   func(in ProvisionInput) (string, string) { return store.KindGuest, strconv.FormatInt(in.NewVMID, 10) },
		Secrets: func(in ProvisionInput) []string {
			if in.CloudInit == nil {
				return nil
			}
			return []string{in.CloudInit.Password}
		},
		Describe: func(in ProvisionInput) []Bullet {
			b := []Bullet{{"vmid", strconv.FormatInt(in.NewVMID, 10)}, {"vm_name", in.NewName}, {"target_node", in.TargetNode}}
			if in.Source.Image != nil {
				b = append(b, Bullet{"image", in.Source.Image.URL})
			} else {
				b = append(b, Bullet{"template_vmid", strconv.FormatInt(in.Source.TemplateVMID, 10)})
			}
			if in.Storage != "" {
				b = append(b, Bullet{"storage", in.Storage})
			}
			return b
		},
		Dispatch: dispatchProvision,
		Confirm:  confirmProvision,
		Cancellable: map[string]string{
			stepRelocateDisk: "the disk stays on its source storage; the new VM exists as far as the provisioning got: delete it with vm.delete or finish it by hand",
			stepImportImage:  "the image download stops (Proxmox removes its partial file); a VM already created exists as far as the provisioning got",
		},
	}
}

// locateProvision checks the request against the cluster before anything is journaled: the
// extra NICs' lock, the bridges of the target node, and the template's node.
func locateProvision(ctx context.Context, c *proxmox.Client, in ProvisionInput) (ProvisionInput, error) {
	if in.EnforceCloudNetwork && len(in.ExtraNetworks) > 0 {
		return in, errExtraNetworksLocked
	}
	if in.Bridge != "" || len(in.ExtraNetworks) > 0 {
		bridges, err := c.Bridges(ctx, in.TargetNode)
		if err != nil {
			return in, err
		}
		if in.Bridge != "" && !slices.Contains(bridges, in.Bridge) {
			return in, fieldError{"bridge"}
		}
		for _, n := range in.ExtraNetworks {
			if !slices.Contains(bridges, n.Bridge) {
				return in, fieldError{"extra_networks"}
			}
		}
	}
	if in.Source.Image == nil {
		g, err := c.ResolveGuest(ctx, strconv.FormatInt(in.Source.TemplateVMID, 10))
		if err != nil {
			return in, err
		}
		in.template = guestLocation{VMID: g.VMID, Node: g.Node}
	}
	return in, nil
}

// provisionOutput is vm.provision's output; on failure it carries what was done so far.
type provisionOutput struct {
	NewVMID       string            `json:"new_vmid"`
	VMID          string            `json:"vmid,omitempty"`
	TargetNode    string            `json:"target_node,omitempty"`
	CloneUPID     string            `json:"clone_upid,omitempty"`
	ImportUPID    string            `json:"import_upid,omitempty"`
	DownloadUPID  string            `json:"download_upid,omitempty"`
	RelocateUPIDs map[string]string `json:"relocate_upids,omitempty"`
	RelocateTasks []relocateTask    `json:"relocate_tasks,omitempty"`
	// UnusedSourceDisks are the source copies relocate_disk left on the new VM as unusedN
	// volumes (move_disk with delete=0): storage:volume, for the operator to remove.
	UnusedSourceDisks []string `json:"unused_source_disks,omitempty"`
	// TemplateLocalVolumes name the template's volumes on storage that is not shared (drive
	// storage:volume), with 409 template_storage_not_shared.
	TemplateLocalVolumes []string `json:"template_local_volumes,omitempty"`
	ConfigUPID           string   `json:"config_upid,omitempty"`
	ResizeUPID           string   `json:"resize_upid,omitempty"`
	StartUPID            string   `json:"start_upid,omitempty"`
	Status               string   `json:"status,omitempty"`
}

// relocateTask is one disk move dispatched by relocate_disk.
type relocateTask struct {
	Disk  string `json:"disk"`
	UPID  string `json:"upid,omitempty"`
	State string `json:"state"` // ok | failed
}

// provision is one run of vm.provision's steps.
type provision struct {
	x   *Exec
	in  ProvisionInput
	out provisionOutput
	// err is a write's error that is not an outcome (a lost answer, Proxmox unavailable
	// after the first write): the pipeline confirms the provisioning by reading.
	err error
	// config is the new VM's configuration as the first step that needed it read it (see
	// vmConfig); nil until then.
	config map[string]string
	// resumed is, when the provisioning resumes an interrupted one, the new VM as it was found
	// (resumeProvision): each step first looks whether its effect is there.
	resumed *proxmox.Guest
}

// vmConfig is the new VM's configuration, read once (GET …/config) by the first step that
// needs it and reused by the later ones: relocate_disk, configure_cloud_init and resize_disk
// read from it only what the writes in between leave as they are — the device keys and boot
// order, the NICs and the Cloud-Init drive. A disk move changes a disk's volume (and adds an
// unused entry), the configuration update adds a Cloud-Init drive (never a disk, never in the
// boot order) and NICs; neither changes which disk boots.
func (p *provision) vmConfig(ctx context.Context) (map[string]string, error) {
	if p.config != nil {
		return p.config, nil
	}
	raw, err := p.x.Proxmox.RawVMConfig(ctx, p.in.TargetNode, p.in.NewVMID)
	if err != nil {
		return nil, err
	}
	p.config = raw
	return raw, nil
}

func dispatchProvision(ctx context.Context, x *Exec, in ProvisionInput) (Outcome, error) {
	p := &provision{x: x, in: in, out: provisionOutput{NewVMID: strconv.FormatInt(in.NewVMID, 10)}}
	out, err := p.run(ctx)
	if p.err != nil {
		return Outcome{}, p.err
	}
	return out, err
}

// run performs the steps in order; the first that reaches an outcome ends it.
func (p *provision) run(ctx context.Context) (Outcome, error) {
	in := p.in
	inv, out := p.inventory(ctx)
	if out != nil {
		return *out, nil
	}
	var direct bool
	if in.Source.Image != nil {
		out = p.importImage(ctx, inv)
	} else if out = p.templateShared(ctx, inv); out == nil {
		direct, out = p.cloneTemplate(ctx, inv)
	}
	if out != nil {
		return *out, nil
	}
	if in.Source.Image != nil || direct {
		p.step(ctx, stepRelocateDisk, events.StepSkipped, "", "")
	} else if out := p.relocate(ctx); out != nil {
		return *out, nil
	}
	for _, step := range []func(context.Context) *Outcome{p.configure, p.resize, p.start} {
		if out := step(ctx); out != nil {
			return *out, nil
		}
	}
	return Outcome{Status: 201, Result: ResultCreated, UPID: cmp.Or(p.out.CloneUPID, p.out.ImportUPID), Output: p.out}, nil
}

// confirmProvision tells by reading what an interrupted provisioning left, and finishes it.
// No VM with the new vmid: nothing was created, the provisioning runs as new. The VM exists:
// the tasks of it that still run (the clone, an import, a disk move) are waited for, then the
// provisioning resumes after what it finds done (resumeProvision); nothing is created or sent
// twice. A VM that is not on the target node once its tasks ended is answered 502
// proxmox_create_unconfirmed, left as it is.
func confirmProvision(ctx context.Context, x *Exec, in ProvisionInput) (Outcome, error) {
	vmid := strconv.FormatInt(in.NewVMID, 10)
	for range maxProvisionWaits {
		g, err := x.Proxmox.ResolveGuest(ctx, vmid)
		switch {
		case errors.Is(err, proxmox.ErrVMNotFound):
			return dispatchProvision(ctx, x, in)
		case err != nil:
			return Outcome{}, err
		}
		running, err := x.Proxmox.ActiveGuestTasks(ctx, g.Node, in.NewVMID)
		if err != nil {
			return Outcome{}, err
		}
		if len(running) == 0 {
			if g.Node != in.TargetNode {
				return Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxCreateUnconfirmed,
					Output: provisionOutput{NewVMID: vmid},
					Detail: "an interrupted attempt of this command created VM " + vmid + ", which is on node " + g.Node +
						", not on " + in.TargetNode + "; it is left as it is and not created twice"}, nil
			}
			return resumeProvision(ctx, x, in, g)
		}
		for _, t := range running {
			x.Step(ctx, "confirm", events.StepRunning, t.UPID, "waiting for the new VM's "+t.Type+" task to end")
			if err := x.Proxmox.WaitTask(x.runningHook(ctx, "confirm"), g.Node, t.UPID); err != nil && !isTaskError(err) {
				return Outcome{}, err
			}
		}
	}
	return Outcome{}, fmt.Errorf("%w: the new VM's tasks kept running", errTransient)
}

// maxProvisionWaits bounds how many rounds of the new VM's running tasks a confirmation waits
// for before it lets a later delivery look again.
const maxProvisionWaits = 8

// isTaskError reports whether err is a task's failure (its end was seen).
func isTaskError(err error) bool {
	var te *proxmox.TaskError
	return errors.As(err, &te)
}

// resumeProvision finishes a provisioning whose VM exists on the target node with no task
// running: each remaining step runs, or is skipped where the VM shows it done (disks already on
// the destination storage, the configuration already applied, the boot disk already as large,
// the VM already running); a step is never sent twice over its effect.
func resumeProvision(ctx context.Context, x *Exec, in ProvisionInput, g proxmox.Guest) (Outcome, error) {
	p := &provision{x: x, in: in, out: provisionOutput{NewVMID: strconv.FormatInt(in.NewVMID, 10)}, resumed: &g}
	x.Step(ctx, "confirm", events.StepDone, "", "VM "+p.out.NewVMID+" exists on "+g.Node+"; the provisioning resumes after what it finds done")
	steps := []func(context.Context) *Outcome{p.configure, p.resize, p.start}
	if in.Storage != "" && in.Source.Image == nil {
		steps = append([]func(context.Context) *Outcome{p.relocate}, steps...)
	}
	for _, step := range steps {
		if out := step(ctx); out != nil {
			if p.err != nil {
				return Outcome{}, p.err
			}
			return *out, nil
		}
	}
	return Outcome{Status: 201, Result: ResultCreated, Output: p.out}, nil
}

// applied reports whether the VM's configuration raw already holds every value of params that
// PVE keeps as it is given (a Cloud-Init password is kept hashed, SSH keys encoded: those are
// not compared).
func applied(raw, params map[string]string) bool {
	for k, v := range params {
		switch k {
		case "cipassword", "sshkeys":
			continue
		}
		if raw[k] != v {
			return false
		}
	}
	return true
}

func (p *provision) step(ctx context.Context, name string, status events.StepStatus, upid, detail string) {
	p.x.Step(ctx, name, status, upid, detail)
}

// fail attaches what was done so far to a failure outcome.
func (p *provision) fail(out Outcome) Outcome {
	out.Output = p.out
	return out
}

// failed maps a Proxmox error of a step's read to its outcome.
func (p *provision) failed(ctx context.Context, step string, err error) *Outcome {
	p.step(ctx, step, events.StepError, "", "")
	return p.writeFailed(err)
}

// writeFailed maps a write's error (its error step already reported): an outcome with what was
// done so far, or, when the error is not an outcome, p.err for the pipeline.
func (p *provision) writeFailed(err error) *Outcome {
	out, class := classify(err)
	if class != final {
		p.err = err
	}
	out = p.fail(out)
	return &out
}

// write sends one of the provisioning's writes as step through the pipeline's write protocol.
func (p *provision) write(ctx context.Context, step, detail string, send func(ctx context.Context) (string, error)) (string, error) {
	sent, err := p.x.Write(ctx, step, detail, func(ctx context.Context) (Sent, error) {
		upid, err := send(ctx)
		return Sent{UPID: upid}, err
	})
	return sent.UPID, err
}

// inventory is the storage_inventory step: one read of the cluster's storages, before anything
// is created; the destination storage must be enabled and active on the target node.
func (p *provision) inventory(ctx context.Context) ([]proxmox.StorageStatus, *Outcome) {
	p.step(ctx, stepStorageInventory, events.StepStarted, "", "")
	inv, err := p.x.Proxmox.StorageInventory(ctx)
	if err != nil {
		p.step(ctx, stepStorageInventory, events.StepError, "", "")
		out := p.fail(Outcome{Status: 502, Result: ResultFailed, Reason: ReasonStorageLookupFailed, Detail: "the cluster storage inventory could not be read"})
		return nil, &out
	}
	if p.in.Storage != "" {
		if st, ok := findStorage(inv, p.in.Storage, p.in.TargetNode); !ok || !st.Enabled || !st.Active {
			p.step(ctx, stepStorageInventory, events.StepError, "", "destination storage unavailable on the target node")
			out := p.fail(Outcome{Status: 409, Result: ResultRefused, Reason: ReasonTargetStorageUnavailable, Fields: []string{"storage"},
				Detail: "the destination storage is missing, disabled or unavailable on the target node"})
			return nil, &out
		}
	}
	p.step(ctx, stepStorageInventory, events.StepDone, "", "")
	return inv, nil
}

func findStorage(inv []proxmox.StorageStatus, storage, node string) (proxmox.StorageStatus, bool) {
	for _, st := range inv {
		if st.Storage == storage && st.Node == node {
			return st, true
		}
	}
	return proxmox.StorageStatus{}, false
}

// templateShared refuses, before anything is created, a clone of the template to another node
// when one of its volumes is on storage the inventory says is not shared on the template's
// node: Proxmox refuses it ("can't clone VM to node … (VM uses local storage)",
// qemu-server PVE::API2::Qemu clone_vm and $check_storage_access_clone, which count every
// drive's volume, CD-ROM and Cloud-Init ones included, but "none" and the host "cdrom"). A
// template configuration that cannot be read leaves the decision to Proxmox.
func (p *provision) templateShared(ctx context.Context, inv []proxmox.StorageStatus) *Outcome {
	in := p.in
	if in.TargetNode == in.template.Node {
		return nil
	}
	raw, err := p.x.Proxmox.RawVMConfig(ctx, in.template.Node, in.template.VMID)
	if err != nil {
		return nil
	}
	local := localVolumes(raw, inv, in.template.Node)
	if len(local) == 0 {
		return nil
	}
	detail := fmt.Sprintf("template %d on %s has volumes on storage that is not shared (%s): Proxmox clones it only to its own node. "+
		"Provision it on %s (target_node) and migrate the VM, or move the template's disks to shared storage",
		in.template.VMID, in.template.Node, strings.Join(local, ", "), in.template.Node)
	p.step(ctx, stepImportImage, events.StepSkipped, "", "")
	p.step(ctx, stepCloneTemplate, events.StepError, "", detail)
	p.out.TemplateLocalVolumes = local
	out := p.fail(Outcome{Status: 409, Result: ResultRefused, Reason: ReasonTemplateStorageNotShared, Fields: []string{"target_node"}, Detail: detail})
	return &out
}

// templateDrive matches the configuration keys of QEMU drives (qemu-server's drive keys).
var templateDrive = regexp.MustCompile(`^(ide|sata|scsi|virtio)\d+$|^efidisk0$|^tpmstate0$`)

// localVolumes are the drives of raw (a QEMU configuration) whose volume is on a storage the
// inventory lists as not shared on node, as "drive storage:volume", sorted.
func localVolumes(raw map[string]string, inv []proxmox.StorageStatus, node string) []string {
	var out []string
	for key, value := range raw {
		if !templateDrive.MatchString(key) {
			continue
		}
		volid, _, _ := strings.Cut(value, ",")
		if v, ok := strings.CutPrefix(volid, "file="); ok {
			volid = v
		}
		storage, _, ok := strings.Cut(volid, ":")
		if !ok || volid == "none" || volid == "cdrom" || strings.HasPrefix(volid, "/") {
			continue
		}
		if st, found := findStorage(inv, storage, node); found && !st.Shared {
			out = append(out, key+" "+volid)
		}
	}
	slices.Sort(out)
	return out
}

// cloneTemplate clones directly when the destination is shared on the template node, on the
// same node, or not asked for; otherwise it clones without a storage override and reports that
// relocate_disk must follow.
func (p *provision) cloneTemplate(ctx context.Context, inv []proxmox.StorageStatus) (direct bool, out *Outcome) {
	in := p.in
	sameNode := in.TargetNode == in.template.Node
	direct = in.Storage == "" || sameNode
	if st, ok := findStorage(inv, in.Storage, in.template.Node); ok && st.Shared && st.Enabled {
		direct = true
	}
	p.step(ctx, stepImportImage, events.StepSkipped, "", "")
	req := proxmox.CloneRequest{Node: in.template.Node, VMID: in.template.VMID, NewVMID: in.NewVMID, Name: in.NewName, Full: in.FullClone}
	if !sameNode {
		req.Target = in.TargetNode
	}
	if direct {
		req.Storage = in.Storage
	}
	detail := "direct clone"
	if !direct {
		detail = "clone without a storage override; relocate_disk follows"
	}
	upid, err := p.write(ctx, stepCloneTemplate, detail, func(ctx context.Context) (string, error) { return p.x.Proxmox.CloneVM(ctx, req) })
	p.out.CloneUPID = upid
	if err != nil {
		return false, p.writeFailed(err)
	}
	return direct, nil
}

// relocate moves every data disk of the new VM that is not on the destination storage
// (delete=0: the source copies stay as unused disks).
func (p *provision) relocate(ctx context.Context) *Outcome {
	in := p.in
	refuse := func(detail string) *Outcome {
		p.step(ctx, stepRelocateDisk, events.StepError, "", detail)
		p.out.VMID, p.out.TargetNode = p.out.NewVMID, in.TargetNode
		out := p.fail(Outcome{Status: 502, Result: ResultFailed, Reason: ReasonRelocateDiskFailed, Detail: detail})
		return &out
	}
	p.step(ctx, stepRelocateDisk, events.StepStarted, "", "")
	raw, err := p.vmConfig(ctx)
	if err != nil {
		return refuse("the new VM's configuration could not be read")
	}
	cfg, err := guestconfig.Parse(string(proxmox.GuestQEMU), raw, in.TargetNode, in.NewVMID)
	if err != nil {
		return refuse("the new VM's configuration is malformed")
	}
	if len(cfg.Disks) == 0 {
		return refuse("the new VM's configuration has no disks")
	}
	p.out.RelocateUPIDs = map[string]string{}
	for _, d := range cfg.Disks {
		if d.Storage == "" || d.Storage == in.Storage {
			continue
		}
		upid, err := p.write(ctx, stepRelocateDisk, "moving "+d.Device+" to "+in.Storage, func(ctx context.Context) (string, error) {
			return p.x.Proxmox.MoveDisk(ctx, in.TargetNode, in.NewVMID, d.Device, in.Storage)
		})
		task := relocateTask{Disk: d.Device, UPID: upid, State: "ok"}
		if err != nil {
			if _, class := classify(err); class != final {
				p.err = err
			}
			task.State = "failed"
			p.out.RelocateTasks = append(p.out.RelocateTasks, task)
			p.out.VMID, p.out.TargetNode = p.out.NewVMID, in.TargetNode
			out := p.fail(Outcome{Status: 502, Result: ResultFailed, Reason: ReasonRelocateDiskFailed, Detail: "moving " + d.Device + " failed"})
			return &out
		}
		p.out.RelocateTasks = append(p.out.RelocateTasks, task)
		p.out.RelocateUPIDs[d.Device] = upid
		p.out.UnusedSourceDisks = append(p.out.UnusedSourceDisks, d.Storage+":"+d.Volume)
	}
	p.out.RelocateTasks = nil // reported only with a failure
	return nil
}

// configure is configure_cloud_init: memory, CPU, agent, Cloud-Init, the net0 override and the
// extra NICs, in one configuration update.
func (p *provision) configure(ctx context.Context) *Outcome {
	in := p.in
	refuse := func(detail string) *Outcome {
		p.step(ctx, stepConfigure, events.StepStarted, "", "")
		p.step(ctx, stepConfigure, events.StepError, "", "")
		out := p.fail(Outcome{Status: 502, Result: ResultFailed, Reason: ReasonConfigReadFailed, Detail: detail})
		return &out
	}
	raw, err := p.vmConfig(ctx)
	if err != nil {
		return refuse("the new VM's configuration could not be read")
	}
	params, err := p.configParams(raw)
	if err != nil {
		return refuse(err.Error())
	}
	if applied(raw, params) {
		p.step(ctx, stepConfigure, events.StepSkipped, "", "the configuration already holds every value")
		return nil
	}
	upid, err := p.write(ctx, stepConfigure, "", func(ctx context.Context) (string, error) {
		return p.x.Proxmox.UpdateVMConfig(ctx, in.TargetNode, in.NewVMID, params)
	})
	p.out.ConfigUPID = upid
	if err != nil {
		return p.writeFailed(err)
	}
	return nil
}

// configParams renders the configuration update from the request and the VM's current config.
func (p *provision) configParams(raw map[string]string) (map[string]string, error) {
	in := p.in
	params := map[string]string{"agent": boolDigit(in.EnableAgent)}
	setInt := func(key string, v int64) {
		if v > 0 {
			params[key] = strconv.FormatInt(v, 10)
		}
	}
	setInt("memory", in.MemoryMB)
	setInt("cores", in.Cores)
	setInt("sockets", in.Sockets)
	if ci := in.CloudInit; ci != nil {
		if slot := cloudInitSlot(raw); slot == "" {
			free := freeIDESlot(raw)
			if free == "" {
				return nil, errors.New("no free IDE slot for the Cloud-Init drive")
			}
			params[free] = p.cloudInitStorage(raw) + ":cloudinit"
		}
		password, err := p.x.Open(ci.Password)
		if err != nil {
			return nil, err
		}
		for key, v := range map[string]string{"ciuser": ci.User, "cipassword": password, "sshkeys": ci.SSHKeys,
			"ipconfig0": ci.IPConfig0, "nameserver": ci.Nameserver, "searchdomain": ci.Searchdomain} {
			if v != "" {
				params[key] = v
			}
		}
	}
	if in.Bridge != "" || in.VLANTag != 0 {
		params["net0"] = overrideNIC(raw["net0"], in.Bridge, in.VLANTag)
	}
	for _, n := range in.ExtraNetworks {
		key := "net" + strconv.FormatInt(n.Index, 10)
		params[key] = renderNIC(raw[key], n)
	}
	return params, nil
}

// cloudInitStorage is where a new Cloud-Init drive goes: the destination storage, else the
// storage of the VM's first disk.
func (p *provision) cloudInitStorage(raw map[string]string) string {
	if p.in.Storage != "" {
		return p.in.Storage
	}
	if cfg, err := guestconfig.Parse(string(proxmox.GuestQEMU), raw, p.in.TargetNode, p.in.NewVMID); err == nil {
		for _, d := range cfg.Disks {
			if d.Storage != "" {
				return d.Storage
			}
		}
	}
	return "local-lvm"
}

func cloudInitSlot(raw map[string]string) string {
	for key, v := range raw {
		if strings.Contains(v, "cloudinit") && (strings.HasPrefix(key, "ide") || strings.HasPrefix(key, "scsi") || strings.HasPrefix(key, "sata")) {
			return key
		}
	}
	return ""
}

func freeIDESlot(raw map[string]string) string {
	for _, slot := range []string{"ide2", "ide0", "ide1", "ide3"} {
		if _, used := raw[slot]; !used {
			return slot
		}
	}
	return ""
}

// overrideNIC sets bridge and VLAN on an existing NIC, keeping its model, MAC and other options.
func overrideNIC(existing, bridge string, vlan int64) string {
	parts := strings.Split(existing, ",")
	out := make([]string, 0, len(parts)+2)
	for _, part := range parts {
		key, _, _ := strings.Cut(part, "=")
		if part == "" || (key == "bridge" && bridge != "") || (key == "tag" && vlan != 0) {
			continue
		}
		out = append(out, part)
	}
	if bridge != "" {
		out = append(out, "bridge="+bridge)
	}
	if vlan != 0 {
		out = append(out, "tag="+strconv.FormatInt(vlan, 10))
	}
	return strings.Join(out, ",")
}

// renderNIC renders an extra NIC, keeping the MAC of a NIC already at that index.
func renderNIC(existing string, n ExtraNetwork) string {
	model := n.Model
	if mac := nicMAC(existing); mac != "" {
		model += "=" + mac
	}
	parts := []string{model, "bridge=" + n.Bridge}
	if n.VLANTag != 0 {
		parts = append(parts, "tag="+strconv.FormatInt(n.VLANTag, 10))
	}
	if n.Firewall {
		parts = append(parts, "firewall=1")
	}
	return strings.Join(parts, ",")
}

// nicMAC finds the MAC of a netN value in either form (virtio=MAC or macaddr=MAC).
func nicMAC(v string) string {
	for _, part := range strings.Split(v, ",") {
		key, val, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		if key == "macaddr" || (slices.Contains(proxmox.NICModels(), key) && strings.Count(val, ":") == 5) {
			return val
		}
	}
	return ""
}

func boolDigit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// resize grows the boot disk to disk_gb.
func (p *provision) resize(ctx context.Context) *Outcome {
	in := p.in
	if in.DiskGB == 0 {
		p.step(ctx, stepResizeDisk, events.StepSkipped, "", "")
		return nil
	}
	raw, err := p.vmConfig(ctx)
	var disk string
	if err == nil {
		if cfg, perr := guestconfig.Parse(string(proxmox.GuestQEMU), raw, in.TargetNode, in.NewVMID); perr == nil {
			disk = bootDisk(cfg)
		}
	}
	if p.resumed != nil && disk != "" && diskSize(raw, in, disk) >= in.DiskGB<<30 {
		p.step(ctx, stepResizeDisk, events.StepSkipped, "", disk+" is already "+strconv.FormatInt(in.DiskGB, 10)+" GiB or larger")
		return nil
	}
	if disk == "" {
		p.step(ctx, stepResizeDisk, events.StepStarted, "", "")
		p.step(ctx, stepResizeDisk, events.StepError, "", "no disk to resize")
		out := p.fail(Outcome{Status: 502, Result: ResultFailed, Reason: ReasonConfigReadFailed, Detail: "the disk to resize could not be found"})
		return &out
	}
	upid, err := p.write(ctx, stepResizeDisk, disk, func(ctx context.Context) (string, error) {
		return p.x.Proxmox.ResizeDisk(ctx, in.TargetNode, in.NewVMID, disk, fmt.Sprintf("%dG", in.DiskGB))
	})
	p.out.ResizeUPID = upid
	if err != nil {
		return p.writeFailed(err)
	}
	return nil
}

// diskSize is the size of the new VM's disk device in its configuration raw, 0 when unknown.
func diskSize(raw map[string]string, in ProvisionInput, device string) int64 {
	cfg, err := guestconfig.Parse(string(proxmox.GuestQEMU), raw, in.TargetNode, in.NewVMID)
	if err != nil {
		return 0
	}
	for _, d := range cfg.Disks {
		if d.Device == device {
			return d.SizeBytes
		}
	}
	return 0
}

func bootDisk(cfg guestconfig.Config) string {
	for _, d := range cfg.Disks {
		if d.Bootable {
			return d.Device
		}
	}
	for _, d := range cfg.Disks {
		if !strings.HasPrefix(d.Device, "efidisk") && !strings.HasPrefix(d.Device, "tpmstate") {
			return d.Device
		}
	}
	return ""
}

// start starts the new VM unless start_after_provision is false.
func (p *provision) start(ctx context.Context) *Outcome {
	in := p.in
	if !in.StartAfterProvision {
		p.step(ctx, stepStartVM, events.StepSkipped, "", "")
		p.out.Status = "stopped"
		return nil
	}
	if p.resumed != nil && p.resumed.Status == proxmox.StatusRunning {
		p.step(ctx, stepStartVM, events.StepSkipped, "", "already running")
		p.out.Status = "started"
		return nil
	}
	upid, err := p.write(ctx, stepStartVM, "", func(ctx context.Context) (string, error) {
		// the VM this command has just created is stopped: no status read before the start
		res, err := p.x.Proxmox.StartKnown(ctx, proxmox.Guest{VMID: in.NewVMID, Name: in.NewName, Node: in.TargetNode,
			Type: proxmox.GuestQEMU, Status: proxmox.StatusStopped})
		return lastUPID(res.UPIDs), err
	})
	p.out.StartUPID = upid
	if err != nil {
		return p.writeFailed(err)
	}
	p.out.Status = "started"
	return nil
}
