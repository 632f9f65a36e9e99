package simpve

import (
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"time"
)

// resizeSizeRe is PUT .../resize's size pattern.
var resizeSizeRe = regexp.MustCompile(`^(\+)?(\d+(?:\.\d+)?)([KMGT])?$`)

// resizeDisk is PUT /nodes/{node}/qemu/{vmid}/resize (PVE 8+: a "resize" task). The checks
// before the worker answer 500: "disk 'x' does not exist", "you can't resize a cdrom"
// (Cloud-Init drives included), "shrinking disks is not supported"; a size without "+" is
// absolute, with "+" it is added; the drive's size option is updated by the task.
func (s *Server) resizeDisk(c *call, g *guest) answer {
	p := c.params
	disk, size := p.Get("disk"), p.Get("size")
	errs := map[string]string{}
	if !p.Has("disk") {
		errs["disk"] = "property is missing and it is not optional"
	} else if !diskKeyRe.MatchString(disk) {
		errs["disk"] = fmt.Sprintf("value '%s' does not have a value in the enumeration", disk)
	}
	m := resizeSizeRe.FindStringSubmatch(size)
	if !p.Has("size") {
		errs["size"] = "property is missing and it is not optional"
	} else if m == nil {
		errs["size"] = "value does not match the regex pattern"
	}
	if len(errs) > 0 {
		return paramFail(errs)
	}
	d, a, ok := configuredDrive(g, disk, true)
	if !ok {
		return a
	}
	if d.cdrom(true) {
		return fail(http.StatusInternalServerError, "you can't resize a cdrom")
	}
	cur, known := diskBytes(d)
	if !known {
		return fail(http.StatusInternalServerError, fmt.Sprintf("Could not determine current size of volume '%s'", d.file))
	}
	n, _ := strconv.ParseFloat(m[2], 64)
	n *= float64(unitBytes(m[3]))
	if m[1] == "+" {
		n += float64(cur)
	}
	newSize := int64(math.Floor(n))
	if newSize < cur {
		return fail(http.StatusInternalServerError, "shrinking disks is not supported")
	}
	return s.startTask(c, g, "resize", "", "", func(time.Time) {
		d.setOpt("size", formatSize(newSize))
		g.config[disk] = d.String()
	})
}

// unitBytes is the multiplier of a K/M/G/T suffix ("" = bytes).
func unitBytes(u string) int64 {
	switch u {
	case "K":
		return 1 << 10
	case "M":
		return 1 << 20
	case "G":
		return 1 << 30
	case "T":
		return 1 << 40
	}
	return 1
}

// diskBytes is the drive's size option in bytes.
func diskBytes(d drive) (int64, bool) {
	v, found := d.opt("size")
	if !found || v == "" {
		return 0, false
	}
	unit := v[len(v)-1:]
	num := v
	if unitBytes(unit) > 1 {
		num = v[:len(v)-1]
	} else {
		unit = ""
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, false
	}
	return int64(f * float64(unitBytes(unit))), true
}

// formatSize prints a size as qemu-server's format_size does: the largest unit that
// divides it exactly.
func formatSize(b int64) string {
	for _, u := range []string{"T", "G", "M", "K"} {
		if ub := unitBytes(u); b%ub == 0 && b >= ub {
			return strconv.FormatInt(b/ub, 10) + u
		}
	}
	return strconv.FormatInt(b, 10)
}
