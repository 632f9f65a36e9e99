package proxmox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Backup modes of vzdump (PVE's `mode`).
const (
	BackupModeSnapshot = "snapshot"
	BackupModeSuspend  = "suspend"
	BackupModeStop     = "stop"
)

// BackupContent is PVE's storage content type of backups.
const BackupContent = "backup"

// BackupTaskType is the worker type of a vzdump task ("UPID:…:vzdump:100:…").
const BackupTaskType = "vzdump"

// ErrBackupStorageUnavailable: the storage cannot take a backup of a guest on its node: it
// does not exist, is disabled, is not available on that node, has no content `backup` or is
// not active there. It is returned as a *[BackupStorageError] saying which, before any write.
var ErrBackupStorageUnavailable = errors.New("proxmox: backup storage unavailable")

// BackupStorageError is a storage that cannot take a guest's backup on its node. It matches
// [ErrBackupStorageUnavailable].
type BackupStorageError struct {
	Storage, Node string
	// Why says what is wrong, as a sentence fragment naming the storage: "storage 'pbs1' is
	// disabled (disable 1 in /storage)".
	Why string
}

// Error renders "proxmox: backup storage unavailable: WHY".
func (e *BackupStorageError) Error() string {
	return ErrBackupStorageUnavailable.Error() + ": " + e.Why
}

// Is matches ErrBackupStorageUnavailable.
func (e *BackupStorageError) Is(target error) bool { return target == ErrBackupStorageUnavailable }

// BackupTarget is a storage that can take backups on a node, as [Client.CheckBackupStorage]
// found it.
type BackupTarget struct {
	Storage, Node string
	Type          string // plugin type: "pbs", "dir", "nfs", …
	Shared        bool
}

// CheckBackupStorage tells whether storage can take a backup of a guest on node, with the reads
// PVE's own checks need and no write: the cluster storage inventory (GET
// /cluster/resources?type=storage, one entry per storage enabled on a node) and, only when
// storage has no entry on node, the storage configuration (GET /storage) to say why: it does
// not exist (or the token may not see it), is disabled, or its nodes list leaves node out.
// An entry without content `backup`, or not active on node (status not "available"), is
// refused too. A refusal is a *[BackupStorageError]; other errors are the requests' (see the
// package doc).
func (c *Client) CheckBackupStorage(ctx context.Context, storage, node string) (BackupTarget, error) {
	t, why, err := c.checkStorageContent(ctx, nil, storage, node, BackupContent, "where the guest is")
	if why != "" {
		return BackupTarget{}, &BackupStorageError{Storage: storage, Node: node, Why: why}
	}
	return t, err
}

// checkStorageContent tells whether storage can hold content on node, with the reads of
// [Client.CheckBackupStorage] (the inventory only when inv is nil): why says what is wrong
// ("" when it can), where is how a refusal names node ("where the guest is").
func (c *Client) checkStorageContent(ctx context.Context, inv []StorageStatus, storage, node, content, where string) (BackupTarget, string, error) {
	if inv == nil {
		var err error
		if inv, err = c.StorageInventory(ctx); err != nil {
			return BackupTarget{}, "", err
		}
	}
	refuse := func(format string, args ...any) (BackupTarget, string, error) {
		return BackupTarget{}, fmt.Sprintf(format, args...), nil
	}
	if i := slices.IndexFunc(inv, func(s StorageStatus) bool { return s.Storage == storage && s.Node == node }); i >= 0 {
		s := inv[i]
		switch {
		case !slices.Contains(s.Content, content):
			return refuse("storage '%s' has no content '%s' (its content: %s); add '%s' to its content or name a storage that has it",
				storage, content, contentList(s.Content), content)
		case !s.Active:
			return refuse("storage '%s' is not active on node '%s' (its status in /cluster/resources is not 'available')", storage, node)
		}
		return BackupTarget{Storage: storage, Node: node, Type: s.Type, Shared: s.Shared}, "", nil
	}
	configs, err := c.Storages(ctx)
	if err != nil {
		return BackupTarget{}, "", err
	}
	i := slices.IndexFunc(configs, func(s StorageConfig) bool { return s["storage"] == storage })
	if i < 0 {
		return refuse("storage '%s' does not exist (GET /storage lists no storage of that id that the token may audit)", storage)
	}
	cfg := configs[i]
	switch {
	case flatBool(cfg, "disable"):
		return refuse("storage '%s' is disabled (disable 1 in /storage); enable it or name another storage", storage)
	case !nodeListed(cfg["nodes"], node):
		return refuse("storage '%s' is not available on node '%s', %s (its nodes: %s)", storage, node, where, cfg["nodes"])
	case !slices.Contains(splitContent(cfg["content"]), content):
		return refuse("storage '%s' has no content '%s' (its content: %s); add '%s' to its content or name a storage that has it",
			storage, content, contentList(splitContent(cfg["content"])), content)
	}
	return refuse("storage '%s' is not listed on node '%s' in /cluster/resources (the node may be offline)", storage, node)
}

// nodeListed reports whether a storage's nodes list ("" = every node) includes node.
func nodeListed(nodes, node string) bool {
	if strings.TrimSpace(nodes) == "" {
		return true
	}
	return slices.Contains(splitContent(nodes), node)
}

func contentList(c []string) string {
	if len(c) == 0 {
		return "none"
	}
	return strings.Join(c, ",")
}

// BackupRequest is one vzdump of one guest into a storage.
type BackupRequest struct {
	// Storage is the target storage id (required).
	Storage string
	// Mode is snapshot, suspend or stop ("" sends none: PVE's default, snapshot).
	Mode string
	// Compress is zstd, lzo, gzip or "0" ("" sends none: PVE's default, no compression).
	// A PBS storage ignores it: PBS always compresses its chunks with zstd.
	Compress string
	// NotesTemplate is the backup's notes template ({{guestname}}, {{node}}, {{vmid}},
	// {{cluster}}; a single line, newline and backslash escaped as \n and \\); "" sends none.
	NotesTemplate string
	// Protected marks the backup protected (protected=1).
	Protected bool
}

// backupParams are the POST /nodes/{node}/vzdump parameters [Client.Backup] can send, in order.
var backupParams = []string{"vmid", "storage", "mode", "compress", "notes-template", "protected", "remove"}

// form is the vzdump request for guest vmid: always remove=0, so a backup never prunes older
// ones (as PVE's own "Backup now" does unless asked to).
func (r BackupRequest) form(vmid int64) url.Values {
	f := url.Values{"vmid": {strconv.FormatInt(vmid, 10)}, "storage": {r.Storage}, "remove": {"0"}}
	if r.Mode != "" {
		f.Set("mode", r.Mode)
	}
	if r.Compress != "" {
		f.Set("compress", r.Compress)
	}
	if r.NotesTemplate != "" {
		f.Set("notes-template", r.NotesTemplate)
	}
	if r.Protected {
		f.Set("protected", "1")
	}
	return f
}

// Backup backs up g alone into req.Storage: exactly one POST /nodes/{node}/vzdump (vmid,
// storage, mode, compress, notes-template, protected, remove=0) on g's node, then it waits for
// the task. It returns the UPID ("" when the POST itself failed) and the error: a *[TaskError]
// when the task failed (PVE ends a job whose guest failed with the exit status "job errors"),
// [ErrVMNotFound] for an incomplete guest (no request), else the request's error (see the
// package doc; ErrAnswerLost: the backup may have started).
func (c *Client) Backup(ctx context.Context, g Guest, req BackupRequest) (string, error) {
	if err := g.check(); err != nil {
		return "", err
	}
	r := request{method: http.MethodPost, path: "/nodes/" + url.PathEscape(g.Node) + "/vzdump", form: req.form(g.VMID)}
	return c.runTask(ctx, g.Node, r)
}

// BackupVolume is one backup in a storage's content.
type BackupVolume struct {
	// VolID is the volume id: "pbs1:backup/vm/100/2026-12-01T10:00:00Z" on a PBS storage,
	// "local:backup/vzdump-qemu-100-2026_12_01-10_00_00.vma.zst" on a file storage.
	VolID string
	VMID  int64
	// Format is "pbs-vm", "pbs-ct", "vma.zst", "tar.zst", …
	Format string
	// Size is the size in bytes; 0 when PVE does not report it.
	Size int64
	// Created is the backup's time (ctime), UTC, second precision; zero when PVE gives none.
	Created   time.Time
	Notes     string // the first line of the notes
	Protected bool
	// Type is the backed-up guest's type (PVE's subtype: qemu or lxc); "" when PVE gives
	// none.
	Type GuestType
	// Verified is a PBS backup's last verification state ("ok", "failed"); "" when it was
	// never verified or the storage is not a PBS.
	Verified string
}

// GuestBackups lists the backups of guest vmid in storage as node sees it (GET
// /nodes/{node}/storage/{storage}/content with content=backup and vmid), oldest first (by
// creation time, then volume id). Entries of other content or other guests are left out
// even if the storage lists them. Errors: see the package doc (PVE answers 500 when the
// storage does not exist, is disabled or is not available on node).
func (c *Client) GuestBackups(ctx context.Context, node, storage string, vmid int64) ([]BackupVolume, error) {
	out, err := c.Backups(ctx, node, storage, vmid)
	slices.Reverse(out)
	return out, err
}

// backupArchiveLine is the line vzdump logs as it starts writing a guest's archive
// (pve-manager PVE/VZDump.pm, exec_backup_task): "INFO: creating vzdump archive
// '/var/lib/vz/dump/vzdump-qemu-100-2026_12_02-10_00_00.vma.zst'" into a file storage, "INFO:
// creating Proxmox Backup Server archive 'vm/100/2026-12-02T10:00:00Z'" into a PBS.
var backupArchiveLine = regexp.MustCompile(`creating (?:vzdump|Proxmox Backup Server) archive '([^']+)'`)

// BackupArchive reads the log of the vzdump task upid on node (one guest's backup) and returns
// the archive it wrote: a file path, or a PBS snapshot name. It returns "" when the log names
// none (the task failed before, or skipped the guest), and the error of a log read that failed.
func (c *Client) BackupArchive(ctx context.Context, node, upid string) (string, error) {
	var archive string
	err := c.scanTaskLog(ctx, node, upid, func(line string) {
		if m := backupArchiveLine.FindStringSubmatch(line); m != nil {
			archive = m[1]
		}
	})
	return archive, err
}

// BackupOfArchive returns the backup among backups that is archive, as [Client.BackupArchive]
// reads it from its task's log: the volume "storage:backup/<file name>" of a file path, or
// "storage:backup/<snapshot>" of a PBS snapshot name; false when none is.
func BackupOfArchive(backups []BackupVolume, archive string) (BackupVolume, bool) {
	name := archive
	if strings.HasPrefix(archive, "/") {
		name = path.Base(archive)
	}
	for _, b := range backups {
		if _, rel, ok := strings.Cut(b.VolID, ":backup/"); ok && rel == name && name != "" {
			return b, true
		}
	}
	return BackupVolume{}, false
}

// ActiveGuestTasks lists the tasks of guest vmid that still run on node (GET
// /nodes/{node}/tasks with vmid and source=active), newest first, whatever their type.
func (c *Client) ActiveGuestTasks(ctx context.Context, node string, vmid int64) ([]TaskSummary, error) {
	q := url.Values{"vmid": {strconv.FormatInt(vmid, 10)}, "source": {"active"}}
	r := request{method: http.MethodGet, path: "/nodes/" + url.PathEscape(node) + "/tasks", query: q}
	list, err := getList(ctx, c, r, func(it map[string]string) TaskSummary {
		return TaskSummary{UPID: it["upid"], Node: it["node"], Type: it["type"], ID: it["id"], User: it["user"],
			Start: time.Unix(flatInt(it, "starttime"), 0).UTC(), Status: it["status"], Running: true}
	})
	if err != nil {
		return nil, err
	}
	out := list[:0]
	for _, t := range list {
		if t.UPID != "" && t.ID == strconv.FormatInt(vmid, 10) && (t.Status == "" || t.Status == "RUNNING") {
			t.Status = ""
			out = append(out, t)
		}
	}
	slices.SortStableFunc(out, func(a, b TaskSummary) int { return cmp.Or(b.Start.Compare(a.Start), cmp.Compare(b.UPID, a.UPID)) })
	return out, nil
}

// TaskSummary is one task of a node's task list.
type TaskSummary struct {
	UPID  string
	Node  string
	Type  string // worker type, "vzdump"
	ID    string // worker id, usually the vmid
	User  string
	Start time.Time // UTC, second precision
	// End is when a finished task ended (UTC, second precision; zero while it runs).
	End time.Time
	// Running is true while the task runs (PVE lists it with status "RUNNING").
	Running bool
	// Status is the exit status of a finished task ("OK", "WARNINGS: 1", "job errors", …).
	Status string
}

// OK reports whether a finished task succeeded ("OK" or "WARNINGS: n").
func (t TaskSummary) OK() bool { return !t.Running && taskOK(t.Status) }

// GuestTasks lists node's tasks of type typ for guest vmid started at or after since, running
// ones included (GET /nodes/{node}/tasks with vmid, typefilter, since and source=all), newest
// first. Errors: see the package doc.
func (c *Client) GuestTasks(ctx context.Context, node string, vmid int64, typ string, since time.Time) ([]TaskSummary, error) {
	q := url.Values{"vmid": {strconv.FormatInt(vmid, 10)}, "typefilter": {typ}, "source": {"all"}}
	if !since.IsZero() {
		q.Set("since", strconv.FormatInt(since.Unix(), 10))
	}
	r := request{method: http.MethodGet, path: "/nodes/" + url.PathEscape(node) + "/tasks", query: q}
	list, err := getList(ctx, c, r, func(it map[string]string) TaskSummary {
		t := TaskSummary{
			UPID: it["upid"], Node: it["node"], Type: it["type"], ID: it["id"], User: it["user"],
			Start: time.Unix(flatInt(it, "starttime"), 0).UTC(), Status: it["status"],
		}
		t.Running = t.Status == "RUNNING" || (t.Status == "" && flatInt(it, "endtime") == 0)
		if t.Running {
			t.Status = ""
		} else if end := flatInt(it, "endtime"); end > 0 {
			t.End = time.Unix(end, 0).UTC()
		}
		return t
	})
	if err != nil {
		return nil, err
	}
	floor := since.Truncate(time.Second)
	out := list[:0]
	for _, t := range list {
		if t.UPID != "" && t.Type == typ && t.ID == strconv.FormatInt(vmid, 10) && !t.Start.Before(floor) {
			out = append(out, t)
		}
	}
	slices.SortStableFunc(out, func(a, b TaskSummary) int { return cmp.Or(b.Start.Compare(a.Start), cmp.Compare(b.UPID, a.UPID)) })
	return out, nil
}
