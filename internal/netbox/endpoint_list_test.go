package netbox_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/proxbus/proxbus/internal/netbox"
	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
)

// TestProxmoxEndpoints: the list is read across pages, each endpoint with its address (the
// domain, else the IP address without its prefix length), port, verify_ssl and token id.
func TestProxmoxEndpoints(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, "")
	fx.sim.PutEndpoint(simnetbox.EndpointSpec{ID: 3, Name: "by-ip", IPAddress: "192.0.2.10/24", Port: 443,
		Username: "svc@pve", TokenName: "bus"})
	fx.sim.PutEndpoint(simnetbox.EndpointSpec{ID: 4, Name: "no-token", Domain: "pve4.example.net", VerifySSL: true})
	for id := int64(10); id < 210; id++ { // more than one page
		fx.sim.AddEndpoint(id, fmt.Sprintf("bulk-%d", id), false)
	}
	got, err := fx.client.ProxmoxEndpoints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 204 {
		t.Fatalf("%d endpoints, want 204", len(got))
	}
	want := []netbox.ProxmoxEndpoint{
		{ID: 1, Name: "lab", Domain: "lab.pve.invalid", Port: 8006, VerifySSL: true, Username: "proxbus@pve", TokenName: "proxbus"},
		{ID: 2, Name: "lab-readonly", Domain: "lab-readonly.pve.invalid", Port: 8006, VerifySSL: true, Username: "proxbus@pve", TokenName: "proxbus"},
		{ID: 3, Name: "by-ip", IPAddress: "192.0.2.10", Port: 443, Username: "svc@pve", TokenName: "bus"},
		{ID: 4, Name: "no-token", Domain: "pve4.example.net", Port: 8006, VerifySSL: true},
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("endpoint %d = %+v, want %+v", i, got[i], w)
		}
	}
	if got[2].Host() != "192.0.2.10" || got[0].Host() != "lab.pve.invalid" {
		t.Errorf("hosts %q %q", got[2].Host(), got[0].Host())
	}
	if got[2].TokenID() != "svc@pve!bus" || got[3].TokenID() != "" {
		t.Errorf("token ids %q %q", got[2].TokenID(), got[3].TokenID())
	}
	if got[203].ID != 209 {
		t.Errorf("last endpoint %d, want 209", got[203].ID)
	}
}

// TestProxmoxEndpointsErrors: an answer that is not an endpoint list, or an entry without an
// id, is ErrUnavailable; a refused token is ErrUnauthorized.
func TestProxmoxEndpointsErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		status int
		body   string
		want   error
	}{
		{"not a list", 200, `{"detail":"x"}`, netbox.ErrUnavailable},
		{"no id", 200, `{"count":1,"next":null,"results":[{"name":"x"}]}`, netbox.ErrUnavailable},
		{"refused", 403, `{"detail":"Invalid v1 token"}`, netbox.ErrUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			t.Cleanup(ts.Close)
			c := newClient(t, ts.URL, simnetbox.TokenV1, 0)
			if _, err := c.ProxmoxEndpoints(context.Background()); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
}
