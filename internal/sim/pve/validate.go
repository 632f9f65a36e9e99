package simpve

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// storageTypes is the enum of POST /storage's type parameter (PVE 9.2 schema).
var storageTypes = []string{"btrfs", "cephfs", "cifs", "dir", "esxi", "iscsi", "iscsidirect", "lvm", "lvmthin", "nfs", "pbs", "rbd", "zfs", "zfspool"}

// contentTypes are the values of pve-storage-content-list.
var contentTypes = []string{"images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import", "none"}

var (
	storageIDRe   = regexp.MustCompile(`(?i)^[a-z][a-z0-9\-_.]*[a-z0-9]$`)
	fingerprintRe = regexp.MustCompile(`^([A-Fa-f0-9]{2}:){31}[A-Fa-f0-9]{2}$`)
	integerRe     = regexp.MustCompile(`^[+-]?\d+$`)
	nodeNameRe    = regexp.MustCompile(`(?i)^[a-z0-9]([a-z0-9\-]*[a-z0-9])?$`)
	dnsNameRe     = regexp.MustCompile(`(?i)^([a-z0-9]([a-z0-9\-]*[a-z0-9])?\.)*[a-z0-9]([a-z0-9\-]*[a-z0-9])?$`)
	pruneKeys     = []string{"keep-all", "keep-last", "keep-hourly", "keep-daily", "keep-weekly", "keep-monthly", "keep-yearly"}
)

// checkStorageID is pve-storage-id; "" when valid.
func checkStorageID(id string) string {
	if !storageIDRe.MatchString(id) {
		return fmt.Sprintf("invalid format - storage ID '%s' contains illegal characters", id)
	}
	return ""
}

// checkCreateSchema validates the parameters this simulator accepts for POST /storage the
// way PVE's JSON schema does, returning per-parameter errors.
func checkCreateSchema(p paramsGetter) map[string]string {
	errs := map[string]string{}
	req := func(k string) (string, bool) {
		if !p.Has(k) {
			errs[k] = "property is missing and it is not optional"
			return "", false
		}
		return p.Get(k), true
	}
	if id, ok := req("storage"); ok {
		if msg := checkStorageID(id); msg != "" {
			errs["storage"] = msg
		}
	}
	if typ, ok := req("type"); ok && !contains(storageTypes, typ) {
		errs["type"] = fmt.Sprintf("value '%s' does not have a value in the enumeration '%s'", typ, strings.Join(storageTypes, ", "))
	}
	if p.Has("port") {
		v := p.Get("port")
		n, err := strconv.Atoi(v)
		switch {
		case !integerRe.MatchString(v) || err != nil:
			errs["port"] = fmt.Sprintf("type check ('integer') failed - got '%s'", v)
		case n < 1:
			errs["port"] = "value must have a minimum value of 1"
		case n > 65535:
			errs["port"] = "value must have a maximum value of 65535"
		}
	}
	if p.Has("fingerprint") && !fingerprintRe.MatchString(p.Get("fingerprint")) {
		errs["fingerprint"] = "value does not match the regex pattern"
	}
	if p.Has("server") {
		v := p.Get("server")
		if net.ParseIP(strings.Trim(v, "[]")) == nil && !dnsNameRe.MatchString(v) {
			errs["server"] = "invalid format - value does not look like a valid server name or IP address"
		}
	}
	if p.Has("nodes") {
		for _, n := range splitList(p.Get("nodes")) {
			if !nodeNameRe.MatchString(n) {
				errs["nodes"] = fmt.Sprintf("invalid format - value '%s' does not look like a valid node name", n)
				break
			}
		}
	}
	if p.Has("content") {
		for _, ct := range splitList(p.Get("content")) {
			if !contains(contentTypes, ct) {
				errs["content"] = fmt.Sprintf("invalid format - invalid content type '%s'", ct)
				break
			}
		}
	}
	if p.Has("prune-backups") {
		if msg := checkPrune(p.Get("prune-backups")); msg != "" {
			errs["prune-backups"] = msg
		}
	}
	if p.Has("password") && len(p.Get("password")) > 256 {
		errs["password"] = "value may only be 256 characters long"
	}
	return errs
}

// paramsGetter is the part of url.Values the checks use.
type paramsGetter interface {
	Has(string) bool
	Get(string) string
}

// checkPrune validates the prune-backups property string; "" when valid.
func checkPrune(v string) string {
	others := 0
	keepAll := false
	for _, kv := range splitList(v) {
		k, val, found := strings.Cut(kv, "=")
		if !found || !contains(pruneKeys, k) {
			return fmt.Sprintf("invalid format - format error\n%s: property is not defined in schema and the schema does not allow additional properties", k)
		}
		if k == "keep-all" {
			switch val {
			case "1", "yes", "on", "true":
				keepAll = true
			case "0", "no", "off", "false":
			default:
				return fmt.Sprintf("invalid format - format error\nkeep-all: type check ('boolean') failed - got '%s'", val)
			}
			continue
		}
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return fmt.Sprintf("invalid format - format error\n%s: type check ('integer') failed - got '%s'", k, val)
		}
		if n > 0 {
			others++
		}
	}
	if keepAll && others > 0 {
		return "invalid format - keep-all cannot be set together with other options."
	}
	return ""
}
