package handlers

import (
	"context"
	"errors"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// PBSStorageInput is the validated data of storage.pbs.create (contract §9).
type PBSStorageInput struct {
	Storage     string   `json:"storage"`
	Server      string   `json:"server"`
	Port        int64    `json:"port"`
	Datastore   string   `json:"datastore"`
	Namespace   string   `json:"namespace,omitempty"`
	Username    string   `json:"username"`
	Password    string   `json:"password"`
	Fingerprint string   `json:"fingerprint"`
	Nodes       []string `json:"nodes,omitempty"`
}

var (
	storageIDPattern   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]*[A-Za-z0-9]$`)
	datastorePattern   = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,32}$`)
	pbsNamePattern     = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)
	tokenIDPattern     = regexp.MustCompile(`^[^\s@:!]+@[A-Za-z][A-Za-z0-9._-]*![A-Za-z0-9_][A-Za-z0-9._-]*$`)
	fingerprintPattern = regexp.MustCompile(`^([0-9A-Fa-f]{2}:){31}[0-9A-Fa-f]{2}$`)
	hostnamePattern    = regexp.MustCompile(`^(?i)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)
	nodeNamePattern    = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)
)

// StoragePBSCreate is the storage.pbs.create verb: create a Proxmox Backup Server storage,
// create-only (contract §9).
func StoragePBSCreate() Verb {
	return Spec[PBSStorageInput]{
		Name:     "storage.pbs.create",
		Access:   Write,
		Decode:   decodePBSStorage,
		Resource: func(in PBSStorageInput) string { return in.Storage },
		Secrets:  func(in PBSStorageInput) []string { return []string{in.Password} },
		Describe: func(in PBSStorageInput) []Bullet {
			b := []Bullet{{"storage", in.Storage}, {"server", in.Server}, {"port", strconv.FormatInt(in.Port, 10)},
				{"datastore", in.Datastore}, {"username", in.Username}, {"fingerprint", in.Fingerprint}}
			if in.Namespace != "" {
				b = append(b, Bullet{"namespace", in.Namespace})
			}
			if len(in.Nodes) > 0 {
				b = append(b, Bullet{"nodes", strings.Join(in.Nodes, ",")})
			}
			return b
		},
		Dispatch: dispatchPBSStorage,
		Confirm:  confirmPBSStorage,
	}
}

func decodePBSStorage(f *Fields) PBSStorageInput {
	return PBSStorageInput{
		Storage:   f.String("storage", true, storageIDPattern.MatchString),
		Server:    f.String("server", true, validServer),
		Port:      f.Int("port", false, 8007, 1, 65535),
		Datastore: f.String("datastore", true, datastorePattern.MatchString),
		Namespace: f.String("namespace", false, validNamespace),
		Username:  f.String("username", true, tokenIDPattern.MatchString),
		Password:  f.String("password", true, nil),
		// Upper-cased: PVE compares fingerprints case-insensitively, and so must the request
		// fingerprint of the Idempotency-Key window.
		Fingerprint: strings.ToUpper(f.String("fingerprint", true, fingerprintPattern.MatchString)),
		Nodes:       f.Strings("nodes", false, 0, nodeNamePattern.MatchString),
	}
}

func validServer(s string) bool {
	if net.ParseIP(s) != nil { // IPv6 without brackets, as PVE's address format wants it
		return true
	}
	return len(s) <= 253 && hostnamePattern.MatchString(s)
}

func validNamespace(s string) bool {
	parts := strings.Split(s, "/")
	if len(parts) > 7 {
		return false
	}
	for _, p := range parts {
		if !pbsNamePattern.MatchString(p) {
			return false
		}
	}
	return true
}

// dispatchPBSStorage reads the cluster's storages and creates the PBS storage when absent.
func dispatchPBSStorage(ctx context.Context, x *Exec, in PBSStorageInput) (Outcome, error) {
	var storages []proxmox.StorageConfig
	if _, err := x.Read(ctx, "read_storage", func(ctx context.Context) (_ *Outcome, err error) {
		storages, err = x.Proxmox.Storages(ctx)
		return nil, err
	}); err != nil {
		return Outcome{}, err
	}
	for _, existing := range storages {
		if existing["storage"] != in.Storage {
			continue
		}
		return compareExisting(in, existing, ResultAlreadyPresent), nil
	}
	password, err := x.Open(in.Password)
	if err != nil {
		return Outcome{}, err
	}
	_, err = x.Write(ctx, "create_storage", "", func(ctx context.Context) (Sent, error) {
		return Sent{}, x.Proxmox.CreatePBSStorage(ctx, proxmox.PBSStorage{
			Storage: in.Storage, Server: in.Server, Port: int(in.Port), Datastore: in.Datastore, Namespace: in.Namespace,
			Username: in.Username, Password: proxmox.Secret(password), Fingerprint: in.Fingerprint, Nodes: in.Nodes,
		})
	})
	switch {
	case err == nil:
		return Outcome{Status: 201, Result: ResultCreated, Output: pbsOutput(in)}, nil
	case errors.Is(err, proxmox.ErrAlreadyExists):
		// Created by someone else between our read and our create: judge it like a read.
		return judgeExisting(ctx, x, in)
	}
	return Outcome{}, err
}

// confirmPBSStorage is the lost-create-answer rule: one GET /storage/{storage}, never a second
// POST. Equal → 201 created; different → 409; absent, or the read failed → 502
// proxmox_create_unconfirmed.
func confirmPBSStorage(ctx context.Context, x *Exec, in PBSStorageInput) (Outcome, error) {
	got, err := x.Proxmox.Storage(ctx, in.Storage)
	switch {
	case errors.Is(err, proxmox.ErrNotFound):
		return Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxCreateUnconfirmed,
			Detail: "the create was sent but its answer was lost, and the storage does not exist"}, nil
	case err != nil:
		return Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxCreateUnconfirmed,
			Detail: "the create was sent but its answer was lost, and the confirming read failed"}, nil
	}
	return compareExisting(in, got, ResultCreated), nil
}

// judgeExisting reads a storage that exists although our read did not show it.
func judgeExisting(ctx context.Context, x *Exec, in PBSStorageInput) (Outcome, error) {
	got, err := x.Proxmox.Storage(ctx, in.Storage)
	if err != nil {
		return Outcome{}, err
	}
	return compareExisting(in, got, ResultAlreadyPresent), nil
}

// compareExisting is the outcome for an existing storage: equal → ifEqual (201 created when
// it is ours, 200 already_present otherwise), different → 409 storage_conflict.
func compareExisting(in PBSStorageInput, got proxmox.StorageConfig, ifEqual string) Outcome {
	if diff := pbsDifferences(in, got); len(diff) > 0 {
		return Outcome{Status: 409, Result: ResultRefused, Reason: ReasonStorageConflict, Fields: diff,
			Detail: "a storage with this id exists with different settings"}
	}
	status := 200
	if ifEqual == ResultCreated {
		status = 201
	}
	return Outcome{Status: status, Result: ifEqual, Output: pbsOutput(in)}
}

// pbsDifferences names the fields in which an existing storage differs from the request: every
// declared field but the password; fingerprint case-insensitive, nodes as a set; plus the type,
// content and prune-backups proxbus always sets.
func pbsDifferences(in PBSStorageInput, got proxmox.StorageConfig) []string {
	var diff []string
	port := got["port"]
	if port == "" {
		port = "8007"
	}
	checks := []struct {
		name string
		same bool
	}{
		{"content", got["content"] == "backup"},
		{"datastore", got["datastore"] == in.Datastore},
		{"fingerprint", strings.EqualFold(got["fingerprint"], in.Fingerprint)},
		{"namespace", got["namespace"] == in.Namespace},
		{"nodes", sameSet(splitList(got["nodes"]), in.Nodes)},
		{"port", port == strconv.FormatInt(in.Port, 10)},
		{"prune-backups", samePrune(got["prune-backups"])},
		{"server", got["server"] == in.Server},
		{"type", got["type"] == "pbs"},
		{"username", got["username"] == in.Username},
	}
	for _, c := range checks {
		if !c.same {
			diff = append(diff, c.name)
		}
	}
	return diff
}

func samePrune(s string) bool {
	return s == "keep-all=1" || s == "keep-all=true"
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' })
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// pbsOutput is the verb's output: the storage as configured, without the password.
func pbsOutput(in PBSStorageInput) map[string]any {
	out := map[string]any{"storage": in.Storage, "type": "pbs", "server": in.Server, "port": in.Port,
		"datastore": in.Datastore, "username": in.Username, "fingerprint": in.Fingerprint, "content": "backup"}
	if in.Namespace != "" {
		out["namespace"] = in.Namespace
	}
	if len(in.Nodes) > 0 {
		out["nodes"] = in.Nodes
	}
	return out
}
