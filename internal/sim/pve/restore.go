package simpve

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// Demo backups (contract §10's demo cluster): two vzdump archives in the directory storage
// "local" of pve1, made a day before the cluster's guests were last looked at.
const (
	// DemoBackupWeb is a backup of web-01 (VM 100), zstd-compressed, unprotected.
	DemoBackupWeb = "local:backup/vzdump-qemu-100-2026_11_30-02_00_00.vma.zst"
	// DemoBackupCT is a protected backup of ct-pve1 (CT 200).
	DemoBackupCT = "local:backup/vzdump-lxc-200-2026_11_30-02_10_00.tar.zst"
)

// demoBackups are the demo cluster's backups of guests (taken from their configuration).
func demoBackups(guests map[int64]*guest) map[string][]*backupVol {
	at := func(s string) int64 {
		t, _ := time.Parse("2006_01_02-15_04_05", s)
		return t.Unix()
	}
	vols := []*backupVol{}
	if g := guests[DemoWebVMID]; g != nil {
		vols = append(vols, &backupVol{volid: DemoBackupWeb, vmid: g.vmid, subtype: string(g.typ), format: "vma.zst", size: 1932735283,
			ctime: at("2026_11_30-02_00_00"), notes: "web-01, nightly", config: maps.Clone(g.config)})
	}
	if g := guests[DemoCT1]; g != nil {
		vols = append(vols, &backupVol{volid: DemoBackupCT, vmid: g.vmid, subtype: string(g.typ), format: "tar.zst", size: 412316860,
			ctime: at("2026_11_30-02_10_00"), notes: "ct-pve1, before the upgrade", protected: true, config: maps.Clone(g.config)})
	}
	return map[string][]*backupVol{"local\x00pve1": vols}
}

// SetBackupVerification sets the last verification state ("ok", "failed"; "" none) of the
// backup volid on every node that lists it, as a PBS verify job would (PBS storages only in
// PVE; the simulator does not check).
func (s *Server) SetBackupVerification(volid, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, vols := range s.state.backups {
		for _, v := range vols {
			if v.volid == volid {
				v.verification, v.verifyUPID = state, ""
				if state != "" {
					v.verifyUPID = "UPID:pbs:0000A1B2:00C3D4E5:00000000:6750A000:verificationjob:store1\\x3av\\x2dverify:root@pam:"
				}
			}
		}
	}
}

// restoreEndpoints wraps the VM and container creation of existing: a POST
// /nodes/{node}/qemu with archive, or /nodes/{node}/lxc with restore=1, is a restore; any
// other request goes to the creation as before (a container's creation is answered 501 when
// existing has none). The restore finds its archive among b's backups; so does the deletion
// of a backup (DELETE /nodes/{node}/storage/{storage}/content/{volume}).
func (b *backupStore) restoreEndpoints(existing map[string]endpoint) map[string]endpoint {
	vmPerm := func(c *call) (string, string) { return "/vms/" + c.params.Get("vmid"), privVMAllocate }
	wrap := func(key string, typ proxmox.GuestType, restoring func(c *call) bool) endpoint {
		inner := existing[key]
		if inner.fn == nil {
			inner = endpoint{perm: vmPerm, fn: func(c *call) answer {
				return fail(http.StatusNotImplemented, "sim/pve: creating a "+string(typ)+" guest other than by a restore is not simulated")
			}}
		}
		return endpoint{perm: inner.perm, fn: func(c *call) answer {
			if restoring(c) {
				return b.restore(c, typ)
			}
			return inner.fn(c)
		}}
	}
	return map[string]endpoint{
		"POST /nodes/{node}/qemu": wrap("POST /nodes/{node}/qemu", proxmox.GuestQEMU, func(c *call) bool { return c.params.Has("archive") }),
		"POST /nodes/{node}/lxc":  wrap("POST /nodes/{node}/lxc", proxmox.GuestLXC, func(c *call) bool { return flag(c, "restore") }),
		"DELETE /nodes/{node}/storage/{storage}/content/{volume}": {
			perm: func(c *call) (string, string) {
				// pve-storage src/PVE/API2/Storage/Content.pm, delete: a backup with an owner
				// needs Datastore.AllocateSpace (and VM.Backup on its guest), any other volume
				// Datastore.Allocate
				volid := contentVolID(c)
				sid, _, _ := strings.Cut(volid, ":")
				if _, _, owner, ok := proxmox.ParseBackupVolID(volid); ok && owner > 0 {
					return "/storage/" + sid, privAllocateSpace
				}
				return "/storage/" + sid, privAllocate
			},
			fn: b.deleteVolume,
		},
	}
}

// contentVolID is the volume of a content method: volume as is when it names its storage,
// else storage:volume (pve-storage Content.pm's real_volume_id).
func contentVolID(c *call) string {
	v := c.r.PathValue("volume")
	if imgVolumeID.MatchString(v) {
		return v
	}
	return c.r.PathValue("storage") + ":" + v
}

// findBackup is the backup volid as node sees it, nil when there is none. Server.mu is held.
func (b *backupStore) findBackup(volid, node string) *backupVol {
	sid, _, _ := strings.Cut(volid, ":")
	for _, v := range b.vols[b.backupKey(sid, node)] {
		if v.volid == volid {
			return v
		}
	}
	return nil
}

// deleteVolume is DELETE /nodes/{node}/storage/{storage}/content/{volume} for a backup
// (pve-storage src/PVE/API2/Storage/Content.pm, delete): the storage must exist (500); the
// worker 'imgdel' (id "<owner>@<storage>") frees it with vdisk_free, which refuses a
// protected volume (src/PVE/Storage/Plugin.pm, free_image: "cannot remove protected volume
// '<volname>' on '<storage>'"; PBS refuses to forget a protected snapshot likewise) and fails
// for one that is not there (unlink of a file that does not exist; PBS: the snapshot is not
// found). Deleting any other volume is not simulated (501). Server.mu is held.
func (b *backupStore) deleteVolume(c *call) answer {
	s := b.s
	node := c.r.PathValue("node")
	if _, found := s.state.node(node); !found {
		return unknownNode(node)
	}
	volid := contentVolID(c)
	sid, volname, _ := strings.Cut(volid, ":")
	m, found := s.state.storages[sid]
	if !found {
		return fail(http.StatusInternalServerError, fmt.Sprintf("storage '%s' does not exist", sid))
	}
	_, _, owner, isBackup := proxmox.ParseBackupVolID(volid)
	if !isBackup {
		return fail(http.StatusNotImplemented, "sim/pve: deleting a volume that is not a backup is not simulated")
	}
	if msg := s.state.storageUsable(sid, node); msg != "" {
		return fail(http.StatusInternalServerError, msg)
	}
	v := b.findBackup(volid, node)
	failure := ""
	switch {
	case v == nil && m["type"] == "pbs":
		failure = fmt.Sprintf("proxmox-backup-client failed: Error: unable to forget snapshot '%s' - not found", strings.TrimPrefix(volname, "backup/"))
	case v == nil:
		failure = fmt.Sprintf("unlink '%s/dump/%s' failed - No such file or directory", imgStoragePath(sid, m), strings.TrimPrefix(volname, "backup/"))
	case v.protected:
		failure = fmt.Sprintf("cannot remove protected volume '%s' on '%s'", volname, sid)
	}
	key := b.backupKey(sid, node)
	effect := func(time.Time) {
		b.vols[key] = slices.DeleteFunc(b.vols[key], func(x *backupVol) bool { return x.volid == volid })
	}
	log := func(float64) []string {
		if failure != "" {
			return nil
		}
		return []string{"Removed volume '" + volid + "'"}
	}
	ghost := &guest{vmid: owner, typ: proxmox.GuestQEMU, node: node, config: map[string]string{}, snapshots: map[string]*snapshot{}}
	return s.startTaskAs(c, ghost, fmt.Sprintf("%d@%s", owner, sid), "imgdel", "", failure, effect, log)
}

// restoreReq is a restore's parameters, which passed the schema.
type restoreReq struct {
	typ                  proxmox.GuestType
	node, archive        string
	vmid                 int64
	storage              string // "" none
	unique, start, force bool
	bwlimit              string
}

// restore is a restore of archive into guest vmid on node as qemu-server (PVE/API2/Qemu.pm,
// create_vm with archive; PVE/QemuServer.pm restore_vma_archive, restore_tar_archive and
// restore_proxmox_backup_archive) and pve-container (src/PVE/API2/LXC.pm, create_vm with
// restore=1) make it. Before the worker: the archive's storage must exist (500 "storage 'x'
// does not exist") and the volume be a backup (500 "unable to use volume … - content type
// needs to be 'backup'"); a vmid in use without force is refused (500 "unable to restore VM
// 100 - VM 100 already exists on node 'pve1'"; a container: "CT 200 already exists on node
// 'pve1'"), and with force a guest of the other type or on another node too, a running or
// protected container (500 "can't overwrite running container", "unable to restore CT 200 -
// protection mode enabled"); a container's storage (default 'local') must be enabled on the
// node (500) and have content rootdir (400 storage "storage 'x' does not support container
// directories"). The guest's configuration is created (locked "create") before the worker,
// which fails for a running or protected VM ("unable to restore VM 100 - vm is running"), a
// storage of the VM without content images ("Content type 'images' is not available on
// storage 'x'"), an archive that is not there or of the other guest type; a failed VM
// restore leaves its configuration (PVE: "VM 100 state is NOT cleaned up"), a failed
// container restore of a new vmid removes it. On success the guest has the backup's
// configuration with its volumes renamed to the vmid (on storage when given), without
// snapshots or unused volumes, new MAC addresses with unique, and is started with start. A
// VM's restore logs vma extract's or pbs-restore's progress lines. Server.mu is held.
func (b *backupStore) restore(c *call, typ proxmox.GuestType) answer {
	s := b.s
	p := c.params
	r := restoreReq{typ: typ, node: c.r.PathValue("node"), vmid: int64(perlInt(p.Get("vmid"))), storage: p.Get("storage"),
		unique: flag(c, "unique"), start: flag(c, "start"), force: flag(c, "force"), bwlimit: p.Get("bwlimit")}
	r.archive = p.Get("archive")
	if typ == proxmox.GuestLXC {
		r.archive = p.Get("ostemplate")
	}
	if _, found := s.state.node(r.node); !found {
		return unknownNode(r.node)
	}
	kind := "VM"
	if typ == proxmox.GuestLXC {
		kind = "CT"
	}
	emsg := fmt.Sprintf("unable to restore %s %d -", kind, r.vmid)
	m := imgVolumeID.FindStringSubmatch(r.archive)
	if m == nil {
		return fail(http.StatusNotImplemented, "sim/pve: a restore from a file path or a pipe is not simulated")
	}
	archStorage := m[1]
	if _, found := s.state.storages[archStorage]; !found {
		return fail(http.StatusInternalServerError, fmt.Sprintf("storage '%s' does not exist", archStorage))
	}
	if !strings.HasPrefix(m[2], "backup/") {
		// pve-storage src/PVE/Storage.pm, check_volume_access with content 'backup'
		return fail(http.StatusInternalServerError, fmt.Sprintf("unable to use volume %s - content type needs to be 'backup'", r.archive))
	}
	old, exists := s.state.guests[r.vmid]
	if a, refused := r.refuseExisting(old, exists, emsg); refused {
		return a
	}
	target := r.storage
	if typ == proxmox.GuestLXC && target == "" {
		target = "local" // pve-container: extract_param($param, 'storage') // 'local'
	}
	if typ == proxmox.GuestLXC {
		if msg := s.state.storageEnabledOn(target, r.node); msg != "" {
			return fail(http.StatusInternalServerError, msg)
		}
		if !contains(splitList(s.state.storages[target]["content"]), proxmox.RootdirContent) {
			return paramFail(map[string]string{"storage": fmt.Sprintf("storage '%s' does not support container directories", target)})
		}
	}
	vol := b.findBackup(r.archive, r.node)
	failure := b.restoreFailure(r, vol, old, exists, archStorage, target)
	if failure != "" {
		failure = emsg + " " + failure
	}
	g := old
	if !exists {
		g = &guest{vmid: r.vmid, typ: typ, node: r.node, config: map[string]string{}, status: stateStopped, snapshots: map[string]*snapshot{}}
		s.state.guests[r.vmid] = g // create_and_lock_config: the configuration exists while the worker runs
	}
	willFail := failure != ""
	if q := s.taskFaults[faultKey(r.node, r.vmid)]; len(q) > 0 && !succeeded(q[0]) {
		willFail = true
	}
	if willFail && !exists && typ == proxmox.GuestLXC {
		// pve-container: $destroy_config_on_error for a vmid that had no container
		delete(s.state.guests, r.vmid)
	}
	effect := func(t time.Time) {
		g.config = restoredConfig(vol, r, target)
		g.snapshots, g.parent = map[string]*snapshot{}, ""
		if r.start {
			g.start(t)
		}
	}
	var log func(float64) []string
	if vol != nil && failure == "" {
		log = restoreLog(r, vol, s.state.storages[archStorage], archStorage, target)
	}
	return s.startLoggedTask(c, g, proxmox.RestoreTaskType(typ), "create", failure, effect, log)
}

// refuseExisting is the refusal, before the worker, of a restore onto vmid, which old holds
// when exists.
func (r restoreReq) refuseExisting(old *guest, exists bool, emsg string) (answer, bool) {
	if !exists {
		return answer{}, false
	}
	inUse := fmt.Sprintf("%s already exists on node '%s'", old.label(), old.node)
	if r.typ == proxmox.GuestLXC {
		switch {
		case !r.force || old.typ != proxmox.GuestLXC || old.node != r.node:
			return fail(http.StatusInternalServerError, inUse), true
		case old.status == stateRunning:
			return fail(http.StatusInternalServerError, "can't overwrite running container"), true
		case old.config["protection"] == "1":
			return fail(http.StatusInternalServerError, emsg+" protection mode enabled"), true
		}
	} else {
		switch {
		case !r.force:
			return fail(http.StatusInternalServerError, emsg+" "+inUse), true
		case old.typ != proxmox.GuestQEMU || old.node != r.node:
			return fail(http.StatusInternalServerError, fmt.Sprintf("%s Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist", emsg, r.node, r.vmid)), true
		}
	}
	if old.task != "" {
		return fail(http.StatusInternalServerError, fmt.Sprintf("%s can't lock file '%s' - got timeout", emsg, old.lockFile())), true
	}
	return answer{}, false
}

// restoreFailure is what the restore worker dies with ("" when it succeeds). Server.mu is held.
func (b *backupStore) restoreFailure(r restoreReq, vol *backupVol, old *guest, exists bool, archStorage, target string) string {
	s := b.s
	am := s.state.storages[archStorage]
	if exists && r.typ == proxmox.GuestQEMU {
		if old.config["protection"] == "1" {
			return "protection mode enabled"
		}
		if old.status == stateRunning {
			return "vm is running"
		}
	}
	if msg := s.state.storageUsable(archStorage, r.node); msg != "" {
		return msg
	}
	if vol == nil {
		if am["type"] == "pbs" {
			return fmt.Sprintf("proxmox-backup-client failed: Error: unable to open snapshot '%s' - not found", strings.TrimPrefix(r.archive[len(archStorage)+1:], "backup/"))
		}
		return fmt.Sprintf("unable to open file '%s/dump/%s' - No such file or directory", imgStoragePath(archStorage, am),
			strings.TrimPrefix(r.archive[len(archStorage)+1:], "backup/"))
	}
	if proxmox.GuestType(vol.subtype) != r.typ {
		if r.typ == proxmox.GuestQEMU {
			if am["type"] == "pbs" {
				return fmt.Sprintf("got unexpected backup format '%s'", vol.format)
			}
			return fmt.Sprintf("ERROR: file '%s' does not look like a QemuServer vzdump backup", r.archive)
		}
		return "unable to detect container configuration in the archive (not a container backup)"
	}
	for _, sid := range restoredStorages(vol, r, target) {
		if msg := s.state.storageUsable(sid, r.node); msg != "" {
			return msg
		}
		if r.typ == proxmox.GuestQEMU && !contains(splitList(s.state.storages[sid]["content"]), proxmox.ImagesContent) {
			return fmt.Sprintf("Content type 'images' is not available on storage '%s'", sid)
		}
	}
	return ""
}

// restoredVolumes are the keys of the volumes a restore of vol brings back: a VM's disks
// (not CD-ROMs, not Cloud-Init drives, not those excluded from the backup), a container's
// root file system and the mount points the backup included.
func restoredVolumes(vol *backupVol) []string {
	var keys []string
	for _, k := range slices.SortedFunc(maps.Keys(vol.config), compareDriveKeys) {
		d := parseDrive(vol.config[k])
		if vol.subtype == string(proxmox.GuestLXC) {
			if bk, _ := d.opt("backup"); k == "rootfs" || (mountPointKey.MatchString(k) && bk == "1") {
				keys = append(keys, k)
			}
			continue
		}
		media, _ := d.opt("media")
		bk, hasBackup := d.opt("backup")
		if diskKeyRe.MatchString(k) && d.file != "none" && media != "cdrom" && !cloudinitRe.MatchString(d.file) && !(hasBackup && bk == "0") {
			keys = append(keys, k)
		}
	}
	return keys
}

// restoredStorages are the storages the restored volumes go to: target, else each volume's own.
func restoredStorages(vol *backupVol, r restoreReq, target string) []string {
	var out []string
	for _, k := range restoredVolumes(vol) {
		sid := target
		if sid == "" {
			sid, _, _ = strings.Cut(parseDrive(vol.config[k]).file, ":")
		}
		if !slices.Contains(out, sid) {
			out = append(out, sid)
		}
	}
	return out
}

// restoredConfig is the configuration a restore of vol into r.vmid gives: the backup's, its
// volumes renamed to the vmid (on target when given), unused volumes, disks the backup
// excluded and the lock dropped, a new vmgenid, new MAC addresses and smbios1 uuid with
// unique.
func restoredConfig(vol *backupVol, r restoreReq, target string) map[string]string {
	cfg := maps.Clone(vol.config)
	oldID, newID := strconv.FormatInt(vol.vmid, 10), strconv.FormatInt(r.vmid, 10)
	for k, v := range cfg {
		bk, hasBackup := parseDrive(v).opt("backup")
		excluded := vol.subtype == string(proxmox.GuestQEMU) && diskKeyRe.MatchString(k) && hasBackup && bk == "0"
		if unusedKeyRe.MatchString(k) || k == "lock" || k == "parent" || excluded {
			delete(cfg, k) // restore_update_config_line comments out a disk the backup excluded
		}
	}
	// qemu-server restore_update_config_line: a new vmgenid always (unless it is 0), a new
	// smbios1 uuid with unique
	if v, found := cfg["vmgenid"]; found && v != "0" {
		cfg["vmgenid"] = randomUUID()
	}
	if v, found := cfg["smbios1"]; found && r.unique {
		parts := strings.Split(v, ",")
		for i, p := range parts {
			if strings.HasPrefix(p, "uuid=") {
				parts[i] = "uuid=" + randomUUID()
			}
		}
		cfg["smbios1"] = strings.Join(parts, ",")
	}
	for _, k := range restoredVolumes(vol) {
		d := parseDrive(cfg[k])
		sid, name, _ := strings.Cut(d.file, ":")
		if target != "" {
			sid = target
		}
		name = strings.ReplaceAll(name, "vm-"+oldID+"-", "vm-"+newID+"-")
		if rest, found := strings.CutPrefix(name, oldID+"/"); found {
			name = newID + "/" + rest
		}
		_, opts, _ := strings.Cut(cfg[k], ",")
		cfg[k] = sid + ":" + name
		if opts != "" {
			cfg[k] += "," + opts
		}
	}
	if r.unique {
		for k, v := range cfg {
			if !strings.HasPrefix(k, "net") {
				continue
			}
			parts := strings.Split(v, ",")
			for i, part := range parts {
				key, val, _ := strings.Cut(part, "=")
				switch {
				case key == "hwaddr":
					parts[i] = "hwaddr=" + randomMAC()
				case i == 0 && imgNetModel.MatchString(part) && val != "":
					parts[i] = key + "=" + randomMAC()
				}
			}
			cfg[k] = strings.Join(parts, ",")
		}
	}
	return cfg
}

// restoreLog is the restore worker's log: a VM's from a file (restore_vma_archive: the vma
// extract command, the volumes it allocates, "progress N% (read B bytes, duration S sec)"
// lines, the totals), from PBS (restore_proxmox_backup_archive: pbs-restore per disk with
// "progress N% (read B bytes, zeroes = Z% (B bytes), duration S sec)"), or a container's
// (restore_archive: no progress lines).
func restoreLog(r restoreReq, vol *backupVol, am map[string]string, archStorage, target string) func(frac float64) []string {
	total := int64(0)
	for _, k := range restoredVolumes(vol) {
		_, opts, _ := strings.Cut(vol.config[k], ",")
		total += imgOptSize(opts)
	}
	total = max(total, vol.size)
	newCfg := restoredConfig(vol, r, target)
	var head, tail []string
	if r.bwlimit != "" && r.bwlimit != "0" {
		head = append(head, "applying read rate limit: "+r.bwlimit)
	}
	file := imgStoragePath(archStorage, am) + "/dump/" + strings.TrimPrefix(r.archive[len(archStorage)+1:], "backup/")
	pbs := am["type"] == "pbs"
	switch {
	case r.typ == proxmox.GuestLXC:
		head = append(head, "recovering backed-up configuration from '"+r.archive+"'")
		head = append(head, fmt.Sprintf("restoring '%s' now..", r.archive))
		tail = append(tail, fmt.Sprintf("Total bytes read: %d (%s, %s/s)", total/4, taskLogBytes(total/4), taskLogBytes(total/40)),
			"merging backed-up and given configuration..")
	case pbs:
		head = append(head, "restore proxmox backup image: [REDACTED]", "connecting to repository '"+am["username"]+"@"+am["server"]+":"+am["datastore"]+"'")
		for _, k := range restoredVolumes(vol) {
			head = append(head, fmt.Sprintf("new volume ID is '%s'", parseDrive(newCfg[k]).file))
		}
		head = append(head, "starting to restore snapshot '"+strings.TrimPrefix(r.archive[len(archStorage)+1:], "backup/")+"'", "download and verify backup index")
		tail = append(tail, fmt.Sprintf("restore image complete (bytes=%d, duration=1.00s, speed=%.2fMB/s)", total, float64(total)/(1<<20)), "rescan volumes...")
	default:
		head = append(head, fmt.Sprintf("restore vma archive: zstd -q -d -c %s | vma extract -v -r /var/tmp/vzdumptmp%d.fifo - /var/tmp/vzdumptmp%d", file, r.vmid, r.vmid),
			"CFG: size: 612 name: qemu-server.conf")
		for _, k := range restoredVolumes(vol) {
			head = append(head, fmt.Sprintf("new volume ID is '%s'", parseDrive(newCfg[k]).file),
				fmt.Sprintf("map 'drive-%s' to '/dev/pve/%s' (write zeros = 0)", k, parseDrive(newCfg[k]).file))
		}
		tail = append(tail, fmt.Sprintf("total bytes read %d, sparse bytes %d (75%%)", total, total*3/4),
			"space reduction due to 4K zero blocks 75%", "rescan volumes...")
	}
	if r.start && r.typ == proxmox.GuestQEMU {
		tail = append(tail, "Execute autostart")
	}
	const steps = 10
	line := func(i int) string {
		if pbs {
			return fmt.Sprintf("progress %d%% (read %d bytes, zeroes = 75%% (%d bytes), duration %d sec)", i*100/steps, total*int64(i)/steps, total*int64(i)/steps*3/4, i)
		}
		return fmt.Sprintf("progress %d%% (read %d bytes, duration %d sec)", i*100/steps, total*int64(i)/steps, i)
	}
	if r.typ == proxmox.GuestLXC {
		return progressLog(head, 0, line, tail)
	}
	return progressLog(head, steps, line, tail)
}

// Backups returns the volume ids of the backups on storage, on every node, oldest first
// within each node.
func (s *Server) Backups(storage string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for key, vols := range s.state.backups {
		if st, _, _ := strings.Cut(key, "\x00"); st != storage {
			continue
		}
		for _, v := range vols {
			out = append(out, v.volid)
		}
	}
	return out
}
