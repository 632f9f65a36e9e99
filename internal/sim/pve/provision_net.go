package simpve

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// netDevice is a parsed QEMU netN value.
type netDevice struct {
	model, mac string
	opts       map[string]string // bridge, firewall, tag, … (not model/macaddr)
}

// netOptions are netN's options besides the model and MAC (PVE 9.2 schema).
var netOptions = []string{"bridge", "firewall", "link_down", "mtu", "queues", "rate", "tag", "trunks"}

var (
	macRe    = regexp.MustCompile(`^[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}$`)
	bridgeRe = regexp.MustCompile(`^[-_.\w\d]+$`)
)

// netFormatError is PVE's property-string error for one option.
func netFormatError(key, msg string) string {
	return "invalid format - format error\n" + key + ": " + msg
}

// parseNet parses a netN value as qemu-server's parse_net does, returning PVE's message
// on a malformed value. A missing MAC is generated (as PVE does when it stores it).
func parseNet(v string) (netDevice, string) {
	d := netDevice{opts: map[string]string{}}
	models := proxmox.NICModels()
	for i, part := range strings.Split(v, ",") {
		k, val, hasEq := strings.Cut(part, "=")
		switch {
		case !hasEq && i == 0:
			k, val = "model", part
			fallthrough
		case k == "model":
			if !slices.Contains(models, val) {
				return d, netFormatError("model", fmt.Sprintf("value '%s' does not have a value in the enumeration '%s'", val, strings.Join(models, ", ")))
			}
			d.model = val
		case slices.Contains(models, k):
			d.model, d.mac = k, val
		case k == "macaddr":
			d.mac = val
		case slices.Contains(netOptions, k):
			if msg := checkNetOption(k, val); msg != "" {
				return d, netFormatError(k, msg)
			}
			d.opts[k] = val
		default:
			return d, netFormatError(k, "property is not defined in schema and the schema does not allow additional properties")
		}
	}
	if d.model == "" {
		return d, netFormatError("model", "property is missing and it is not optional")
	}
	if d.mac == "" {
		d.mac = randomMAC()
	} else if hw, err := net.ParseMAC(d.mac); err != nil || !macRe.MatchString(d.mac) || hw[0]&1 == 1 {
		return d, netFormatError("macaddr", fmt.Sprintf("value does not look like a valid unicast MAC address: %s", d.mac))
	}
	d.mac = strings.ToUpper(d.mac)
	return d, ""
}

// checkNetOption validates one netN option value; "" when valid.
func checkNetOption(k, v string) string {
	switch k {
	case "bridge":
		if !bridgeRe.MatchString(v) {
			return fmt.Sprintf("invalid format - invalid bridge ID '%s'", v)
		}
	case "firewall", "link_down":
		if _, ok := parseBool(v); !ok {
			return fmt.Sprintf("type check ('boolean') failed - got '%s'", v)
		}
	case "tag":
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			return fmt.Sprintf("type check ('integer') failed - got '%s'", v)
		case n < 1:
			return "value must have a minimum value of 1"
		case n > 4094:
			return "value must have a maximum value of 4094"
		}
	case "mtu", "queues":
		if _, err := strconv.Atoi(v); err != nil {
			return fmt.Sprintf("type check ('integer') failed - got '%s'", v)
		}
	case "rate":
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return fmt.Sprintf("type check ('number') failed - got '%s'", v)
		}
	}
	return ""
}

// String prints the device as qemu-server's print_net does: "<model>=<MAC>", then the
// other options sorted by name.
func (d netDevice) String() string {
	parts := []string{d.model + "=" + d.mac}
	for _, k := range netOptions {
		if v, found := d.opts[k]; found {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ",")
}

// parseBool is PVE's boolean: 1/0, true/false, yes/no, on/off.
func parseBool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true, true
	case "0", "false", "no", "off":
		return false, true
	}
	return false, false
}

// simBridges are the bridges every simulated node has (GET /nodes/{node}/network).
var simBridges = []string{"vmbr0", "vmbr1"}
