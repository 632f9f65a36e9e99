package pveparam

import (
	"fmt"
	"regexp"
)

var (
	// linkLocalIfaceRe splits a link-local IPv6 address with its interface, "fe80::1%eth0".
	linkLocalIfaceRe = regexp.MustCompile(`^(fe80:[^%]+)%(.*)$`)
	// ifaceRe is pve_verify_iface's pattern (pve-common src/PVE/JSONSchema.pm).
	ifaceRe = regexp.MustCompile(`(?i)^[a-z][a-z0-9_]{1,20}([:.]\d+)?$`)
	// mpIllegalRe are the sequences verify_lxc_mp_string refuses: /./ or /../, /. or /.. at
	// the end, ../ at the beginning.
	mpIllegalRe = regexp.MustCompile(`/\.\.?/|/\.\.?$|^\.\./`)
)

// verifyIPWithLLIface is pve-container's verify_ip_with_ll_iface (src/PVE/LXC/Config.pm,
// format lxc-ip-with-ll-iface, used as a list for nameserver): an IP address, or a
// link-local IPv6 address with "%interface".
func verifyIPWithLLIface(s string) error {
	if m := linkLocalIfaceRe.FindStringSubmatch(s); m != nil && ipRe.MatchString(m[1]) && ifaceRe.MatchString(m[2]) {
		return nil
	}
	return verifyIP(s)
}

// verifyLXCMPString is pve-container's verify_lxc_mp_string (src/PVE/LXC/Config.pm, format
// pve-lxc-mp-string: a mount point's volume or path).
func verifyLXCMPString(s string) error {
	if mpIllegalRe.MatchString(s) {
		return fmt.Errorf("%s contains illegal character sequences\n", s)
	}
	return nil
}
