package handlers

import (
	"context"
	"errors"
	"strings"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// ReasonStorageNotFound: storage.pbs.update or storage.pbs.delete named a storage that does
// not exist or is not a PBS storage (404); nothing was written.
const ReasonStorageNotFound = "storage_not_found"

// Steps of storage.pbs.update and storage.pbs.delete.
const (
	stepReadStorage   = "read_storage"
	stepUpdateStorage = "update_storage"
	stepDeleteStorage = "delete_storage"
)

// PBSStorageUpdateInput is the validated data of storage.pbs.update (contract §9): the storage
// and at least one of what a PBS token rotation changes. Password is write-only.
type PBSStorageUpdateInput struct {
	Storage     string `json:"storage"`
	Username    string `json:"username,omitempty"`
	Password    string `json:"password,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
}

// PBSStorageDeleteInput is the data of storage.pbs.delete.
type PBSStorageDeleteInput struct {
	Storage string `json:"storage"`
}

// pbsChangeOutput is the output of storage.pbs.update and storage.pbs.delete: the storage,
// and for an update the token id and fingerprint it has now and the names of the options the
// update sent (never the password's value).
type pbsChangeOutput struct {
	Storage     string   `json:"storage"`
	Username    string   `json:"username,omitempty"`
	Fingerprint string   `json:"fingerprint,omitempty"`
	Changed     []string `json:"changed,omitempty"`
}

// StoragePBSUpdate is the storage.pbs.update verb (contract §9): it rotates what a PBS token
// rotation changes — the token id (username), its secret (password), the server's certificate
// fingerprint — with one PUT /storage/{storage} carrying the options that change.
//
// What "equal" means: PVE never returns a storage's password (pve-storage keeps it in
// /etc/pve/priv/storage/<id>.pw and leaves it out of every answer), so only the username
// and the fingerprint (case-insensitive) can be compared. A request without a password whose
// fields equal the storage's is 200 already_present with no write; a request with a password
// always sends it (200 ok): whether the secret is already the one asked cannot be told.
// A storage that does not exist, or is not of type pbs, is 404 storage_not_found.
//
// A lost answer is confirmed by one read: the username and fingerprint asked are in place →
// 200 ok; otherwise, and always when a password was asked (its effect cannot be read),
// 502 proxmox_write_unconfirmed; the PUT is never sent twice. Journals on the endpoint.
func StoragePBSUpdate() Verb {
	return Spec[PBSStorageUpdateInput]{
		Name:     "storage.pbs.update",
		Access:   Write,
		Decode:   decodePBSStorageUpdate,
		Resource: func(in PBSStorageUpdateInput) string { return in.Storage },
		Secrets:  func(in PBSStorageUpdateInput) []string { return []string{in.Password} },
		Describe: func(in PBSStorageUpdateInput) []Bullet {
			b := []Bullet{{"storage", in.Storage}}
			if in.Username != "" {
				b = append(b, Bullet{"username", in.Username})
			}
			if in.Fingerprint != "" {
				b = append(b, Bullet{"fingerprint", in.Fingerprint})
			}
			if in.Password != "" {
				b = append(b, Bullet{"rotates", "the token secret (write-only, not shown)"})
			}
			return b
		},
		Dispatch: dispatchPBSStorageUpdate,
		Confirm:  confirmPBSStorageUpdate,
	}
}

func decodePBSStorageUpdate(f *Fields) PBSStorageUpdateInput {
	in := PBSStorageUpdateInput{
		Storage:  f.String("storage", true, storageIDPattern.MatchString),
		Username: f.String("username", false, tokenIDPattern.MatchString),
		// PVE's schema: at most 256 characters (pve-storage PBSPlugin password).
		Password:    f.String("password", false, func(s string) bool { return s != "" && len([]rune(s)) <= 256 }),
		Fingerprint: strings.ToUpper(f.String("fingerprint", false, fingerprintPattern.MatchString)),
	}
	if !f.Has("username") && !f.Has("password") && !f.Has("fingerprint") {
		// at least one: the fields it may be are named, never a value
		f.Fail("username")
		f.Fail("password")
		f.Fail("fingerprint")
	}
	return in
}

// readPBSStorage is the read_storage step: the storage's configuration, or the 404
// storage_not_found outcome for one that does not exist (absent reports whether that is why)
// or is not a PBS storage.
func readPBSStorage(ctx context.Context, x *Exec, id string) (cfg proxmox.StorageConfig, refusal *Outcome, absent bool, err error) {
	x.Step(ctx, stepReadStorage, events.StepStarted, "", "")
	cfg, err = x.Proxmox.Storage(ctx, id)
	switch {
	case errors.Is(err, proxmox.ErrNotFound):
		x.Step(ctx, stepReadStorage, events.StepDone, "", "no storage "+id)
		return nil, storageNotFound("no storage " + id + " is configured on the endpoint's cluster; check the storage id"), true, nil
	case err != nil:
		x.Step(ctx, stepReadStorage, events.StepError, "", "")
		return nil, nil, false, err
	}
	x.Step(ctx, stepReadStorage, events.StepDone, "", "")
	if cfg["type"] != "pbs" {
		return nil, storageNotFound("storage " + id + " is of type " + cfg["type"] + ", not a Proxmox Backup Server storage (pbs); " +
			"this verb changes only PBS storages"), false, nil
	}
	return cfg, nil, false, nil
}

func storageNotFound(detail string) *Outcome {
	return &Outcome{Status: 404, Result: ResultRefused, Reason: ReasonStorageNotFound, Fields: []string{"storage"}, Detail: detail}
}

// pbsUpdateChanges is the update to send — the readable options that differ from cfg, and the
// password when one is asked — and the names of the options it sets (none: nothing to send).
func pbsUpdateChanges(in PBSStorageUpdateInput, cfg proxmox.StorageConfig) (proxmox.PBSStorageUpdate, []string) {
	u := proxmox.PBSStorageUpdate{Storage: in.Storage}
	var changed []string
	if in.Username != "" && cfg["username"] != in.Username {
		u.Username = in.Username
		changed = append(changed, "username")
	}
	if in.Password != "" {
		u.Password = proxmox.Secret(in.Password)
		changed = append(changed, "password")
	}
	if in.Fingerprint != "" && !strings.EqualFold(cfg["fingerprint"], in.Fingerprint) {
		u.Fingerprint = in.Fingerprint
		changed = append(changed, "fingerprint")
	}
	return u, changed
}

// dispatchPBSStorageUpdate reads the storage, and sends what changes.
func dispatchPBSStorageUpdate(ctx context.Context, x *Exec, in PBSStorageUpdateInput) (Outcome, error) {
	cfg, refusal, _, err := readPBSStorage(ctx, x, in.Storage)
	if err != nil || refusal != nil {
		return derefOutcome(refusal), err
	}
	u, changed := pbsUpdateChanges(in, cfg)
	out := pbsChangeOutput{Storage: in.Storage, Username: cfg["username"], Fingerprint: cfg["fingerprint"]}
	if len(changed) == 0 {
		x.Step(ctx, stepUpdateStorage, events.StepSkipped, "", "the storage already has the token id and fingerprint asked")
		return Outcome{Status: 200, Result: ResultAlreadyPresent, Output: out,
			Detail: "the storage already has the token id and fingerprint asked; nothing was sent"}, nil
	}
	_, err = x.Write(ctx, stepUpdateStorage, "sets "+strings.Join(changed, ", "), func(ctx context.Context) (Sent, error) {
		return Sent{}, x.Proxmox.UpdatePBSStorage(ctx, u)
	})
	switch {
	case errors.Is(err, proxmox.ErrNotFound): // removed between the read and the update
		return *storageNotFound("storage " + in.Storage + " was removed before the update reached it"), nil
	case err != nil:
		return Outcome{}, err
	}
	out.Username, out.Fingerprint = pbsAfter(in, cfg)
	out.Changed = changed
	return Outcome{Status: 200, Result: ResultOK, Output: out}, nil
}

// pbsAfter is the storage's username and fingerprint once in is applied to cfg.
func pbsAfter(in PBSStorageUpdateInput, cfg proxmox.StorageConfig) (username, fingerprint string) {
	username, fingerprint = cfg["username"], cfg["fingerprint"]
	if in.Username != "" {
		username = in.Username
	}
	if in.Fingerprint != "" && !strings.EqualFold(fingerprint, in.Fingerprint) {
		fingerprint = in.Fingerprint
	}
	return username, fingerprint
}

// confirmPBSStorageUpdate tells by one read whether an update whose answer was lost took
// effect; it never sends the PUT again. An attempt that never sent it runs as new.
func confirmPBSStorageUpdate(ctx context.Context, x *Exec, in PBSStorageUpdateInput) (Outcome, error) {
	if !x.MaySent(stepUpdateStorage) {
		return dispatchPBSStorageUpdate(ctx, x, in)
	}
	cfg, err := x.Proxmox.Storage(ctx, in.Storage)
	unconfirmed := unconfirmedWrite()
	switch {
	case errors.Is(err, proxmox.ErrNotFound):
		unconfirmed.Detail = "the update was sent but its answer was lost, and the storage no longer exists; it is not sent twice"
		return unconfirmed, nil
	case err != nil:
		return Outcome{}, err
	}
	if _, changed := pbsUpdateChanges(PBSStorageUpdateInput{Storage: in.Storage, Username: in.Username, Fingerprint: in.Fingerprint}, cfg); len(changed) > 0 {
		unconfirmed.Detail = "the update was sent but its answer was lost, and the storage does not have the " + strings.Join(changed, " and ") +
			" asked; it is not sent twice: check the storage in Proxmox"
		return unconfirmed, nil
	}
	if in.Password != "" {
		unconfirmed.Detail = "the update was sent but its answer was lost; Proxmox never shows a storage's token secret, so whether it " +
			"was set cannot be read. Send storage.pbs.update again with the secret (a new command id): setting it again is harmless"
		return unconfirmed, nil
	}
	username, fingerprint := pbsAfter(in, cfg)
	return Outcome{Status: 200, Result: ResultOK, Output: pbsChangeOutput{Storage: in.Storage, Username: username, Fingerprint: fingerprint}}, nil
}

// StoragePBSDelete is the storage.pbs.delete verb (contract §9): it removes a PBS storage's
// registration from the cluster with DELETE /storage/{storage}; the backups on the Proxmox
// Backup Server are not touched (registering the storage again finds them). A storage that
// does not exist → 200 already_absent (a replay-safe repeat); one that is not of type pbs →
// 404 storage_not_found, nothing written. A lost answer is confirmed by one read: the
// storage gone → 200 ok; still there → 502 proxmox_write_unconfirmed; never a second DELETE.
// Journals on the endpoint.
func StoragePBSDelete() Verb {
	return Spec[PBSStorageDeleteInput]{
		Name:   "storage.pbs.delete",
		Access: Write,
		Decode: func(f *Fields) PBSStorageDeleteInput {
			return PBSStorageDeleteInput{Storage: f.String("storage", true, storageIDPattern.MatchString)}
		},
		Resource: func(in PBSStorageDeleteInput) string { return in.Storage },
		Describe: func(in PBSStorageDeleteInput) []Bullet { return []Bullet{{"storage", in.Storage}} },
		Dispatch: dispatchPBSStorageDelete,
		Confirm:  confirmPBSStorageDelete,
	}
}

// dispatchPBSStorageDelete reads the storage and deletes its registration.
func dispatchPBSStorageDelete(ctx context.Context, x *Exec, in PBSStorageDeleteInput) (Outcome, error) {
	out := pbsChangeOutput{Storage: in.Storage}
	_, refusal, absent, err := readPBSStorage(ctx, x, in.Storage)
	switch {
	case err != nil:
		return Outcome{}, err
	case absent:
		x.Step(ctx, stepDeleteStorage, events.StepSkipped, "", "no storage "+in.Storage)
		return Outcome{Status: 200, Result: ResultAlreadyAbsent, Output: out, Detail: "no storage " + in.Storage + " is configured; nothing was sent"}, nil
	case refusal != nil:
		return *refusal, nil
	}
	_, err = x.Write(ctx, stepDeleteStorage, "the registration only: the backups on the PBS stay", func(ctx context.Context) (Sent, error) {
		return Sent{}, x.Proxmox.DeleteStorage(ctx, in.Storage)
	})
	switch {
	case errors.Is(err, proxmox.ErrNotFound): // removed between the read and the delete
		return Outcome{Status: 200, Result: ResultAlreadyAbsent, Output: out, Detail: "the storage was gone when the delete reached Proxmox"}, nil
	case err != nil:
		return Outcome{}, err
	}
	return Outcome{Status: 200, Result: ResultOK, Output: out}, nil
}

// confirmPBSStorageDelete tells by one read whether a delete whose answer was lost took
// effect; an attempt that never sent it runs as new.
func confirmPBSStorageDelete(ctx context.Context, x *Exec, in PBSStorageDeleteInput) (Outcome, error) {
	if !x.MaySent(stepDeleteStorage) {
		return dispatchPBSStorageDelete(ctx, x, in)
	}
	_, err := x.Proxmox.Storage(ctx, in.Storage)
	switch {
	case errors.Is(err, proxmox.ErrNotFound):
		return Outcome{Status: 200, Result: ResultOK, Output: pbsChangeOutput{Storage: in.Storage}}, nil
	case err != nil:
		return Outcome{}, err
	}
	out := unconfirmedWrite()
	out.Detail = "the delete was sent but its answer was lost, and the storage is still configured; it is not sent twice: check it in Proxmox"
	return out, nil
}
