package proxmox_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestCheckAPI pins the start-up probe: the version with the right token; a refused token is
// ErrUnauthorized (never transient); a URL that answers but is no PVE API (404, an HTML page,
// JSON without a version) is ErrNotProxmox; a closed port is ErrUnreachable (transient).
func TestCheckAPI(t *testing.T) {
	t.Parallel()
	_, simURL := startSim(t, "demo")
	page := func(status int, contentType, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	tests := []struct {
		name, url, secret string
		want              error
	}{
		{"the demo token", simURL, simpve.DemoSecret, nil},
		{"a wrong secret", simURL, "wrong", proxmox.ErrUnauthorized},
		{"404", page(404, "text/html", "<h1>Not Found</h1>"), simpve.DemoSecret, proxmox.ErrNotProxmox},
		{"an HTML page", page(200, "text/html", "<html>hello</html>"), simpve.DemoSecret, proxmox.ErrNotProxmox},
		{"JSON without a version", page(200, "application/json", `{"data":{"x":"y"}}`), simpve.DemoSecret, proxmox.ErrNotProxmox},
		{"a closed port", closedURL(t), simpve.DemoSecret, proxmox.ErrUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, endpoint(simpve.DemoTokenID, tt.url), tt.secret)
			v, err := c.CheckAPI(testCtx(t))
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("CheckAPI = %+v, %v; want %v", v, err, tt.want)
			}
			if tt.want == nil && v.Version != simpve.SimVersion {
				t.Errorf("version %q, want %q", v.Version, simpve.SimVersion)
			}
			if transient := tt.want == proxmox.ErrUnreachable; err != nil && proxmox.IsTransient(err) != transient {
				t.Errorf("IsTransient(%v) = %v, want %v", err, !transient, transient)
			}
		})
	}
}
