package pveparam

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrUndefinedFormat reports a format the schema names that no verifier here ports.
var ErrUndefinedFormat = errors.New("undefined format")

// checkFormat is check_format (src/PVE/JSONSchema.pm) for a named format: "name-list"
// checks each item of split_list (an empty list passes), "name-opt" checks a value that is
// not false, a property-string format parses the value, any other calls the verifier.
func checkFormat(format, value, path string) error {
	if format == "regex" {
		return nil
	}
	name, kind := format, ""
	for _, suffix := range []string{"-list", "-opt"} {
		if n, ok := strings.CutSuffix(format, suffix); ok {
			name, kind = n, suffix
			break
		}
	}
	verify := verifier(name)
	hash, isHash := hashFormat(name)
	if verify == nil && !isHash {
		return fmt.Errorf("%w '%s'\n", ErrUndefinedFormat, format)
	}
	if kind != "" && isHash {
		return fmt.Errorf("'%s' format must have code ref, not hash\n", kind)
	}
	switch kind {
	case "-list":
		for _, item := range splitList(value) {
			if err := verify(item); err != nil {
				return err
			}
		}
		return nil
	case "-opt":
		if value == "" || value == "0" {
			return nil
		}
		return verify(value)
	}
	if isHash {
		return parsePropertyString(hash.props, hash.validate, value, path)
	}
	return verify(value)
}

var (
	listSeparators = regexp.MustCompile(`[,;]`)
	perlSpace      = regexp.MustCompile(`[\s\x{85}\p{Z}]+`) // Perl's \s on a character string
)

// splitList is split_list (src/PVE/ParseUtils.pm): at NUL bytes when there are any,
// otherwise at commas, semicolons and white space.
func splitList(s string) []string {
	if strings.Contains(s, "\x00") {
		return perlSplit(s, "\x00")
	}
	s = listSeparators.ReplaceAllString(s, " ")
	if loc := perlSpace.FindStringIndex(s); loc != nil && loc[0] == 0 {
		s = s[loc[1]:]
	}
	if s == "" {
		return nil
	}
	fields := perlSpace.Split(s, -1)
	for len(fields) > 0 && fields[len(fields)-1] == "" {
		fields = fields[:len(fields)-1]
	}
	return fields
}

// verifier returns the verifier of a code-ref format (nil when there is none). A verifier
// returns PVE's die message, newline included. The functions named without a file are
// pve-common's src/PVE/JSONSchema.pm.
func verifier(name string) func(string) error {
	switch name {
	case "string":
		return func(string) error { return nil }
	case "urlencoded": // pve_verify_urlencoded
		return matching(urlencodedRe, "invalid urlencoded string: %s")
	case "pve-configid": // pve_verify_configid: $CONFIGID_RE, so two characters at least, '-' allowed
		return matching(configIDRe, "invalid configuration ID '%s'")
	case "pve-storage-id":
		return verifyStorageID
	case "pve-bridge-id": // parse_bridge_id
		return matching(bridgeIDRe, "invalid bridge ID '%s'")
	case "pve-vmid": // pve_verify_vmid: /^[1-9][0-9]{2,8}$/
		return matching(vmidRe, "value does not look like a valid VM ID")
	case "pve-node": // pve_verify_node_name
		return matching(nodeNameRe, "value does not look like a valid node name")
	case "storage-pair":
		return verifyStoragePair
	case "mac-addr": // pve_verify_mac_addr: unicast only
		return matching(macAddrRe, "value does not look like a valid unicast MAC address")
	case "ipv4": // pve_verify_ipv4
		return matching(ipv4Re, "value does not look like a valid IPv4 address")
	case "ipv6": // pve_verify_ipv6
		return matching(ipv6Re, "value does not look like a valid IPv6 address")
	case "ip":
		return verifyIP
	case "pve-ipv4-config":
		return verifyIPv4Config
	case "pve-ipv6-config":
		return verifyIPv6Config
	case "dns-name":
		return verifyDNSName
	case "address":
		return verifyAddress
	case "disk-size": // pve_verify_disk_size with parse_size's pattern
		return matching(diskSizeRe, "value does not look like a valid disk size: %s")
	case "pve-tag": // pve_verify_tag, used as pve-tag-list
		return matching(tagRe, "invalid characters in tag")
	case "pve-storage-server":
		return verifyStorageServer
	case "pve-storage-content":
		return verifyContent
	case "pve-volume-id":
		return verifyVolumeID
	case "pve-volume-id-or-qm-path":
		return verifyVolumeIDOrQMPath
	case "pve-volume-id-or-absolute-path":
		return verifyVolumeIDOrAbsolutePath
	case "pve-qm-bootdev":
		return verifyBootdev
	case "pve-phys-bits":
		return verifyPhysBits
	case "lxc-ip-with-ll-iface":
		return verifyIPWithLLIface
	case "pve-lxc-mp-string":
		return verifyLXCMPString
	}
	return nil
}

// hashFormatDef is a named property-string format and its validator.
type hashFormatDef struct {
	props    map[string]Schema
	validate func(map[string]string) error
}

// hashFormat returns a named property-string format.
func hashFormat(name string) (hashFormatDef, bool) {
	switch name {
	case "prune-backups":
		return hashFormatDef{props: pruneBackupsFormat(), validate: validatePruneBackups}, true
	case "pve-qm-ipconfig":
		return hashFormatDef{props: ipconfigFormat()}, true
	case "pve-qm-boot":
		return hashFormatDef{props: bootFormat()}, true
	case "pve-vm-cpu-conf":
		return hashFormatDef{props: cpuFormat(), validate: validateVMCPUConf}, true
	}
	return hashFormatDef{}, false
}

// matching is a verifier of the form `die "msg\n" if $value !~ m/^RE$/`; msg may hold the
// value once (%s).
func matching(re *regexp.Regexp, msg string) func(string) error {
	return func(v string) error {
		if re.MatchString(v) {
			return nil
		}
		if strings.Contains(msg, "%s") {
			return fmt.Errorf(msg+"\n", v)
		}
		return errors.New(msg + "\n")
	}
}

// perlRe compiles a Perl pattern matched as m/^(?:…)$/: $ also before a final newline.
func perlRe(pattern string) *regexp.Regexp {
	return regexp.MustCompile(`^(?:` + perlClasses(pattern) + `)\n?$`)
}

// Patterns of src/PVE/JSONSchema.pm and src/PVE/ParseUtils.pm (pve-common).
var (
	urlencodedRe = perlRe(`[-%a-zA-Z0-9_.!~*'()]*`)
	configIDRe   = perlRe(`(?i:[a-z][a-z0-9_-]+)`) // $CONFIGID_RE
	idRe         = perlRe(`(?i:[a-z][a-z0-9\-\_\.]*[a-z0-9])`)
	bridgeIDRe   = perlRe(`[-_.\w\d]+`)
	vmidRe       = perlRe(`[1-9][0-9]{2,8}`)
	nodeNameRe   = perlRe(`[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?`)
	macAddrRe    = perlRe(`(?i:[a-f0-9][02468ace](?::[a-f0-9]{2}){5})`)
	ipv4Octet    = `(?:25[0-5]|(?:2[0-4]|1[0-9]|[1-9])?[0-9])`
	ipv4RE       = `(?:(?:` + ipv4Octet + `\.){3}` + ipv4Octet + `)`
	ipv6H16      = `(?:[0-9a-fA-F]{1,4})`
	ipv6LS32     = `(?:(?:` + ipv4RE + `|` + ipv6H16 + `:` + ipv6H16 + `))`
	ipv6RE       = `(?:` +
		`(?:(?:(?:` + ipv6H16 + `:){6})` + ipv6LS32 + `)|` +
		`(?:(?:::(?:` + ipv6H16 + `:){5})` + ipv6LS32 + `)|` +
		`(?:(?:(?:` + ipv6H16 + `)?::(?:` + ipv6H16 + `:){4})` + ipv6LS32 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,1}` + ipv6H16 + `)?::(?:` + ipv6H16 + `:){3})` + ipv6LS32 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,2}` + ipv6H16 + `)?::(?:` + ipv6H16 + `:){2})` + ipv6LS32 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,3}` + ipv6H16 + `)?::(?:` + ipv6H16 + `:){1})` + ipv6LS32 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,4}` + ipv6H16 + `)?::)` + ipv6LS32 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,5}` + ipv6H16 + `)?::)` + ipv6H16 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,6}` + ipv6H16 + `)?::)))`
	ipv4Re      = perlRe(ipv4RE)
	ipv6Re      = perlRe(ipv6RE)
	ipRe        = perlRe(ipv4RE + `|` + ipv6RE)
	cidrv4Re    = regexp.MustCompile(`^(?:` + ipv4RE + `)(?:/(\p{Nd}+))\n?$`)
	cidrv6Re    = regexp.MustCompile(`^(?:` + ipv6RE + `)(?:/(\p{Nd}+))\n?$`)
	dnsNameRe   = perlRe(`(([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)\.)*([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)`)
	diskSizeRe  = perlRe(`(\d+(\.\d+)?)([KMGT](?:iB)?)?`)
	tagRe       = perlRe(`(?i:[a-z0-9_][a-z0-9_\-\+\.]*)`) // $PVE_TAG_RE
	ipConfigKw4 = perlRe(`dhcp|manual`)
	ipConfigKw6 = perlRe(`auto|dhcp|manual`)
)

// verifyStorageID is parse_storage_id and parse_id (pve-common src/PVE/JSONSchema.pm).
func verifyStorageID(s string) error { return parseID(s, "storage") }

func parseID(id, typ string) error {
	if len([]rune(id)) < 2 {
		return fmt.Errorf("%s ID '%s' cannot be shorter than 2 characters\n", typ, id)
	}
	if !idRe.MatchString(id) {
		return fmt.Errorf("%s ID '%s' contains illegal characters\n", typ, id)
	}
	return nil
}

// verifyStoragePair is verify_storagepair, i.e. $verify_idpair over parse_idmap with
// pve-storage-id (pve-common src/PVE/JSONSchema.pm): "1" (identity), "source:target" pairs
// and at most one default target, each a storage ID.
func verifyStoragePair(s string) error {
	if err := parseIDMap(s, verifyStorageID); err != nil {
		return fmt.Errorf("%s\n", err.Error())
	}
	return nil
}

var pairRe = regexp.MustCompile(`^([^:]+):([^:]+)\n?$`)

// parseIDMap is parse_idmap (pve-common src/PVE/JSONSchema.pm).
func parseIDMap(idmap string, verify func(string) error) error {
	if idmap == "" || idmap == "0" {
		return nil
	}
	identity, hasDefault := false, false
	entries := map[string]bool{}
	for _, entry := range splitList(idmap) {
		if entry == "1" {
			identity = true
			continue
		}
		if m := pairRe.FindStringSubmatch(entry); m != nil {
			for _, id := range m[1:] {
				if err := verify(id); err != nil {
					return fmt.Errorf("entry '%s' contains invalid ID - %s\n", entry, err.Error())
				}
			}
			if entries[m[1]] {
				return fmt.Errorf("duplicate mapping for source '%s'\n", m[1])
			}
			entries[m[1]] = true
			continue
		}
		if err := verify(entry); err != nil {
			return fmt.Errorf("entry '%s' contains invalid ID - %s\n", entry, err.Error())
		}
		if hasDefault {
			return errors.New("default target ID can only be provided once\n")
		}
		hasDefault = true
	}
	if identity && (hasDefault || len(entries) > 0) {
		return errors.New("identity mapping cannot be combined with other mappings\n")
	}
	return nil
}

// verifyIP is pve_verify_ip (pve-common src/PVE/JSONSchema.pm).
func verifyIP(s string) error {
	if !ipRe.MatchString(s) {
		return errors.New("value does not look like a valid IP address\n")
	}
	return nil
}

// cidr is pve_verify_cidrv4/pve_verify_cidrv6 (pve-common src/PVE/JSONSchema.pm): an
// address with a prefix length above 7 and at most max.
func cidr(re *regexp.Regexp, s string, max int) bool {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return false
	}
	n := numify(m[1])
	return n > 7 && n <= float64(max)
}

// verifyIPv4Config is pve_verify_ipv4_config (pve-common src/PVE/JSONSchema.pm).
func verifyIPv4Config(s string) error {
	if ipConfigKw4.MatchString(s) || cidr(cidrv4Re, s, 32) {
		return nil
	}
	return errors.New("value does not look like a valid ipv4 network configuration\n")
}

// verifyIPv6Config is pve_verify_ipv6_config (pve-common src/PVE/JSONSchema.pm).
func verifyIPv6Config(s string) error {
	if ipConfigKw6.MatchString(s) || cidr(cidrv6Re, s, 128) {
		return nil
	}
	return errors.New("value does not look like a valid ipv6 network configuration\n")
}

// verifyDNSName is pve_verify_dns_name (pve-common src/PVE/JSONSchema.pm).
func verifyDNSName(s string) error {
	if !dnsNameRe.MatchString(s) {
		return errors.New("value does not look like a valid DNS name\n")
	}
	return nil
}

// verifyAddress is pve_verify_address (pve-common src/PVE/JSONSchema.pm): an IP address or
// a DNS name; "[fe80::1]" is neither.
func verifyAddress(s string) error {
	if verifyIP(s) != nil && verifyDNSName(s) != nil {
		return fmt.Errorf("value does not look like a valid address: %s\n", s)
	}
	return nil
}
