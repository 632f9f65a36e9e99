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
}

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
// and finds the backup it made in the storage's content by the archive the task's log names,
// never by time (two backups of one guest in one second are two volumes). A new backup is a
// new volume: 201 created, output {upid, volid, storage, size_bytes?} with the guest's vmid,
// name, node and type. A lost answer, or an earlier attempt that stopped after sending, is
// confirmed by the guest's vzdump tasks since the command arrived (waited for while one runs)
// and the archive the newest one wrote, never by a second vzdump. Exclusive on the guest;
// journals on its NetBox VM.
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
		Cancellable: map[string]string{"backup_vm": "vzdump removes the archive it was writing; the guest's earlier backups are untouched " +
			"(a guest stopped or suspended for a stop or suspend mode backup is started or resumed again by vzdump)"},
	}, func(in *BackupInput) *GuestRef { return &in.GuestRef })
}

// dispatchBackup checks the storage, sends the vzdump, waits for its task and reads the
// backup it made.
func dispatchBackup(ctx context.Context, x *Exec, in BackupInput) (Outcome, error) {
	g := in.guest
	var pace bool
	refusal, err := x.Read(ctx, "check_storage", func(ctx context.Context) (*Outcome, error) {
		_, err := x.Proxmox.CheckBackupStorage(ctx, in.Storage, g.Node)
		var refused *proxmox.BackupStorageError
		if errors.As(err, &refused) {
			return &Outcome{Status: 409, Result: ResultRefused, Reason: ReasonBackupStorageUnavailable, Fields: []string{"storage"},
				Detail: "storage: " + refused.Why}, nil
		}
		if err != nil {
			return nil, err
		}
		pace, err = sameSecondRisk(ctx, x, g)
		return nil, err
	})
	switch {
	case err != nil:
		return Outcome{}, err
	case refusal != nil:
		return *refusal, nil
	}
	if pace {
		x.r.p.sleep(time.Second)
	}
	req := proxmox.BackupRequest{Storage: in.Storage, Mode: in.Mode, Compress: in.Compress, NotesTemplate: in.NotesTemplate, Protected: in.Protected}
	var upid string
	_, err = x.Write(ctx, "backup_vm", "vzdump of "+strconv.FormatInt(g.VMID, 10)+" into "+in.Storage, func(ctx context.Context) (Sent, error) {
		var err error
		upid, err = x.Proxmox.Backup(ctx, g, req)
		return Sent{UPID: upid}, err
	})
	if err != nil {
		return Outcome{}, err
	}
	return backupMadeBy(ctx, x, in, upid)
}

// backupMadeBy is the outcome of the ended vzdump task upid: the backup it made, found in the
// storage by the archive its log names (listed within ConfirmFor: a storage may list a new
// volume late), 201 created; or, when its log names no archive or the storage never lists it,
// 502 proxmox_write_unconfirmed: the task ended OK, but what it made cannot be told.
func backupMadeBy(ctx context.Context, x *Exec, in BackupInput, upid string) (Outcome, error) {
	g := in.guest
	archive, err := x.Proxmox.BackupArchive(ctx, g.Node, upid)
	if err != nil {
		return Outcome{}, err
	}
	var vol proxmox.BackupVolume
	found := false
	if archive != "" {
		found, err = x.untilInPlace(ctx, func(ctx context.Context) (bool, error) {
			vols, err := x.Proxmox.GuestBackups(ctx, g.Node, in.Storage, g.VMID)
			if err != nil {
				return false, err
			}
			var ok bool
			vol, ok = proxmox.BackupOfArchive(vols, archive)
			return ok, nil
		})
	}
	switch {
	case err != nil:
		return Outcome{}, err
	case archive == "":
		return Outcome{}, x.Unconfirmed(upid, fmt.Sprintf("the vzdump task %s ended OK but its log names no archive of guest %d "+
			"(vzdump skips a guest that is no longer on node %s); it is not sent twice", upid, g.VMID, g.Node))
	case !found:
		return Outcome{}, x.Unconfirmed(upid, fmt.Sprintf("the vzdump task %s ended OK and wrote %s, but storage %s does not list it; it is not sent twice",
			upid, archive, in.Storage))
	}
	return backupCreated(in, upid, vol), nil
}

// confirmBackup tells, by reading, whether a vzdump whose answer was lost (or whose attempt
// stopped after sending) made a backup: the newest of the guest's vzdump tasks since the
// command arrived is waited for while it runs; a failed one is the outcome (502 task_failed),
// one that ended OK is judged by the backup its log names (backupMadeBy). While no task is
// listed it keeps looking for up to ConfirmFor and then answers 502 proxmox_write_unconfirmed.
// It never sends a second vzdump.
func confirmBackup(ctx context.Context, x *Exec, in BackupInput) (Outcome, error) {
	g := in.guest
	since := x.CommandSince()
	task, found, err := x.newestGuestTask(ctx, g.Node, g.VMID, proxmox.BackupTaskType, since)
	switch {
	case err != nil:
		return Outcome{}, err
	case !found:
		return Outcome{}, x.Unconfirmed("", fmt.Sprintf("the vzdump may have been sent; no vzdump task of guest %d on %s started since %s; it is not sent twice",
			g.VMID, g.Node, since.UTC().Format(time.RFC3339)))
	}
	if task.Running {
		x.Step(ctx, "confirm", events.StepRunning, task.UPID, "waiting for the guest's vzdump task to end")
		if err := x.AwaitTask(ctx, "backup_vm", g.Node, task.UPID); err != nil {
			return Outcome{}, err
		}
	} else if !task.OK() {
		return Outcome{}, &proxmox.TaskError{UPID: task.UPID, Node: g.Node, ExitStatus: task.Status}
	}
	return backupMadeBy(ctx, x, in, task.UPID)
}

// sameSecondRisk reports whether the guest's last backup started and ended within one second
// of its node's clock in the last minute: a vzdump names its archive after the guest and the
// second it starts, and renames it over an existing file of that name (pve-manager
// PVE/VZDump.pm: the basename's strftime of the backup time, then rename of the temporary
// file), so a second backup starting in that same second would overwrite the first. Backups of
// one guest run one at a time (its lease), so the last one ended before this one starts: one
// second's pause then puts this one in a later second of the node's clock.
func sameSecondRisk(ctx context.Context, x *Exec, g proxmox.Guest) (bool, error) {
	tasks, err := x.Proxmox.GuestTasks(ctx, g.Node, g.VMID, proxmox.BackupTaskType, x.r.p.cfg.Now().Add(-time.Minute))
	if err != nil || len(tasks) == 0 {
		return false, err
	}
	last := tasks[0] // the newest
	return !last.Running && !last.End.IsZero() && last.End.Equal(last.Start), nil
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
	var bullets []Bullet
	if vol.VolID != "" {
		bullets = append(bullets, Bullet{"volid", vol.VolID})
	}
	if vol.Size > 0 {
		output["size_bytes"] = vol.Size
		bullets = append(bullets, Bullet{"size_bytes", strconv.FormatInt(vol.Size, 10)})
	}
	return Outcome{Status: 201, Result: ResultCreated, UPID: upid, Output: output, Bullets: bullets}
}
