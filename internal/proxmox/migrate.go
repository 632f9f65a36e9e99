package proxmox

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
)

// Worker types of migration tasks ("UPID:…:qmigrate:100:…").
const (
	MigrateTaskQEMU = "qmigrate"
	MigrateTaskLXC  = "vzmigrate"
)

// MigrateTaskType is the worker type of a migration of a guest of type t (PVE's hamigrate,
// for an HA-managed guest, is not covered: it only asks the HA manager to migrate).
func MigrateTaskType(t GuestType) string {
	if t == GuestLXC {
		return MigrateTaskLXC
	}
	return MigrateTaskQEMU
}

// MigrationPrecondition is PVE's answer to GET /nodes/{node}/qemu/{vmid}/migrate
// (qemu-server's migrate_vm_precondition), read from the guest's current node.
type MigrationPrecondition struct {
	// Running: the VM runs (a paused VM runs too).
	Running bool
	// AllowedNodes are the other nodes PVE found nothing against.
	AllowedNodes []string
	// NotAllowed maps each other node that something blocks to what blocks it. PVE lists
	// every other node in not_allowed_nodes, an allowed one with an empty object; those are
	// left out here.
	NotAllowed map[string]NodeBlockers
	// LocalDisks are the VM's volumes on storage that is not shared (CD-ROMs, unused disks and
	// volumes only a snapshot references included), ordered by volume id.
	LocalDisks []LocalDisk
	// LocalResources are the config keys PVE reports as local resources (hostpciN, usbN,
	// serialN, parallelN, …); mapped devices among them do not block (see Mapped).
	LocalResources []string
	// Mapped are the mapped devices (config key → mapping), from mapped-resource-info (or the
	// deprecated mapped-resources list).
	Mapped map[string]MappedResource
}

// NodeBlockers is what keeps a VM from migrating to one node.
type NodeBlockers struct {
	UnavailableStorages  []string // storages of the VM not available there
	UnavailableResources []string // mapped devices (config keys) with no mapping there
	BlockingHA           []string // HA resources that block it, "sid (cause)"
}

// Empty reports whether nothing blocks the node.
func (b NodeBlockers) Empty() bool {
	return len(b.UnavailableStorages) == 0 && len(b.UnavailableResources) == 0 && len(b.BlockingHA) == 0
}

// LocalDisk is one entry of the precondition's local_disks.
type LocalDisk struct {
	VolID     string // "local-lvm:vm-100-disk-0", or "cdrom" for a host CD-ROM drive
	Drive     string // config key ("scsi0", "unused0"); "" when PVE gives none
	SizeBytes int64  // 0 when PVE gives none
	CDROM     bool
	Unused    bool
	CloudInit bool // a Cloud-Init drive: PVE copies it as a generated volume
}

// MappedResource is one mapped device of a VM.
type MappedResource struct {
	Name          string // the mapping's name (hostpci0: mapping=gpu-a40 → "gpu-a40")
	LiveMigration bool   // the mapping allows live migration
}

// BlockingResources are the local resources that are not mapped devices: PVE refuses to
// migrate a VM that has any (qemu-server's "can't migrate VM which uses local devices").
func (p MigrationPrecondition) BlockingResources() []string {
	var out []string
	for _, r := range p.LocalResources {
		if _, mapped := p.Mapped[r]; !mapped {
			out = append(out, r)
		}
	}
	return out
}

// cloudInitVolume is qemu-server's test of a Cloud-Init volume name (drive_is_cloudinit).
var cloudInitVolume = regexp.MustCompile(`[:/](?:vm-\d+-)?cloudinit(?:\.(?:raw|qcow2|vmdk))?$`)

// MigrationPrecondition reads PVE's migration preconditions of the QEMU VM g towards target
// (GET /nodes/{node}/qemu/{vmid}/migrate?target=…, a read). A container →
// [ErrUnsupportedForContainer] without a request (pve-container's answer has none of the
// disk and resource lists). Errors: [ErrVMNotFound] when g is gone from its node, an
// *[APIError] (a locked VM: 500 "VM is locked (backup)"), or the request's error; an answer
// of another shape is [ErrAnswerLost] with the cause [ErrUndecodable].
func (c *Client) MigrationPrecondition(ctx context.Context, g Guest, target string) (MigrationPrecondition, error) {
	if err := g.check(); err != nil {
		return MigrationPrecondition{}, err
	}
	if g.Type != GuestQEMU {
		return MigrationPrecondition{}, fmt.Errorf("%w: migration preconditions of CT %d", ErrUnsupportedForContainer, g.VMID)
	}
	r := request{method: http.MethodGet, path: g.basePath() + "/migrate", query: url.Values{"target": {target}}}
	var raw json.RawMessage
	if err := c.do(ctx, r, &raw); err != nil {
		return MigrationPrecondition{}, guestNotFound(g, err)
	}
	p, err := parsePrecondition(raw)
	if err != nil {
		return MigrationPrecondition{}, &TransportError{Method: r.method, Path: r.path, Sent: true, Err: fmt.Errorf("%w: %w", ErrUndecodable, err)}
	}
	return p, nil
}

// preconditionJSON is the answer's shape; PVE's booleans come as 0/1 or true/false.
type preconditionJSON struct {
	Running         pveBool                   `json:"running"`
	AllowedNodes    []string                  `json:"allowed_nodes"`
	NotAllowed      map[string]blockersJSON   `json:"not_allowed_nodes"`
	LocalDisks      []localDiskJSON           `json:"local_disks"`
	LocalResources  []string                  `json:"local_resources"`
	MappedResources []string                  `json:"mapped-resources"`
	MappedInfo      map[string]mappedInfoJSON `json:"mapped-resource-info"`
}

type blockersJSON struct {
	UnavailableStorages  []string `json:"unavailable_storages"`
	UnavailableResources []string `json:"unavailable-resources"`
	BlockingHA           []struct {
		SID   string `json:"sid"`
		Cause string `json:"cause"`
	} `json:"blocking-ha-resources"`
}

type localDiskJSON struct {
	VolID       string   `json:"volid"`
	DriveName   string   `json:"drivename"`
	Size        pveInt   `json:"size"`
	CDROM       pveBool  `json:"cdrom"`
	IsUnused    pveBool  `json:"is_unused"`
	IsCloudInit *pveBool `json:"is_cloudinit"`
}

type mappedInfoJSON struct {
	Name          string  `json:"name"`
	LiveMigration pveBool `json:"live-migration"`
}

// parsePrecondition decodes the answer's data.
func parsePrecondition(raw json.RawMessage) (MigrationPrecondition, error) {
	var j preconditionJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return MigrationPrecondition{}, fmt.Errorf("%s: a JSON %s is not what PVE sends there", te.Field, te.Value)
		}
		return MigrationPrecondition{}, kindError(raw, "an object", err)
	}
	p := MigrationPrecondition{
		Running: bool(j.Running), AllowedNodes: j.AllowedNodes, NotAllowed: map[string]NodeBlockers{},
		LocalResources: j.LocalResources, Mapped: map[string]MappedResource{},
	}
	for _, node := range slices.Sorted(maps.Keys(j.NotAllowed)) {
		b := j.NotAllowed[node]
		nb := NodeBlockers{UnavailableStorages: b.UnavailableStorages, UnavailableResources: b.UnavailableResources}
		for _, ha := range b.BlockingHA {
			nb.BlockingHA = append(nb.BlockingHA, fmt.Sprintf("%s (%s)", ha.SID, ha.Cause))
		}
		if !nb.Empty() {
			p.NotAllowed[node] = nb
		}
	}
	for _, d := range j.LocalDisks {
		ld := LocalDisk{VolID: d.VolID, Drive: d.DriveName, SizeBytes: int64(d.Size), CDROM: bool(d.CDROM), Unused: bool(d.IsUnused)}
		if d.IsCloudInit != nil {
			ld.CloudInit = bool(*d.IsCloudInit)
		} else {
			ld.CloudInit = cloudInitVolume.MatchString(d.VolID)
		}
		p.LocalDisks = append(p.LocalDisks, ld)
	}
	slices.SortFunc(p.LocalDisks, func(a, b LocalDisk) int { return cmp.Compare(a.VolID, b.VolID) })
	for key, m := range j.MappedInfo {
		p.Mapped[key] = MappedResource{Name: m.Name, LiveMigration: bool(m.LiveMigration)}
	}
	for _, key := range j.MappedResources {
		if _, known := p.Mapped[key]; !known {
			p.Mapped[key] = MappedResource{}
		}
	}
	return p, nil
}

// pveBool is a PVE boolean: true/false, 0/1 (as a number or a string), or null (false).
type pveBool bool

// UnmarshalJSON implements json.Unmarshaler.
func (b *pveBool) UnmarshalJSON(data []byte) error {
	s, _, err := flatValue(data)
	if err != nil {
		return err
	}
	switch s {
	case "", "0", "false":
		*b = false
	case "1", "true":
		*b = true
	default:
		return fmt.Errorf("a boolean was expected, not %s", jsonKind(data))
	}
	return nil
}

// pveInt is a PVE integer: a number (integral) or a numeric string, or null (0).
type pveInt int64

// UnmarshalJSON implements json.Unmarshaler.
func (n *pveInt) UnmarshalJSON(data []byte) error {
	s, ok, err := flatValue(data)
	if err != nil || !ok {
		*n = 0
		return err
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		*n = pveInt(v)
		return nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		*n = pveInt(f)
		return nil
	}
	return fmt.Errorf("an integer was expected, not %s", jsonKind(data))
}

// kindOf names the JSON kind of data without quoting it (it may hold anything).
func jsonKind(data []byte) string {
	v := bytes.TrimSpace(data)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "another value"
}

// MigrateRequest is what [Client.Migrate] asks PVE for.
type MigrateRequest struct {
	// Target is the node to migrate to.
	Target string
	// Online (QEMU): migrate a running VM live (online=1). PVE refuses a running VM without
	// it; a stopped VM migrates offline either way.
	Online bool
	// WithLocalDisks (QEMU): copy disks on local storage along (with-local-disks=1).
	WithLocalDisks bool
	// TargetStorage, when not empty, is the storage the guest's local volumes go to on the
	// target (qemu targetstorage, lxc target-storage); else each stays on a storage of the
	// same id.
	TargetStorage string
	// Restart (LXC): a running container is shut down, moved and started on the target
	// (restart=1); PVE refuses a running container without it.
	Restart bool
}

// Form is the request's form for a guest of type t: only the parameters t's API declares.
func (m MigrateRequest) Form(t GuestType) url.Values {
	form := url.Values{"target": {m.Target}}
	switch t {
	case GuestLXC:
		if m.Restart {
			form.Set("restart", "1")
		}
		if m.TargetStorage != "" {
			form.Set("target-storage", m.TargetStorage)
		}
	default:
		if m.Online {
			form.Set("online", "1")
		}
		if m.WithLocalDisks {
			form.Set("with-local-disks", "1")
		}
		if m.TargetStorage != "" {
			form.Set("targetstorage", m.TargetStorage)
		}
	}
	return form
}

// Migrate migrates g to req.Target (POST /nodes/{node}/{qemu|lxc}/{vmid}/migrate) and waits
// for the migration task (qmigrate / vzmigrate, run by g's node), returning its UPID ("" when
// the request failed). The guest is on the target once the task ended OK. Errors: a *[TaskError]
// (the task's exit status, "migration aborted", is in its log), [ErrVMNotFound] when g is
// gone from its node, an *[APIError] (PVE's checks before the task: "can't migrate running VM
// without --online", "target is local node.", "no such cluster node 'x'", a storage not
// available on the target), or the request's error; [ErrAnswerLost] means the migration may
// have started: confirm it by reading, never send it again.
func (c *Client) Migrate(ctx context.Context, g Guest, req MigrateRequest) (string, error) {
	if err := g.check(); err != nil {
		return "", err
	}
	r := request{method: http.MethodPost, path: g.basePath() + "/migrate", form: req.Form(g.Type)}
	upid, err := c.runTask(ctx, g.Node, r)
	if upid == "" {
		err = guestNotFound(g, err)
	}
	return upid, err
}
