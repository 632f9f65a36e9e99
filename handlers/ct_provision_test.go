package handlers

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// ctSecret is the root password the container tests set: it must appear in no event,
// journal comment or plan.
const ctSecret = "CANARY-ct-root-9c1d"

// ctData is a ct.provision body for vmid 320 on pve2 with edits applied (a nil value removes
// the field).
func ctData(t *testing.T, edits map[string]any) string {
	t.Helper()
	body := map[string]any{
		"new_vmid": 320, "hostname": "ct-320", "target_node": "pve2", "ostemplate": simpve.DemoCTTemplate,
		"storage": "local-lvm", "rootfs_gb": 8, "memory_mb": 1024, "swap_mb": 0, "cores": 2, "nesting": true,
		"password": ctSecret, "ssh_keys": []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDemo demo@proxbus"},
		"net": []map[string]any{
			{"index": 0, "bridge": "vmbr0", "ip": "dhcp", "firewall": true},
			{"index": 1, "bridge": "vmbr1", "vlan_tag": 20, "ip": "10.20.0.50/24", "gw": "10.20.0.1"},
		},
		"nameserver": "10.20.0.53", "searchdomain": "lab.example",
	}
	return string(editedBody(t, body, edits))
}

// TestCTProvisionDecode pins ct.provision's data: the defaults (unprivileged and start true)
// are part of the request fingerprint, the password is not; every rule break names its field.
func TestCTProvisionDecode(t *testing.T) {
	t.Parallel()
	a, out := CTProvision().prepare(json.RawMessage(ctData(t, nil)))
	if out != nil {
		t.Fatalf("valid body refused: %+v", out)
	}
	b, _ := CTProvision().prepare(json.RawMessage(ctData(t, map[string]any{"password": "another-one", "unprivileged": true, "start": true})))
	if a.fingerprint != b.fingerprint {
		t.Error("the fingerprint depends on the password or on spelled-out defaults")
	}
	if !slices.Equal(a.secrets, []string{ctSecret}) {
		t.Errorf("secrets %v", a.secrets)
	}
	for _, bl := range a.bullets {
		if strings.Contains(bl.Value, ctSecret) {
			t.Errorf("bullet %s carries the password", bl.Name)
		}
	}
	tests := []struct {
		edits map[string]any
		field string
	}{
		{map[string]any{"ostemplate": "local:iso/debian.iso"}, "ostemplate"},
		{map[string]any{"ostemplate": nil}, "ostemplate"},
		{map[string]any{"rootfs_gb": 0}, "rootfs_gb"},
		{map[string]any{"storage": nil}, "storage"},
		{map[string]any{"hostname": "not a name"}, "hostname"},
		{map[string]any{"password": "1234"}, "password"},
		{map[string]any{"unprivileged": false}, "nesting"},
		{map[string]any{"swap_mb": -1}, "swap_mb"},
		{map[string]any{"new_vmid": 99}, "new_vmid"},
		{map[string]any{"net": []map[string]any{{"index": 10, "bridge": "vmbr0", "ip": "dhcp"}}}, "net"},
		{map[string]any{"net": []map[string]any{{"index": 0, "bridge": "vmbr0", "ip": "dhcp", "gw": "10.0.0.1"}}}, "net"},
		{map[string]any{"net": []map[string]any{{"index": 0, "bridge": "vmbr0", "ip": "10.0.0.5"}}}, "net"},
		{map[string]any{"net": []map[string]any{{"index": 0, "bridge": "vmbr0", "ip": "dhcp"}, {"index": 0, "bridge": "vmbr1", "ip": "dhcp"}}}, "net"},
		{map[string]any{"nameserver": "dns.example"}, "nameserver"},
	}
	for _, tt := range tests {
		_, out := CTProvision().prepare(json.RawMessage(ctData(t, tt.edits)))
		if out == nil || out.Status != 422 || !slices.Equal(out.Fields, []string{tt.field}) {
			t.Errorf("prepare with %v = %+v, want 422 naming %s", tt.edits, out, tt.field)
		}
	}
}

// ctWrites are the simulator's non-GET requests of container 320 and its create.
func ctWrites(e *rtEnv) []string {
	var out []string
	for _, w := range pveWrites(e.pve) {
		if strings.HasPrefix(w, "POST /nodes/pve2/lxc") {
			path, _, _ := strings.Cut(w, "?")
			out = append(out, path)
		}
	}
	return out
}

// TestCTProvisionOutcomes pins ct.provision through the pipeline against the simulator: the
// container PVE made (its configuration from every field, the root password set, started),
// start: false, and the refusals before any write — a template the node lacks (404), a
// storage without rootdir (409), a bridge the node lacks (422) — and PVE's own refusal of a
// vmid in use.
func TestCTProvisionOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		edits  map[string]any
		status int
		reason string
		fields []string
		writes []string
		state  string // the container's status afterwards, "" when it must not exist
	}{
		{name: "created and started", status: 201, state: "running",
			writes: []string{"POST /nodes/pve2/lxc", "POST /nodes/pve2/lxc/320/status/start"}},
		{name: "not started", edits: map[string]any{"start": false}, status: 201, state: "stopped",
			writes: []string{"POST /nodes/pve2/lxc"}},
		{name: "on shared storage", edits: map[string]any{"storage": "ceph"}, status: 201, state: "running",
			writes: []string{"POST /nodes/pve2/lxc", "POST /nodes/pve2/lxc/320/status/start"}},
		{name: "template not on the node", edits: map[string]any{"ostemplate": "local:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz"},
			status: 404, reason: ReasonTemplateNotFound, fields: []string{"ostemplate"}},
		{name: "template storage missing", edits: map[string]any{"ostemplate": "nfs-tmpl:vztmpl/debian.tar.zst"},
			status: 404, reason: ReasonTemplateNotFound, fields: []string{"ostemplate"}},
		{name: "storage without rootdir", edits: map[string]any{"storage": "images"},
			status: 409, reason: ReasonTargetStorageUnavailable, fields: []string{"storage"}},
		{name: "bridge the node lacks", edits: map[string]any{"net": []map[string]any{{"index": 0, "bridge": "vmbr9", "ip": "dhcp"}}},
			status: 422, reason: ReasonInvalidBody, fields: []string{"net"}},
		{name: "vmid in use", edits: map[string]any{"new_vmid": 100}, status: 502, reason: ReasonProxmoxRefused,
			writes: []string{"POST /nodes/pve2/lxc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newRTEnv(t)
			res := e.resultOf(t, "ct.provision", "ct", ctData(t, tt.edits))
			if res.Status != tt.status || res.Reason != tt.reason || !slices.Equal(res.Fields, tt.fields) {
				t.Fatalf("result %d %s %q %v (%s), want %d %q %v", res.Status, res.Result, res.Reason, res.Fields, res.Detail, tt.status, tt.reason, tt.fields)
			}
			if w := ctWrites(e); !slices.Equal(w, tt.writes) {
				t.Errorf("writes %q, want %q", w, tt.writes)
			}
			assertSecretNowhere(t, e, ctSecret)
			g, found := e.pve.Guest(320)
			if tt.state == "" {
				if found && tt.status != 502 {
					t.Errorf("container 320 exists after a refusal")
				}
				return
			}
			if !found || g.Type != proxmox.GuestLXC || g.Node != "pve2" || g.Status != tt.state {
				t.Fatalf("container 320: %+v (found %v), want an LXC on pve2, %s", g, found, tt.state)
			}
			c := g.Config
			storage, _ := tt.edits["storage"].(string)
			if storage == "" {
				storage = "local-lvm"
			}
			if c["hostname"] != "ct-320" || c["memory"] != "1024" || c["swap"] != "0" || c["cores"] != "2" || c["unprivileged"] != "1" ||
				c["features"] != "nesting=1" || c["rootfs"] != storage+":vm-320-disk-0,size=8G" || c["nameserver"] != "10.20.0.53" ||
				c["searchdomain"] != "lab.example" || c["ostype"] != "debian" ||
				!strings.HasPrefix(c["net0"], "name=eth0,bridge=vmbr0,ip=dhcp,firewall=1,hwaddr=") ||
				!strings.HasPrefix(c["net1"], "name=eth1,bridge=vmbr1,tag=20,ip=10.20.0.50/24,gw=10.20.0.1,hwaddr=") {
				t.Errorf("config %v", c)
			}
			if !e.pve.CheckContainerPassword(320, ctSecret) {
				t.Error("the root password was not set")
			}
			var out ctOutput
			if err := json.Unmarshal(res.Output, &out); err != nil || out.NewVMID != "320" || out.CreateUPID == "" ||
				(tt.state == "running") != (out.StartUPID != "" && out.Status == "started") {
				t.Errorf("output %s", res.Output)
			}
		})
	}
}

// TestCTProvisionLostAnswer pins the confirmation of a create whose answer was lost, by
// reading the container and its vzcreate task, never by a second create: the container made
// is started (201); a create whose task failed is 502 task_failed.
func TestCTProvisionLostAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		setup  func(e *rtEnv)
		status int
		reason string
		writes []string
	}{
		{name: "container made", setup: func(*rtEnv) {}, status: 201,
			writes: []string{"POST /nodes/pve2/lxc", "POST /nodes/pve2/lxc/320/status/start"}},
		{name: "create failed", setup: func(e *rtEnv) { e.pve.FailTask("pve2", 320, "unable to create CT 320 - no space left") },
			status: 502, reason: ReasonTaskFailed, writes: []string{"POST /nodes/pve2/lxc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newRTEnv(t)
			tt.setup(e)
			e.pve.DropAnswerAfterApply("POST", "/nodes/pve2/lxc", 1)
			res := e.resultOf(t, "ct.provision", "lost", ctData(t, nil))
			if res.Status != tt.status || res.Reason != tt.reason || !res.Finalized() {
				t.Fatalf("result %d %s %q (%s), want %d %q", res.Status, res.Result, res.Reason, res.Detail, tt.status, tt.reason)
			}
			if w := ctWrites(e); !slices.Equal(w, tt.writes) {
				t.Errorf("writes %q, want %q (one create)", w, tt.writes)
			}
			if tt.status == 201 && !e.pub.hasStep(t, "lost", "confirm", events.StepDone) {
				t.Error("no confirm step: the lost answer was not confirmed by reading")
			}
			assertSecretNowhere(t, e, ctSecret)
		})
	}
}

// TestCTProvisionDryRun pins contract §4a for ct.provision: the plan is the create (password
// redacted) and the start, complete, 201 created; nothing is sent or journaled; a missing
// template plans the refusal.
func TestCTProvisionDryRun(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t)
	p := e.dryRun(t, "ct.provision", "dry", ctData(t, nil))
	if !p.Complete || p.Outcome == nil || p.Outcome.Status != 201 || len(p.Writes) != 2 || p.Writes[0].Path != "/nodes/pve2/lxc" ||
		p.Writes[0].Params["password"] == ctSecret || p.Writes[0].Params["rootfs"] != "local-lvm:8" ||
		p.Writes[1].Path != "/nodes/pve2/lxc/320/status/start" {
		t.Errorf("plan %+v (outcome %+v)", p, p.Outcome)
	}
	refused := e.dryRun(t, "ct.provision", "dry-refused", ctData(t, map[string]any{"ostemplate": "local:vztmpl/none.tar.zst"}))
	if !refused.Complete || refused.Outcome == nil || refused.Outcome.Reason != ReasonTemplateNotFound || len(refused.Writes) != 0 {
		t.Errorf("refused plan %+v (outcome %+v)", refused, refused.Outcome)
	}
	if w := ctWrites(e); len(w) != 0 {
		t.Errorf("a dry run sent %q", w)
	}
	if n := len(e.nb.JournalEntries()); n != 0 {
		t.Errorf("a dry run journaled %d entries", n)
	}
	assertSecretNowhere(t, e, ctSecret)
}

// TestCTProvisionLostAnswerOtherContainer: a create whose answer was lost, on a vmid where
// PVE refused it because another container already had it, is not taken for this command's:
// no vzcreate since the command arrived → 502 proxmox_create_unconfirmed, nothing started.
func TestCTProvisionLostAnswerOtherContainer(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t)
	e.pve.AddGuest(simpve.GuestSpec{VMID: 320, Node: "pve2", Name: "someone-else", Type: proxmox.GuestLXC, Status: "stopped"})
	e.pve.DropAnswerAfterApply("POST", "/nodes/pve2/lxc", 1)
	res := e.resultOf(t, "ct.provision", "other", ctData(t, nil))
	if res.Status != 502 || res.Reason != ReasonProxmoxCreateUnconfirmed {
		t.Fatalf("result %d %s %q (%s), want 502 proxmox_create_unconfirmed", res.Status, res.Result, res.Reason, res.Detail)
	}
	if w := ctWrites(e); !slices.Equal(w, []string{"POST /nodes/pve2/lxc"}) {
		t.Errorf("writes %q, want the one refused create", w)
	}
}
