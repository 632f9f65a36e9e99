package simpve

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

var (
	// imgDriveKey matches the keys create_disks handles.
	imgDriveKey = regexp.MustCompile(`^(?:(?:scsi|virtio|sata|ide)\d+|efidisk0|tpmstate0)$`)
	// imgNewDisk is qemu-server's NEW_DISK_RE: "[storage:]size".
	imgNewDisk = regexp.MustCompile(`^(([^/:\s]+):)?(\d+(\.\d+)?)$`)
	// imgVolumeID is pve-storage's parse_volume_id.
	imgVolumeID = regexp.MustCompile(`(?i)^([a-z][a-z0-9\-_.]*[a-z0-9]):(.+)$`)
	// imgNetModel is the "model[=mac]" head of a netN value.
	imgNetModel = regexp.MustCompile(`^(e1000|e1000-82540em|e1000-82544gc|e1000-82545em|e1000e|i82551|i82557b|i82559er|ne2k_isa|ne2k_pci|pcnet|rtl8139|virtio|vmxnet3)(=([0-9A-Fa-f:]+))?$`)
	// imgNetKey matches netN keys.
	imgNetKey = regexp.MustCompile(`^net\d+$`)
)

// imgSpecialSyntax is qemu-server's refusal of import-from on anything but "<storage>:0".
const imgSpecialSyntax = "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>"

// imgCreate collects what POST /nodes/{node}/qemu will do.
type imgCreate struct {
	vmid    int64
	node    string
	config  map[string]string
	failure string // the worker's error, "" when it succeeds
	disks   int    // disks allocated so far (vm-<vmid>-disk-N)
}

// createVM is POST /nodes/{node}/qemu: a new QEMU VM. Checks before the worker, as
// qemu-server makes them: vmid (400), node, vmid unused (500 "VM 100 already exists on
// node 'pve1'"), drive syntax (400, "'import-from' requires special syntax …"), storages
// (500 "storage 'x' does not exist", 400 storage "storage 'x' does not support vm
// images"), import source types (400). The qmcreate task then fails as PVE's worker does
// when an import source is missing ("unable to create VM 100 - cannot import from
// 'images:import/x.qcow2' - could not get size of images:import/x.qcow2", "unable to
// create VM 100 - can't find file '/x'"), and the VM only exists when it succeeds. Disks
// are created as vm-<vmid>-disk-N on their storage (size of the imported image), a
// cloud-init drive as vm-<vmid>-cloudinit, NICs get a MAC. start=1 starts the VM.
func (s *Server) createVM(c *call) answer {
	p := c.params
	vmid := int64(perlInt(p.Get("vmid"))) // the schema checked every parameter
	node := c.r.PathValue("node")
	if _, found := s.state.node(node); !found {
		return unknownNode(node)
	}
	if g, exists := s.state.guests[vmid]; exists {
		label := "VM"
		if g.typ == proxmox.GuestLXC {
			label = "CT"
		}
		return fail(http.StatusInternalServerError, fmt.Sprintf("%s %d already exists on node '%s'", label, vmid, g.node))
	}
	cr := &imgCreate{vmid: vmid, node: node, config: map[string]string{}}
	for _, k := range slices.Sorted(maps.Keys(p)) {
		switch {
		case k == "vmid" || k == "start" || k == "storage" || k == "import-working-storage":
		case imgDriveKey.MatchString(k):
			if a, failed := s.imgDrive(cr, k, p.Get(k), p.Get("storage")); failed {
				return a
			}
		case imgNetKey.MatchString(k):
			v, msg := imgNet(p.Get(k), vmid, k)
			if msg != "" {
				return paramFail(map[string]string{k: msg})
			}
			cr.config[k] = v
		default:
			cr.config[k] = p.Get(k)
		}
	}
	if cr.failure != "" {
		cr.failure = fmt.Sprintf("unable to create VM %d - %s", vmid, cr.failure)
	}
	start := p.Get("start") == "1"
	g := &guest{vmid: vmid, typ: proxmox.GuestQEMU, node: node, config: cr.config, status: stateStopped, snapshots: map[string]*snapshot{}}
	willFail := cr.failure != ""
	if q := s.taskFaults[faultKey(node, vmid)]; len(q) > 0 && !succeeded(q[0]) {
		willFail = true
	}
	a := s.startTask(c, g, "qmcreate", "create", cr.failure, func(t time.Time) {
		if start {
			g.start(t)
		}
	})
	if !willFail {
		s.state.guests[vmid] = g // the config exists (locked "create") while the task runs
	}
	return a
}

// imgDrive handles one drive parameter of a create; a non-nil failed answer refuses the
// request. Worker failures are recorded in cr.failure. Server.mu is held.
func (s *Server) imgDrive(cr *imgCreate, key, value, defStorage string) (answer, bool) {
	file, opts := imgSplitDrive(value)
	source, hasImport := "", false
	var kept []string
	for _, o := range opts {
		if v, found := strings.CutPrefix(o, "import-from="); found {
			source, hasImport = v, true
			continue
		}
		kept = append(kept, o)
	}
	m := imgNewDisk.FindStringSubmatch(file)
	if hasImport && (m == nil || m[3] != "0") {
		return paramFail(map[string]string{key: imgSpecialSyntax}), true
	}
	switch {
	case file == "none" || file == "cdrom":
		cr.config[key] = value
		return answer{}, false
	case strings.HasSuffix(file, ":cloudinit"):
		sid := strings.TrimSuffix(file, ":cloudinit")
		st, a, bad := s.imgImagesStorage(sid)
		if bad {
			return a, true
		}
		name := fmt.Sprintf("vm-%d-cloudinit", cr.vmid)
		if imgStoragePath(sid, st) != "" {
			name = fmt.Sprintf("%d/%s.qcow2", cr.vmid, name)
		}
		cr.config[key] = sid + ":" + name + ",media=cdrom"
		return answer{}, false
	case m == nil:
		cr.config[key] = value // an existing volume: kept as given
		return answer{}, false
	}
	sid := m[2]
	if sid == "" {
		sid = defStorage
	}
	if sid == "" {
		cr.fail("no storage ID specified (and no default storage)")
		return answer{}, false
	}
	st, a, bad := s.imgImagesStorage(sid)
	if bad {
		return a, true
	}
	if msg := s.state.storageUsable(sid, cr.node); msg != "" {
		cr.fail(msg) // vdisk_alloc in the worker
	}
	size := int64(0)
	if hasImport {
		var a answer
		var bad bool
		if size, a, bad = s.imgImportSource(cr, key, source); bad {
			return a, true
		}
	} else {
		gb, _ := strconv.ParseFloat(m[3], 64)
		size = int64(gb * (1 << 30))
	}
	name := fmt.Sprintf("vm-%d-disk-%d", cr.vmid, cr.disks)
	if imgStoragePath(sid, st) != "" {
		name = fmt.Sprintf("%d/%s.qcow2", cr.vmid, name)
	}
	cr.disks++
	line := sid + ":" + name
	for _, o := range kept {
		if !strings.HasPrefix(o, "size=") && !strings.HasPrefix(o, "format=") {
			line += "," + o
		}
	}
	cr.config[key] = line + ",size=" + imgFormatSize(size)
	return answer{}, false
}

// fail records the first worker failure.
func (cr *imgCreate) fail(msg string) {
	if cr.failure == "" {
		cr.failure = msg
	}
}

// imgSplitDrive splits a drive value into its volume (the leading "file=" optional) and
// its other options.
func imgSplitDrive(value string) (string, []string) {
	parts := strings.Split(value, ",")
	var file string
	var opts []string
	for i, part := range parts {
		switch v, isFile := strings.CutPrefix(part, "file="); {
		case isFile:
			file = v
		case i == 0 && !strings.Contains(part, "="):
			file = part
		default:
			opts = append(opts, part)
		}
	}
	return file, opts
}

// imgImagesStorage checks a target storage of a new disk; Server.mu is held.
func (s *Server) imgImagesStorage(sid string) (map[string]string, answer, bool) {
	st, found := s.state.storages[sid]
	if !found {
		return nil, fail(http.StatusInternalServerError, fmt.Sprintf("storage '%s' does not exist", sid)), true
	}
	if !contains(splitList(st["content"]), "images") {
		return nil, paramFail(map[string]string{"storage": fmt.Sprintf("storage '%s' does not support vm images", sid)}), true
	}
	return st, answer{}, false
}

// imgImportSource checks an import-from source and returns the imported disk's size. A
// volume must be of type import (or images) on an existing storage (else a refusal); a
// missing file is a worker failure. Server.mu is held.
func (s *Server) imgImportSource(cr *imgCreate, key, source string) (int64, answer, bool) {
	if vm := imgVolumeID.FindStringSubmatch(source); vm != nil {
		sid, volname := vm[1], vm[2]
		if _, found := s.state.storages[sid]; !found {
			return 0, fail(http.StatusInternalServerError, fmt.Sprintf("storage '%s' does not exist", sid)), true
		}
		file, isImport := strings.CutPrefix(volname, "import/")
		if !isImport {
			vtype := "images"
			if i := strings.IndexByte(volname, '/'); i > 0 && !imgIsVMDir(volname[:i]) {
				vtype = volname[:i]
			}
			if vtype != "images" {
				return 0, paramFail(map[string]string{key: fmt.Sprintf("%s has wrong type '%s' - needs to be 'images' or 'import'", source, vtype)}), true
			}
			cr.fail(fmt.Sprintf("sim/pve: import-from a VM volume ('%s') is not simulated", source))
			return 0, answer{}, false
		}
		v, found := s.imgGet(sid, cr.node, file)
		if !found {
			cr.fail(fmt.Sprintf("cannot import from '%s' - could not get size of %s", source, source))
			return 0, answer{}, false
		}
		return v.size, answer{}, false
	}
	size, err := s.imgNodeFileSize(cr.node, source)
	if err != nil {
		cr.fail(fmt.Sprintf("can't find file '%s'", source))
		return 0, answer{}, false
	}
	return size, answer{}, false
}

// imgIsVMDir reports whether a volname's directory is a vmid ("100/vm-100-disk-0.qcow2").
func imgIsVMDir(dir string) bool {
	_, err := strconv.ParseInt(dir, 10, 64)
	return err == nil
}

// imgNodeFileSize is the size of absolute path p on node's simulated filesystem (the
// virtual size for a qcow2); an error when there is no such regular file. Server.mu is
// held (the read is local and short).
func (s *Server) imgNodeFileSize(node, p string) (int64, error) {
	root := s.imgRoots[node]
	if root == "" || !strings.HasPrefix(p, "/") {
		return 0, os.ErrNotExist
	}
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(filepath.Clean(p))))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 0, os.ErrNotExist
	}
	head := &imgHead{}
	buf := make([]byte, 32)
	n, _ := f.Read(buf)
	_, _ = head.Write(buf[:n])
	if v := head.qcow2Size(); v > 0 {
		return v, nil
	}
	return st.Size(), nil
}

// imgNet validates a netN value's model and fills in a MAC as PVE does; msg is the
// parameter error.
func imgNet(value string, vmid int64, key string) (string, string) {
	head, rest, _ := strings.Cut(value, ",")
	m := imgNetModel.FindStringSubmatch(head)
	if m == nil {
		return "", "invalid format - format error\nmodel: value does not match the regex pattern"
	}
	if m[3] != "" {
		return value, ""
	}
	idx, _ := strconv.Atoi(strings.TrimPrefix(key, "net"))
	mac := fmt.Sprintf("BC:24:11:%02X:%02X:%02X", (vmid>>8)&0xff, vmid&0xff, idx)
	out := m[1] + "=" + mac
	if rest != "" {
		out += "," + rest
	}
	return out, ""
}
