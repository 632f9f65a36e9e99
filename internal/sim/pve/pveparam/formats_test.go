package pveparam

import (
	"strings"
	"testing"
)

// formatCase is one value of a format: want "" when PVE accepts it, else the start of
// PVE's message.
type formatCase struct {
	format, value, want string
}

func runFormatCases(t *testing.T, cases []formatCase) {
	t.Helper()
	for _, tc := range cases {
		err := checkFormat(tc.format, tc.value, "p")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %q: refused (%v), PVE accepts it", tc.format, tc.value, err)
		case tc.want != "" && err == nil:
			t.Errorf("%s %q: accepted, PVE refuses it with %q", tc.format, tc.value, tc.want)
		case tc.want != "" && !strings.HasPrefix(err.Error(), tc.want):
			t.Errorf("%s %q: message %q, want %q…", tc.format, tc.value, err.Error(), tc.want)
		}
	}
}

// TestConfigID uses pve-common's own cases (test/format_test.pl) and snapshot names.
func TestConfigID(t *testing.T) {
	t.Parallel()
	var cases []formatCase
	for _, v := range []string{"aa", "a0", "a_", "a-", "a-a", strings.Repeat("a", 100), "Aa", "AA", "snap-1", "before_upgrade"} {
		cases = append(cases, formatCase{"pve-configid", v, ""})
	}
	for _, v := range []string{"a", "a+", "1a", "_a", "-a", "+a", "A", "snap 1", "snap.1", ""} {
		cases = append(cases, formatCase{"pve-configid", v, "invalid configuration ID '" + v + "'"})
	}
	runFormatCases(t, cases)
}

func TestCommonFormats(t *testing.T) {
	t.Parallel()
	runFormatCases(t, []formatCase{
		{"pve-vmid", "100", ""},
		{"pve-vmid", "999999999", ""},
		{"pve-vmid", "100\n", ""}, // Perl's $ matches before a final newline
		{"pve-vmid", "0100", "value does not look like a valid VM ID"},
		{"pve-vmid", "+100", "value does not look like a valid VM ID"},
		{"pve-vmid", "99", "value does not look like a valid VM ID"},
		{"pve-vmid", "1000000000", "value does not look like a valid VM ID"},
		{"pve-vmid-list", "100,101 102;103", ""},
		{"pve-vmid-list", "", ""},
		{"pve-vmid-list", "100,abc", "value does not look like a valid VM ID"},
		{"pve-node", "pve1", ""},
		{"pve-node", "a", ""},
		{"pve-node", "node-a", ""},
		{"pve-node", "-pve", "value does not look like a valid node name"},
		{"pve-node", "pve-", "value does not look like a valid node name"},
		{"pve-node", "pve.example", "value does not look like a valid node name"},
		{"pve-node-list", "pve1,pve2", ""},
		{"pve-node-list", "pve1,pve_2", "value does not look like a valid node name"},
		{"pve-storage-id", "local-lvm", ""},
		{"pve-storage-id", "pbs.1", ""},
		{"pve-storage-id", "s", "storage ID 's' cannot be shorter than 2 characters"},
		{"pve-storage-id", "1pbs", "storage ID '1pbs' contains illegal characters"},
		{"pve-storage-id", "pbs-", "storage ID 'pbs-' contains illegal characters"},
		{"pve-bridge-id", "vmbr0", ""},
		{"pve-bridge-id", "vmbr0.100", ""},
		{"pve-bridge-id", "vmbr 0", "invalid bridge ID 'vmbr 0'"},
		{"mac-addr", "BC:24:11:00:00:01", ""},
		{"mac-addr", "01:24:11:00:00:01", "value does not look like a valid unicast MAC address"},
		{"mac-addr", "bc:24:11:00:00", "value does not look like a valid unicast MAC address"},
		{"dns-name", "web-1.example.com", ""},
		{"dns-name", "web_1", "value does not look like a valid DNS name"},
		{"dns-name", "-web", "value does not look like a valid DNS name"},
		{"address-list", "192.0.2.53 2001:db8::53", ""},
		{"address-list", "dns.example", ""},
		{"address-list", "[fe80::1]", "value does not look like a valid address: [fe80::1]"},
		{"pve-tag-list", "prod;web,db", ""},
		{"pve-tag-list", "a b", ""},
		{"pve-tag-list", "prod/web", "invalid characters in tag"},
		{"urlencoded", "ssh-ed25519%20AAAA%0A", ""},
		{"urlencoded", "ssh-ed25519 AAAA", "invalid urlencoded string: ssh-ed25519 AAAA"},
		{"storage-pair-list", "local-lvm", ""},
		{"storage-pair-list", "local:fast,slow:bulk", ""},
		{"storage-pair-list", "1", ""},
		// check_format verifies a -list item by item: the whole-map rules of parse_idmap are
		// the method's, not the schema's.
		{"storage-pair-list", "1,local", ""},
		{"storage-pair-list", "aa:bb,aa:cc", ""},
		{"storage-pair-list", "aa,bb", ""},
		{"storage-pair-list", "a:bb", "entry 'a:bb' contains invalid ID - storage ID 'a' cannot be shorter than 2 characters"},
		{"disk-size", "32G", ""},
		{"disk-size", "1.5TiB", ""},
		{"disk-size", "32GB", "value does not look like a valid disk size: 32GB"},
		{"ipv4", "192.0.2.1", ""},
		{"ipv4", "192.0.2.256", "value does not look like a valid IPv4 address"},
		{"ipv6", "2001:db8::1", ""},
		{"ipv6", "2001:db8:::1", "value does not look like a valid IPv6 address"},
		{"pve-ipv4-config", "dhcp", ""},
		{"pve-ipv4-config", "192.0.2.10/24", ""},
		{"pve-ipv4-config", "192.0.2.10/7", "value does not look like a valid ipv4 network configuration"},
		{"pve-ipv4-config", "192.0.2.10", "value does not look like a valid ipv4 network configuration"},
		{"pve-ipv4-config", "auto", "value does not look like a valid ipv4 network configuration"},
		{"pve-ipv6-config", "auto", ""},
		{"pve-ipv6-config", "2001:db8::10/64", ""},
		{"pve-ipv6-config", "2001:db8::10/129", "value does not look like a valid ipv6 network configuration"},
		{"no-such-format", "x", "undefined format 'no-such-format'"},
	})
}

func TestStorageFormats(t *testing.T) {
	t.Parallel()
	runFormatCases(t, []formatCase{
		{"pve-storage-content", "backup", ""},
		{"pve-storage-content", "import", ""},
		{"pve-storage-content", "vztmpl", ""},
		{"pve-storage-content", "backups", "invalid content type 'backups'"},
		{"pve-storage-content-list", "backup,iso", ""},
		{"pve-storage-content-list", "backup,isos", "invalid content type 'isos'"},
		{"pve-storage-server", "pbs.example.com", ""},
		{"pve-storage-server", "192.0.2.5", ""},
		{"pve-storage-server", "fe80::1", ""},
		{"pve-storage-server", "[fe80::1]", "value does not look like a valid server name or IP address"},
		{"pve-storage-server", "pbs.example.com:8007", "value does not look like a valid server name or IP address"},
		{"prune-backups", "keep-all=1", ""},
		{"prune-backups", "keep-all=yes", ""}, // parse_boolean inside property strings
		{"prune-backups", "keep-last=3,keep-daily=7", ""},
		{"prune-backups", "keep-all=1,keep-last=0", ""},
		{"prune-backups", "keep-all=1,keep-last=2", "keep-all cannot be set together with other options."},
		{"prune-backups", "keep-last=1,keep-last=2", "duplicate key in comma-separated list property: keep-last"},
		{"prune-backups", "keep-last=-1", "format error\np.keep-last: value must have a minimum value of 0"},
		{"prune-backups", "keep-last=x", "format error\np.keep-last: type check ('integer') failed - got 'x'"},
		{"prune-backups", "keep-all=maybe", "format error\np.keep-all: type check ('boolean') failed - got 'maybe'"},
		{"prune-backups", "keep-forever=1", "invalid key in comma-separated list property: keep-forever"},
		{"prune-backups", "keep-last=", "missing key in comma-separated list property"},
		{"prune-backups", "3", "value without key, but schema does not define a default key"},
		{"pve-volume-id", "local:iso/x.iso", ""},
		{"pve-volume-id", "x.iso", "unable to parse volume ID 'x.iso'"},
		{"pve-volume-id-or-qm-path", "none", ""},
		{"pve-volume-id-or-qm-path", "cdrom", ""},
		{"pve-volume-id-or-qm-path", "/dev/sdb", ""},
		{"pve-volume-id-or-qm-path", "local-lvm:vm-100-disk-0", ""},
		{"pve-volume-id-or-qm-path", "vm-100-disk-0", "unable to parse volume ID 'vm-100-disk-0'"},
		{"pve-volume-id-or-absolute-path", "cdrom", "unable to parse volume ID 'cdrom'"},
	})
}

func TestQemuFormats(t *testing.T) {
	t.Parallel()
	runFormatCases(t, []formatCase{
		{"pve-qm-ipconfig", "ip=dhcp", ""},
		{"pve-qm-ipconfig", "ip=192.0.2.10/24,gw=192.0.2.1", ""},
		{"pve-qm-ipconfig", "ip6=auto", ""},
		{"pve-qm-ipconfig", "ip=192.0.2.10/24,ip6=2001:db8::10/64,gw6=2001:db8::1", ""},
		{"pve-qm-ipconfig", "gw=192.0.2.1", "format error\np.ip: missing property required by 'p.gw'"},
		{"pve-qm-ipconfig", "ip6=auto,gw=192.0.2.1", "format error\np.ip: missing property required by 'p.gw'"},
		{"pve-qm-ipconfig", "ip=192.0.2.10", "format error\np.ip: invalid format - value does not look like a valid ipv4 network configuration"},
		{"pve-qm-ipconfig", "dhcp", "value without key, but schema does not define a default key"},
		{"pve-qm-boot", "order=scsi0;ide2;net0", ""},
		{"pve-qm-boot", "cdn", ""},
		{"pve-qm-boot", "order=scsi31", "format error\np.order: invalid format - invalid boot device 'scsi31'"},
		{"pve-qm-boot", "order=efidisk0", "format error\np.order: invalid format - invalid boot device 'efidisk0'"},
		{"pve-qm-boot", "xyz", "format error\np.legacy: value does not match the regex pattern"},
		{"pve-vm-cpu-conf", "host", ""},
		{"pve-vm-cpu-conf", "x86-64-v2-AES", ""},
		{"pve-vm-cpu-conf", "cputype=kvm64,flags=+aes;-pcid", ""},
		{"pve-vm-cpu-conf", "host,hidden=1,phys-bits=host", ""},
		{"pve-vm-cpu-conf", "flags=+aes", "CPU is missing cputype"},
		{"pve-vm-cpu-conf", "hostt", "Built-in cputype 'hostt' is not defined (missing 'custom-' prefix?)"},
		{"pve-vm-cpu-conf", "custom-fast", "Custom cputype 'fast' not found"},
		{"pve-vm-cpu-conf", "host,flags=+avx", "VM-specific CPU flags must be a subset of: aes, amd-no-ssb"},
		{"pve-vm-cpu-conf", "host,reported-model=qemu64", "Property 'reported-model' not allowed in VM-specific CPU config."},
		{"pve-vm-cpu-conf", "host,phys-bits=7", "format error\np.phys-bits: invalid format - value must be an integer between 8 and 64 or 'host'"},
		{"pve-vm-cpu-conf", "host,hidden=maybe", "format error\np.hidden: type check ('boolean') failed - got 'maybe'"},
	})
}

func TestSplitList(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"a,b;c d":      "a|b|c|d",
		" a,,b ":       "a|b",
		"":             "",
		"a\x00b,c":     "a|b,c",
		",":            "",
		"a\t\nb":       "a|b",
		"100":          "100",
		" ;100 ,  ":    "100",
		"100\u00a0101": "100|101", // \s is Unicode's
	} {
		if got := strings.Join(splitList(in), "|"); got != want {
			t.Errorf("splitList(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPerlCharacterClasses: PVE matches decoded character strings, where Perl's \d, \w and
// \s are Unicode's, and $ also matches before a final newline.
func TestPerlCharacterClasses(t *testing.T) {
	t.Parallel()
	runFormatCases(t, []formatCase{
		{"pve-bridge-id", "vmbré0", ""},     // \w is Unicode's
		{"pve-bridge-id", "vmbr\u0661", ""}, // so is \d
		{"pve-bridge-id", "vmbr0\n", ""},    // $ before a final newline
		{"pve-bridge-id", "vmbr0\n\n", "invalid bridge ID"},
		{"disk-size", "\u0661\u0660G", ""},
		{"pve-vmid", "\u0661\u0660\u0660", "value does not look like a valid VM ID"}, // [0-9] is ASCII
		{"pve-ipv4-config", "192.0.2.10/24\n", ""},
		{"pve-ipv4-config", "192.0.2.10/\u0662\u0664", "value does not look like a valid ipv4 network configuration"}, // numifies to 0
	})
	for pattern, cases := range map[string]map[string]bool{
		`[-_.\w\d]+`:          {"a-b": true, "é": true, "a b": false, "]": false},
		`\s+`:                 {" \t": true, "\u00a0": true, "x": false},
		`[^\d]+`:              {"ab": true, "a1": false},
		`[]a]+`:               {"]a": true, "b": false},
		`(/dev/[^,]+|socket)`: {"/dev/ttyS0": true, "socket": true, "/dev/a,b": false},
	} {
		for v, want := range cases {
			if got := perlMatch(pattern, v); got != want {
				t.Errorf("%q =~ /^%s$/ = %v, want %v", v, pattern, got, want)
			}
		}
	}
}
