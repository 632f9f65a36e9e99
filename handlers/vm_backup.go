package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// ReasonBackupStorageUnavailable (409): vm.backup's storage does not exist, is disabled, is not
// available on the guest's node, has no content `backup` or is not active there; `detail` says
// which, `fields` is [storage], and nothing was written.
const ReasonBackupStorageUnavailable = "backup_storage_unavailable"

// BackupInput is the data of vm.backup (contract §9): the guest, the storage to back it up
// into, and vzdump's options.
type BackupInput struct {
	GuestRef
	Storage       string `json:"storage"`
	Mode          string `json:"mode"`
	Compress      string `json:"compress,omitempty"`
	NotesTemplate string `json:"notes_template,omitempty"`
	Protected     bool   `json:"protected,omitempty"`
	// sent records when this delivery sent the vzdump; shared by the copies of the input, so
	// that Confirm after a lost answer knows it. Nil or zero: another delivery sent it.
	sent *backupSent
}

// backupSent is the time of this delivery's vzdump POST, taken just before it left.
type backupSent struct{ at time.Time }

// backupModes and backupCompressions are vzdump's mode and compress values.
var (
	backupModes        = []string{proxmox.BackupModeSnapshot, proxmox.BackupModeSuspend, proxmox.BackupModeStop}
	backupCompressions = []string{"zstd", "lzo", "gzip", "0"}
	// notesTemplatePattern is a single line (vzdump wants newline and backslash escaped as
	// \n and \\) of printable characters.
	notesTemplatePattern = regexp.MustCompile(`^[^\x00-\x1f\x7f]+$`)
)

// decodeBackup reads vm.backup's data.
func decodeBackup(f *Fields) BackupInput {
	in := BackupInput{
		GuestRef: decodeGuestRef(f),
		Storage:  f.String("storage", true, storageIDPattern.MatchString),
		Mode:     f.String("mode", false, func(s string) bool { return slices.Contains(backupModes, s) }),
		NotesTemplate: f.String("notes_template", false, func(s string) bool {
			return len(s) <= 1024 && notesTemplatePattern.MatchString(s)
		}),
		Protected: f.Bool("protected", false),
		sent:      &backupSent{},
	}
	if in.Mode == "" {
		in.Mode = proxmox.BackupModeSnapshot
	}
	// compress is a string; the number 0 (no compression) is accepted as "0".
	if raw := f.Raw("compress"); raw != nil && string(bytes.TrimSpace(raw)) == "0" {
		in.Compress = "0"
	} else {
		in.Compress = f.String("compress", false, func(s string) bool { return slices.Contains(backupCompressions, s) })
	}
	return in
}

// VMBackup backs a VM or container up into a storage (contract §9 vm.backup): one POST
// /nodes/{node}/vzdump for that guest alone, after a check of the storage that refuses one
// that cannot take it (409 backup_storage_unavailable, nothing written); it waits for the task
// and reads the backup's volume id back from the storage's content. A new backup is a new
// volume: 201 created, output {upid, volid, storage, size_bytes?} with the guest's vmid, name,
// node and type. A lost answer, or an earlier attempt that stopped after sending, is confirmed
// by the guest's backups in the storage made since the dispatch (and its vzdump tasks, waited
// for while one runs), never by a second vzdump. Exclusive on the guest; journals on its
// NetBox VM.
func VMBackup() Verb {
	return onGuest(Spec[BackupInput]{
		Name:   "vm.backup",
		Access: Write,
		Decode: decodeBackup,
		Describe: func(in BackupInput) []Bullet {
			b := append(guestBullets(in.guest), Bullet{"storage", in.Storage}, Bullet{"mode", in.Mode})
			if in.Compress != "" {
				b = append(b, Bullet{"compress", in.Compress})
			}
			if in.NotesTemplate != "" {
				b = append(b, Bullet{"notes_template", in.NotesTemplate})
			}
			return append(b, Bullet{"protected", boolWord(in.Protected)})
		},
		Dispatch: dispatchBackup,
		Confirm:  confirmBackup,
	}, func(in *BackupInput) *GuestRef { return &in.GuestRef })
}

// dispatchBackup checks the storage, sends the vzdump, waits for its task and reads the
// backup it made: the newest of the guest's backups created at or after the task's start.
func dispatchBackup(ctx context.Context, x *Exec, in BackupInput) (Outcome, error) {
	g := in.guest
	x.Step(ctx, "check_storage", events.StepStarted, "", "")
	if _, err := x.Proxmox.CheckBackupStorage(ctx, in.Storage, g.Node); err != nil {
		var refused *proxmox.BackupStorageError
		if errors.As(err, &refused) {
			x.Step(ctx, "check_storage", events.StepError, "", refused.Why)
			return Outcome{Status: 409, Result: ResultRefused, Reason: ReasonBackupStorageUnavailable, Fields: []string{"storage"},
				Detail: "storage: " + refused.Why}, nil
		}
		x.Step(ctx, "check_storage", events.StepError, "", "")
		return Outcome{}, err
	}
	x.Step(ctx, "check_storage", events.StepDone, "", "")
	req := proxmox.BackupRequest{Storage: in.Storage, Mode: in.Mode, Compress: in.Compress, NotesTemplate: in.NotesTemplate, Protected: in.Protected}
	var upid string
	_, err := x.Write(ctx, "backup_vm", "vzdump of "+strconv.FormatInt(g.VMID, 10)+" into "+in.Storage, func(ctx context.Context) (Sent, error) {
		if in.sent != nil {
			in.sent.at = time.Now()
		}
		var err error
		upid, err = x.Proxmox.Backup(ctx, g, req)
		return Sent{UPID: upid}, err
	})
	if err != nil {
		return Outcome{}, err
	}
	since := x.backupSince(in)
	if u, perr := proxmox.ParseUPID(upid); perr == nil {
		since = u.StartTime // Proxmox's clock, like the backup's ctime
	}
	var vol proxmox.BackupVolume
	found, err := x.untilInPlace(ctx, func(ctx context.Context) (bool, error) {
		var ok bool
		var err error
		vol, ok, err = newestBackup(ctx, x.Proxmox, in, since)
		return ok, err
	})
	switch {
	case err != nil:
		return Outcome{}, err
	case !found:
		out := unconfirmedWrite()
		out.UPID = upid
		out.Detail = fmt.Sprintf("the vzdump task %s ended OK but storage %s lists no backup of guest %d made since %s "+
			"(vzdump skips a guest that is no longer on node %s); it is not sent twice",
			upid, in.Storage, g.VMID, since.UTC().Format(time.RFC3339), g.Node)
		return out, nil
	}
	return backupCreated(in, upid, vol), nil
}

// newestBackup is the newest of the guest's backups in the storage created at or after since.
func newestBackup(ctx context.Context, c *proxmox.Client, in BackupInput, since time.Time) (proxmox.BackupVolume, bool, error) {
	vols, err := c.GuestBackups(ctx, in.guest.Node, in.Storage, in.guest.VMID)
	if err != nil {
		return proxmox.BackupVolume{}, false, err
	}
	v, ok := proxmox.NewestBackupSince(vols, since)
	return v, ok, nil
}

// confirmBackup tells, by reading, whether a vzdump whose answer was lost (or whose attempt
// stopped after sending) made a backup: the guest's backups in the storage created since the
// dispatch. While none is listed it looks at the guest's vzdump tasks since then: a running
// one is waited for (however long it runs), a failed one is the outcome (502 task_failed);
// otherwise it keeps looking for up to ConfirmFor and then answers 502
// proxmox_write_unconfirmed. It never sends a second vzdump.
func confirmBackup(ctx context.Context, x *Exec, in BackupInput) (Outcome, error) {
	g := in.guest
	since := x.backupSince(in)
	var vol proxmox.BackupVolume
	var upid string
	found, err := x.untilInPlace(ctx, func(ctx context.Context) (bool, error) {
		v, ok, err := newestBackup(ctx, x.Proxmox, in, since)
		if err != nil || ok {
			vol = v
			return ok, err
		}
		tasks, err := x.Proxmox.GuestTasks(ctx, g.Node, g.VMID, proxmox.BackupTaskType, since)
		if err != nil || len(tasks) == 0 {
			return false, err
		}
		t := tasks[0] // the newest
		upid = t.UPID
		switch {
		case t.Running:
			x.Step(ctx, "confirm", events.StepRunning, t.UPID, "waiting for the guest's vzdump task to end")
			if err := x.Proxmox.WaitTask(x.runningHook(ctx, "confirm"), g.Node, t.UPID); err != nil {
				return false, err
			}
		case !t.OK():
			return false, &proxmox.TaskError{UPID: t.UPID, Node: g.Node, ExitStatus: t.Status}
		}
		v, ok, err = newestBackup(ctx, x.Proxmox, in, t.Start)
		vol = v
		return ok, err
	})
	switch {
	case err != nil:
		return Outcome{}, err
	case !found:
		out := unconfirmedWrite()
		out.UPID = upid
		out.Detail = fmt.Sprintf("the vzdump may have been sent; storage %s lists no backup of guest %d made since %s and no vzdump task of it runs; it is not sent twice",
			in.Storage, g.VMID, since.UTC().Format(time.RFC3339))
		return out, nil
	}
	if upid == "" {
		upid = backupTaskOf(ctx, x, in, vol)
	}
	return backupCreated(in, upid, vol), nil
}

// backupTaskOf finds the vzdump task that made vol (the newest started at or before its
// creation); "" when the task list cannot tell.
func backupTaskOf(ctx context.Context, x *Exec, in BackupInput, vol proxmox.BackupVolume) string {
	tasks, err := x.Proxmox.GuestTasks(ctx, in.guest.Node, in.guest.VMID, proxmox.BackupTaskType, x.backupSince(in))
	if err != nil {
		return ""
	}
	for _, t := range tasks {
		if !t.Start.After(vol.Created) {
			return t.UPID
		}
	}
	return ""
}

// backupSince is the earliest time a backup made by this command can have: when this delivery
// sent the vzdump, if it did; else [Exec.CommandSince] (the command's arrival in the stream: a
// vzdump sent by an earlier delivery left after that; without it, this delivery's start, which
// finds nothing an earlier delivery made, so it answers unconfirmed rather than take another
// backup for this one's).
func (x *Exec) backupSince(in BackupInput) time.Time {
	if in.sent != nil && !in.sent.at.IsZero() {
		return in.sent.at
	}
	return x.CommandSince()
}

// backupCreated is the outcome of a backup found in the storage: 201 created.
func backupCreated(in BackupInput, upid string, vol proxmox.BackupVolume) Outcome {
	output := guestOutput(in.guest, nil)
	output["storage"] = in.Storage
	if vol.VolID != "" {
		output["volid"] = vol.VolID
	}
	if upid != "" {
		output["upid"] = upid
	}
	if vol.Size > 0 {
		output["size_bytes"] = vol.Size
	}
	return Outcome{Status: 201, Result: ResultCreated, UPID: upid, Output: output}
}
