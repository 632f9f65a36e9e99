package simpve

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cipasswordMask is what GET .../config shows instead of a Cloud-Init password.
const cipasswordMask = "**********"

var (
	urlencodedRe  = regexp.MustCompile(`^[-%a-zA-Z0-9_.!~*'()]*$`)
	memoryRe      = regexp.MustCompile(`^(?:current=)?(\d+)$`)
	ipconfigKeyRe = regexp.MustCompile(`^ipconfig(?:[12]?[0-9]|3[01])$`)
	ideKeyRe      = regexp.MustCompile(`^ide[0-3]$`)
	ciDriveRe     = regexp.MustCompile(`^([^:\s,]+):cloudinit$`)
)

// updateConfig is POST /nodes/{node}/qemu/{vmid}/config: each value is checked as PVE's
// schema does (400 with per-parameter errors), then a qmconfig task applies them. netN
// values are stored as print_net writes them (a MAC is generated when none is given);
// "<storage>:cloudinit" on ideN creates the Cloud-Init volume (the worker fails when the
// storage is not usable on the node); sshkeys must be URL-encoded and is stored so;
// cipassword is stored hashed and shown masked. A bridge the node does not have makes the
// worker fail with "bridge 'vmbrX' does not exist" (PVE reports it when it plugs the NIC).
func (s *Server) updateConfig(c *call, g *guest) answer {
	errs := map[string]string{}
	values := map[string]string{}
	failure := ""
	for _, k := range slices.Sorted(maps.Keys(c.params)) {
		v := c.params.Get(k)
		nv, msg, fails := s.checkConfigValue(g, k, v)
		if msg != "" {
			errs[k] = msg
			continue
		}
		if fails != "" && failure == "" {
			failure = fails
		}
		values[k] = nv
	}
	if len(errs) > 0 {
		return paramFail(errs)
	}
	if a, free := checkLock(g); !free {
		return a
	}
	return s.startTask(c, g, "qmconfig", "", failure, func(time.Time) {
		for k, v := range values {
			if k == "cipassword" {
				sum := sha256.Sum256([]byte(v))
				s.state.ciPasswords[g.vmid] = hex.EncodeToString(sum[:])
				v = cipasswordMask
			}
			g.config[k] = v
		}
	})
}

// checkConfigValue validates one key: it returns the value to store, a 400 message for a
// malformed value, or the exit status the worker fails with.
func (s *Server) checkConfigValue(g *guest, k, v string) (stored, bad, fails string) {
	switch {
	case k == "memory":
		m := memoryRe.FindStringSubmatch(v)
		if m == nil {
			return "", netFormatError("current", fmt.Sprintf("type check ('integer') failed - got '%s'", strings.TrimPrefix(v, "current="))), ""
		}
		if n, _ := strconv.Atoi(m[1]); n < 16 {
			return "", netFormatError("current", "value must have a minimum value of 16"), ""
		}
	case k == "cores" || k == "sockets":
		n, err := strconv.Atoi(v)
		if err != nil {
			return "", fmt.Sprintf("type check ('integer') failed - got '%s'", v), ""
		}
		if n < 1 {
			return "", "value must have a minimum value of 1", ""
		}
	case k == "agent":
		if msg := checkAgent(v); msg != "" {
			return "", msg, ""
		}
	case k == "sshkeys":
		if !urlencodedRe.MatchString(v) {
			return "", "invalid format - invalid urlencoded string", ""
		}
	case k == "nameserver":
		for _, a := range splitList(v) {
			if net.ParseIP(a) == nil {
				return "", fmt.Sprintf("invalid format - value does not look like a valid address: %s", a), ""
			}
		}
	case ipconfigKeyRe.MatchString(k):
		if msg := checkIPConfig(v); msg != "" {
			return "", msg, ""
		}
	case netKeyRe.MatchString(k):
		nd, msg := parseNet(v)
		if msg != "" {
			return "", msg, ""
		}
		if br, found := nd.opts["bridge"]; found && !slices.Contains(simBridges, br) {
			fails = fmt.Sprintf("bridge '%s' does not exist", br)
		}
		return nd.String(), "", fails
	case ideKeyRe.MatchString(k):
		return s.checkIDE(g, v)
	}
	return v, "", ""
}

// checkIDE accepts a new Cloud-Init drive "<storage>:cloudinit[,media=cdrom][,format=…]"
// and empty CD-ROM drives ("none,media=cdrom", "cdrom"); other ide values are not simulated.
func (s *Server) checkIDE(g *guest, v string) (stored, bad, fails string) {
	d := parseDrive(v)
	if d.file == "none" || d.file == "cdrom" {
		d.setOpt("media", "cdrom")
		return d.String(), "", ""
	}
	m := ciDriveRe.FindStringSubmatch(d.file)
	if m == nil {
		return "", "invalid format - sim/pve: only '<storage>:cloudinit' and empty CD-ROM drives are simulated on ide", ""
	}
	if msg := checkStorageID(m[1]); msg != "" {
		return "", msg, ""
	}
	for _, o := range d.opts {
		switch {
		case o[0] == "media" && (o[1] == "cdrom" || o[1] == "disk"):
		case o[0] == "format" && (o[1] == "raw" || o[1] == "qcow2"):
		default:
			return "", netFormatError(o[0], fmt.Sprintf("sim/pve: option '%s=%s' not simulated for a Cloud-Init drive", o[0], o[1])), ""
		}
	}
	if msg := s.state.storageUsable(m[1], g.node); msg != "" {
		fails = msg
	}
	return s.state.cloudinitVolume(m[1], g.vmid) + ",media=cdrom", "", fails
}

// checkAgent validates agent: "[enabled=]<1|0>[,fstrim_cloned_disks=<1|0>][,freeze-fs=<1|0>][,type=<virtio|isa>]".
func checkAgent(v string) string {
	for i, part := range strings.Split(v, ",") {
		k, val, hasEq := strings.Cut(part, "=")
		if !hasEq && i == 0 {
			k, val = "enabled", part
		}
		switch k {
		case "enabled", "fstrim_cloned_disks", "freeze-fs", "freeze-fs-on-backup":
			if _, valid := parseBool(val); !valid {
				return netFormatError(k, fmt.Sprintf("type check ('boolean') failed - got '%s'", val))
			}
		case "type":
			if val != "virtio" && val != "isa" {
				return netFormatError(k, fmt.Sprintf("value '%s' does not have a value in the enumeration 'virtio, isa'", val))
			}
		default:
			return netFormatError(k, "property is not defined in schema and the schema does not allow additional properties")
		}
	}
	return ""
}

// checkIPConfig validates ipconfigN: "[gw=<IPv4>][,gw6=<IPv6>][,ip=<IPv4/CIDR|dhcp>][,ip6=<IPv6/CIDR|dhcp|auto>]".
func checkIPConfig(v string) string {
	for _, part := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(part, "=")
		var ok bool
		switch k {
		case "ip":
			ok = val == "dhcp" || isCIDR(val, false)
		case "ip6":
			ok = val == "dhcp" || val == "auto" || isCIDR(val, true)
		case "gw":
			ip := net.ParseIP(val)
			ok = ip != nil && ip.To4() != nil
		case "gw6":
			ip := net.ParseIP(val)
			ok = ip != nil && ip.To4() == nil
		default:
			return netFormatError(k, "property is not defined in schema and the schema does not allow additional properties")
		}
		if !ok {
			return netFormatError(k, fmt.Sprintf("invalid format - value does not look like a valid address: %s", val))
		}
	}
	return ""
}

// isCIDR reports whether v is an address with prefix of the given family.
func isCIDR(v string, v6 bool) bool {
	ip, _, err := net.ParseCIDR(v)
	return err == nil && (ip.To4() == nil) == v6
}

// CheckCloudInitPassword reports whether password is the Cloud-Init password last set on
// guest vmid (its configuration shows only "**********", as PVE's does).
func (s *Server) CheckCloudInitPassword(vmid int64, password string) bool {
	sum := sha256.Sum256([]byte(password))
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.ciPasswords[vmid] == hex.EncodeToString(sum[:])
}
