package proxmox_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestUpdatePBSStorage pins PUT /storage/{storage}: only the fields set are sent, PVE keeps
// the password apart and never shows it, a missing storage is ErrNotFound, and a refusal's
// texts never carry the password.
func TestUpdatePBSStorage(t *testing.T) {
	t.Parallel()
	if got := (proxmox.PBSStorageUpdate{Storage: "p", Fingerprint: "AB"}).Form(); got.Encode() != (url.Values{"fingerprint": {"AB"}}).Encode() {
		t.Errorf("Form() = %v, want the fingerprint alone", got)
	}
	sim := simpve.New(simpve.Options{Scenario: simpve.ScenarioDemo})
	srv, _ := recordingServer(t, sim)
	c := demoClient(t, srv.URL)
	ctx := testCtx(t)
	if err := c.CreatePBSStorage(ctx, pbs("pbs-u")); err != nil {
		t.Fatal(err)
	}
	secret := "rotated-" + topSecret
	if err := c.UpdatePBSStorage(ctx, proxmox.PBSStorageUpdate{Storage: "pbs-u", Username: "backup@pbs!new", Password: proxmox.Secret(secret)}); err != nil {
		t.Fatalf("UpdatePBSStorage: %v", err)
	}
	cfg, err := c.Storage(ctx, "pbs-u")
	if err != nil || cfg["username"] != "backup@pbs!new" || cfg["password"] != "" || !sim.CheckStoragePassword("pbs-u", secret) {
		t.Errorf("after the update: %v, %v (secret kept: %v)", cfg, err, sim.CheckStoragePassword("pbs-u", secret))
	}
	err = c.UpdatePBSStorage(ctx, proxmox.PBSStorageUpdate{Storage: "pbs-none", Password: proxmox.Secret(secret)})
	if !errors.Is(err, proxmox.ErrNotFound) {
		t.Errorf("missing storage: %v, want ErrNotFound", err)
	}
	sim.FailNext("PUT", "/storage/pbs-u", 1, 500, "update storage failed: cannot use "+secret)
	err = c.UpdatePBSStorage(ctx, proxmox.PBSStorageUpdate{Storage: "pbs-u", Password: proxmox.Secret(secret)})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("refusal %v: want an error without the secret", err)
	}
}

// TestDeleteStorage pins DELETE /storage/{storage}: the storage is gone afterwards, and a
// second delete is ErrNotFound.
func TestDeleteStorage(t *testing.T) {
	t.Parallel()
	sim := simpve.New(simpve.Options{Scenario: simpve.ScenarioDemo})
	srv, _ := recordingServer(t, sim)
	c := demoClient(t, srv.URL)
	ctx := testCtx(t)
	if err := c.CreatePBSStorage(ctx, pbs("pbs-d")); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteStorage(ctx, "pbs-d"); err != nil {
		t.Fatalf("DeleteStorage: %v", err)
	}
	if _, err := c.Storage(ctx, "pbs-d"); !errors.Is(err, proxmox.ErrNotFound) {
		t.Errorf("after the delete: %v, want ErrNotFound", err)
	}
	if err := c.DeleteStorage(ctx, "pbs-d"); !errors.Is(err, proxmox.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
}

// TestCreateContainer pins POST /nodes/{node}/lxc: the form (rootfs as <storage>:<GiB>, the
// NICs rendered, swap 0 sent, zero values left out), the task waited for, and the password
// scrubbed from a refusal.
func TestCreateContainer(t *testing.T) {
	t.Parallel()
	req := proxmox.ContainerRequest{Node: "pve2", VMID: 340, OSTemplate: simpve.DemoCTTemplate, Storage: "local-lvm", RootfsGB: 6,
		Hostname: "ct-340", SwapMB: 0, Unprivileged: true, Nesting: true, Password: proxmox.Secret("ct-" + topSecret),
		SSHKeys: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDemo a@b",
		Nets:    []proxmox.ContainerNet{{Index: 1, Bridge: "vmbr1", VLANTag: 20, IP: "10.0.0.5/24", Gateway: "10.0.0.1", Firewall: true}}}
	want := url.Values{"vmid": {"340"}, "ostemplate": {simpve.DemoCTTemplate}, "storage": {"local-lvm"}, "rootfs": {"local-lvm:6"},
		"hostname": {"ct-340"}, "swap": {"0"}, "unprivileged": {"1"}, "features": {"nesting=1"}, "password": {"ct-" + topSecret},
		"ssh-public-keys": {req.SSHKeys}, "net1": {"name=eth1,bridge=vmbr1,tag=20,ip=10.0.0.5/24,gw=10.0.0.1,firewall=1"}}
	if got := req.Form(); got.Encode() != want.Encode() {
		t.Errorf("Form() = %v\nwant %v", got, want)
	}
	sim := simpve.New(simpve.Options{Scenario: simpve.ScenarioDemo, TaskDuration: -1})
	srv, w := recordingServer(t, sim)
	c := demoClient(t, srv.URL)
	ctx := testCtx(t)
	upid, err := c.CreateContainer(ctx, req)
	if err != nil || !strings.Contains(upid, ":vzcreate:340:") || len(w.bodies) != 1 {
		t.Fatalf("CreateContainer = %q, %v (%d POSTs)", upid, err, len(w.bodies))
	}
	if g, ok := sim.Guest(340); !ok || g.Config["rootfs"] != "local-lvm:vm-340-disk-0,size=6G" || !sim.CheckContainerPassword(340, "ct-"+topSecret) {
		t.Errorf("container %+v (exists %v)", g, ok)
	}
	sim.FailNext("POST", "/nodes/pve2/lxc", 1, 500, "unable to create CT 341 - bad password ct-"+topSecret)
	req.VMID = 341
	if _, err := c.CreateContainer(ctx, req); err == nil || strings.Contains(err.Error(), topSecret) {
		t.Errorf("refusal %v: want an error without the password", err)
	}
}
