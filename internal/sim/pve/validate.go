package simpve

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// storageIDRe is pve-storage-id's pattern (pve-common src/PVE/JSONSchema.pm, parse_id).
var storageIDRe = regexp.MustCompile(`(?i)^[a-z][a-z0-9\-_.]*[a-z0-9]$`)

// checkStorageID checks the storage of a volume ID inside a value (the schema checks the
// parameters themselves); "" when valid.
func checkStorageID(id string) string {
	if !storageIDRe.MatchString(id) {
		return fmt.Sprintf("invalid format - storage ID '%s' contains illegal characters", id)
	}
	return ""
}

// perlInt is the integer value of a parameter the schema checked as an integer (an
// optional sign; Perl also allows a final newline); 0 when absent.
func perlInt(v string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(v))
	return n
}
