package proxmox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/proxbus/proxbus/internal/guestconfig"
)

// MigrationWish is what a migration is asked to do: move a guest to node Target, a running VM
// live (Online), with consent to copy disks on local storage (WithLocalDisks), those going to
// TargetStorage on the target when it is set.
type MigrationWish struct {
	Target         string
	Online         bool
	WithLocalDisks bool
	TargetStorage  string
}

// MigrationCheck is what [Client.CheckMigration] found before any write: the request to send,
// or why the migration cannot or may not run.
type MigrationCheck struct {
	// Request is what to send when Reasons is empty and Nodes nil.
	Request MigrateRequest
	// Nodes, when not nil, is the cluster's nodes: Target is not one of them.
	Nodes []string
	// Reasons says, each in a sentence, why the migration cannot or may not run.
	Reasons []string
	// Fields names, sorted, the wish's settings whose change would change the answer, by their
	// data field names: target_node, online, with_local_disks, target_storage.
	Fields []string
}

func (m *MigrationCheck) refuse(field, format string, args ...any) {
	m.Reasons = append(m.Reasons, fmt.Sprintf(format, args...))
	if field != "" && !slices.Contains(m.Fields, field) {
		m.Fields = append(m.Fields, field)
	}
}

// CheckMigration reads, before any write, what migrating g as w needs and what PVE would
// refuse: the cluster's nodes (w.Target must be one, and online); for a VM, PVE's own
// migration preconditions (GET /nodes/{node}/qemu/{vmid}/migrate, pve-manager's
// qemu-server PVE/API2/Qemu.pm migrate_vm_precondition: local disks, local resources, mapped
// devices, storages and HA rules per node); for a container, its volumes and the storages'
// sharing (pve-container src/PVE/LXC/Migrate.pm copies every volume not on shared storage);
// w.TargetStorage, when set, must be active on the target with the guest's content. A VM that
// another operation holds locked is refused with that operation named. The error is a
// read's; a refusal is in the check.
func (c *Client) CheckMigration(ctx context.Context, g Guest, w MigrationWish) (MigrationCheck, error) {
	check := MigrationCheck{Request: MigrateRequest{Target: w.Target, TargetStorage: w.TargetStorage}}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return check, err
	}
	i := slices.IndexFunc(nodes, func(n Node) bool { return n.Node == w.Target })
	if i < 0 {
		check.Nodes = make([]string, len(nodes))
		for j, n := range nodes {
			check.Nodes[j] = n.Node
		}
		return check, nil
	}
	if st := nodes[i].Status; st != "online" {
		check.refuse("target_node", "node %s is %s", w.Target, st)
	}
	var inv []StorageStatus
	if w.TargetStorage != "" || g.Type == GuestLXC {
		if inv, err = c.StorageInventory(ctx); err != nil {
			return check, err
		}
	}
	if w.TargetStorage != "" {
		check.targetStorage(inv, w, g.Type)
	}
	defer slices.Sort(check.Fields)
	if g.Type == GuestLXC {
		cfg, err := c.VMConfig(ctx, g)
		if err != nil {
			return check, err
		}
		check.container(cfg, inv, g, w)
		check.Request.Restart = g.Status == StatusRunning
		return check, nil
	}
	pre, err := c.MigrationPrecondition(ctx, g, w.Target)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusInternalServerError {
		if m := lockedMessage.FindStringSubmatch(apiErr.Message); m != nil {
			check.refuse("", "the VM is locked (%s) by another operation; retry once it ends", m[1])
			return check, nil
		}
	}
	if err != nil {
		return check, err
	}
	check.Request.Online = pre.Running && w.Online
	local := check.vm(pre, g, w)
	check.Request.WithLocalDisks = local && w.WithLocalDisks
	return check, nil
}

// lockedMessage is PVE's refusal of a guest with a config lock ("VM is locked (backup)").
var lockedMessage = regexp.MustCompile(`(?i)\bis locked \(([^)]*)\)`)

// targetStorage refuses a target storage the target node cannot use for the guest's volumes:
// not there (missing, disabled or outside its nodes), not active, or without the content
// (images for VMs, rootdir for containers).
func (m *MigrationCheck) targetStorage(inv []StorageStatus, w MigrationWish, typ GuestType) {
	content := "images"
	if typ == GuestLXC {
		content = "rootdir"
	}
	i := slices.IndexFunc(inv, func(s StorageStatus) bool { return s.Storage == w.TargetStorage && s.Node == w.Target })
	switch {
	case i < 0:
		m.refuse("target_storage", "target_storage %s is not available on node %s (missing, disabled or not in its nodes list)", w.TargetStorage, w.Target)
	case !inv[i].Active:
		m.refuse("target_storage", "target_storage %s is not active on node %s", w.TargetStorage, w.Target)
	case !slices.Contains(inv[i].Content, content):
		m.refuse("target_storage", "target_storage %s has no content %s", w.TargetStorage, content)
	}
}

// vm adds the reasons PVE's precondition answer gives against the migration and reports
// whether the VM has disks on local storage.
func (m *MigrationCheck) vm(pre MigrationPrecondition, g Guest, w MigrationWish) bool {
	target := w.Target
	if pre.Running && !w.Online {
		m.refuse("online", "the VM is running and online is false; PVE migrates a running VM only live: set online true or stop the VM first")
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
		if w.TargetStorage != "" { // local volumes go to target_storage; shared ones must be there
			storages = slices.DeleteFunc(slices.Clone(storages), func(s string) bool { return localStorages[s] })
		}
		if len(storages) > 0 {
			m.refuse("target_node", "storage %s of the VM is not available on node %s", strings.Join(storages, ", "), target)
		}
		if len(b.UnavailableResources) > 0 {
			m.refuse("target_node", "mapped device %s has no mapping on node %s", strings.Join(b.UnavailableResources, ", "), target)
		}
		if len(b.BlockingHA) > 0 {
			m.refuse("target_node", "HA rules keep it off node %s: %s", target, strings.Join(b.BlockingHA, ", "))
		}
	}
	if len(disks) > 0 && !w.WithLocalDisks {
		m.refuse("with_local_disks", "local disks on storage that is not shared: %s; set with_local_disks true to copy them to %s",
			strings.Join(disks, ", "), target)
	}
	if len(cdroms) > 0 {
		m.refuse("", "a CD-ROM holds a local image (%s); eject it or use shared storage first", strings.Join(cdroms, ", "))
	}
	if res := pre.BlockingResources(); len(res) > 0 {
		m.refuse("", "local resources tie it to node %s: %s (passthrough devices and serial/parallel ports cannot move; remove them first)",
			g.Node, strings.Join(res, ", "))
	}
	if pre.Running && w.Online {
		var fixed []string
		for _, key := range slices.Sorted(maps.Keys(pre.Mapped)) {
			if mp := pre.Mapped[key]; !mp.LiveMigration {
				fixed = append(fixed, key+" ("+mp.Name+")")
			}
		}
		if len(fixed) > 0 {
			m.refuse("", "mapped device %s cannot be migrated live; stop the VM first", strings.Join(fixed, ", "))
		}
	}
	return len(disks) > 0
}

// container adds the reasons against a container's migration, from its configuration:
// volumes on local storage without WithLocalDisks (PVE copies them in every container
// migration), storages not available on the target.
func (m *MigrationCheck) container(cfg guestconfig.Config, inv []StorageStatus, g Guest, w MigrationWish) {
	target := w.Target
	shared := func(storage string) bool {
		i := slices.IndexFunc(inv, func(s StorageStatus) bool { return s.Storage == storage && s.Node == g.Node })
		return i >= 0 && inv[i].Shared
	}
	on := func(storage, node string) bool {
		return slices.ContainsFunc(inv, func(s StorageStatus) bool { return s.Storage == storage && s.Node == node })
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
			if w.TargetStorage != "" {
				continue // checked as target_storage
			}
		}
		if !on(storage, target) && !slices.Contains(missing, storage) {
			missing = append(missing, storage)
		}
	}
	if len(missing) > 0 {
		m.refuse("target_node", "storage %s of the container is not available on node %s", strings.Join(missing, ", "), target)
	}
	if len(local) > 0 && !w.WithLocalDisks {
		m.refuse("with_local_disks", "volumes on storage that is not shared: %s; set with_local_disks true to copy them to %s",
			strings.Join(local, ", "), target)
	}
}

// diskLabel names a local disk: "scsi0 local-lvm:vm-100-disk-0 (32.0 GiB)".
func diskLabel(d LocalDisk) string {
	s := d.VolID
	if d.Drive != "" {
		s = d.Drive + " " + s
	}
	if d.SizeBytes > 0 {
		s += " (" + HumanSize(d.SizeBytes) + ")"
	}
	return s
}

// HumanSize renders bytes as PVE does: "32.0 GiB".
func HumanSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	f, u := float64(n), 0
	for f > 1023 && u < len(units)-1 {
		f /= 1024
		u++
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + units[u]
}
