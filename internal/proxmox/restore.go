package proxmox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// Restore task types: the worker PVE runs for a restore of a VM (qemu-server PVE/API2/Qemu.pm,
// create_vm with archive: fork_worker 'qmrestore') and of a container (pve-container
// src/PVE/API2/LXC.pm, create_vm with restore=1: fork_worker 'vzrestore').
const (
	RestoreTaskTypeQEMU = "qmrestore"
	RestoreTaskTypeLXC  = "vzrestore"
)

// RestoreTaskType is the worker type of a restore of a guest of type t.
func RestoreTaskType(t GuestType) string {
	if t == GuestLXC {
		return RestoreTaskTypeLXC
	}
	return RestoreTaskTypeQEMU
}

// Storage content types a restored guest's volumes need: disk images for a VM, container
// root directories for a container.
const (
	ImagesContent  = "images"
	RootdirContent = "rootdir"
)

// ErrTargetStorageUnavailable: a restore's storage cannot hold the guest's volumes on the
// node. It is returned as a *[TargetStorageError] saying why, before any write.
var ErrTargetStorageUnavailable = errors.New("proxmox: target storage unavailable")

// TargetStorageError is a storage that cannot hold a restored guest on a node. It matches
// [ErrTargetStorageUnavailable].
type TargetStorageError struct {
	Storage, Node string
	// Why says what is wrong, naming the storage.
	Why string
}

// Error renders "proxmox: target storage unavailable: WHY".
func (e *TargetStorageError) Error() string {
	return ErrTargetStorageUnavailable.Error() + ": " + e.Why
}

// Is matches ErrTargetStorageUnavailable.
func (e *TargetStorageError) Is(target error) bool { return target == ErrTargetStorageUnavailable }

// CheckRestoreStorage tells whether storage can hold the volumes of a guest of type t
// restored on node: content images (a VM) or rootdir (a container), enabled and active there.
// inv is the storage inventory the caller read (nil: it is read); GET /storage is read only
// to say why a storage has no entry on node. A refusal is a *[TargetStorageError].
func (c *Client) CheckRestoreStorage(ctx context.Context, inv []StorageStatus, storage, node string, t GuestType) error {
	content := ImagesContent
	if t == GuestLXC {
		content = RootdirContent
	}
	_, why, err := c.checkStorageContent(ctx, inv, storage, node, content, "where the guest is restored")
	if why != "" {
		return &TargetStorageError{Storage: storage, Node: node, Why: why}
	}
	return err
}

// backupVolume reads one entry of a storage's content listing as a backup.
// pve-storage src/PVE/Storage/PBSPlugin.pm (list_volumes) adds `verification` {state, upid}
// and `subtype` to a PBS snapshot; a file storage's backups carry `subtype` too.
func backupVolume(it map[string]string) BackupVolume {
	b := BackupVolume{
		VolID: it["volid"], VMID: flatInt(it, "vmid"), Format: it["format"], Size: flatInt(it, "size"),
		Notes: it["notes"], Protected: flatBool(it, "protected"), Type: GuestType(it["subtype"]),
	}
	if t := flatInt(it, "ctime"); t > 0 {
		b.Created = time.Unix(t, 0).UTC()
	}
	if v := it["verification"]; v != "" {
		var ver struct {
			State string `json:"state"`
		}
		if json.Unmarshal([]byte(v), &ver) == nil {
			b.Verified = ver.State
		}
	}
	if b.Type == "" {
		b.Type = backupTypeOf(b.VolID)
	}
	return b
}

// backupName matches the name of a backup volume: PBS "backup/vm/100/…" or "backup/ct/…",
// a file "backup/vzdump-qemu-100-…" or "backup/vzdump-lxc-…" (pve-storage
// src/PVE/Storage/Plugin.pm, parse_volname and archive_info).
var backupName = regexp.MustCompile(`^backup/(?:(vm|ct)/(\d+)/|vzdump-(qemu|lxc|openvz)-(\d+)-)`)

// ParseBackupVolID splits a backup volume id "storage:backup/…" into its storage, the guest
// type and vmid its name says; ok is false for anything else.
func ParseBackupVolID(volid string) (storage string, t GuestType, vmid int64, ok bool) {
	m := volumeIDPattern.FindStringSubmatch(volid)
	if m == nil {
		return "", "", 0, false
	}
	n := backupName.FindStringSubmatch(m[2])
	if n == nil {
		return "", "", 0, false
	}
	kind, id := n[1], n[2]
	if kind == "" {
		kind, id = n[3], n[4]
	}
	vmid, _ = strconv.ParseInt(id, 10, 64)
	t = GuestQEMU
	if kind == "ct" || kind == "lxc" || kind == "openvz" {
		t = GuestLXC
	}
	return m[1], t, vmid, true
}

// volumeIDPattern is pve-storage's parse_volume_id: "storage:volname".
var volumeIDPattern = regexp.MustCompile(`(?i)^([a-z][a-z0-9\-_.]*[a-z0-9]):(.+)$`)

func backupTypeOf(volid string) GuestType {
	_, t, _, _ := ParseBackupVolID(volid)
	return t
}

// Backups lists the backups in storage as node sees it (GET
// /nodes/{node}/storage/{storage}/content with content=backup, and vmid when not 0), newest
// first (by creation time, then volume id). Errors: see the package doc (PVE answers 500 when
// the storage does not exist, is disabled or is not available on node).
func (c *Client) Backups(ctx context.Context, node, storage string, vmid int64) ([]BackupVolume, error) {
	q := url.Values{"content": {BackupContent}}
	if vmid != 0 {
		q.Set("vmid", strconv.FormatInt(vmid, 10))
	}
	r := request{method: http.MethodGet, path: "/nodes/" + url.PathEscape(node) + "/storage/" + url.PathEscape(storage) + "/content", query: q}
	type entry struct {
		BackupVolume
		content string
	}
	items, err := getList(ctx, c, r, func(it map[string]string) entry {
		return entry{BackupVolume: backupVolume(it), content: it["content"]}
	})
	if err != nil {
		return nil, err
	}
	out := make([]BackupVolume, 0, len(items))
	for _, it := range items {
		if it.content == BackupContent && it.VolID != "" && (vmid == 0 || it.VMID == vmid) {
			out = append(out, it.BackupVolume)
		}
	}
	slices.SortStableFunc(out, func(a, b BackupVolume) int {
		return cmp.Or(b.Created.Compare(a.Created), cmp.Compare(b.VolID, a.VolID))
	})
	return out, nil
}

// RestoreRequest is one restore of a backup into a guest.
type RestoreRequest struct {
	// Archive is the backup's volume id.
	Archive string
	// Type is the backed-up guest's type: a VM is restored with POST /nodes/{node}/qemu
	// (archive), a container with POST /nodes/{node}/lxc (ostemplate, restore=1).
	Type GuestType
	// VMID and Node are the guest to restore into.
	VMID int64
	Node string
	// Storage is where the volumes go ("" sends none: PVE puts them back where they were
	// for a VM; for a container PVE's default is 'local').
	Storage string
	// Unique gives the guest new MAC addresses; Start starts it after the restore; Force
	// overwrites an existing guest of that vmid.
	Unique, Start, Force bool
	// BandwidthLimitKiB is the restore's I/O limit in KiB/s (bwlimit; nil sends none: the
	// datacenter's or the storage's restore limit applies; 0 is unlimited).
	BandwidthLimitKiB *int64
}

// restoreParams are the parameters [Client.Restore] can send, per path, in order.
var (
	restoreQEMUParams = []string{"vmid", "archive", "storage", "unique", "start", "force", "bwlimit"}
	restoreLXCParams  = []string{"vmid", "ostemplate", "restore", "storage", "unique", "start", "force", "bwlimit"}
)

// path and form are the restore's request.
func (r RestoreRequest) request() request {
	f := url.Values{"vmid": {strconv.FormatInt(r.VMID, 10)}}
	path := "/nodes/" + url.PathEscape(r.Node) + "/qemu"
	if r.Type == GuestLXC {
		path = "/nodes/" + url.PathEscape(r.Node) + "/lxc"
		f.Set("ostemplate", r.Archive)
		f.Set("restore", "1")
	} else {
		f.Set("archive", r.Archive)
	}
	if r.Storage != "" {
		f.Set("storage", r.Storage)
	}
	set := func(k string, v bool) {
		if v {
			f.Set(k, "1")
		}
	}
	set("unique", r.Unique)
	set("start", r.Start)
	set("force", r.Force)
	if r.BandwidthLimitKiB != nil {
		f.Set("bwlimit", strconv.FormatInt(*r.BandwidthLimitKiB, 10))
	}
	return request{method: http.MethodPost, path: path, form: f}
}

// Restore restores req.Archive into guest req.VMID on req.Node: exactly one POST
// /nodes/{node}/qemu (archive) or /nodes/{node}/lxc (ostemplate, restore=1), then it waits
// for the restore task. It returns the UPID ("" when the POST itself failed) and the error: a
// *[TaskError] when the restore failed (PVE leaves a VM whose restore failed in place, "VM
// state is NOT cleaned up"), else the request's error (see the package doc; ErrAnswerLost:
// the restore may have started).
func (c *Client) Restore(ctx context.Context, req RestoreRequest) (string, error) {
	if req.VMID <= 0 || req.Node == "" || req.Archive == "" {
		return "", fmt.Errorf("proxmox: restore needs an archive, a vmid and a node")
	}
	return c.runTask(ctx, req.Node, req.request())
}

// DeleteBackup deletes the backup volid from storage as node sees it: exactly one DELETE
// /nodes/{node}/storage/{storage}/content/{volid} (PVE's worker 'imgdel'), then it waits for
// the task. It returns the UPID and the error: a *[TaskError] when the deletion failed (a
// protected backup: "cannot remove protected volume …"), else the request's.
func (c *Client) DeleteBackup(ctx context.Context, node, storage, volid string) (string, error) {
	r := request{method: http.MethodDelete,
		path: "/nodes/" + url.PathEscape(node) + "/storage/" + url.PathEscape(storage) + "/content/" + url.PathEscape(volid)}
	return c.runTask(ctx, node, r)
}
