package simpve

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// Migrations, as qemu-server (API2/Qemu.pm migrate_vm_precondition and migrate_vm,
// QemuMigrate.pm) and pve-container (API2/LXC.pm migrate_vm, LXC/Migrate.pm) do them:
//
//   - GET /nodes/{node}/qemu/{vmid}/migrate answers running, allowed_nodes,
//     not_allowed_nodes (every other node: an empty object when nothing blocks it, else
//     unavailable_storages), local_disks (volumes on storage that is not shared, CD-ROMs,
//     unused disks and snapshot-only volumes included, with PVE's foreach_volid attributes),
//     local_resources (hostpciN, usbN, serialN, parallelN, … that are not sockets or SPICE),
//     mapped-resources and mapped-resource-info (devices given by mapping=, which the
//     simulator maps on every node, none live-migratable);
//   - POST …/migrate runs PVE's checks before the worker (400 "target is local node.", 500
//     "no such cluster node 'x'", "can't migrate running VM without --online" / "… container
//     without --online or --restart", a locked guest, a storage not available on the target
//     or a target storage that is not there or cannot hold the guest's volumes), then starts
//     a qmigrate / vzmigrate task on the guest's node. The worker's own checks fail the task
//     with "migration aborted" and log why (local devices, a local CD-ROM image, attached
//     local disks of a running VM without with-local-disks, snapshots on local storage that
//     is not ZFS, a running container with online). A task that ends OK moves the guest: its
//     node (so its config path, nodes/<target>/qemu-server/<vmid>.conf) is the target, its
//     local volumes are on the target storage when one was given, a running VM still runs
//     and a restarted container runs again. The task's log carries PVE's lines: the drive
//     mirror's "drive-scsi0: transferred 1.0 GiB of 32.0 GiB (3.12%) in 5s", the live
//     migration's "migration active, transferred 512.0 MiB of 4.0 GiB VM-state, 1.0 GiB/s"
//     and an offline copy's dd lines.

// migrationEndpoints are the migration methods.
func (s *Server) migrationEndpoints() map[string]endpoint {
	return map[string]endpoint{
		"GET /nodes/{node}/qemu/{vmid}/migrate":  {perm: vmPerm(privMigrate), fn: s.guestHandler(proxmox.GuestQEMU, s.getMigratePrecondition)},
		"POST /nodes/{node}/qemu/{vmid}/migrate": {perm: vmPerm(privMigrate), fn: s.guestHandler(proxmox.GuestQEMU, s.migrateQEMU)},
		"POST /nodes/{node}/lxc/{vmid}/migrate":  {perm: vmPerm(privMigrate), fn: s.guestHandler(proxmox.GuestLXC, s.migrateLXC)},
	}
}

// privMigrate is the privilege of migrations.
const privMigrate = "VM.Migrate"

// The nominal speeds the migration logs are written at (their byte counts and durations; the
// task itself takes the simulator's task duration): disks copy at 200 MiB/s, RAM at 1 GiB/s.
const (
	simDiskSpeed = 200 << 20
	simRAMSpeed  = 1 << 30
)

// volAttr is one volume of a QEMU VM with qemu-server's foreach_volid attributes.
type volAttr struct {
	volid             string
	drive             string // the valid drive name that holds it ("" for unusedN, vmstate)
	cdrom, cloudinit  bool
	shared            bool // the drive's shared=1 option
	unused, attached  bool
	vmstate, tpmstate bool
	size              int64
	snapshots         []string // snapshots that reference it, sorted
}

// qemuVolumes is foreach_volid of g: the volumes of its config (drives, unusedN, vmstate)
// and of its snapshots, ordered by volume id.
func qemuVolumes(g *guest) []*volAttr {
	vols := map[string]*volAttr{}
	visit := func(cfg map[string]string, snap string) {
		for _, k := range slices.Sorted(maps.Keys(cfg)) {
			if !diskKeyRe.MatchString(k) && !unusedKeyRe.MatchString(k) && k != "vmstate" {
				continue
			}
			d := parseDrive(cfg[k])
			if d.file == "" {
				continue
			}
			v, seen := vols[d.file]
			if !seen {
				v = &volAttr{volid: d.file, cdrom: true}
				vols[d.file] = v
			}
			if !d.cdrom(true) {
				v.cdrom = false
			}
			v.cloudinit = v.cloudinit || d.cloudinit()
			if sh, _ := d.opt("shared"); sh == "1" {
				v.shared = true
			}
			isUnused := unusedKeyRe.MatchString(k)
			v.unused = v.unused || isUnused
			v.attached = v.attached || (!isUnused && snap == "")
			if snap != "" && !slices.Contains(v.snapshots, snap) {
				v.snapshots = append(v.snapshots, snap)
				slices.Sort(v.snapshots)
			}
			if n, ok := diskBytes(d); ok && v.size == 0 {
				v.size = n
			}
			v.vmstate = v.vmstate || k == "vmstate"
			v.tpmstate = v.tpmstate || k == "tpmstate0"
			if diskKeyRe.MatchString(k) {
				v.drive = k
			}
		}
	}
	visit(g.config, "")
	for _, name := range slices.Sorted(maps.Keys(g.snapshots)) {
		visit(g.snapshots[name].config, name)
	}
	out := slices.Collect(maps.Values(vols))
	slices.SortFunc(out, func(a, b *volAttr) int { return strings.Compare(a.volid, b.volid) })
	return out
}

// storageOf is a volume id's storage ("" for "none", "cdrom" or an absolute path).
func storageOf(volid string) string { return drive{file: volid}.storage() }

// sharedStorage reports whether storage sid exists and is shared.
func (c *cluster) sharedStorage(sid string) bool {
	m, found := c.storages[sid]
	return found && storageShared(m)
}

// localVolume reports whether migrate_vm_precondition lists v in local_disks: not on shared
// storage, not marked shared, not an empty CD-ROM drive.
func (c *cluster) localVolume(v *volAttr) bool {
	if sid := storageOf(v.volid); sid != "" && c.sharedStorage(sid) {
		return false
	}
	return !v.shared && !(v.cdrom && v.volid == "none")
}

// localResources is qemu-server's check_local_resources of g: the config keys that tie it to
// its node, and its mapped devices (key → mapping name). A mapped PCI device is a local
// resource only while the VM runs; a mapped USB device always is (and mapped).
func localResources(g *guest, running bool) ([]string, map[string]string) {
	var res []string
	mapped := map[string]string{}
	if running {
		for _, k := range []string{"amd-sev", "intel-tdx"} {
			if g.config[k] != "" {
				res = append(res, k)
			}
		}
	}
	for _, k := range []string{"hostusb", "hostpci", "ivshmem"} { // old syntax, ivshmem
		if g.config[k] != "" {
			res = append(res, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(g.config)) {
		d := parseDrive(g.config[k])
		switch {
		case strings.HasPrefix(k, "usb"):
			host, _ := d.opt("host")
			if host == "" && !strings.Contains(d.file, "=") {
				host = d.file
			}
			if strings.EqualFold(host, "spice") {
				continue
			}
			if name, ok := d.opt("mapping"); ok {
				mapped[k] = name
			}
		case strings.HasPrefix(k, "hostpci"):
			if name, ok := d.opt("mapping"); ok {
				mapped[k] = name
				if !running {
					continue
				}
			}
		case strings.HasPrefix(k, "virtiofs"):
			if name, ok := d.opt("dirid"); ok {
				mapped[k] = name
			}
		case strings.HasPrefix(k, "serial") && g.config[k] == "socket":
			continue
		}
		if localResourceKey.MatchString(k) {
			res = append(res, k)
		}
	}
	return res, mapped
}

// localResourceKey matches the config keys check_local_resources reports.
var localResourceKey = regexp.MustCompile(`^(?:usb|hostpci|serial|parallel|virtiofs)\d+$`)

// storagesUnavailableOn is check_local_storage_availability of g for node n: the storages
// of its current drives that are disabled or whose nodes list leaves n out, sorted; msg is
// PVE's error when a drive names a storage that does not exist.
func (c *cluster) storagesUnavailableOn(g *guest, n string) (storages []string, msg string) {
	seen := map[string]bool{}
	for _, k := range slices.Sorted(maps.Keys(g.config)) {
		if !diskKeyRe.MatchString(k) {
			continue
		}
		sid := parseDrive(g.config[k]).storage()
		if sid == "" {
			continue
		}
		m, found := c.storages[sid]
		if !found {
			return nil, fmt.Sprintf("storage '%s' does not exist", sid)
		}
		if (m["disable"] == "1" || !storageOnNode(m, n)) && !seen[sid] {
			seen[sid] = true
			storages = append(storages, sid)
		}
	}
	slices.Sort(storages)
	return storages, ""
}

// getMigratePrecondition is GET /nodes/{node}/qemu/{vmid}/migrate.
func (s *Server) getMigratePrecondition(c *call, g *guest) answer {
	if g.lock != "" {
		return fail(http.StatusInternalServerError, fmt.Sprintf("VM is locked (%s)", g.lock))
	}
	running := g.status == stateRunning
	res, mapped := localResources(g, running)
	allowed := []string{}
	notAllowed := map[string]any{}
	for _, n := range s.state.nodes {
		if n.name == g.node {
			continue
		}
		unavailable, msg := s.state.storagesUnavailableOn(g, n.name)
		if msg != "" {
			return fail(http.StatusInternalServerError, msg)
		}
		entry := map[string]any{}
		if len(unavailable) > 0 {
			entry["unavailable_storages"] = unavailable
		} else {
			allowed = append(allowed, n.name)
		}
		notAllowed[n.name] = entry
	}
	disks := []map[string]any{}
	for _, v := range qemuVolumes(g) {
		if !s.state.localVolume(v) {
			continue
		}
		d := map[string]any{
			"volid": v.volid, "cdrom": boolInt(v.cdrom), "is_cloudinit": boolInt(v.cloudinit), "replicate": 1,
			"shared": boolInt(v.shared), "is_unused": boolInt(v.unused), "is_attached": boolInt(v.attached),
			"is_vmstate": boolInt(v.vmstate), "is_tpmstate": boolInt(v.tpmstate),
		}
		if v.size > 0 {
			d["size"] = v.size
		}
		if v.drive != "" {
			d["drivename"] = v.drive
		}
		if len(v.snapshots) > 0 {
			refs := map[string]int{}
			for _, sn := range v.snapshots {
				refs[sn] = 1
			}
			d["referenced_in_snapshot"] = refs
		}
		disks = append(disks, d)
	}
	info := map[string]any{}
	for k, name := range mapped {
		info[k] = map[string]any{"name": name}
	}
	if res == nil {
		res = []string{}
	}
	return ok(map[string]any{
		"running": boolInt(running), "allowed_nodes": allowed, "not_allowed_nodes": notAllowed,
		"local_disks": disks, "local_resources": res,
		"mapped-resources": slices.Sorted(maps.Keys(mapped)), "mapped-resource-info": info,
		"has-dbus-vmstate": 1,
	})
}

// storageMap is PVE's parsed storage-pair-list (parse_idmap): "1" maps each storage to
// itself, a lone id maps every storage to it, "a:b" pairs map a to b.
type storageMap struct {
	identity bool
	def      string
	entries  map[string]string
}

// storagePairRe is one item of a storage-pair-list.
var storagePairRe = regexp.MustCompile(`(?i)^(?:([a-z][a-z0-9\-_.]*[a-z0-9]):)?([a-z][a-z0-9\-_.]*[a-z0-9])$`)

// parseStorageMap parses v; msg is PVE's complaint about a malformed list.
func parseStorageMap(v string) (storageMap, string) {
	m := storageMap{entries: map[string]string{}}
	if v == "1" {
		m.identity = true
		return m, ""
	}
	for _, item := range strings.Split(v, ",") {
		p := storagePairRe.FindStringSubmatch(strings.TrimSpace(item))
		switch {
		case p == nil:
			return m, fmt.Sprintf("invalid format - storage pair '%s' - value does not look like a valid storage identifier", item)
		case p[1] == "" && m.def != "":
			return m, "invalid format - default target ID specified more than once"
		case p[1] == "":
			m.def = p[2]
		default:
			m.entries[p[1]] = p[2]
		}
	}
	return m, ""
}

// target is map_id: the storage sid's volumes go to.
func (m storageMap) target(sid string) string {
	switch {
	case m.identity:
		return sid
	case m.entries[sid] != "":
		return m.entries[sid]
	case m.def != "":
		return m.def
	}
	return sid
}

// targets are the target storages the map names (not for identity).
func (m storageMap) targets() []string {
	out := slices.Collect(maps.Values(m.entries))
	if m.def != "" {
		out = append(out, m.def)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// migrateRequest reads what both migrate POSTs share and runs PVE's checks before the
// worker: target (400 when missing or the guest's own node, 500 for a node not in the
// cluster), the guest's lock and the storage map param (each storage it names enabled on the
// target with content, checked as the token's Datastore.AllocateSpace would be). ok false:
// a is the answer.
func (s *Server) migrateRequest(c *call, g *guest, mapParam, content, contentMsg string) (target string, smap storageMap, a answer, ok bool) {
	p := c.params
	errs := map[string]string{}
	target = p.Get("target") // the schema checked target, the booleans and the map's IDs
	if p.Has(mapParam) {
		var msg string
		if smap, msg = parseStorageMap(p.Get(mapParam)); msg != "" {
			errs[mapParam] = msg
		}
	}
	if len(errs) > 0 {
		return "", smap, paramFail(errs), false
	}
	if target == g.node {
		return "", smap, paramFail(map[string]string{"target": "target is local node."}), false
	}
	if _, found := s.state.node(target); !found {
		return "", smap, fail(http.StatusInternalServerError, fmt.Sprintf("no such cluster node '%s'", target)), false
	}
	if g.lock != "" {
		return "", smap, fail(http.StatusInternalServerError, fmt.Sprintf("%s is locked (%s)", guestKind(g), g.lock)), false
	}
	if g.task != "" {
		return "", smap, g.lockTimeout(), false
	}
	for _, sid := range smap.targets() {
		if msg := s.state.storageEnabledOn(sid, target); msg != "" {
			return "", smap, fail(http.StatusInternalServerError, msg), false
		}
		if !slices.Contains(splitContent(s.state.storages[sid]["content"]), content) {
			return "", smap, fail(http.StatusInternalServerError, fmt.Sprintf("storage '%s' %s", sid, contentMsg)), false
		}
	}
	return target, smap, answer{}, true
}

// guestKind is "VM" or "CT", as PVE's config messages name guests.
func guestKind(g *guest) string {
	if g.typ == proxmox.GuestLXC {
		return "CT"
	}
	return "VM"
}

// splitContent splits a storage's content list.
func splitContent(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// migrateQEMU is POST /nodes/{node}/qemu/{vmid}/migrate (qmigrate).
func (s *Server) migrateQEMU(c *call, g *guest) answer {
	target, smap, a, ok := s.migrateRequest(c, g, "targetstorage", "images", "does not support vm images")
	if !ok {
		return a
	}
	online := flag(c, "online")
	withLocal := flag(c, "with-local-disks")
	running := g.status == stateRunning
	if running && !online {
		return fail(http.StatusInternalServerError, "can't migrate running VM without --online")
	}
	if !c.params.Has("targetstorage") || smap.identity {
		for _, k := range slices.Sorted(maps.Keys(g.config)) {
			if !diskKeyRe.MatchString(k) {
				continue
			}
			if sid := parseDrive(g.config[k]).storage(); sid != "" {
				if msg := s.state.storageEnabledOn(sid, target); msg != "" {
					return fail(http.StatusInternalServerError, msg)
				}
			}
		}
	}
	m := &migration{s: s, g: g, target: target, smap: smap, withLocal: withLocal}
	failure, log := m.qemu()
	return s.startLoggedTask(c, g, proxmox.MigrateTaskQEMU, "migrate", failure, m.effect, log)
}

// migrateLXC is POST /nodes/{node}/lxc/{vmid}/migrate (vzmigrate).
func (s *Server) migrateLXC(c *call, g *guest) answer {
	target, smap, a, ok := s.migrateRequest(c, g, "target-storage", "rootdir", "does not support CT rootdirs")
	if !ok {
		return a
	}
	online := flag(c, "online")
	restart := flag(c, "restart")
	running := g.status == stateRunning
	if running && !online && !restart {
		return fail(http.StatusInternalServerError, "can't migrate running container without --online or --restart")
	}
	m := &migration{s: s, g: g, target: target, smap: smap, online: online, restart: restart && running}
	failure, log := m.lxc()
	return s.startLoggedTask(c, g, proxmox.MigrateTaskLXC, "migrate", failure, m.effect, log)
}

// migration is one migration task being planned: its checks, log and effect.
type migration struct {
	s         *Server
	g         *guest
	target    string
	smap      storageMap
	online    bool // LXC: online was asked (PVE refuses it for a running container)
	withLocal bool // QEMU: with-local-disks
	restart   bool // LXC: a running container is shut down and started on the target
	begun     time.Time
	lines     []migLine
	at        time.Duration     // the log's clock
	moved     map[string]string // local volume → its volume id on the target
}

// copyVol is a local volume a migration copies, to storage sid of the target.
type copyVol struct {
	v   *volAttr
	sid string
}

// migLine is one line of the log and when, on the log's clock, it is written.
type migLine struct {
	at   time.Duration
	text string
}

// say logs msg as AbstractMigrate's log does ("2026-01-02 10:00:00 msg"; level err adds
// "ERROR:"), after d more of the log's clock.
func (m *migration) say(d time.Duration, msg string) {
	m.at += d
	m.lines = append(m.lines, migLine{at: m.at, text: m.begun.Add(m.at).Format("2006-01-02 15:04:05") + " " + msg})
}

// sayErr logs msg at level err.
func (m *migration) sayErr(d time.Duration, msg string) { m.say(d, "ERROR: "+msg) }

// print writes msg without a time stamp (a child process's output, QEMU's block jobs).
func (m *migration) print(d time.Duration, msg string) {
	m.at += d
	m.lines = append(m.lines, migLine{at: m.at, text: msg})
}

// logFunc is the task's log: the lines whose time has come at frac of the run.
func (m *migration) logFunc() func(frac float64) []string {
	total := m.at
	lines := slices.Clone(m.lines)
	return func(frac float64) []string {
		var out []string
		for _, l := range lines {
			if total <= 0 || frac >= 1 || float64(l.at) <= frac*float64(total) {
				out = append(out, l.text)
			}
		}
		return out
	}
}

// abort ends the log with AbstractMigrate's summary of a failure and returns the task's exit
// status.
func (m *migration) abort(err string) string {
	m.at += time.Second
	m.sayErr(0, fmt.Sprintf("migration aborted (duration %s): %s", clock(m.at), err))
	return "migration aborted"
}

// clock is AbstractMigrate's duration, "00:01:05".
func clock(d time.Duration) string {
	secs := int64(d.Round(time.Second) / time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", secs/3600, secs/60%60, secs%60)
}

// nodeIP is the address the migration log names for node n.
func (s *Server) nodeIP(n string) string {
	if a := s.imgAddrs[n]; a != "" {
		return a
	}
	for i, nd := range s.state.nodes {
		if nd.name == n {
			return fmt.Sprintf("10.0.0.%d", 11+i)
		}
	}
	return "0.0.0.0"
}

// qemu plans a VM's migration: the worker's checks (failure is the exit status when one
// fails, "" else) and its log.
func (m *migration) qemu() (failure string, log func(float64) []string) {
	g, st := m.g, m.s.state
	m.begun = time.Now()
	running := g.status == stateRunning
	if running {
		m.say(0, "conntrack state migration not supported or disabled, active connections might get dropped")
	}
	res, mapped := localResources(g, running)
	var blocking []string
	for _, r := range res {
		if _, isMapped := mapped[r]; !isMapped {
			blocking = append(blocking, r)
		}
	}
	if len(blocking) > 0 {
		return m.abort("can't migrate VM which uses local devices: " + strings.Join(blocking, ", ")), m.logFunc()
	}
	if len(mapped) > 0 && running {
		var names []string
		for _, k := range slices.Sorted(maps.Keys(mapped)) {
			names = append(names, k+":"+mapped[k])
		}
		return m.abort("can't live migrate running VM which uses following mapped devices: " + strings.Join(names, ", ")), m.logFunc()
	}
	if len(mapped) > 0 {
		m.say(0, "migrating VM which uses mapped local devices")
	}
	m.say(0, fmt.Sprintf("starting migration of VM %d to node '%s' (%s)", g.vmid, m.target, m.s.nodeIP(m.target)))
	volErrs := map[string]string{}
	var found []string
	var copies []copyVol
	for _, v := range qemuVolumes(g) {
		sid := storageOf(v.volid)
		switch {
		case strings.HasPrefix(v.volid, "/"):
			if !v.shared {
				volErrs[v.volid] = "local file/device"
			}
			continue
		case v.cdrom && v.volid == "cdrom":
			volErrs[v.volid] = "can't migrate local cdrom drive"
			continue
		case v.volid == "none" || sid == "":
			continue
		}
		targetSID := sid
		if !st.sharedStorage(sid) {
			targetSID = m.smap.target(sid)
		}
		if msg := st.storageEnabledOn(targetSID, m.target); msg != "" {
			volErrs[v.volid] = msg
			continue
		}
		if st.sharedStorage(sid) {
			continue
		}
		typ := st.storages[sid]["type"]
		switch {
		case v.cdrom && v.cloudinit:
			found = append(found, fmt.Sprintf("found generated disk '%s' (in current VM config)", v.volid))
			copies = append(copies, copyVol{v, targetSID})
			continue
		case v.cdrom:
			volErrs[v.volid] = "local cdrom image"
			continue
		case len(v.snapshots) > 0 && running:
			volErrs[v.volid] = "online storage migration not possible if non-replicated snapshot exists"
			continue
		case len(v.snapshots) > 0 && typ != "zfspool" && !(volFormat(v.volid) == "qcow2" && fileStorageTypes[typ]):
			volErrs[v.volid] = "non-migratable snapshot exists"
			continue
		}
		ref := "attached"
		switch {
		case v.tpmstate:
			ref = "generated"
		case v.unused:
			ref = "unused"
		case !v.attached:
			ref = "referenced by snapshot(s)"
		}
		if ref == "generated" {
			found = append(found, fmt.Sprintf("found generated disk '%s' (in current VM config)", v.volid))
		} else {
			found = append(found, fmt.Sprintf("found local disk '%s' (%s)", v.volid, ref))
		}
		if ref == "attached" && running && !m.withLocal {
			volErrs[v.volid] = "can't live migrate attached local disks without with-local-disks option"
		}
		if !slices.Contains([]string{"dir", "btrfs", "zfspool", "lvmthin", "lvm"}, typ) {
			volErrs[v.volid] = fmt.Sprintf("can't migrate '%s' - storage type '%s' not supported", v.volid, typ)
		}
		copies = append(copies, copyVol{v, targetSID})
	}
	for _, f := range found {
		m.say(0, f)
	}
	if len(volErrs) > 0 {
		for _, vol := range slices.Sorted(maps.Keys(volErrs)) {
			m.say(0, fmt.Sprintf("can't migrate local disk '%s': %s", vol, volErrs[vol]))
		}
		const err = "Problem found while scanning volumes - can't migrate VM - check log"
		m.sayErr(0, err)
		m.say(time.Second, "aborting phase 1 - cleanup resources")
		return m.abort(err), m.logFunc()
	}
	m.planMoves(copies)
	var offline, mirrors []copyVol
	for _, c := range copies {
		if running && c.v.attached && !c.v.cdrom && !c.v.tpmstate {
			mirrors = append(mirrors, c)
		} else {
			offline = append(offline, c)
		}
	}
	if len(offline) > 0 {
		m.say(0, "copying local disk images")
	}
	for _, c := range offline {
		m.ddCopy(c.v.volid, c.sid, c.v.size)
	}
	if !running {
		m.say(time.Second, fmt.Sprintf("migration finished successfully (duration %s)", clock(m.at+time.Second)))
		return "", m.logFunc()
	}
	m.say(time.Second, fmt.Sprintf("starting VM %d on remote node '%s'", g.vmid, m.target))
	for _, c := range mirrors {
		m.say(2*time.Second, fmt.Sprintf("volume '%s' is '%s' on the target", c.v.volid, m.moved[c.v.volid]))
	}
	m.say(0, "start remote tunnel")
	m.say(time.Second, "ssh tunnel ver 1")
	if len(mirrors) > 0 {
		m.say(0, "starting storage migration")
		for _, c := range mirrors {
			m.say(0, fmt.Sprintf("%s: start migration to nbd:unix:/run/qemu-server/%d_nbd.migrate:exportname=drive-%s", c.v.drive, g.vmid, c.v.drive))
			m.print(0, "drive mirror is starting for drive-"+c.v.drive)
		}
		m.mirror(mirrors)
		m.say(0, "switching mirror jobs to actively synced mode")
		for _, c := range mirrors {
			m.print(0, "drive-"+c.v.drive+": switching to actively synced mode")
			m.print(0, "drive-"+c.v.drive+": successfully switched to actively synced mode")
		}
	}
	m.liveRAM()
	if len(mirrors) > 0 {
		m.print(0, "all 'mirror' jobs are ready")
		for _, c := range mirrors {
			m.print(0, "drive-"+c.v.drive+": Completing block job...")
			m.print(0, "drive-"+c.v.drive+": Completed successfully.")
			m.print(0, "drive-"+c.v.drive+": mirror-job finished")
		}
		m.say(time.Second, "stopping NBD storage migration server on target.")
	}
	m.say(3*time.Second, fmt.Sprintf("migration finished successfully (duration %s)", clock(m.at+3*time.Second)))
	return "", m.logFunc()
}

// mirror logs the drive mirror of the running VM's attached local disks: QEMU's block job
// lines, 20 steps (the mirrors run side by side at the nominal disk speed).
func (m *migration) mirror(mirrors []copyVol) {
	const steps = 20
	var longest int64
	for _, c := range mirrors {
		longest = max(longest, c.v.size)
	}
	step := time.Duration(float64(longest) / simDiskSpeed / steps * float64(time.Second))
	start := m.at
	for i := 0; i <= steps; i++ {
		if i > 0 {
			m.at += step
		}
		for _, c := range mirrors {
			done := min(c.v.size, int64(float64(longest)*float64(i)/steps))
			pct := 100.0
			if c.v.size > 0 {
				pct = float64(done) * 100 / float64(c.v.size)
			}
			line := fmt.Sprintf("drive-%s: transferred %s of %s (%.2f%%) in %s", c.v.drive, renderBytes(float64(done), 1), renderBytes(float64(c.v.size), 1), pct,
				renderDuration(m.at-start))
			if done == c.v.size {
				line += ", ready"
			}
			m.print(0, line)
		}
	}
	m.print(0, "all 'mirror' jobs are ready")
}

// planMoves gives each copied volume its volume id on the target: the same one on a storage
// of the same id, else the next free disk of the guest on the target storage.
func (m *migration) planMoves(copies []copyVol) {
	cfg := cloneMap(m.g.config)
	m.moved = map[string]string{}
	for i, c := range copies {
		vol := m.s.targetVolume(m.g.vmid, cfg, c.v.volid, c.sid)
		m.moved[c.v.volid] = vol
		cfg[fmt.Sprintf("planned%d", i)] = vol
	}
}

// liveRAM logs the live migration of the VM's RAM, 10 progress lines.
func (m *migration) liveRAM() {
	g := m.g
	mem := g.memBytes()
	m.say(0, fmt.Sprintf("starting online/live migration on unix:/run/qemu-server/%d.migrate", g.vmid))
	m.say(0, "set migration capabilities")
	m.say(0, "migration downtime limit: 100 ms")
	m.say(0, "migration cachesize: "+renderBytes(float64(roundPowerOf2(mem/10)), 1))
	m.say(0, "set migration parameters")
	m.say(0, fmt.Sprintf("start migrate command to unix:/run/qemu-server/%d.migrate", g.vmid))
	const steps = 10
	step := time.Duration(float64(mem) / simRAMSpeed / steps * float64(time.Second))
	for i := 1; i < steps; i++ {
		done := mem * int64(i) / steps
		m.say(step, fmt.Sprintf("migration active, transferred %s of %s VM-state, %s/s", renderBytes(float64(done), 1), renderBytes(float64(mem), 1), renderBytes(float64(simRAMSpeed), 1)))
	}
	m.say(step, fmt.Sprintf("average migration speed: %s/s - downtime 43 ms", renderBytes(float64(simRAMSpeed), 1)))
	m.say(0, fmt.Sprintf("migration completed, transferred %s VM-state", renderBytes(float64(mem), 1)))
	m.say(0, "migration status: completed")
}

// roundPowerOf2 is qemu-server's round_powerof2.
func roundPowerOf2(n int64) int64 {
	if n < 2 {
		return 1
	}
	return 2 << int(math.Log2(float64(n-1)))
}

// ddCopy logs an offline copy of volid (size bytes) to storage sid on the target, as
// storage_migrate's pvesm export | pvesm import pipe prints it (dd with status=progress).
func (m *migration) ddCopy(volid, sid string, size int64) {
	_, volname, _ := strings.Cut(volid, ":")
	if t := m.s.state.storages[sid]["type"]; t == "lvmthin" || t == "lvm" {
		m.say(time.Second, fmt.Sprintf("  Logical volume \"%s\" created.", volname))
	}
	const steps = 5
	secs := float64(size) / simDiskSpeed
	for i := 1; i < steps; i++ {
		done := size * int64(i) / steps
		m.say(time.Duration(secs/steps*float64(time.Second)), fmt.Sprintf("%d bytes (%s, %s) copied, %d s, %s/s", done, siBytes(done), iecBytes(done), int(secs*float64(i)/steps), siBytes(simDiskSpeed)))
	}
	blocks := size / (64 << 10)
	m.say(time.Duration(secs/steps*float64(time.Second)), fmt.Sprintf("%d+0 records in", blocks))
	m.say(0, fmt.Sprintf("%d+0 records out", blocks))
	m.say(0, fmt.Sprintf("%d bytes (%s, %s) copied, %.3f s, %s/s", size, siBytes(size), iecBytes(size), secs, siBytes(simDiskSpeed)))
	newVol := m.moved[volid]
	m.say(0, fmt.Sprintf("successfully imported '%s'", newVol))
	m.say(0, fmt.Sprintf("volume '%s' is '%s' on the target", volid, newVol))
}

// siBytes and iecBytes are dd's human sizes: "34 GB", "1.1 GB"; "32 GiB", "1020 MiB".
func siBytes(n int64) string  { return humanBytes(n, 1000, []string{"B", "kB", "MB", "GB", "TB"}) }
func iecBytes(n int64) string { return humanBytes(n, 1024, []string{"B", "KiB", "MiB", "GiB", "TiB"}) }

func humanBytes(n int64, base float64, units []string) string {
	f, u := float64(n), 0
	for f >= base && u < len(units)-1 {
		f /= base
		u++
	}
	if f < 10 && u > 0 {
		return fmt.Sprintf("%.1f %s", f, units[u])
	}
	return fmt.Sprintf("%.0f %s", f, units[u])
}

// targetVolume is the volume id volid of guest vmid (config cfg) gets on storage sid of the
// target: the same one when sid is its own storage, else the next free disk there.
func (s *Server) targetVolume(vmid int64, cfg map[string]string, volid, sid string) string {
	if storageOf(volid) == sid {
		return volid
	}
	_, volname, _ := strings.Cut(volid, ":")
	if cloudinitRe.MatchString(volid) {
		return s.state.cloudinitVolume(sid, vmid)
	}
	return s.state.newVolume(cfg, sid, vmid, volFormat(volname))
}

// lxc plans a container's migration: the worker's checks (failure is the exit status when
// one fails, "" else) and its log.
func (m *migration) lxc() (failure string, log func(float64) []string) {
	g, st := m.g, m.s.state
	m.begun = time.Now()
	running := g.status == stateRunning
	if running && m.online {
		return m.abort("lxc live migration is currently not implemented"), m.logFunc()
	}
	mps := lxcMountPoints(g.config)
	for _, k := range mps {
		mp := parseDrive(g.config[k])
		sid := mp.storage()
		if sid == "" {
			if sh, _ := mp.opt("shared"); sh != "1" {
				return m.abort(fmt.Sprintf("cannot migrate local bind mount point '%s'", k)), m.logFunc()
			}
			continue
		}
		if msg := st.storageEnabledOn(sid, g.node); msg != "" {
			return m.abort(msg), m.logFunc()
		}
		targetSID := sid
		if !st.sharedStorage(sid) {
			targetSID = m.smap.target(sid)
		}
		if msg := st.storageEnabledOn(targetSID, m.target); msg != "" {
			return m.abort(msg), m.logFunc()
		}
		if !slices.Contains(splitContent(st.storages[targetSID]["content"]), "rootdir") {
			return m.abort(fmt.Sprintf("%s: content type 'rootdir' is not available on storage '%s'", mp.file, targetSID)), m.logFunc()
		}
	}
	if m.restart {
		m.say(0, fmt.Sprintf("shutdown CT %d", g.vmid))
	}
	m.say(2*time.Second, fmt.Sprintf("starting migration of CT %d to node '%s' (%s)", g.vmid, m.target, m.s.nodeIP(m.target)))
	volErrs := map[string]string{}
	var copies []copyVol
	for _, name := range slices.Sorted(maps.Keys(g.snapshots)) {
		snap := g.snapshots[name].config
		for _, k := range lxcMountPoints(snap) {
			volid := parseDrive(snap[k]).file
			if sid := storageOf(volid); sid != "" && !st.sharedStorage(sid) {
				if t := st.storages[sid]["type"]; t != "zfspool" && t != "btrfs" {
					volErrs[volid] = "non-migratable snapshot exists"
				}
			}
		}
	}
	for _, k := range mps {
		mp := parseDrive(g.config[k])
		sid := mp.storage()
		if sid == "" {
			continue
		}
		if st.sharedStorage(sid) {
			m.say(0, fmt.Sprintf("volume '%s' is on shared storage '%s'", mp.file, sid))
			continue
		}
		m.say(0, fmt.Sprintf("found local volume '%s' (in current VM config)", mp.file))
		size, _ := diskBytes(mp)
		copies = append(copies, copyVol{&volAttr{volid: mp.file, size: size}, m.smap.target(sid)})
		if t := st.storages[sid]["type"]; !slices.Contains([]string{"dir", "zfspool", "lvmthin", "lvm", "btrfs"}, t) {
			volErrs[mp.file] = fmt.Sprintf("storage type '%s' not supported", t)
		}
	}
	if len(volErrs) > 0 {
		for _, vol := range slices.Sorted(maps.Keys(volErrs)) {
			m.say(0, fmt.Sprintf("can't migrate local volume '%s': %s", vol, volErrs[vol]))
		}
		const err = "can't migrate CT - check log"
		m.sayErr(0, err)
		m.say(0, "aborting phase 1 - cleanup resources")
		m.say(0, "start final cleanup")
		if m.restart {
			m.say(time.Second, "start container on source node")
		}
		return m.abort(err), m.logFunc()
	}
	m.planMoves(copies)
	for _, c := range copies {
		m.ddCopy(c.v.volid, c.sid, c.v.size)
	}
	m.say(time.Second, "start final cleanup")
	if m.restart {
		m.say(2*time.Second, "start container on target node")
	}
	m.say(time.Second, fmt.Sprintf("migration finished successfully (duration %s)", clock(m.at+time.Second)))
	return "", m.logFunc()
}

// lxcMountPoints are a container config's volume keys: rootfs, mpN and unusedN, sorted.
func lxcMountPoints(cfg map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		if k == "rootfs" || lxcMountKeyRe.MatchString(k) {
			out = append(out, k)
		}
	}
	return out
}

var lxcMountKeyRe = regexp.MustCompile(`^(?:mp|unused)\d+$`)

// effect moves the guest once its migration task ended OK: to the target node, with its
// local volumes on the storage the map gives; a restarted container runs again.
func (m *migration) effect(t time.Time) {
	g := m.g
	for k, v := range g.config {
		if !diskKeyRe.MatchString(k) && !unusedKeyRe.MatchString(k) && k != "rootfs" && !lxcMountKeyRe.MatchString(k) {
			continue
		}
		d := parseDrive(v)
		if vol, moved := m.moved[d.file]; moved && vol != d.file {
			d.file = vol
			g.config[k] = d.String()
		}
	}
	g.node = m.target
	if m.restart {
		g.start(t)
	}
}
