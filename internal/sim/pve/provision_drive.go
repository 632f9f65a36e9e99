package simpve

import (
	"crypto/rand"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// drive is a parsed QEMU drive value: its volume ("file") and the other options in order.
type drive struct {
	file string
	opts [][2]string // key, value
}

// diskKeyRe matches QEMU drive keys (qemu-server's valid drive names).
var diskKeyRe = regexp.MustCompile(`^(?:ide[0-3]|sata[0-5]|scsi(?:[0-9]|[12][0-9]|30)|virtio(?:[0-9]|1[0-5])|efidisk0|tpmstate0)$`)

// unusedKeyRe matches unusedN keys.
var unusedKeyRe = regexp.MustCompile(`^unused\d+$`)

// cloudinitRe is qemu-server's drive_is_cloudinit test on a volume.
var cloudinitRe = regexp.MustCompile(`[:/](?:vm-\d+-)?cloudinit(?:\.(?:raw|qcow2|vmdk))?$`)

// parseDrive splits "vol,k=v,…" (or "file=vol,…").
func parseDrive(v string) drive {
	var d drive
	for i, part := range strings.Split(v, ",") {
		k, val, hasEq := strings.Cut(part, "=")
		switch {
		case i == 0 && !hasEq:
			d.file = part
		case k == "file":
			d.file = val
		default:
			d.opts = append(d.opts, [2]string{k, val})
		}
	}
	return d
}

// opt returns option k's value.
func (d drive) opt(k string) (string, bool) {
	for _, o := range d.opts {
		if o[0] == k {
			return o[1], true
		}
	}
	return "", false
}

// setOpt sets option k, keeping its position (appended when new).
func (d *drive) setOpt(k, v string) {
	for i := range d.opts {
		if d.opts[i][0] == k {
			d.opts[i][1] = v
			return
		}
	}
	d.opts = append(d.opts, [2]string{k, v})
}

// String prints the drive as qemu-server does: the volume, then the options in order.
func (d drive) String() string {
	parts := []string{d.file}
	for _, o := range d.opts {
		parts = append(parts, o[0]+"="+o[1])
	}
	return strings.Join(parts, ",")
}

// cloudinit reports whether the drive is a Cloud-Init drive.
func (d drive) cloudinit() bool { return cloudinitRe.MatchString(d.file) }

// cdrom is qemu-server's drive_is_cdrom: media=cdrom or the "cdrom" pseudo volume;
// withCloudinit false excludes Cloud-Init drives (drive_is_cdrom($drive, 1)).
func (d drive) cdrom(withCloudinit bool) bool {
	media, _ := d.opt("media")
	is := media == "cdrom" || d.file == "cdrom"
	if is && !withCloudinit && d.cloudinit() {
		return false
	}
	return is
}

// storage is the drive's storage id ("" for none, cdrom or an absolute path).
func (d drive) storage() string {
	sid, _, found := strings.Cut(d.file, ":")
	if !found || strings.HasPrefix(d.file, "/") {
		return ""
	}
	return sid
}

// volFormat is the format a volume name implies (".qcow2", ".vmdk", else raw).
func volFormat(volname string) string {
	switch {
	case strings.HasSuffix(volname, ".qcow2"):
		return "qcow2"
	case strings.HasSuffix(volname, ".vmdk"):
		return "vmdk"
	}
	return "raw"
}

// diskNumRe extracts N of "vm-<vmid>-disk-N".
var diskNumRe = regexp.MustCompile(`vm-(\d+)-disk-(\d+)`)

// newVolume allocates the next free "vm-<vmid>-disk-N" on storage sid given the volumes
// config already references there; file storages get "<vmid>/vm-<vmid>-disk-N.<fmt>".
func (c *cluster) newVolume(config map[string]string, sid string, vmid int64, format string) string {
	next := 0
	for _, v := range config {
		d := parseDrive(v)
		if d.storage() != sid {
			continue
		}
		for _, m := range diskNumRe.FindAllStringSubmatch(d.file, -1) {
			if m[1] == strconv.FormatInt(vmid, 10) {
				if n, err := strconv.Atoi(m[2]); err == nil && n >= next {
					next = n + 1
				}
			}
		}
	}
	name := fmt.Sprintf("vm-%d-disk-%d", vmid, next)
	if fileStorageTypes[c.storages[sid]["type"]] {
		return fmt.Sprintf("%s:%d/%s.%s", sid, vmid, name, format)
	}
	return sid + ":" + name
}

// cloudinitVolume is the Cloud-Init volume of vmid on storage sid.
func (c *cluster) cloudinitVolume(sid string, vmid int64) string {
	if fileStorageTypes[c.storages[sid]["type"]] {
		return fmt.Sprintf("%s:%d/vm-%d-cloudinit.qcow2", sid, vmid, vmid)
	}
	return fmt.Sprintf("%s:vm-%d-cloudinit", sid, vmid)
}

// addUnused records volid as the first free unusedN of config (PVE's add_unused_volume).
func addUnused(config map[string]string, volid string) {
	for i := 0; ; i++ {
		k := "unused" + strconv.Itoa(i)
		if _, used := config[k]; !used {
			config[k] = volid
			return
		}
	}
}

// randomMAC is PVE's random_ether_addr with its default prefix BC:24:11.
func randomMAC() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("BC:24:11:%02X:%02X:%02X", b[0], b[1], b[2])
}

// randomUUID is a random (version 4) UUID.
func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
