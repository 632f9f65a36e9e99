package tracing

import "testing"

// TestScrubURL pins what url.full keeps when a span leaves the process: scheme, host and path;
// never the query, the fragment or the user part.
func TestScrubURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"https://pve1:8006/api2/json/nodes/pve1/qemu", "https://pve1:8006/api2/json/nodes/pve1/qemu"},
		{"https://pve1:8006/api2/json/storage?secret=CANARY", "https://pve1:8006/api2/json/storage"},
		{"https://user:CANARY@netbox/api/extras/journal-entries/?q=cmd#frag", "https://netbox/api/extras/journal-entries/"},
		{"https://netbox/api/?", "https://netbox/api/"},
		{"://bad url", ""},
	}
	for _, tt := range tests {
		if got := scrubURL(tt.in); got != tt.want {
			t.Errorf("scrubURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
