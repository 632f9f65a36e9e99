package proxmox_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

func TestAPIOperation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, url, want string
	}{
		{"GET", "https://pve:8006/api2/json/version", "GET /version"},
		{"GET", "https://pve:8006/api2/json/cluster/resources?type=vm", "GET /cluster/resources"},
		{"POST", "https://pve:8006/api2/json/nodes/pve1/qemu/101/status/start", "POST /nodes/{node}/qemu/{vmid}/status/start"},
		{"POST", "https://pve:8006/api2/json/nodes/pve2/lxc/202/status/stop", "POST /nodes/{node}/lxc/{vmid}/status/stop"},
		{"GET", "https://pve:8006/api2/json/nodes/pve1/tasks/UPID:pve1:0001:task/status", "GET /nodes/{node}/tasks/{upid}/status"},
		{"DELETE", "https://pve:8006/api2/json/nodes/pve1/qemu/101/snapshot/before-upgrade", "DELETE /nodes/{node}/qemu/{vmid}/snapshot/{snapname}"},
		{"GET", "https://pve:8006/api2/json/storage/backup-secret-name", "GET /storage/{storage}"},
		{"PUT", "https://pve:8006/api2/json/storage/x", "PUT /storage/{storage}"},
		{"PUT", "https://pve:8006/api2/json/cluster/options", "PUT other"},
		{"GET", "https://pve:8006/api2/json/access/users/root@pam", "GET other"},
		{"GET", "https://pve:8006/elsewhere", "GET other"},
	}
	for _, tc := range tests {
		t.Run(tc.want+" "+tc.url, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(tc.method, tc.url, nil)
			if got := proxmox.APIOperation(r); got != tc.want {
				t.Errorf("APIOperation(%s %s) = %q, want %q", tc.method, tc.url, got, tc.want)
			}
		})
	}
}

// opRecorder is a RoundTripper wrapper that records the operations passing through it.
type opRecorder struct {
	mu       sync.Mutex
	ops      []string
	endpoint []int64
}

func (o *opRecorder) wrap(ep proxmox.EndpointConfig, next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		o.mu.Lock()
		o.ops = append(o.ops, proxmox.APIOperation(r))
		o.endpoint = append(o.endpoint, ep.ID)
		o.mu.Unlock()
		return next.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestWithTransportWrapper: every request of a client built with the option goes through the
// wrapper, with the client's endpoint, whether the client builds its transport or is given
// one.
func TestWithTransportWrapper(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, "demo")
	tests := []struct {
		name string
		opts []proxmox.ClientOption
	}{
		{"built transport", nil},
		{"given client", []proxmox.ClientOption{proxmox.WithHTTPClient(&http.Client{})}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &opRecorder{}
			opts := append(slices.Clone(tc.opts), proxmox.WithTransportWrapper(rec.wrap))
			c := newClient(t, endpoint(simpve.DemoTokenID, url), simpve.DemoSecret, opts...)
			if _, err := c.Version(testCtx(t)); err != nil {
				t.Fatalf("version: %v", err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if !slices.Contains(rec.ops, "GET /version") {
				t.Errorf("wrapper saw %v, want GET /version among them", rec.ops)
			}
			for _, id := range rec.endpoint {
				if id != 1 {
					t.Errorf("wrapper got endpoint %d, want 1", id)
				}
			}
		})
	}
}
