package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

// Reasons of vm.restore (contract §9).
const (
	// ReasonVMExists (409): the target vmid is in use and force was not asked, or force
	// cannot overwrite that guest (another node, the other guest type); nothing was written.
	ReasonVMExists = "vm_exists"
	// ReasonBackupNotFound (404): the archive is not a backup its storage lists on the target
	// node (or that storage is not available there); nothing was written.
	ReasonBackupNotFound = "backup_not_found"
)

// Steps of vm.restore: the reads before the restore, and the restore itself.
const (
	stepCheckRestore = "check_restore"
	stepRestoreVM    = "restore_vm"
)

// lxcDefaultStorage is where PVE puts a container's volumes when a restore names no storage
// (pve-container src/PVE/API2/LXC.pm: extract_param($param, 'storage') // 'local').
const lxcDefaultStorage = "local"

// RestoreInput is the data of vm.restore: the backup (a volume id), the guest to restore it
// into and PVE's restore options.
type RestoreInput struct {
	Archive           string `json:"archive"`
	VMID              int64  `json:"vmid"`
	TargetNode        string `json:"target_node"`
	Storage           string `json:"storage,omitempty"`
	Unique            bool   `json:"unique"`
	Start             bool   `json:"start"`
	Force             bool   `json:"force"`
	BandwidthLimitKiB *int64 `json:"bandwidth_limit_kib,omitempty"`
	// backup is the archive as its storage lists it on the target node (set by Locate); its
	// VolID is "" when missing says why it was not found.
	backup  proxmox.BackupVolume
	missing string
}

// decodeRestore reads vm.restore's data.
func decodeRestore(f *Fields) RestoreInput {
	in := RestoreInput{
		Archive: f.String("archive", true, func(s string) bool {
			_, _, _, ok := proxmox.ParseBackupVolID(s)
			return ok && len(s) <= 255
		}),
		VMID:       f.Int("vmid", true, 0, 100, 999999999),
		TargetNode: f.String("target_node", true, nodeNamePattern.MatchString),
		Storage:    f.String("storage", false, storageIDPattern.MatchString),
		Unique:     f.Bool("unique", true),
		Start:      f.Bool("start", false),
		Force:      f.Bool("force", false),
	}
	if f.Has("bandwidth_limit_kib") {
		v := f.Int("bandwidth_limit_kib", true, 0, 0, 1<<40)
		in.BandwidthLimitKiB = &v
	}
	return in
}

// restoreType is the type of the guest the archive holds: as its storage lists it, else as
// its name says.
func (in RestoreInput) restoreType() proxmox.GuestType {
	if in.backup.Type != "" {
		return in.backup.Type
	}
	_, t, _, _ := proxmox.ParseBackupVolID(in.Archive)
	return t
}

// restoreOutput is vm.restore's output: the restored guest, its node, the restore task, its
// type, and the backup it came from.
type restoreOutput struct {
	VMID      string `json:"vmid"`
	Node      string `json:"node"`
	UPID      string `json:"upid,omitempty"`
	Type      string `json:"type"`
	VolID     string `json:"volid"`
	SizeBytes int64  `json:"size_bytes,omitempty"`
}

// VMRestore restores a backup into a VM or container (contract §9 vm.restore): a VM's with
// POST /nodes/{node}/qemu (archive), a container's with POST /nodes/{node}/lxc (ostemplate =
// the archive, restore=1), with unique, start, force and bwlimit, waiting for the restore task
// with running progress steps from its log. Before any write it reads (check_restore) the
// archive in its storage's listing on the target node (missing, or not a backup → 404
// backup_not_found), the storage the volumes go to (content images for a VM, rootdir for a
// container; a container restored without storage goes to 'local', as PVE puts it → 409
// target_storage_unavailable naming storage) and the vmid (in use → 409 vm_exists unless
// force; with force a guest on another node or of the other type is still vm_exists, a
// running one 409 vm_running, a protected one 409 vm_protected). A new guest is 201 created,
// output {vmid, node, upid, type, volid, size_bytes}. A lost answer, or an attempt that
// stopped after sending, is confirmed by the guest's restore tasks since the command arrived
// (waited for while one runs) and the guest, never by a second restore. Exclusive on the
// target vmid; journals on its NetBox VM, with the backup's volid and size. force overwrites a
// guest: list vm.restore in an endpoint's approval verbs to have a second person approve
// restores (a restore bound to be refused is refused without asking).
func VMRestore() Verb {
	return Spec[RestoreInput]{
		Name:        "vm.restore",
		Access:      Write,
		Decode:      decodeRestore,
		Locate:      locateRestore,
		Resource:    func(in RestoreInput) string { return strconv.FormatInt(in.VMID, 10) },
		Exclusive:   func(in RestoreInput) (string, string) { return store.KindGuest, strconv.FormatInt(in.VMID, 10) },
		JournalVMID: func(in RestoreInput) int64 { return in.VMID },
		Describe:    describeRestore,
		Dispatch:    dispatchRestore,
		Confirm:     confirmRestore,
		Cancellable: map[string]string{stepRestoreVM: "PVE stops the restore: a VM keeps the configuration and the volumes restored so far " +
			"(PVE does not clean up a failed restore: delete the VM or restore again with force), a container restored into a new vmid is removed"},
	}
}

// describeRestore is vm.restore's journal bullets: the backup (volid, size, type) and the
// options.
func describeRestore(in RestoreInput) []Bullet {
	b := []Bullet{{"volid", in.Archive}}
	if in.backup.Size > 0 {
		b = append(b, Bullet{"size_bytes", strconv.FormatInt(in.backup.Size, 10)})
	}
	b = append(b, Bullet{"backup_type", string(in.restoreType())}, Bullet{"vmid", strconv.FormatInt(in.VMID, 10)},
		Bullet{"target_node", in.TargetNode})
	if in.Storage != "" {
		b = append(b, Bullet{"storage", in.Storage})
	}
	b = append(b, Bullet{"unique", boolWord(in.Unique)}, Bullet{"start", boolWord(in.Start)}, Bullet{"force", boolWord(in.Force)})
	if in.BandwidthLimitKiB != nil {
		b = append(b, Bullet{"bandwidth_limit_kib", strconv.FormatInt(*in.BandwidthLimitKiB, 10)})
	}
	return b
}

// locateRestore finds the archive on the target node (a target_node that is not in the
// cluster → 422 invalid_body naming it): the backup, or why it is missing.
func locateRestore(ctx context.Context, c *proxmox.Client, in RestoreInput) (RestoreInput, error) {
	inv, err := c.StorageInventory(ctx)
	if err != nil {
		return in, err
	}
	if !slices.ContainsFunc(inv, func(s proxmox.StorageStatus) bool { return s.Node == in.TargetNode }) {
		return in, fieldError{"target_node"}
	}
	in.backup, in.missing, err = findArchive(ctx, c, inv, in.Archive, in.TargetNode)
	return in, err
}

// findArchive finds the backup volid in its storage's listing on node, given the storage
// inventory inv: the backup, or why it is not there.
func findArchive(ctx context.Context, c *proxmox.Client, inv []proxmox.StorageStatus, volid, node string) (proxmox.BackupVolume, string, error) {
	storage, _, vmid, _ := proxmox.ParseBackupVolID(volid)
	i := slices.IndexFunc(inv, func(s proxmox.StorageStatus) bool { return s.Storage == storage && s.Node == node })
	switch {
	case i < 0:
		return proxmox.BackupVolume{}, fmt.Sprintf("the archive's storage '%s' does not exist or is not enabled on node '%s'", storage, node), nil
	case !inv[i].Active:
		return proxmox.BackupVolume{}, fmt.Sprintf("the archive's storage '%s' is not active on node '%s'", storage, node), nil
	case !slices.Contains(inv[i].Content, proxmox.BackupContent):
		return proxmox.BackupVolume{}, fmt.Sprintf("the archive's storage '%s' holds no backups (no content 'backup')", storage), nil
	}
	vols, err := c.Backups(ctx, node, storage, vmid)
	if err != nil {
		return proxmox.BackupVolume{}, "", err
	}
	if j := slices.IndexFunc(vols, func(b proxmox.BackupVolume) bool { return b.VolID == volid }); j >= 0 {
		return vols[j], "", nil
	}
	return proxmox.BackupVolume{}, fmt.Sprintf("storage '%s' lists no backup %s on node '%s'; vm.backup.list shows its backups", storage, volid, node), nil
}

// dispatchRestore reads again what the restore depends on (the command may have waited) and
// refuses what it can tell PVE would refuse, then restores.
func dispatchRestore(ctx context.Context, x *Exec, in RestoreInput) (Outcome, error) {
	refusal, err := x.Read(ctx, stepCheckRestore, func(ctx context.Context) (*Outcome, error) { return checkRestore(ctx, x.Proxmox, &in) })
	switch {
	case err != nil:
		return Outcome{}, err
	case refusal != nil:
		return *refusal, nil
	}
	req := proxmox.RestoreRequest{Archive: in.Archive, Type: in.restoreType(), VMID: in.VMID, Node: in.TargetNode, Storage: in.Storage,
		Unique: in.Unique, Start: in.Start, Force: in.Force, BandwidthLimitKiB: in.BandwidthLimitKiB}
	var upid string
	_, err = x.Write(ctx, stepRestoreVM, "restore of "+in.Archive+" into "+strconv.FormatInt(in.VMID, 10), func(ctx context.Context) (Sent, error) {
		var err error
		upid, err = x.Proxmox.Restore(ctx, req)
		return Sent{UPID: upid}, err
	})
	if err != nil {
		return Outcome{}, err
	}
	return restoreCreated(in, upid), nil
}

// checkRestore is the refusal of a restore that PVE would refuse, found by reading, or nil.
// It updates in.backup from the listing it reads.
func checkRestore(ctx context.Context, c *proxmox.Client, in *RestoreInput) (*Outcome, error) {
	inv, err := c.StorageInventory(ctx)
	if err != nil {
		return nil, err
	}
	if in.backup, in.missing, err = findArchive(ctx, c, inv, in.Archive, in.TargetNode); err != nil {
		return nil, err
	}
	if in.missing != "" {
		return &Outcome{Status: 404, Result: ResultRefused, Reason: ReasonBackupNotFound, Fields: []string{"archive"},
			Detail: "archive: " + in.missing}, nil
	}
	typ := in.restoreType()
	storage := in.Storage
	if storage == "" && typ == proxmox.GuestLXC {
		storage = lxcDefaultStorage
	}
	if storage != "" {
		var refused *proxmox.TargetStorageError
		err := c.CheckRestoreStorage(ctx, inv, storage, in.TargetNode, typ)
		switch {
		case errors.As(err, &refused):
			detail := "storage: " + refused.Why
			if in.Storage == "" {
				detail = "storage: none was given, and PVE restores a container onto 'local': " + refused.Why
			}
			return &Outcome{Status: 409, Result: ResultRefused, Reason: ReasonTargetStorageUnavailable, Fields: []string{"storage"}, Detail: detail}, nil
		case err != nil:
			return nil, err
		}
	}
	return checkRestoreTarget(ctx, c, *in, typ)
}

// checkRestoreTarget refuses a restore onto a vmid in use that PVE would refuse or that was
// not asked to overwrite it.
func checkRestoreTarget(ctx context.Context, c *proxmox.Client, in RestoreInput, typ proxmox.GuestType) (*Outcome, error) {
	g, err := c.ResolveGuest(ctx, strconv.FormatInt(in.VMID, 10))
	switch {
	case errors.Is(err, proxmox.ErrVMNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	exists := func(detail string) (*Outcome, error) {
		return &Outcome{Status: 409, Result: ResultRefused, Reason: ReasonVMExists, Fields: []string{"vmid"}, Detail: detail}, nil
	}
	switch {
	case !in.Force:
		return exists(fmt.Sprintf("vmid %d is in use by %s; restore into a free vmid, or send force: true to overwrite it with the backup", in.VMID, guestLabel(g)))
	case g.Type != typ:
		return exists(fmt.Sprintf("vmid %d is in use by %s, and a %s backup cannot overwrite a guest of the other type; restore into a free vmid", in.VMID, guestLabel(g), typ))
	case g.Node != in.TargetNode:
		return exists(fmt.Sprintf("vmid %d is in use by %s; PVE overwrites a guest only on its own node: restore to target_node %s or into a free vmid",
			in.VMID, guestLabel(g), g.Node))
	case g.Status == proxmox.StatusRunning || g.Status == proxmox.StatusPaused:
		out := deleteRunning(g)
		out.Detail = fmt.Sprintf("%s is %s; PVE does not overwrite a running guest: stop it first", guestLabel(g), g.Status)
		return &out, nil
	}
	protected, err := c.GuestProtected(ctx, g)
	if err != nil && !errors.Is(err, proxmox.ErrVMNotFound) {
		return nil, err
	}
	if protected {
		out := deleteProtected(g)
		out.Detail = fmt.Sprintf("%s has protection: 1 in its configuration, which PVE does not overwrite; clear it first", guestLabel(g))
		return &out, nil
	}
	return nil, nil
}

// confirmRestore tells, by reading, whether a restore whose answer was lost (or whose attempt
// stopped after sending) took effect: an attempt that never sent it runs the restore; else
// the newest of the guest's restore tasks on the target node since the command arrived is
// waited for while it runs, a failed one is the outcome (502 task_failed), one that ended OK
// with the guest on the node is 201 created. While no task is listed it looks for up to
// ConfirmFor, then answers 502 proxmox_write_unconfirmed. It never sends a second restore.
func confirmRestore(ctx context.Context, x *Exec, in RestoreInput) (Outcome, error) {
	if !x.MaySent(stepRestoreVM) {
		return dispatchRestore(ctx, x, in)
	}
	since := x.CommandSince()
	typ := proxmox.RestoreTaskType(in.restoreType())
	task, found, err := x.newestGuestTask(ctx, in.TargetNode, in.VMID, typ, since)
	switch {
	case err != nil:
		return Outcome{}, err
	case !found:
		out := unconfirmedWrite()
		out.Detail = fmt.Sprintf("the restore may have been sent; no %s task of guest %d on %s started since %s; it is not sent twice",
			typ, in.VMID, in.TargetNode, since.UTC().Format(time.RFC3339))
		return out, nil
	}
	if task.Running {
		x.Step(ctx, "confirm", events.StepRunning, task.UPID, "waiting for the guest's restore task to end")
		if err := x.AwaitTask(ctx, stepRestoreVM, in.TargetNode, task.UPID); err != nil {
			return Outcome{}, err
		}
	} else if !task.OK() {
		return Outcome{}, &proxmox.TaskError{UPID: task.UPID, Node: in.TargetNode, ExitStatus: task.Status}
	}
	g, err := x.Proxmox.LocateGuest(ctx, strconv.FormatInt(in.VMID, 10))
	switch {
	case errors.Is(err, proxmox.ErrVMNotFound) || (err == nil && g.Node != in.TargetNode):
		out := unconfirmedWrite()
		out.UPID = task.UPID
		out.Detail = fmt.Sprintf("the restore task %s ended OK, but guest %d is not on %s; it is not sent twice", task.UPID, in.VMID, in.TargetNode)
		return out, nil
	case err != nil:
		return Outcome{}, err
	}
	return restoreCreated(in, task.UPID), nil
}

// restoreCreated is the outcome of a restore whose task ended OK: 201 created.
func restoreCreated(in RestoreInput, upid string) Outcome {
	return Outcome{Status: 201, Result: ResultCreated, UPID: upid, Output: restoreOutput{
		VMID: strconv.FormatInt(in.VMID, 10), Node: in.TargetNode, UPID: upid, Type: string(in.restoreType()),
		VolID: in.Archive, SizeBytes: in.backup.Size,
	}}
}

// newestGuestTask is the newest of guest vmid's tasks of type typ on node started since
// since, looked for for up to ConfirmFor while none is listed (a task may be listed late);
// found is false when none was.
func (x *Exec) newestGuestTask(ctx context.Context, node string, vmid int64, typ string, since time.Time) (task proxmox.TaskSummary, found bool, err error) {
	found, err = x.untilInPlace(ctx, func(ctx context.Context) (bool, error) {
		tasks, err := x.Proxmox.GuestTasks(ctx, node, vmid, typ, since)
		if err != nil || len(tasks) == 0 {
			return false, err
		}
		task = tasks[0] // the newest
		return true, nil
	})
	return task, found, err
}
