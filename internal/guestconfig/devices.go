package guestconfig

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// devKey is a configuration key of an indexed device ("scsi10" → bus "scsi", index 10).
type devKey struct {
	key   string
	bus   string
	index int
}

// devKeyRE matches indexed device keys; indexes have no leading zeros, as PVE writes them.
var devKeyRE = regexp.MustCompile(`^([a-z]+)(0|[1-9][0-9]{0,3})$`)

// devices returns the keys of raw whose bus is in buses (bus → rank), ordered by rank
// then index.
func devices(raw map[string]string, buses map[string]int) []devKey {
	var out []devKey
	for k := range raw {
		m := devKeyRE.FindStringSubmatch(k)
		if m == nil {
			continue
		}
		if _, ok := buses[m[1]]; !ok {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		out = append(out, devKey{key: k, bus: m[1], index: n})
	}
	slices.SortFunc(out, func(a, b devKey) int {
		if d := buses[a.bus] - buses[b.bus]; d != 0 {
			return d
		}
		return a.index - b.index
	})
	return out
}

var sizeRE = regexp.MustCompile(`^([0-9]+)(\.[0-9]+)?([KMGT])?$`)

// parseSize parses a PVE disk size ("32G", "4M", "528K", "1.5T", "1073741824") into bytes,
// like PVE::JSONSchema::parse_size (powers of 1024, fractions truncated).
func parseSize(key, v string) (int64, error) {
	m := sizeRE.FindStringSubmatch(v)
	bad := &Error{Key: key, Reason: "size: not a disk size"}
	if m == nil {
		return 0, bad
	}
	mult := int64(1)
	switch m[3] {
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	case "T":
		mult = 1 << 40
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, bad
	}
	size := n * mult
	if m[2] != "" {
		frac, err := strconv.ParseFloat("0"+m[2], 64)
		if err != nil {
			return 0, bad
		}
		extra := int64(frac * float64(mult))
		if size > math.MaxInt64-extra {
			return 0, bad
		}
		size += extra
	}
	return size, nil
}

// volIDRE is a PVE volume id "storage:volname" (storage id as PVE::Storage checks it).
var volIDRE = regexp.MustCompile(`^(?i:([a-z][a-z0-9._-]*[a-z0-9])):(.+)$`)

// splitVolume splits a volume id into storage and volume name; an absolute path gives
// storage "" and the path.
func splitVolume(key, v string) (storage, volume string, err error) {
	if strings.HasPrefix(v, "/") {
		return "", v, nil
	}
	if m := volIDRE.FindStringSubmatch(v); m != nil {
		return m[1], m[2], nil
	}
	return "", "", &Error{Key: key, Reason: "not a volume id (storage:volume) or absolute path"}
}

// format is the disk format: explicit, else from the volume's extension, else raw.
func format(explicit, volume string) string {
	if explicit != "" {
		return explicit
	}
	base := volume[strings.LastIndex(volume, "/")+1:]
	if i := strings.LastIndex(base, "."); i >= 0 {
		switch ext := strings.ToLower(base[i+1:]); ext {
		case "raw", "qcow2", "vmdk", "qed":
			return ext
		}
	}
	if strings.HasPrefix(base, "subvol-") {
		return "subvol"
	}
	return "raw"
}

// unused parses the unusedN keys ("[file=|volume=]storage:volume").
func unused(raw map[string]string) ([]UnusedDisk, error) {
	out := []UnusedDisk{}
	for _, d := range devices(raw, map[string]int{"unused": 0}) {
		opts, err := props(d.key, raw[d.key], "file", map[string]string{"volume": "file"})
		if err != nil {
			return nil, err
		}
		if opts["file"] == "" {
			return nil, &Error{Key: d.key, Reason: "no volume"}
		}
		storage, volume, err := splitVolume(d.key, opts["file"])
		if err != nil {
			return nil, err
		}
		out = append(out, UnusedDisk{Device: d.key, Storage: storage, Volume: volume})
	}
	return out, nil
}

// macRE is a MAC address as PVE accepts it in net and hwaddr options.
var macRE = regexp.MustCompile(`^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$`)

// mac validates and upper-cases a MAC address option.
func mac(key, opt, v string) (string, error) {
	if !macRE.MatchString(v) {
		return "", &Error{Key: key, Reason: opt + ": not a MAC address"}
	}
	return strings.ToUpper(v), nil
}

// vlan parses tag= (1..4094); 0 when absent.
func vlan(key string, opts map[string]string) (int, error) {
	v, ok := opts["tag"]
	if !ok {
		return 0, nil
	}
	n, err := parseInt(key, "tag", v, 1, 4094)
	return int(n), err
}
