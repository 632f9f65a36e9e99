package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// ReasonMigrationPreconditionFailed (409): vm.migrate found, before any write, that the
// migration cannot or may not run: the target node is offline or not allowed for the guest
// (its storages, mapped devices or HA rules), the guest has disks on local storage and
// with_local_disks is false, a local CD-ROM image, local devices (PCI/USB passthrough,
// serial ports), a running VM with online false, or a target_storage the target cannot use.
// `detail` names every reason, `fields` the data fields that would change the answer.
const ReasonMigrationPreconditionFailed = "migration_precondition_failed"

// stepMigrateVM is vm.migrate's one write step.
const stepMigrateVM = "migrate_vm"

// MigrateInput is the data of vm.migrate (contract §9): the guest, the node to move it to,
// and how: online (a running VM live; default true), with_local_disks (consent to copy disks
// on local storage; default false), target_storage (where those go on the target).
type MigrateInput struct {
	GuestRef
	TargetNode     string `json:"target_node"`
	Online         bool   `json:"online"`
	WithLocalDisks bool   `json:"with_local_disks"`
	TargetStorage  string `json:"target_storage,omitempty"`
}

// decodeMigrate reads vm.migrate's data.
func decodeMigrate(f *Fields) MigrateInput {
	return MigrateInput{
		GuestRef:       decodeGuestRef(f),
		TargetNode:     f.String("target_node", true, nodeNamePattern.MatchString),
		Online:         f.Bool("online", true),
		WithLocalDisks: f.Bool("with_local_disks", false),
		TargetStorage:  f.String("target_storage", false, storageIDPattern.MatchString),
	}
}

// VMMigrate moves a VM or container to another node of its cluster (contract §9 vm.migrate):
// POST /nodes/{node}/{qemu|lxc}/{vmid}/migrate, waiting for the migration task with running
// progress steps; output {vmid, name, type, node (the target), source_node, upid}, 200 ok.
// Before any write it reads the cluster's nodes (a target_node not in the cluster → 422
// invalid_body, fields [target_node]) and, for a VM, PVE's migration preconditions (GET
// …/qemu/{vmid}/migrate); for a container its volumes and the storages' sharing. A guest
// already on target_node → 200 already_present, nothing written; every reason the
// migration cannot or may not run → 409 migration_precondition_failed naming them all. A
// running VM migrates live (online=1, with-local-disks=1 when it has local disks); a running
// container is restart-migrated (restart=1: shut down, moved, started on the target), since
// PVE cannot move a running container live. A lost answer, or an earlier attempt that stopped
// after sending, is confirmed by reading where the guest is and its migration tasks (a
// running one is waited for), never by a second migrate; so is the end of the hamigrate task
// PVE answers for an HA-managed guest. Exclusive on the guest; journals on its NetBox VM.
func VMMigrate() Verb {
	return onGuest(Spec[MigrateInput]{
		Name:   "vm.migrate",
		Access: Write,
		Decode: decodeMigrate,
		Describe: func(in MigrateInput) []Bullet {
			b := append(guestBullets(in.guest), Bullet{"target_node", in.TargetNode}, Bullet{"online", boolWord(in.Online)},
				Bullet{"with_local_disks", boolWord(in.WithLocalDisks)})
			if in.TargetStorage != "" {
				b = append(b, Bullet{"target_storage", in.TargetStorage})
			}
			return b
		},
		Dispatch: dispatchMigrate,
		Confirm:  confirmMigrate,
		Cancellable: map[string]string{stepMigrateVM: "the migration is aborted and the guest stays on its node; " +
			"what it had copied to the target is removed by Proxmox"},
	}, func(in *MigrateInput) *GuestRef { return &in.GuestRef })
}

// dispatchMigrate checks the migration, then sends it and waits for its task.
func dispatchMigrate(ctx context.Context, x *Exec, in MigrateInput) (Outcome, error) {
	g := in.guest
	if g.Node == in.TargetNode {
		detail := fmt.Sprintf("%s %d is on node %s already", guestWord(g), g.VMID, g.Node)
		x.Step(ctx, stepMigrateVM, events.StepSkipped, "", detail)
		return Outcome{Status: 200, Result: ResultAlreadyPresent, Detail: detail, Output: migrateOutput(g, g.Node, "")}, nil
	}
	req, refusal, err := preflightMigration(ctx, x.Proxmox, in)
	switch {
	case err != nil:
		return Outcome{}, err
	case refusal != nil:
		return *refusal, nil
	}
	var upid string
	_, err = x.Write(ctx, stepMigrateVM, migrationDetail(g, req), func(ctx context.Context) (Sent, error) {
		var err error
		upid, err = x.Proxmox.Migrate(ctx, g, req)
		return Sent{UPID: upid}, err
	})
	if err != nil {
		return Outcome{}, err
	}
	if u, perr := proxmox.ParseUPID(upid); perr == nil && u.Type == haMigrateTask {
		// An HA-managed guest: the task only asked the HA manager, whose own migration
		// follows; it is confirmed as a lost answer is.
		return confirmMigrate(ctx, x, in)
	}
	return Outcome{Status: 200, Result: ResultOK, UPID: upid, Output: migrateOutput(g, in.TargetNode, upid)}, nil
}

// haMigrateTask is the worker type of PVE's answer for an HA-managed guest: a task that asks
// the HA manager to migrate it (ha-manager migrate) and ends before the migration does.
const haMigrateTask = "hamigrate"

// migrationDetail says what the migrate step sends: "live migration to pve2 with local disks".
func migrationDetail(g proxmox.Guest, req proxmox.MigrateRequest) string {
	kind := "offline migration"
	switch {
	case req.Online:
		kind = "live migration"
	case req.Restart:
		kind = "restart migration (the container is shut down, moved and started again)"
	}
	d := kind + " to " + req.Target
	if req.WithLocalDisks {
		d += " with its local disks"
	}
	if req.TargetStorage != "" {
		d += ", local volumes to storage " + req.TargetStorage
	}
	return d
}

// migrateOutput is vm.migrate's output: the guest, where it is (node), where it came from and
// the migration task.
func migrateOutput(g proxmox.Guest, node, upid string) map[string]any {
	out := guestOutput(g, nil)
	out["node"] = node
	if node != g.Node {
		out["source_node"] = g.Node
	}
	if upid != "" {
		out["upid"] = upid
	}
	return out
}

// guestWord is "VM" or "CT", as PVE names guests.
func guestWord(g proxmox.Guest) string {
	if g.Type == proxmox.GuestLXC {
		return "CT"
	}
	return "VM"
}

// lockedMessage is PVE's refusal of a guest with a config lock ("VM is locked (backup)").
var lockedMessage = regexp.MustCompile(`(?i)\bis locked \(([^)]*)\)`)

// refusals collects the reasons a migration cannot run and the data fields they concern.
type refusals struct {
	reasons []string
	fields  []string
}

func (r *refusals) add(field, format string, args ...any) {
	r.reasons = append(r.reasons, fmt.Sprintf(format, args...))
	if field != "" && !slices.Contains(r.fields, field) {
		r.fields = append(r.fields, field)
	}
}

// outcome is the 409 answer naming every reason, nil when there is none.
func (r *refusals) outcome(g proxmox.Guest, target string) *Outcome {
	if len(r.reasons) == 0 {
		return nil
	}
	slices.Sort(r.fields)
	return &Outcome{Status: 409, Result: ResultRefused, Reason: ReasonMigrationPreconditionFailed, Fields: r.fields,
		Detail: fmt.Sprintf("%s %d (%s) cannot migrate from %s to %s: %s", guestWord(g), g.VMID, g.Name, g.Node, target,
			strings.Join(r.reasons, "; "))}
}

// preflightMigration reads what the migration needs, before any write, and returns the
// request to send, or the refusal (422 for a target node not in the cluster, else 409).
func preflightMigration(ctx context.Context, c *proxmox.Client, in MigrateInput) (proxmox.MigrateRequest, *Outcome, error) {
	g, target := in.guest, in.TargetNode
	req := proxmox.MigrateRequest{Target: target, TargetStorage: in.TargetStorage}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return req, nil, err
	}
	i := slices.IndexFunc(nodes, func(n proxmox.Node) bool { return n.Node == target })
	if i < 0 {
		names := make([]string, len(nodes))
		for j, n := range nodes {
			names[j] = n.Node
		}
		out := invalidBody([]string{"target_node"}, "target_node: not a node of the endpoint's cluster (its nodes: "+strings.Join(names, ", ")+")")
		return req, out, nil
	}
	var r refusals
	if st := nodes[i].Status; st != "online" {
		r.add("target_node", "node %s is %s", target, st)
	}
	var inv []proxmox.StorageStatus
	if in.TargetStorage != "" || g.Type == proxmox.GuestLXC {
		if inv, err = c.StorageInventory(ctx); err != nil {
			return req, nil, err
		}
	}
	if in.TargetStorage != "" {
		checkTargetStorage(&r, inv, in, g.Type)
	}
	if g.Type == proxmox.GuestLXC {
		running, err := containerPreflight(ctx, c, &r, inv, in)
		if err != nil {
			return req, nil, err
		}
		req.Restart = running
		return req, r.outcome(g, target), nil
	}
	pre, err := c.MigrationPrecondition(ctx, g, target)
	var apiErr *proxmox.APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusInternalServerError {
		if m := lockedMessage.FindStringSubmatch(apiErr.Message); m != nil {
			r.add("", "the VM is locked (%s) by another operation; retry once it ends", m[1])
			return req, r.outcome(g, target), nil
		}
	}
	if err != nil {
		return req, nil, err
	}
	req.Online = pre.Running && in.Online
	local := vmPreflight(&r, pre, in)
	req.WithLocalDisks = local && in.WithLocalDisks
	return req, r.outcome(g, target), nil
}

// checkTargetStorage refuses a target_storage the target node cannot use for the guest's
// volumes: not there (missing, disabled or outside its nodes), not active, or without the
// content (images for VMs, rootdir for containers).
func checkTargetStorage(r *refusals, inv []proxmox.StorageStatus, in MigrateInput, typ proxmox.GuestType) {
	content := "images"
	if typ == proxmox.GuestLXC {
		content = "rootdir"
	}
	i := slices.IndexFunc(inv, func(s proxmox.StorageStatus) bool {
		return s.Storage == in.TargetStorage && s.Node == in.TargetNode
	})
	switch {
	case i < 0:
		r.add("target_storage", "target_storage %s is not available on node %s (missing, disabled or not in its nodes list)", in.TargetStorage, in.TargetNode)
	case !inv[i].Active:
		r.add("target_storage", "target_storage %s is not active on node %s", in.TargetStorage, in.TargetNode)
	case !slices.Contains(inv[i].Content, content):
		r.add("target_storage", "target_storage %s has no content %s", in.TargetStorage, content)
	}
}

// vmPreflight adds the reasons PVE's precondition answer gives against the migration and
// reports whether the VM has disks on local storage.
func vmPreflight(r *refusals, pre proxmox.MigrationPrecondition, in MigrateInput) bool {
	target := in.TargetNode
	if pre.Running && !in.Online {
		r.add("online", "the VM is running and online is false; PVE migrates a running VM only live: set online true or stop the VM first")
	}
	var disks, cdroms []string
	localStorages := map[string]bool{}
	for _, d := range pre.LocalDisks {
		sid, _, _ := strings.Cut(d.VolID, ":")
		localStorages[sid] = true
		switch {
		case d.CDROM && d.CloudInit:
			// a Cloud-Init drive: PVE copies it along
		case d.CDROM:
			cdroms = append(cdroms, diskLabel(d))
		default:
			disks = append(disks, diskLabel(d))
		}
	}
	if b, blocked := pre.NotAllowed[target]; blocked {
		storages := b.UnavailableStorages
		if in.TargetStorage != "" { // local volumes go to target_storage; shared ones must be there
			storages = slices.DeleteFunc(slices.Clone(storages), func(s string) bool { return localStorages[s] })
		}
		if len(storages) > 0 {
			r.add("target_node", "storage %s of the VM is not available on node %s", strings.Join(storages, ", "), target)
		}
		if len(b.UnavailableResources) > 0 {
			r.add("target_node", "mapped device %s has no mapping on node %s", strings.Join(b.UnavailableResources, ", "), target)
		}
		if len(b.BlockingHA) > 0 {
			r.add("target_node", "HA rules keep it off node %s: %s", target, strings.Join(b.BlockingHA, ", "))
		}
	}
	if len(disks) > 0 && !in.WithLocalDisks {
		r.add("with_local_disks", "local disks on storage that is not shared: %s; set with_local_disks true to copy them to %s",
			strings.Join(disks, ", "), target)
	}
	if len(cdroms) > 0 {
		r.add("", "a CD-ROM holds a local image (%s); eject it or use shared storage first", strings.Join(cdroms, ", "))
	}
	if res := pre.BlockingResources(); len(res) > 0 {
		r.add("", "local resources tie it to node %s: %s (passthrough devices and serial/parallel ports cannot move; remove them first)",
			in.guest.Node, strings.Join(res, ", "))
	}
	if pre.Running && in.Online {
		var fixed []string
		for _, key := range sortedKeys(pre.Mapped) {
			if m := pre.Mapped[key]; !m.LiveMigration {
				fixed = append(fixed, key+" ("+m.Name+")")
			}
		}
		if len(fixed) > 0 {
			r.add("", "mapped device %s cannot be migrated live; stop the VM first", strings.Join(fixed, ", "))
		}
	}
	return len(disks) > 0
}

// diskLabel names a local disk: "scsi0 local-lvm:vm-100-disk-0 (32.0 GiB)".
func diskLabel(d proxmox.LocalDisk) string {
	s := d.VolID
	if d.Drive != "" {
		s = d.Drive + " " + s
	}
	if d.SizeBytes > 0 {
		s += " (" + humanSize(d.SizeBytes) + ")"
	}
	return s
}

// humanSize renders bytes as PVE does: "32.0 GiB".
func humanSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	f, u := float64(n), 0
	for f > 1023 && u < len(units)-1 {
		f /= 1024
		u++
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + units[u]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// containerPreflight reads the container's volumes (GET …/lxc/{vmid}/config) and adds the
// reasons against its migration: volumes on local storage without with_local_disks (PVE
// copies them in every container migration), storages not available on the target. It
// reports whether the container runs (as Locate found it; it is then restart-migrated).
func containerPreflight(ctx context.Context, c *proxmox.Client, r *refusals, inv []proxmox.StorageStatus, in MigrateInput) (bool, error) {
	g, target := in.guest, in.TargetNode
	cfg, err := c.VMConfig(ctx, g)
	if err != nil {
		return false, err
	}
	shared := func(storage string) bool {
		i := slices.IndexFunc(inv, func(s proxmox.StorageStatus) bool { return s.Storage == storage && s.Node == g.Node })
		return i >= 0 && inv[i].Shared
	}
	on := func(storage, node string) bool {
		return slices.ContainsFunc(inv, func(s proxmox.StorageStatus) bool { return s.Storage == storage && s.Node == node })
	}
	var local, missing []string
	vols := make([][3]string, 0, len(cfg.Disks)+len(cfg.Unused)) // device, storage, volume
	for _, d := range cfg.Disks {
		if d.Storage != "" {
			vols = append(vols, [3]string{d.Device, d.Storage, d.Volume})
		}
	}
	for _, u := range cfg.Unused {
		vols = append(vols, [3]string{u.Device, u.Storage, u.Volume})
	}
	for _, v := range vols {
		storage := v[1]
		if !shared(storage) {
			local = append(local, fmt.Sprintf("%s %s:%s", v[0], v[1], v[2]))
			if in.TargetStorage != "" {
				continue // checked as target_storage
			}
		}
		if !on(storage, target) && !slices.Contains(missing, storage) {
			missing = append(missing, storage)
		}
	}
	if len(missing) > 0 {
		r.add("target_node", "storage %s of the container is not available on node %s", strings.Join(missing, ", "), target)
	}
	if len(local) > 0 && !in.WithLocalDisks {
		r.add("with_local_disks", "volumes on storage that is not shared: %s; set with_local_disks true to copy them to %s",
			strings.Join(local, ", "), target)
	}
	return g.Status == proxmox.StatusRunning, nil
}

// confirmMigrate tells, by reading, whether a migration whose answer was lost (or whose
// attempt stopped after sending) took place: the guest on target_node → 200 ok. While it is
// not, the guest's migration tasks on its node are read: a running one is waited for
// (however long it runs), a failed one started since the command arrived is the outcome (502
// task_failed); otherwise it keeps looking for up to ConfirmFor (the task may not be listed
// yet) and then answers 502 proxmox_write_unconfirmed. It never sends a second migrate.
func confirmMigrate(ctx context.Context, x *Exec, in MigrateInput) (Outcome, error) {
	vmid := strconv.FormatInt(in.guest.VMID, 10)
	since := x.CommandSince()
	var now proxmox.Guest
	var upid string
	found, err := x.untilInPlace(ctx, func(ctx context.Context) (bool, error) {
		var err error
		if now, err = x.Proxmox.ResolveGuest(ctx, vmid); err != nil || now.Node == in.TargetNode {
			return err == nil, err
		}
		tasks, err := x.Proxmox.GuestTasks(ctx, now.Node, now.VMID, proxmox.MigrateTaskType(now.Type), time.Time{})
		if err != nil {
			return false, err
		}
		if i := slices.IndexFunc(tasks, func(t proxmox.TaskSummary) bool { return t.Running }); i >= 0 {
			t := tasks[i]
			upid = t.UPID
			x.Step(ctx, "confirm", events.StepRunning, t.UPID, "waiting for the guest's migration task to end")
			if err := x.AwaitTask(ctx, stepMigrateVM, now.Node, t.UPID); err != nil {
				return false, err
			}
			now, err = x.Proxmox.ResolveGuest(ctx, vmid)
			return err == nil && now.Node == in.TargetNode, err
		}
		floor := since.Truncate(time.Second)
		if i := slices.IndexFunc(tasks, func(t proxmox.TaskSummary) bool { return !t.Start.Before(floor) }); i >= 0 && !tasks[i].OK() {
			return false, &proxmox.TaskError{UPID: tasks[i].UPID, Node: now.Node, ExitStatus: tasks[i].Status}
		}
		return false, nil
	})
	switch {
	case err != nil:
		return Outcome{}, err
	case !found:
		out := unconfirmedWrite()
		out.UPID = upid
		out.Detail = fmt.Sprintf("the migrate may have been sent; %s %d is still on node %s, not on %s, and no migration task of it runs; it is not sent twice",
			guestWord(now), now.VMID, now.Node, in.TargetNode)
		return out, nil
	}
	output := migrateOutput(now, now.Node, upid)
	if in.guest.Node != now.Node {
		output["source_node"] = in.guest.Node
	}
	return Outcome{Status: 200, Result: ResultOK, UPID: upid, Output: output}, nil
}
