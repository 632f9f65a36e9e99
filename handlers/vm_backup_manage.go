package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

// ReasonBackupProtected (409): vm.backup.delete's backup is protected; nothing was written.
const ReasonBackupProtected = "backup_protected"

// stepDeleteBackup is vm.backup.delete's write.
const stepDeleteBackup = "delete_backup"

// BackupListInput is the data of vm.backup.list: the storage, and optionally one guest (a
// vmid, also of a guest that no longer exists, or a name).
type BackupListInput struct {
	Storage string `json:"storage"`
	VM      string `json:"vm,omitempty"`
	vmid    int64  // the guest's vmid, 0 for every guest (set by Locate)
}

// BackupListEntry is one backup of vm.backup.list's output (contract §9): `{backups:
// [BackupListEntry…]}`, newest first. Node is set for a storage local to each node (the
// same volume id may then name a backup on several nodes); Verified is a PBS backup's last
// verification (true: ok), absent when it was never verified.
type BackupListEntry struct {
	VolID     string `json:"volid"`
	Node      string `json:"node,omitempty"`
	VMID      string `json:"vmid"`
	Type      string `json:"type"`
	Created   string `json:"created,omitempty"`
	SizeBytes int64  `json:"size_bytes"`
	Format    string `json:"format"`
	Protected bool   `json:"protected"`
	Notes     string `json:"notes"`
	Verified  *bool  `json:"verified,omitempty"`
}

// VMBackupList lists a storage's backups, or one guest's, newest first (contract §9
// vm.backup.list; a read): the storage's content with content=backup on the one node it is
// read from when it is shared, on every node where it is active when it is local to each.
// A storage that is not enabled and active on any node, or has no content backup → 409
// backup_storage_unavailable naming storage.
func VMBackupList() Verb {
	return Spec[BackupListInput]{
		Name:   "vm.backup.list",
		Access: Read,
		Decode: func(f *Fields) BackupListInput {
			in := BackupListInput{Storage: f.String("storage", true, storageIDPattern.MatchString)}
			if f.Has("vm") {
				in.VM = decodeGuestRef(f).VM
			}
			return in
		},
		Locate: func(ctx context.Context, c *proxmox.Client, in BackupListInput) (BackupListInput, error) {
			if in.VM == "" {
				return in, nil
			}
			if vmid, byID := refVMID(in.VM); byID {
				in.vmid = vmid // a deleted guest's backups are listed too
				return in, nil
			}
			ref, err := locateGuest(ctx, c, GuestRef{VM: in.VM})
			in.VM, in.vmid = ref.VM, ref.guest.VMID
			return in, err
		},
		Resource: func(in BackupListInput) string { return in.Storage },
		Dispatch: dispatchBackupList,
	}
}

// backupNodes are the nodes storage's backups are read on: the first node where it is
// active when shared, every such node when local; a refusal when there is none.
func backupNodes(ctx context.Context, c *proxmox.Client, storage string) (nodes []string, shared bool, refusal *Outcome, err error) {
	inv, err := c.StorageInventory(ctx)
	if err != nil {
		return nil, false, nil, err
	}
	refuse := func(why string) *Outcome {
		return &Outcome{Status: 409, Result: ResultRefused, Reason: ReasonBackupStorageUnavailable, Fields: []string{"storage"}, Detail: "storage: " + why}
	}
	listed := false
	for _, s := range inv {
		if s.Storage != storage {
			continue
		}
		listed = true
		if !slices.Contains(s.Content, proxmox.BackupContent) {
			return nil, false, refuse(fmt.Sprintf("storage '%s' has no content 'backup' (its content: %s)", storage, strings.Join(s.Content, ","))), nil
		}
		if s.Active && (!s.Shared || len(nodes) == 0) {
			nodes, shared = append(nodes, s.Node), s.Shared
		}
	}
	switch {
	case !listed:
		return nil, false, refuse(fmt.Sprintf("storage '%s' does not exist or is not enabled on any node (GET /cluster/resources lists it nowhere)", storage)), nil
	case len(nodes) == 0:
		return nil, false, refuse(fmt.Sprintf("storage '%s' is not active on any node", storage)), nil
	}
	return nodes, shared, nil, nil
}

// dispatchBackupList reads the backups on each node backupNodes names and merges them.
func dispatchBackupList(ctx context.Context, x *Exec, in BackupListInput) (Outcome, error) {
	nodes, shared, refusal, err := backupNodes(ctx, x.Proxmox, in.Storage)
	if err != nil || refusal != nil {
		return derefOutcome(refusal), err
	}
	type found struct {
		proxmox.BackupVolume
		node string
	}
	var all []found
	for _, n := range nodes {
		vols, err := x.Proxmox.Backups(ctx, n, in.Storage, in.vmid)
		if err != nil {
			return Outcome{}, err
		}
		for _, v := range vols {
			all = append(all, found{v, n})
		}
	}
	slices.SortStableFunc(all, func(a, b found) int {
		return cmp.Or(b.Created.Compare(a.Created), cmp.Compare(b.VolID, a.VolID), cmp.Compare(a.node, b.node))
	})
	out := make([]BackupListEntry, 0, len(all))
	for _, v := range all {
		e := BackupListEntry{VolID: v.VolID, VMID: strconv.FormatInt(v.VMID, 10), Type: string(v.Type), SizeBytes: v.Size,
			Format: v.Format, Protected: v.Protected, Notes: v.Notes}
		if !shared {
			e.Node = v.node
		}
		if !v.Created.IsZero() {
			e.Created = v.Created.Format(time.RFC3339)
		}
		if v.Verified != "" {
			ok := v.Verified == "ok"
			e.Verified = &ok
		}
		out = append(out, e)
	}
	return Outcome{Status: 200, Result: ResultOK, Output: map[string]any{"backups": out}}, nil
}

// derefOutcome is *o, or the zero Outcome for nil.
func derefOutcome(o *Outcome) Outcome {
	if o == nil {
		return Outcome{}
	}
	return *o
}

// BackupDeleteInput is the data of vm.backup.delete: the backup's volume id.
type BackupDeleteInput struct {
	VolID string `json:"volid"`
	// node and backup are where the backup was found and what it is (set by Locate); node is
	// "" when no node lists it.
	node   string
	backup proxmox.BackupVolume
}

// backupDeleteOutput is vm.backup.delete's output.
type backupDeleteOutput struct {
	VolID     string `json:"volid"`
	Storage   string `json:"storage"`
	Node      string `json:"node,omitempty"`
	UPID      string `json:"upid,omitempty"`
	SizeBytes int64  `json:"size_bytes,omitempty"`
}

// VMBackupDelete deletes one backup (contract §9 vm.backup.delete): DELETE
// /nodes/{node}/storage/{storage}/content/{volid} on a node that lists it, waiting for PVE's
// deletion task. A protected backup → 409 backup_protected, checked before anything is
// written (and a deletion PVE refuses for protection is answered so too); a backup no node
// lists → 200 already_absent, a replay-safe repeat. A storage that cannot be read → 409
// backup_storage_unavailable. A lost answer or an interrupted attempt is confirmed by reading
// whether the storage still lists the backup (for up to ConfirmFor), never by a second
// DELETE. Exclusive on the guest the backup is of (two deletions of one backup run one after
// the other, the second answered already_absent); journals on that guest's NetBox VM, with
// the backup's volid and size.
func VMBackupDelete() Verb {
	return Spec[BackupDeleteInput]{
		Name:   "vm.backup.delete",
		Access: Write,
		Decode: func(f *Fields) BackupDeleteInput {
			return BackupDeleteInput{VolID: f.String("volid", true, func(s string) bool {
				_, _, _, ok := proxmox.ParseBackupVolID(s)
				return ok && len(s) <= 255
			})}
		},
		Locate: func(ctx context.Context, c *proxmox.Client, in BackupDeleteInput) (BackupDeleteInput, error) {
			var err error
			in.node, in.backup, _, err = findBackupVolume(ctx, c, in.VolID)
			return in, err
		},
		Resource: func(in BackupDeleteInput) string { return in.VolID },
		// two deletions of one backup (or a deletion and a backup of its guest) never overlap:
		// the one that waited reads the storage again
		Exclusive: func(in BackupDeleteInput) (string, string) {
			_, _, vmid, _ := proxmox.ParseBackupVolID(in.VolID)
			return store.KindGuest, strconv.FormatInt(vmid, 10)
		},
		JournalVMID: func(in BackupDeleteInput) int64 {
			_, _, vmid, _ := proxmox.ParseBackupVolID(in.VolID)
			return vmid
		},
		Describe: func(in BackupDeleteInput) []Bullet {
			storage, t, vmid, _ := proxmox.ParseBackupVolID(in.VolID)
			b := []Bullet{{"volid", in.VolID}, {"storage", storage}, {"vmid", strconv.FormatInt(vmid, 10)}, {"backup_type", string(t)}}
			if in.backup.Size > 0 {
				b = append(b, Bullet{"size_bytes", strconv.FormatInt(in.backup.Size, 10)})
			}
			if in.node != "" {
				b = append(b, Bullet{"node", in.node})
			}
			return b
		},
		Dispatch: dispatchBackupDelete,
		Confirm:  confirmBackupDelete,
	}
}

// findBackupVolume finds the backup volid on the nodes its storage is read on: the node that
// lists it ("" none) and the backup; a refusal when the storage cannot be read.
func findBackupVolume(ctx context.Context, c *proxmox.Client, volid string) (string, proxmox.BackupVolume, *Outcome, error) {
	storage, _, vmid, _ := proxmox.ParseBackupVolID(volid)
	nodes, _, refusal, err := backupNodes(ctx, c, storage)
	if err != nil || refusal != nil {
		return "", proxmox.BackupVolume{}, refusal, err
	}
	for _, n := range nodes {
		vols, err := c.Backups(ctx, n, storage, vmid)
		if err != nil {
			return "", proxmox.BackupVolume{}, nil, err
		}
		if i := slices.IndexFunc(vols, func(b proxmox.BackupVolume) bool { return b.VolID == volid }); i >= 0 {
			return n, vols[i], nil, nil
		}
	}
	return "", proxmox.BackupVolume{}, nil, nil
}

// dispatchBackupDelete reads the backup again (the command may have waited), refuses a
// protected one, answers one that is gone, and deletes.
func dispatchBackupDelete(ctx context.Context, x *Exec, in BackupDeleteInput) (Outcome, error) {
	storage, _, _, _ := proxmox.ParseBackupVolID(in.VolID)
	node, vol, refusal, err := findBackupVolume(ctx, x.Proxmox, in.VolID)
	switch {
	case err != nil:
		return Outcome{}, err
	case refusal != nil:
		return *refusal, nil
	case node == "":
		detail := fmt.Sprintf("storage '%s' lists no backup %s", storage, in.VolID)
		x.Step(ctx, stepDeleteBackup, events.StepSkipped, "", detail)
		return Outcome{Status: 200, Result: ResultAlreadyAbsent, Detail: detail, Output: backupDeleteOutput{VolID: in.VolID, Storage: storage}}, nil
	case vol.Protected:
		return backupProtected(in.VolID), nil
	}
	var upid string
	_, err = x.Write(ctx, stepDeleteBackup, "", func(ctx context.Context) (Sent, error) {
		var err error
		upid, err = x.Proxmox.DeleteBackup(ctx, node, storage, in.VolID)
		return Sent{UPID: upid}, err
	})
	var taskErr *proxmox.TaskError
	switch {
	case errors.As(err, &taskErr) && strings.Contains(taskErr.ExitStatus+taskErr.LogError, "protected"):
		return backupProtected(in.VolID), nil // protected between the read and the delete
	case err != nil:
		return Outcome{}, err
	}
	return Outcome{Status: 200, Result: ResultOK, UPID: upid,
		Output: backupDeleteOutput{VolID: in.VolID, Storage: storage, Node: node, UPID: upid, SizeBytes: vol.Size}}, nil
}

// backupProtected refuses a protected backup: 409 backup_protected, nothing written.
func backupProtected(volid string) Outcome {
	return Outcome{Status: 409, Result: ResultRefused, Reason: ReasonBackupProtected, Fields: []string{"volid"},
		Detail: fmt.Sprintf("backup %s is protected; remove its protection in Proxmox (the backup's Protected flag) first, then delete it", volid)}
}

// confirmBackupDelete tells by reading whether an interrupted deletion took effect: one never
// sent runs as new; else the backup no longer listed (read for up to ConfirmFor, since the
// deletion task may still run) → 200 ok; still listed → 502 proxmox_write_unconfirmed. The
// DELETE is never sent a second time.
func confirmBackupDelete(ctx context.Context, x *Exec, in BackupDeleteInput) (Outcome, error) {
	if !x.MaySent(stepDeleteBackup) {
		return dispatchBackupDelete(ctx, x, in)
	}
	storage, _, _, _ := proxmox.ParseBackupVolID(in.VolID)
	gone, err := x.untilInPlace(ctx, func(ctx context.Context) (bool, error) {
		node, _, refusal, err := findBackupVolume(ctx, x.Proxmox, in.VolID)
		return err == nil && refusal == nil && node == "", err
	})
	switch {
	case err != nil:
		return Outcome{}, err
	case !gone:
		return unconfirmedWrite(), nil
	}
	return Outcome{Status: 200, Result: ResultOK, Output: backupDeleteOutput{VolID: in.VolID, Storage: storage, Node: in.node, SizeBytes: in.backup.Size}}, nil
}
