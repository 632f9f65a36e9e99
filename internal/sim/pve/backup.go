package simpve

import (
	"cmp"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// Privileges of vzdump: VM.Backup on the guest, Datastore.AllocateSpace on the storage.
const (
	privVMBackup      = "VM.Backup"
	privAllocateSpace = "Datastore.AllocateSpace"
)

// contentKey is the storage content listing, which backupEndpoints extends with backups.
const contentKey = "GET /nodes/{node}/storage/{storage}/content"

// backupStore is what the simulated storages hold as backups: one list per storage for
// shared storages (PBS, NFS, …), one per storage and node for local ones ("local" is a
// directory on each node). Guarded by Server.mu.
type backupStore struct {
	s    *Server
	vols map[string][]*backupVol // backupKey(storage, node) → backups, oldest first
}

// backupVol is one backup as PVE's content listing shows it.
type backupVol struct {
	volid     string
	vmid      int64
	subtype   string // "qemu" or "lxc"
	format    string // "pbs-vm", "pbs-ct", "vma.zst", "tar", …
	size      int64
	ctime     int64
	notes     string // all lines; the listing shows the first
	protected bool
	// config is the guest's configuration the backup holds (what a restore gets back).
	config map[string]string
	// verification is a PBS snapshot's last verification state ("ok", "failed"; "" never
	// verified), with the verify task's UPID.
	verification, verifyUPID string
}

// backupEndpoints are vzdump, the node task list and the storage content listing with
// backups: the listing of existing (the import and disk volumes, images.go) is kept and
// extended, so it must be merged after imageEndpoints. The backups live in a store these
// endpoints share, with the restores and the deletions of backups (restore.go), which wrap
// the VM creation of existing.
func (s *Server) backupEndpoints(existing map[string]endpoint) map[string]endpoint {
	b := &backupStore{s: s, vols: s.state.backups}
	inner := existing[contentKey]
	if inner.fn == nil {
		inner = endpoint{
			perm: func(c *call) (string, string) { return "/storage/" + c.r.PathValue("storage"), privAudit },
			fn:   func(*call) answer { return ok([]map[string]any{}) },
		}
	}
	m := map[string]endpoint{
		"POST /nodes/{node}/vzdump": {
			perm: func(c *call) (string, string) { return "/vms/" + c.params.Get("vmid"), privVMBackup },
			fn:   b.vzdump,
		},
		contentKey: {perm: inner.perm, fn: b.content(inner.fn)},
		"GET /nodes/{node}/tasks": {
			perm: func(*call) (string, string) { return "", "" }, // filtered by owner in the handler
			fn:   s.getNodeTasks,
		},
	}
	maps.Copy(m, b.restoreEndpoints(existing)) // restore.go: restores and deletions of backups
	return m
}

// backupKey keys a storage's backups as node sees them; Server.mu is held.
func (b *backupStore) backupKey(storage, node string) string {
	if m, found := b.s.state.storages[storage]; found && storageShared(m) {
		node = ""
	}
	return storage + "\x00" + node
}

// content wraps the content listing inner: with content "" or "backup", a storage whose
// content includes backup also lists its backups; a vmid parameter keeps only the volumes
// owned by that guest, as PVE's volume_list does.
func (b *backupStore) content(inner func(c *call) answer) func(c *call) answer {
	return func(c *call) answer {
		vmid := int64(perlInt(c.params.Get("vmid"))) // 0: none; the schema checked it
		a := inner(c)
		if a.status != http.StatusOK {
			return a
		}
		listed, err := listingItems(a)
		if err != nil {
			return fail(http.StatusInternalServerError, "sim/pve: content listing unreadable: "+err.Error())
		}
		out := make([]map[string]any, 0, len(listed))
		for _, it := range listed {
			if vmid == 0 || fmt.Sprint(it["vmid"]) == strconv.FormatInt(vmid, 10) {
				out = append(out, it)
			}
		}
		storage, node := c.r.PathValue("storage"), c.r.PathValue("node")
		ct := c.params.Get("content")
		if m := b.s.state.storages[storage]; (ct == "" || ct == proxmox.BackupContent) && contains(splitList(m["content"]), proxmox.BackupContent) {
			for _, v := range b.vols[b.backupKey(storage, node)] {
				if vmid == 0 || v.vmid == vmid {
					out = append(out, v.json())
				}
			}
		}
		return ok(out)
	}
}

// json is the volume's content listing entry.
func (v *backupVol) json() map[string]any {
	m := map[string]any{
		"volid": v.volid, "content": proxmox.BackupContent, "format": v.format, "size": v.size,
		"ctime": v.ctime, "vmid": v.vmid, "subtype": v.subtype,
	}
	if first, _, _ := strings.Cut(v.notes, "\n"); first != "" {
		m["notes"] = first
	}
	if v.protected {
		m["protected"] = 1
	}
	if v.verification != "" {
		// pve-storage src/PVE/Storage/PBSPlugin.pm, list_volumes: PBS's verification object as is
		m["verification"] = map[string]any{"state": v.verification, "upid": v.verifyUPID}
	}
	return m
}

// vzdump is POST /nodes/{node}/vzdump for one guest (vmid; all, pool and exclude are not
// simulated). PVE's schema checks answer 400; the storage permission 403. Everything else is
// found by the worker, as in PVE: a storage that does not exist, is disabled, is not
// available or online on the node or has no content backup fails the task with PVE's
// message; a guest that does not exist, or is locked, fails the job ("job errors"); a guest on
// another node is skipped and the task ends OK without a backup. On success the storage gains
// the backup (PBS: "<storage>:backup/vm/<vmid>/<RFC 3339 UTC>", a file storage:
// "<storage>:backup/vzdump-qemu-<vmid>-<YYYY_MM_DD-HH_MM_SS>.vma[.zst]"), created at the task's
// start, with the notes the template renders and the protection asked for. With remove=0 a
// storage whose prune-backups keeps a limited number refuses a backup past it; pruning
// (remove=1) is not simulated. Server.mu is held.
func (b *backupStore) vzdump(c *call) answer {
	s := b.s
	node := c.r.PathValue("node")
	if _, found := s.state.node(node); !found {
		return unknownNode(node)
	}
	req, errs := parseVzdump(c)
	if len(errs) > 0 {
		return paramFail(errs)
	}
	if req.multi {
		return fail(http.StatusNotImplemented, "sim/pve: a vzdump of several guests is not simulated")
	}
	if !c.token.has(privAllocateSpace) {
		return fail(http.StatusForbidden, fmt.Sprintf("Permission check failed (/storage/%s, %s)", req.storage, privAllocateSpace))
	}
	job := &vzdumpJob{req: req, node: node, start: time.Now().Truncate(time.Second).UTC(), dur: max(s.taskDur, 0)}
	g, found := s.state.guests[req.vmid]
	// The task of a guest the job cannot back up holds no guest's lock: it runs for a
	// stand-in that is in no state.
	ghost := &guest{vmid: req.vmid, typ: proxmox.GuestQEMU, node: node, config: map[string]string{}, snapshots: map[string]*snapshot{}}
	if found {
		ghost.typ = g.typ
	}
	if msg := b.storageProblem(req.storage, node); msg != "" {
		job.setup = msg
		return s.startLoggedTask(c, ghost, proxmox.BackupTaskType, "", msg, nil, job.log)
	}
	switch {
	case !found:
		job.failed = fmt.Sprintf("unable to find VM '%d'", req.vmid)
		return s.startLoggedTask(c, ghost, proxmox.BackupTaskType, "", "job errors", nil, job.log)
	case g.node != node:
		job.skipped = true
		return s.startLoggedTask(c, ghost, proxmox.BackupTaskType, "", "", nil, job.log)
	case g.task != "":
		job.see(g)
		job.failed = "can't lock file '" + g.lockFile() + "' - got timeout"
		if g.lock != "" {
			job.failed = fmt.Sprintf("VM is locked (%s)", g.lock)
		}
		return s.startLoggedTask(c, ghost, proxmox.BackupTaskType, "", "job errors", nil, job.log)
	}
	job.see(g)
	if msg := b.limitReached(req, node); msg != "" {
		job.failed = msg
		return s.startLoggedTask(c, g, proxmox.BackupTaskType, "", "job errors", nil, job.log)
	}
	job.plan(s.state.storages[req.storage], req.storage)
	vol := job.volume()
	key := b.backupKey(req.storage, node)
	if job.pbs && slices.ContainsFunc(b.vols[key], func(v *backupVol) bool { return v.vmid == vol.vmid && v.ctime >= vol.ctime }) {
		// proxmox-backup src/api2/backup/mod.rs (upgrade_to_backup_protocol): a snapshot whose
		// time (whole seconds) is not after the group's last one is refused, "backup
		// timestamp is older than last backup."; vzdump's PBS client reports it as the
		// guest's failure. A second backup of a guest within one second fails so.
		job.failed = "backup connect failed: command error: backup timestamp is older than last backup."
		return s.startLoggedTask(c, g, proxmox.BackupTaskType, "", "job errors", nil, job.log)
	}
	effect := func(time.Time) {
		// pve-manager PVE/VZDump.pm: the archive is named after the guest and the second the
		// backup started, written to a temporary file and renamed over whatever has that name:
		// a second backup of the guest started within the same second replaces the first.
		b.vols[key] = slices.DeleteFunc(b.vols[key], func(v *backupVol) bool { return v.volid == vol.volid })
		b.vols[key] = append(b.vols[key], vol)
	}
	return s.startLoggedTask(c, g, proxmox.BackupTaskType, "backup", "", effect, job.log)
}

// vzdumpReq is a checked vzdump request.
type vzdumpReq struct {
	vmid          int64
	multi         bool // several vmids
	storage, mode string
	compress      string
	notesTemplate string
	protected     bool
	remove        bool
	params        map[string]string // every parameter sent, for the job's command line
}

// parseVzdump reads vzdump's parameters, which passed the schema, and applies
// verify_vzdump_parameters' checks: per-parameter errors.
func parseVzdump(c *call) (vzdumpReq, map[string]string) {
	p := c.params
	r := vzdumpReq{mode: proxmox.BackupModeSnapshot, remove: true, params: map[string]string{}}
	errs := map[string]string{}
	for k := range p {
		r.params[k] = p.Get(k)
	}
	// The schema checked vmid (a pve-vmid-list), the enumerations, storage and the booleans;
	// verify_vzdump_parameters (pve-manager PVE/VZDump.pm, called with $check_missing) wants
	// a vmid, as the simulator has neither all nor pool.
	ids := splitList(p.Get("vmid"))
	if len(ids) == 0 {
		errs["vmid"] = "property is missing"
	}
	for _, id := range ids {
		r.vmid = int64(perlInt(id))
	}
	r.multi = len(ids) > 1
	if p.Has("mode") {
		r.mode = p.Get("mode")
	}
	r.compress = p.Get("compress")
	r.storage = p.Get("storage")
	if !p.Has("storage") {
		errs["storage"] = "sim/pve: a vzdump without storage (dumpdir) is not simulated"
	}
	r.notesTemplate = p.Get("notes-template")
	if msg := verifyNotesTemplate(r.notesTemplate); msg != "" {
		errs["notes-template"] = msg
	}
	r.protected = flag(c, "protected")
	if p.Has("remove") {
		r.remove = flag(c, "remove")
	}
	return r, errs
}

var (
	notesEscapeAny = regexp.MustCompile(`\\(.)`)
	notesVarAny    = regexp.MustCompile(`\{\{([^\s{}]+)\}\}`)
)

// verifyNotesTemplate is pve-manager's $verify_notes_template (PVE/VZDump.pm), which
// verify_vzdump_parameters runs on notes-template after the schema: no line feed, only the
// escapes \n and \\, only the variables cluster, guestname, node and vmid. Positions are
// in characters as Perl's pos counts them. "" when the template is fine.
func verifyNotesTemplate(tmpl string) string {
	if strings.Contains(tmpl, "\n") {
		return "contains a line feed"
	}
	runeAt := func(byteIdx int) int { return utf8.RuneCountInString(tmpl[:byteIdx]) }
	var problems []string
	for _, m := range notesEscapeAny.FindAllStringSubmatchIndex(tmpl, -1) {
		if c := tmpl[m[2]:m[3]]; c != "n" && c != "\\" {
			problems = append(problems, fmt.Sprintf("escape sequence '\\%s' at char %d", c, runeAt(m[1])-2))
		}
	}
	for _, m := range notesVarAny.FindAllStringSubmatchIndex(tmpl, -1) {
		v := tmpl[m[2]:m[3]]
		if !slices.Contains([]string{"cluster", "guestname", "node", "vmid"}, v) {
			problems = append(problems, fmt.Sprintf("variable '%s' at char %d", v, runeAt(m[1])-utf8.RuneCountInString(v)))
		}
	}
	if len(problems) > 0 {
		return "found unknown: " + strings.Join(problems, ", ")
	}
	return ""
}

// storageProblem is what PVE's VZDump->new dies with when storage cannot take backups on
// node ("" when it can): the storage information it cannot get. Server.mu is held.
func (b *backupStore) storageProblem(storage, node string) string {
	m, found := b.s.state.storages[storage]
	why := ""
	switch {
	case !found:
		why = fmt.Sprintf("storage '%s' does not exist", storage)
	case !contains(splitList(m["content"]), proxmox.BackupContent):
		why = fmt.Sprintf("can't use storage '%s' for backups - wrong content type", storage)
	case m["type"] != "pbs" && !fileStorageTypes[m["type"]]:
		why = fmt.Sprintf("can't use storage type '%s' for backup", m["type"])
	default:
		why = b.s.state.storageUsable(storage, node)
	}
	if why == "" {
		return ""
	}
	return fmt.Sprintf("could not get storage information for '%s': %s", storage, why)
}

// limitReached is vzdump's refusal of a backup with remove=0 when the storage's prune-backups
// keeps a limited number and the guest's unprotected backups there reach it ("" otherwise).
func (b *backupStore) limitReached(r vzdumpReq, node string) string {
	if r.remove || r.protected {
		return ""
	}
	limit := 0
	for _, kv := range strings.Split(b.s.state.storages[r.storage]["prune-backups"], ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		n, _ := strconv.Atoi(v)
		if k == "keep-all" && n == 1 {
			return ""
		}
		if strings.HasPrefix(k, "keep-") {
			limit += n
		}
	}
	if limit == 0 {
		return ""
	}
	count := 0
	for _, v := range b.vols[b.backupKey(r.storage, node)] {
		if v.vmid == r.vmid && !v.protected {
			count++
		}
	}
	if count < limit {
		return ""
	}
	return fmt.Sprintf("There is a max backup limit of %d enforced by the target storage or the vzdump parameters. "+
		"Either increase the limit or delete old backups.", limit)
}

// vzdumpJob is one guest's backup as the worker runs it: what it logs and what it makes.
type vzdumpJob struct {
	req  vzdumpReq
	node string
	g    *guest // nil when the guest does not exist
	// status, name and agent are the guest's when the job started: the log does not change
	// with the guest.
	status, name string
	agent        bool
	start        time.Time
	dur          time.Duration
	skipped      bool   // the guest is on another node
	setup        string // VZDump->new died with this (the storage)
	failed       string // the guest's backup failed with this

	pbs      bool
	target   string   // PBS snapshot name or archive path
	volid    string   // the backup's volume id
	format   string   // its format
	disks    []string // "include disk …" / "including mount point …" lines
	total    int64    // bytes of the included disks
	archive  int64    // size of the backup
	notes    string
	typeName string // "qemu" or "lxc"
}

// see records the guest the job backs up, as it is now.
func (j *vzdumpJob) see(g *guest) {
	j.g, j.status, j.name = g, g.status, g.name()
	j.agent = g.config["agent"] != "" && g.config["agent"] != "0"
}

// plan fills in the target, the disks and the sizes of a backup into storage (config m).
func (j *vzdumpJob) plan(m map[string]string, storage string) {
	g := j.g
	j.typeName = string(g.typ)
	j.pbs = m["type"] == "pbs"
	j.disks, j.total = backupDisks(g)
	if j.pbs {
		kind, format := "vm", "pbs-vm"
		if g.typ == proxmox.GuestLXC {
			kind, format = "ct", "pbs-ct"
		}
		j.target = fmt.Sprintf("%s/%d/%s", kind, g.vmid, j.start.Format("2006-01-02T15:04:05Z"))
		j.volid, j.format, j.archive = storage+":backup/"+j.target, format, j.total
	} else {
		ext := ".vma"
		if g.typ == proxmox.GuestLXC {
			ext = ".tar"
		}
		ratio := 1.0
		switch j.req.compress {
		case "zstd":
			ext, ratio = ext+".zst", 0.4
		case "gzip":
			ext, ratio = ext+".gz", 0.45
		case "1", "lzo":
			ext, ratio = ext+".lzo", 0.6
		}
		file := fmt.Sprintf("vzdump-%s-%d-%s%s", g.typ, g.vmid, j.start.Format("2006_01_02-15_04_05"), ext)
		j.target = imgStoragePath(storage, m) + "/dump/" + file
		j.volid, j.format = storage+":backup/"+file, strings.TrimPrefix(ext, ".")
		j.archive = int64(float64(j.total) / 4 * ratio) // a quarter of the disks holds data
	}
	j.notes = renderNotes(j.req.notesTemplate, g, j.node)
}

// volume is the backup the job makes.
func (j *vzdumpJob) volume() *backupVol {
	return &backupVol{
		volid: j.volid, vmid: j.g.vmid, subtype: j.typeName, format: j.format, size: max(j.archive, 1),
		ctime: j.start.Unix(), notes: j.notes, protected: j.req.protected, config: maps.Clone(j.g.config),
	}
}

// backupDisks lists the volumes a backup of g includes or excludes, as vzdump logs them, and
// the size of those included. QEMU: every disk but CD-ROMs and Cloud-Init drives, unless
// backup=0; LXC: the root file system and the mount points with backup=1.
func backupDisks(g *guest) ([]string, int64) {
	var lines []string
	var total int64
	for _, k := range slices.SortedFunc(maps.Keys(g.config), compareDriveKeys) {
		v := g.config[k]
		d := parseDrive(v)
		_, opts, _ := strings.Cut(v, ",")
		size := imgOptSize(opts)
		sizeText, _ := d.opt("size")
		backup, hasBackup := d.opt("backup")
		if g.typ == proxmox.GuestLXC {
			if k != "rootfs" && !mountPointKey.MatchString(k) {
				continue
			}
			mp, _ := d.opt("mp")
			if k == "rootfs" {
				mp = "/"
			}
			if k != "rootfs" && backup != "1" {
				lines = append(lines, fmt.Sprintf("excluding volume mount point %s ('%s') from backup (disabled)", k, mp))
				continue
			}
			lines = append(lines, fmt.Sprintf("including mount point %s ('%s') in backup", k, mp))
			total += size
			continue
		}
		if !diskKeyRe.MatchString(k) || d.file == "none" {
			continue
		}
		if m, _ := d.opt("media"); m == "cdrom" || cloudinitRe.MatchString(d.file) {
			continue
		}
		if hasBackup && backup == "0" {
			lines = append(lines, fmt.Sprintf("exclude disk '%s' '%s' (backup=no)", k, d.file))
			continue
		}
		line := fmt.Sprintf("include disk '%s' '%s'", k, d.file)
		if sizeText != "" {
			line += " " + sizeText
		}
		lines = append(lines, line)
		total += size
	}
	return lines, total
}

// compareDriveKeys orders configuration keys as vzdump walks a guest's volumes: a
// container's rootfs before its mount points, a VM's ide, sata, scsi and virtio disks, then
// efidisk0 and tpmstate0; within a kind by index numerically ("scsi2" before "scsi10").
func compareDriveKeys(a, b string) int {
	rank := func(k string) (int, int) {
		i := strings.IndexFunc(k, isDigit)
		if i < 0 {
			i = len(k)
		}
		n, _ := strconv.Atoi(k[i:])
		order := []string{"rootfs", "mp", "ide", "sata", "scsi", "virtio", "efidisk", "tpmstate"}
		if r := slices.Index(order, k[:i]); r >= 0 {
			return r, n
		}
		return len(order), n
	}
	ra, na := rank(a)
	rb, nb := rank(b)
	if ra != rb || na != nb {
		return cmp.Or(cmp.Compare(ra, rb), cmp.Compare(na, nb))
	}
	return strings.Compare(a, b)
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }

var (
	mountPointKey = regexp.MustCompile(`^mp\d+$`)
	notesVar      = regexp.MustCompile(`\{\{([^}]+)\}\}`)
	notesEscape   = regexp.MustCompile(`\\(.)`)
)

// renderNotes is vzdump's generate_notes: {{cluster}}, {{guestname}}, {{node}} and {{vmid}}
// replaced, \n and \\ unescaped.
func renderNotes(tmpl string, g *guest, node string) string {
	if tmpl == "" {
		return ""
	}
	vars := map[string]string{"cluster": "demo", "guestname": g.name(), "node": node, "vmid": strconv.FormatInt(g.vmid, 10)}
	out := notesVar.ReplaceAllStringFunc(tmpl, func(m string) string {
		if v, found := vars[m[2:len(m)-2]]; found {
			return v
		}
		return m
	})
	return notesEscape.ReplaceAllStringFunc(out, func(m string) string {
		switch m[1] {
		case 'n':
			return "\n"
		case '\\':
			return `\`
		}
		return m
	})
}

// log is the task log once frac of the task has run, as vzdump writes it: the job's command
// line, the guest's backup (its disks, mode, target, and for a QEMU VM the progress lines
// "INFO:  42% (12.3 GiB of 29.3 GiB) in 3s, read: …, write: …" of qemu-server's status
// loop), then the end of the job. The worker's "TASK OK" line is the task's own.
func (j *vzdumpJob) log(frac float64) []string {
	if j.setup != "" {
		return []string{"ERROR: " + j.setup}
	}
	at := j.start.Add(time.Duration(frac * float64(j.dur)))
	out := []string{"INFO: starting new backup job: " + j.cmdline()}
	vmid := j.req.vmid
	if j.skipped {
		return append(out, fmt.Sprintf("INFO: skip external VMs: %d", vmid), "INFO: Backup job finished successfully")
	}
	kind := "qemu"
	if j.g != nil {
		kind = string(j.g.typ)
	}
	out = append(out,
		fmt.Sprintf("INFO: Starting Backup of VM %d (%s)", vmid, kind),
		"INFO: Backup started at "+j.start.Format("2006-01-02 15:04:05"))
	if j.failed != "" {
		if j.g != nil {
			out = append(out, "INFO: status = "+j.status)
		}
		return append(out,
			fmt.Sprintf("ERROR: Backup of VM %d failed - %s", vmid, j.failed),
			"INFO: Failed at "+at.Format("2006-01-02 15:04:05"),
			"INFO: Backup job finished with errors")
	}
	g := j.g
	running := j.status == stateRunning
	mode := j.req.mode
	if !running {
		mode = proxmox.BackupModeStop
	}
	out = append(out, "INFO: status = "+j.status)
	if g.typ == proxmox.GuestLXC {
		out = append(out, "INFO: CT Name: "+j.name)
	} else {
		out = append(out, "INFO: VM Name: "+j.name)
	}
	for _, d := range j.disks {
		out = append(out, "INFO: "+d)
	}
	out = append(out, "INFO: backup mode: "+mode, "INFO: ionice priority: 7")
	if mode == proxmox.BackupModeStop && running {
		out = append(out, "INFO: stopping virtual guest")
	}
	if j.pbs {
		out = append(out, fmt.Sprintf("INFO: creating Proxmox Backup Server archive '%s'", j.target))
	} else {
		out = append(out, fmt.Sprintf("INFO: creating vzdump archive '%s'", j.target))
	}
	if g.typ == proxmox.GuestLXC {
		if frac < 1 {
			return out
		}
		return append(out, j.lxcEnd(at)...)
	}
	if !running || mode == proxmox.BackupModeStop {
		out = append(out, "INFO: starting kvm to execute backup task")
	} else if mode == proxmox.BackupModeSnapshot && j.agent {
		out = append(out, "INFO: issuing guest-agent 'fs-freeze' command", "INFO: issuing guest-agent 'fs-thaw' command")
	}
	out = append(out, "INFO: started backup task '"+j.uuid()+"'")
	if mode != proxmox.BackupModeSnapshot && running {
		out = append(out, "INFO: resuming VM again")
	}
	out = append(out, j.statusLines(frac)...)
	if frac < 1 {
		return out
	}
	return append(out, j.qemuEnd(at)...)
}

// cmdline is the job's command line as vzdump logs it: the vmid, then each parameter as
// --name value (shell-quoted where needed), in name order.
func (j *vzdumpJob) cmdline() string {
	params := map[string]string{"node": j.node}
	for k, v := range j.req.params {
		if k != "vmid" {
			params[k] = v
		}
	}
	var b strings.Builder
	b.WriteString("vzdump " + strconv.FormatInt(j.req.vmid, 10))
	for _, k := range slices.Sorted(maps.Keys(params)) {
		b.WriteString(" --" + k + " " + shellQuote(params[k]))
	}
	return b.String()
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:=,@+-]+$`)

// shellQuote is PVE::Tools::shellquote: safe strings as they are, others in single quotes.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// uuid is the QEMU backup job's id, derived from the target.
func (j *vzdumpJob) uuid() string {
	h := sha1.Sum([]byte(j.target))
	x := hex.EncodeToString(h[:16])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// statusSteps is how many progress intervals a QEMU backup logs: one line about every two
// seconds of the task, as qemu-server's status loop does, at least 4 and at most 50.
func (j *vzdumpJob) statusSteps() int {
	return min(max(int(j.dur/(2*time.Second)), 4), 50)
}

// statusLines are the progress lines logged once frac of the task has run: line i of n at
// frac 0.05 + 0.9·i/n, with i·100/n percent of the disks transferred.
func (j *vzdumpJob) statusLines(frac float64) []string {
	n := j.statusSteps()
	var out []string
	var lastDone int64
	lastAt := time.Duration(0)
	for i := 0; i <= n; i++ {
		at := 0.05 + 0.9*float64(i)/float64(n)
		if frac < at {
			break
		}
		pct := i * 100 / n
		done := j.total * int64(pct) / 100
		elapsed := time.Duration(at * float64(j.dur))
		diff := max((elapsed - lastAt).Seconds(), 1)
		read := float64(done-lastDone) / diff
		out = append(out, fmt.Sprintf("INFO: %3d%% (%s of %s) in %s, read: %s, write: %s",
			pct, renderBytes(float64(done), 1), renderBytes(float64(j.total), 1), renderDuration(elapsed),
			rate(read), rate(read/4)))
		lastDone, lastAt = done, elapsed
	}
	return out
}

// qemuEnd is what a QEMU backup logs after its status loop, then the end of the job.
func (j *vzdumpJob) qemuEnd(at time.Time) []string {
	zero := j.total - j.total/4
	secs := int64(j.dur.Round(time.Second) / time.Second)
	out := []string{}
	if j.total > 0 {
		out = append(out, fmt.Sprintf("INFO: backup is sparse: %s (%d%%) total zero data", renderBytes(float64(zero), 2), zero*100/j.total))
		if j.pbs {
			out = append(out, fmt.Sprintf("INFO: backup was done incrementally, reused %s (%d%%)", renderBytes(float64(zero), 2), zero*100/j.total))
		}
		if secs > 0 {
			out = append(out, fmt.Sprintf("INFO: transferred %s in %d seconds (%s)", renderBytes(float64(j.total), 2), secs, rate(float64(j.total)/float64(secs))))
		} else {
			out = append(out, fmt.Sprintf("INFO: transferred %s in <1 seconds", renderBytes(float64(j.total), 2)))
		}
	}
	if j.status != stateRunning {
		out = append(out, "INFO: stopping kvm after backup task")
	}
	if !j.pbs {
		out = append(out, "INFO: archive file size: "+vzdumpSize(j.archive))
	}
	return append(out, j.jobEnd(at)...)
}

// lxcEnd is what a container backup logs once its archive is written, then the end of the job.
func (j *vzdumpJob) lxcEnd(at time.Time) []string {
	secs := max(j.dur.Seconds(), 0.01)
	var out []string
	if j.pbs {
		out = append(out,
			"INFO: Starting backup: "+j.target,
			"INFO: Client name: "+j.node,
			"INFO: Upload directory '/mnt/vzsnap0' to '"+j.target+"' as root.pxar.didx",
			fmt.Sprintf("INFO: root.pxar: had to backup %s of %s (compressed %s) in %.2fs",
				renderBytes(float64(j.total/4), 2), renderBytes(float64(j.total), 2), renderBytes(float64(j.total/10), 2), secs),
			fmt.Sprintf("INFO: Duration: %.2fs", secs),
			"INFO: End Time: "+at.Format("Mon Jan  2 15:04:05 2006"))
	} else {
		written := j.total / 4
		out = append(out,
			fmt.Sprintf("INFO: Total bytes written: %d (%s, %s)", written, strings.ReplaceAll(renderBytes(float64(written), 1), " ", ""),
				strings.ReplaceAll(rate(float64(written)/max(secs, 1)), " ", "")),
			"INFO: archive file size: "+vzdumpSize(j.archive))
	}
	return append(out, j.jobEnd(at)...)
}

// jobEnd is the end of a successful job: notes, protection, the guest's and the job's end.
func (j *vzdumpJob) jobEnd(at time.Time) []string {
	var out []string
	if j.req.notesTemplate != "" {
		out = append(out, "INFO: adding notes to backup")
	}
	if j.req.protected {
		out = append(out, "INFO: marking backup as protected")
	}
	d := at.Sub(j.start).Round(time.Second)
	return append(out,
		fmt.Sprintf("INFO: Finished Backup of VM %d (%02d:%02d:%02d)", j.req.vmid, int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60),
		"INFO: Backup finished at "+at.Format("2006-01-02 15:04:05"),
		"INFO: Backup job finished successfully")
}

// renderBytes is PVE::Format::render_bytes: B, KiB, MiB, … with precision decimals.
func renderBytes(v float64, precision int) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	u := 0
	if v > 1023 {
		u = min(int(math.Log(v)/math.Log(1024)), len(units)-1)
		v /= math.Pow(1024, float64(u))
	}
	return strconv.FormatFloat(v, 'f', precision, 64) + " " + units[u]
}

// rate is qemu-server's get_mbps: "0 B/s" for nothing, else render_bytes(·, 1) per second.
func rate(perSecond float64) string {
	if perSecond <= 0 {
		return "0 B/s"
	}
	return renderBytes(math.Floor(perSecond), 1) + "/s"
}

// renderDuration is PVE::Format::render_duration: "0s", "3s", "1m 5s", "2h 0m 1s".
func renderDuration(d time.Duration) string {
	rest := int64(d.Round(time.Second) / time.Second)
	if rest == 0 {
		return "0s"
	}
	var parts []string
	for _, u := range []struct {
		unit string
		secs int64
	}{{"w", 7 * 86400}, {"d", 86400}, {"h", 3600}, {"m", 60}, {"s", 1}} {
		if v := rest / u.secs; v > 0 {
			parts = append(parts, strconv.FormatInt(v, 10)+u.unit)
			rest -= v * u.secs
		}
	}
	return strings.Join(parts, " ")
}

// vzdumpSize is vzdump's format_size: KB and MB whole, GB and TB with two decimals.
func vzdumpSize(size int64) string {
	kb := float64(size) / 1024
	switch mb := kb / 1024; {
	case kb < 1024:
		return strconv.FormatInt(int64(kb), 10) + "KB"
	case mb < 1024:
		return strconv.FormatInt(int64(mb), 10) + "MB"
	case mb/1024 < 1024:
		return fmt.Sprintf("%.2fGB", mb/1024)
	default:
		return fmt.Sprintf("%.2fTB", mb/1024/1024)
	}
}
