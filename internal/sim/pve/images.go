package simpve

import (
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// Privileges of the image methods.
const (
	imgPrivAllocateTemplate = "Datastore.AllocateTemplate"
	imgPrivVMAllocate       = "VM.Allocate"
)

// imageEndpoints are the methods of storage content, download-url, VM creation with
// import-from and the cluster status.
func (s *Server) imageEndpoints() map[string]endpoint {
	storagePerm := func(priv string) func(c *call) (string, string) {
		return func(c *call) (string, string) { return "/storage/" + c.r.PathValue("storage"), priv }
	}
	return map[string]endpoint{
		"GET /nodes/{node}/storage/{storage}/content":       {perm: storagePerm(privAudit), fn: s.getStorageContent},
		"POST /nodes/{node}/storage/{storage}/download-url": {perm: storagePerm(imgPrivAllocateTemplate), fn: s.downloadURL},
		"POST /nodes/{node}/qemu": {
			perm: func(c *call) (string, string) { return "/vms/" + c.params.Get("vmid"), imgPrivVMAllocate },
			fn:   s.createVM,
		},
		"GET /cluster/status": {perm: func(*call) (string, string) { return "/", privSysAudit }, fn: s.getClusterStatus},
	}
}

// imgStoragePath is a file-based storage's mount path, "" for other storages.
func imgStoragePath(id string, m map[string]string) string {
	if !fileStorageTypes[m["type"]] {
		return ""
	}
	if p := m["path"]; p != "" {
		return p
	}
	return "/mnt/pve/" + id
}

// imgStorageActive is PVE's storage_check_enabled plus the storage activation of content
// listings and downloads on node: PVE's 500 when it does not exist, is disabled, is not
// available on node or is not online there. Server.mu is held.
func (s *Server) imgStorageActive(id, node string) (map[string]string, answer, bool) {
	if msg := s.state.storageUsable(id, node); msg != "" {
		return nil, fail(http.StatusInternalServerError, msg), false
	}
	return s.state.storages[id], answer{}, true
}

// imgNodeCall checks a /nodes/{node}/storage/{storage}/… call's node (pveproxy's lookup
// failure). Server.mu is held.
func (s *Server) imgNodeCall(c *call) (node, storage string, a answer, okay bool) {
	node, storage = c.r.PathValue("node"), c.r.PathValue("storage")
	if _, found := s.state.node(node); !found {
		return "", "", unknownNode(node), false
	}
	return node, storage, answer{}, true
}

// getStorageContent is GET /nodes/{node}/storage/{storage}/content: the import files and
// the guests' disks on that storage as node sees it, optionally of one content type.
func (s *Server) getStorageContent(c *call) answer {
	node, id, a, okay := s.imgNodeCall(c)
	if !okay {
		return a
	}
	ct := c.params.Get("content") // a pve-storage-content: the schema checked it
	m, a, okay := s.imgStorageActive(id, node)
	if !okay {
		return a
	}
	configured := splitList(m["content"])
	out := []map[string]any{}
	if (ct == "" || ct == proxmox.ImportContent) && contains(configured, proxmox.ImportContent) {
		vols := s.imgVolumes[s.imgVolKey(id, node)]
		for _, file := range slices.Sorted(maps.Keys(vols)) {
			v := vols[file]
			out = append(out, map[string]any{
				"volid": proxmox.ImportVolumeID(id, file), "content": proxmox.ImportContent,
				"format": imgFileFormat(file), "size": v.size, "ctime": v.ctime,
			})
		}
	}
	if ct == "" || ct == "images" || ct == "rootdir" {
		out = append(out, s.imgGuestVolumes(id, node, ct)...)
	}
	return ok(out)
}

// imgFileFormat is the format PVE derives from an import file's extension.
func imgFileFormat(file string) string {
	if i := strings.LastIndexByte(file, '.'); i >= 0 {
		return file[i+1:]
	}
	return "raw"
}

// imgDiskKey matches the configuration keys that hold volumes.
var imgDiskKey = regexp.MustCompile(`^(?:(?:scsi|virtio|sata|ide|unused|mp)\d+|efidisk0|tpmstate0|rootfs)$`)

// imgGuestVolumes lists the guests' volumes on storage id as node sees it (content images
// for VMs, rootdir for containers). Server.mu is held.
func (s *Server) imgGuestVolumes(id, node, ct string) []map[string]any {
	m := s.state.storages[id]
	shared := storageShared(m)
	configured := splitList(m["content"])
	var out []map[string]any
	for _, vmid := range s.state.guestIDs() {
		g := s.state.guests[vmid]
		if !shared && g.node != node {
			continue
		}
		content := "images"
		if g.typ == proxmox.GuestLXC {
			content = "rootdir"
		}
		if (ct != "" && ct != content) || !contains(configured, content) {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(g.config)) {
			if !imgDiskKey.MatchString(k) {
				continue
			}
			volid, opts, _ := strings.Cut(g.config[k], ",")
			if !strings.HasPrefix(volid, id+":") || strings.Contains(opts, "media=cdrom") {
				continue
			}
			format := "raw"
			if strings.HasSuffix(volid, ".qcow2") {
				format = "qcow2"
			}
			out = append(out, map[string]any{
				"volid": volid, "content": content, "format": format, "vmid": vmid, "size": imgOptSize(opts),
			})
		}
	}
	return out
}

// imgOptSize parses the size= option of a drive ("32G") into bytes; 0 when missing.
func imgOptSize(opts string) int64 {
	for _, kv := range strings.Split(opts, ",") {
		v, found := strings.CutPrefix(kv, "size=")
		if !found || v == "" {
			continue
		}
		mult := int64(1)
		switch v[len(v)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			v = v[:len(v)-1]
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0
		}
		return int64(n * float64(mult))
	}
	return 0
}

// imgFormatSize renders bytes as PVE's format_size does (the largest exact unit).
func imgFormatSize(size int64) string {
	units := []string{"K", "M", "G", "T"}
	out := strconv.FormatInt(size, 10)
	for _, u := range units {
		if size%1024 != 0 || size == 0 {
			break
		}
		size /= 1024
		out = strconv.FormatInt(size, 10) + u
	}
	return out
}

// getClusterStatus is GET /cluster/status: the cluster entry and one entry per node with
// its address.
func (s *Server) getClusterStatus(*call) answer {
	out := []map[string]any{{
		"type": "cluster", "id": "cluster", "name": "proxbus-sim", "nodes": len(s.state.nodes),
		"quorate": 1, "version": 3,
	}}
	for i, n := range s.state.nodes {
		addr := s.imgAddrs[n.name]
		if addr == "" {
			addr = fmt.Sprintf("10.0.0.%d", 11+i)
		}
		out = append(out, map[string]any{
			"type": "node", "id": "node/" + n.name, "name": n.name, "nodeid": i + 1, "ip": addr,
			"online": boolInt(n.status == "online"), "local": boolInt(i == 0), "level": "",
		})
	}
	return ok(out)
}

// imgStartTask starts a task that belongs to no guest (download): UPID with worker type
// typ and id, ending after the task duration with failure (or OK and effect applied).
// Server.mu is held.
func (s *Server) imgStartTask(c *call, node, typ, id, failure string, effect func(time.Time)) answer {
	now := time.Now()
	s.state.pid++
	u := proxmox.UPID{
		Node: node, PID: s.state.pid, PStart: 0x00123456 + s.state.pid, StartTime: now.Truncate(time.Second).UTC(),
		Type: typ, ID: id, User: c.tokenID,
	}
	t := &task{upid: u.String(), node: node, typ: typ, user: c.tokenID, end: now.Add(s.taskRun(s.state.pid)), effect: effect, fault: failure}
	s.state.tasks = append(s.state.tasks, t)
	if s.taskDur <= 0 {
		s.finishTask(t, now)
	}
	return ok(t.upid)
}
