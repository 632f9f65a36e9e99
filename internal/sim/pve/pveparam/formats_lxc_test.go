package pveparam

import "testing"

// TestLXCFormats pins the ports of pve-container's formats: nameserver lists with a
// link-local address's interface, mount point strings without path escapes.
func TestLXCFormats(t *testing.T) {
	t.Parallel()
	tests := []struct {
		format, value string
		ok            bool
	}{
		{"lxc-ip-with-ll-iface-list", "192.0.2.53 2001:db8::53", true},
		{"lxc-ip-with-ll-iface-list", "fe80::1%eth0", true},
		{"lxc-ip-with-ll-iface-list", "fe80::1%0bad", false},
		{"lxc-ip-with-ll-iface-list", "dns.example", false},
		{"pve-lxc-mp-string", "local-lvm:8", true},
		{"pve-lxc-mp-string", "/mnt/../etc", false},
		{"pve-lxc-mp-string", "../x", false},
	}
	for _, tt := range tests {
		if err := checkFormat(tt.format, tt.value, "p"); (err == nil) != tt.ok {
			t.Errorf("%s %q: %v, want ok %v", tt.format, tt.value, err, tt.ok)
		}
	}
}
