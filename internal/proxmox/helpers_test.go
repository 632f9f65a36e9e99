package proxmox_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// startSim starts a simulator on a free port and stops it when the test ends.
func startSim(t *testing.T, scenario string) (*simpve.Server, string) {
	t.Helper()
	sim := simpve.New(simpve.Options{Scenario: scenario})
	url, err := sim.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start sim: %v", err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	return sim, url
}

// endpoint is a config for the simulator at urls with token tokenID.
func endpoint(tokenID string, urls ...string) proxmox.EndpointConfig {
	return proxmox.EndpointConfig{
		ID: 1, Name: "sim", URLs: urls, TokenID: tokenID,
		Timeout: 5 * time.Second,
	}
}

// newClient builds a client for cfg with secret, failing the test on error.
func newClient(t *testing.T, cfg proxmox.EndpointConfig, secret string, opts ...proxmox.ClientOption) *proxmox.Client {
	t.Helper()
	opts = append([]proxmox.ClientOption{proxmox.WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	c, err := proxmox.NewClient(cfg, proxmox.Secret(secret), opts...)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

// demoClient is a full-rights client against the simulator at url.
func demoClient(t *testing.T, url string) *proxmox.Client {
	t.Helper()
	return newClient(t, endpoint(simpve.DemoTokenID, url), simpve.DemoSecret)
}

// closedURL returns the URL of a port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	// A port freed on 127.0.0.2 stays free: the servers of parallel tests (httptest, the
	// simulator) listen on 127.0.0.1, so none can take it between its close and the dial.
	// Where 127.0.0.2 is not a loopback address (macOS by default), 127.0.0.1 serves.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// ctx is a test context bounded by the test's deadline.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// pbs is a complete PBS storage request.
func pbs(id string) proxmox.PBSStorage {
	return proxmox.PBSStorage{
		Storage: id, Server: "pbs.example.net", Port: 8007, Datastore: "store1", Namespace: "lab/a",
		Username: "backup@pbs!pve", Password: proxmox.Secret("pbs-" + topSecret),
		Fingerprint: "ab:cd:ef:01:23:45:67:89:ab:cd:ef:01:23:45:67:89:ab:cd:ef:01:23:45:67:89:ab:cd:ef:01:23:45:67:89",
		Nodes:       []string{"pve1", "pve2"},
	}
}
