package simpve

import (
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// snapshotKeys are config keys a clone never copies (qemu-server clone_vm).
var snapshotKeys = map[string]bool{"parent": true, "snaptime": true, "vmstate": true, "snapstate": true, "template": true, "lock": true, "digest": true}

// smbiosUUIDRe finds smbios1's uuid.
var smbiosUUIDRe = regexp.MustCompile(`uuid=[0-9a-fA-F-]+`)

// cloneVM is POST /nodes/{node}/qemu/{vmid}/clone, following qemu-server's clone_vm: the
// early checks answer 500 before any task (storage enabled on both nodes, "can't clone to
// non-shared storage", locks, "parameter 'storage' not allowed for linked clones", "can't
// clone VM to node … (VM uses local storage)" when any disk or CD-ROM/Cloud-Init volume of
// the source is on non-shared storage, an existing newid); then a qmclone task (ID the
// source vmid, on the source node) creates the new VM locked "clone" on the source node,
// copies the configuration with new disks (vm-<newid>-disk-N on the storage asked, else
// each disk's own; linked clones of templates keep the base volume), new MACs, a new
// smbios1 uuid, and moves it to the target node when done. A worker failure (FailTask on
// the source, a storage that is not online) leaves no VM behind.
func (s *Server) cloneVM(c *call, src *guest) answer {
	p := c.params // the schema checked newid, name, full, storage and target
	newid := int64(perlInt(p.Get("newid")))
	full := !src.template()
	if p.Has("full") {
		full = flag(c, "full")
	}
	storage, target := p.Get("storage"), p.Get("target")
	if target == src.node || target == "localhost" {
		target = ""
	}
	if a, refused := s.cloneChecks(src, newid, target, storage, full); refused {
		return a
	}

	newConf, failure := s.cloneConfig(src, newid, storage, full)
	if p.Get("name") != "" {
		newConf["name"] = p.Get("name")
	} else {
		newConf["name"] = "Copy-of-VM-" + src.name()
	}
	final := src.node
	if target != "" {
		final = target
	}
	ng := &guest{vmid: newid, typ: src.typ, node: src.node, config: newConf, status: stateStopped, snapshots: map[string]*snapshot{}}
	srcPW, hasPW := s.state.ciPasswords[src.vmid]
	effect := func(time.Time) {
		ng.node = final
		s.state.guests[newid] = ng
		if hasPW {
			s.state.ciPasswords[newid] = srcPW
		}
	}
	// The worker runs under the source's shared lock: other clones of it may run too. A
	// stand-in takes the task's guest slot so the source itself stays unlocked.
	stand := &guest{vmid: src.vmid, typ: src.typ, node: src.node}
	a := s.startTask(c, stand, "qmclone", "", failure, effect)
	t := s.state.tasks[len(s.state.tasks)-1]
	if !t.done && succeeded(orOK(t.fault)) {
		// The new VM exists, locked, on the source node while the worker copies.
		ng.lock, ng.task = "clone", t.upid
		t.guest = ng
		s.state.guests[newid] = ng
	}
	return a
}

// orOK is exit, or "OK" when empty.
func orOK(exit string) string {
	if exit == "" {
		return taskOK
	}
	return exit
}

// cloneChecks are clone_vm's checks before the worker; refused is true with PVE's answer.
func (s *Server) cloneChecks(src *guest, newid int64, target, storage string, full bool) (answer, bool) {
	if target != "" {
		if _, found := s.state.node(target); !found {
			return fail(http.StatusInternalServerError, fmt.Sprintf("no such cluster node '%s'", target)), true
		}
	}
	if storage != "" {
		if msg := s.state.storageEnabledOn(storage, src.node); msg != "" {
			return fail(http.StatusInternalServerError, msg), true
		}
		if target != "" {
			if msg := s.state.storageEnabledOn(storage, target); msg != "" {
				return fail(http.StatusInternalServerError, msg), true
			}
			if !storageShared(s.state.storages[storage]) {
				return fail(http.StatusInternalServerError, fmt.Sprintf("can't clone to non-shared storage '%s'", storage)), true
			}
		}
	}
	if a, free := checkLock(src); !free {
		return a, true
	}
	if storage != "" && !full {
		return fail(http.StatusInternalServerError, "parameter 'storage' not allowed for linked clones"), true
	}
	if !full {
		for _, k := range slices.Sorted(maps.Keys(src.config)) {
			d := parseDrive(src.config[k])
			if !diskKeyRe.MatchString(k) || d.cdrom(true) || d.cloudinit() {
				continue
			}
			if !src.template() || !strings.Contains(d.file, "base-") {
				return fail(http.StatusInternalServerError, fmt.Sprintf("Linked clone feature is not supported for drive '%s'", k)), true
			}
		}
	}
	if target != "" && !s.sharedVM(src) {
		return fail(http.StatusInternalServerError, fmt.Sprintf("can't clone VM to node '%s' (VM uses local storage)", target)), true
	}
	if _, exists := s.state.guests[newid]; exists {
		return fail(http.StatusInternalServerError, fmt.Sprintf("unable to create VM %d: config file already exists", newid)), true
	}
	return answer{}, false
}

// sharedVM is qemu-server's check_storage_access_clone: every volume of g's drives (disks,
// Cloud-Init drives and CD-ROM images alike; "none" and "cdrom" aside) is on shared storage.
func (s *Server) sharedVM(g *guest) bool {
	for k, v := range g.config {
		if !diskKeyRe.MatchString(k) {
			continue
		}
		d := parseDrive(v)
		sid := d.storage()
		if d.file == "" || d.file == "none" || d.file == "cdrom" || sid == "" {
			continue
		}
		if m, found := s.state.storages[sid]; !found || !storageShared(m) {
			return false
		}
	}
	return true
}

// cloneConfig builds the new VM's configuration and the exit status its worker fails with
// ("" when it succeeds): a destination storage that is not usable on the source node.
func (s *Server) cloneConfig(src *guest, newid int64, storage string, full bool) (map[string]string, string) {
	out := map[string]string{}
	failure := ""
	for _, k := range slices.Sorted(maps.Keys(src.config)) {
		v := src.config[k]
		switch {
		case snapshotKeys[k] || unusedKeyRe.MatchString(k):
			continue
		case netKeyRe.MatchString(k):
			if nd, msg := parseNet(v); msg == "" {
				nd.mac = randomMAC()
				v = nd.String()
			}
		case k == "smbios1":
			v = smbiosUUIDRe.ReplaceAllString(v, "uuid="+randomUUID())
		case k == "vmgenid":
			v = randomUUID()
		case diskKeyRe.MatchString(k):
			d := parseDrive(v)
			if d.cdrom(false) || d.file == "none" || d.storage() == "" {
				break // CD-ROMs are copied as they are
			}
			dest := d.storage()
			if storage != "" {
				dest = storage
			}
			if msg := s.state.storageUsable(dest, src.node); msg != "" && failure == "" {
				failure = "clone failed: " + msg
			}
			switch {
			case d.cloudinit():
				d.file = s.state.cloudinitVolume(dest, newid)
			case full:
				_, volname, _ := strings.Cut(d.file, ":")
				d.file = s.state.newVolume(out, dest, newid, volFormat(volname))
			default: // linked: the base volume stays, the clone gets its own name on top
				_, volname, _ := strings.Cut(d.file, ":")
				n := s.state.newVolume(out, dest, newid, volFormat(volname))
				_, name, _ := strings.Cut(n, ":")
				d.file = dest + ":" + volname + "/" + name
			}
			v = d.String()
		}
		out[k] = v
	}
	return out, failure
}

// netKeyRe matches netN keys.
var netKeyRe = regexp.MustCompile(`^net(?:[12]?[0-9]|3[01])$`)
