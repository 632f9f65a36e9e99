package proxmox_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestNodesVersionResources pins the read helpers against the demo cluster.
func TestNodesVersionResources(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, simpve.ScenarioDemo)
	c := demoClient(t, url)
	nodes, err := c.Nodes(testCtx(t))
	if err != nil {
		t.Fatalf("Nodes: %v", err)
	}
	want := []proxmox.Node{{Node: "pve1", Status: "online"}, {Node: "pve2", Status: "online"}, {Node: "pve3", Status: "online"}}
	if !slices.Equal(nodes, want) {
		t.Errorf("Nodes = %v, want %v", nodes, want)
	}
	v, err := c.Version(testCtx(t))
	if err != nil || v.Version != simpve.SimVersion || v.Release != simpve.SimRelease {
		t.Errorf("Version = %+v, %v", v, err)
	}
	res, err := c.ClusterResources(testCtx(t), proxmox.ResourceStorage)
	if err != nil {
		t.Fatalf("ClusterResources: %v", err)
	}
	seen := map[string]proxmox.ClusterResource{}
	for _, r := range res {
		if r.Type != "storage" {
			t.Errorf("type filter ignored: %+v", r)
		}
		seen[r.ID] = r
	}
	if len(res) != 12 {
		t.Errorf("%d storage resources, want 4 storages x 3 nodes", len(res))
	}
	ceph := seen["storage/pve2/ceph"]
	if !ceph.Shared || ceph.PluginType != "rbd" || ceph.Status != "available" || ceph.Node != "pve2" {
		t.Errorf("storage/pve2/ceph = %+v", ceph)
	}
	if seen["storage/pve1/local-lvm"].Shared {
		t.Error("local-lvm must not be shared")
	}
	all, err := c.ClusterResources(testCtx(t), "")
	if err != nil || len(all) != 26 {
		t.Errorf("ClusterResources(\"\") = %d, %v; want 3 nodes + 11 guests + 12 storages", len(all), err)
	}
	_, err = c.ClusterResources(testCtx(t), "bogus")
	var ae *proxmox.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || !slices.Equal(ae.ParamNames(), []string{"type"}) {
		t.Errorf("ClusterResources(bogus) = %v, want 400 on type", err)
	}
}

// TestReadTimeoutIsAnswerLost pins that a request written but not answered within the
// endpoint's timeout is ErrAnswerLost, and transient because it is a read.
func TestReadTimeoutIsAnswerLost(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t, simpve.ScenarioDemo)
	sim.SetLatency(time.Minute) // aborted by sim.Close at cleanup
	cfg := endpoint(simpve.DemoTokenID, url)
	cfg.Timeout = 50 * time.Millisecond
	_, err := newClient(t, cfg, simpve.DemoSecret).Nodes(testCtx(t))
	if !errors.Is(err, proxmox.ErrAnswerLost) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Nodes = %v, want ErrAnswerLost wrapping the deadline", err)
	}
	if !proxmox.IsTransient(err) {
		t.Error("a lost read answer is transient")
	}
}

// TestFailover pins that with several URLs a dead first URL is skipped (nothing was sent,
// so even a POST moves on) and the create happens exactly once.
func TestFailover(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t, simpve.ScenarioDemo)
	c := newClient(t, endpoint(simpve.DemoTokenID, closedURL(t), url), simpve.DemoSecret)
	if err := c.CreatePBSStorage(testCtx(t), pbs("pbs-fo")); err != nil {
		t.Fatalf("CreatePBSStorage: %v", err)
	}
	if n := sim.Requests("POST", "/storage"); n != 1 {
		t.Errorf("%d POSTs, want 1", n)
	}
	if got := c.Endpoint().URLs; len(got) != 2 || got[1] != url {
		t.Errorf("Endpoint().URLs = %v", got)
	}
}

// TestClients pins the registry: lookup by id, secrets for redaction, and errors naming the
// endpoint without the secret.
func TestClients(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, simpve.ScenarioDemo)
	one := endpoint(simpve.DemoTokenID, url)
	one.TokenSecretEnv = "DEMO"
	two := endpoint(simpve.AuditTokenID, url)
	two.ID, two.TokenSecretEnv = 2, "AUDIT"
	env := map[string]string{"DEMO": simpve.DemoSecret, "AUDIT": "audit-secret-x"}
	cs, err := proxmox.NewClients([]proxmox.EndpointConfig{two, one}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("NewClients: %v", err)
	}
	if c, ok := cs.Get(1); !ok || c.Endpoint().TokenID != simpve.DemoTokenID {
		t.Errorf("Get(1) = %v, %v", c, ok)
	}
	if _, ok := cs.Get(3); ok {
		t.Error("Get(3) found a client")
	}
	if !slices.Equal(cs.IDs(), []int64{1, 2}) {
		t.Errorf("IDs = %v", cs.IDs())
	}
	secrets := cs.Secrets()
	slices.Sort(secrets)
	if !slices.Equal(secrets, []string{"audit-secret-x", simpve.DemoSecret}) {
		t.Errorf("Secrets = %v", secrets)
	}
	delete(env, "AUDIT")
	if _, err := proxmox.NewClients([]proxmox.EndpointConfig{one, two}, func(k string) string { return env[k] }); !errors.Is(err, proxmox.ErrNoSecret) {
		t.Errorf("missing secret: %v, want ErrNoSecret", err)
	}
	if _, err := proxmox.NewClients([]proxmox.EndpointConfig{one, one}, func(k string) string { return env[k] }); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("duplicate id: %v, want config.ErrInvalid", err)
	}
}
