package simpve

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
)

// delReply is one decoded answer of the simulator.
type delReply struct {
	status  int
	message string
	data    json.RawMessage
	errors  map[string]string
}

// delSim serves a demo simulator whose tasks take taskDur (negative: end at once) and returns
// a function sending one request with token id (the demo token when "").
func delSim(t *testing.T, taskDur time.Duration) (*Server, func(method, path, tokenID string) delReply) {
	t.Helper()
	s := New(Options{Scenario: ScenarioDemo, TaskDuration: taskDur})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return s, func(method, path, tokenID string) delReply {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+APIPrefix+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tokenID == "" {
			tokenID = DemoTokenID
		}
		req.Header.Set("Authorization", "PVEAPIToken="+tokenID+"="+DemoSecret)
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		r := delReply{status: res.StatusCode}
		var env struct {
			Data    json.RawMessage   `json:"data"`
			Message string            `json:"message"`
			Errors  map[string]string `json:"errors"`
		}
		if len(raw) > 0 && json.Unmarshal(raw, &env) == nil {
			r.data, r.message, r.errors = env.Data, strings.TrimSpace(env.Message), env.Errors
		}
		return r
	}
}

// TestDeleteRefusals pins PVE's synchronous refusals of a destroy, in PVE's words and order
// (protection before running), and that none of them starts a task or removes anything.
func TestDeleteRefusals(t *testing.T) {
	t.Parallel()
	s, do := delSim(t, -1)
	s.AddGuest(GuestSpec{VMID: 300, Node: "pve1", Name: "guarded", Status: stateRunning, Config: map[string]string{"protection": "1"}})
	tests := []struct {
		path, token string
		status      int
		message     string
		params      []string
	}{
		{"/nodes/pve2/qemu/101", "", 500, "can't remove VM 101 - protection mode enabled", nil},
		{"/nodes/pve1/qemu/300", "", 500, "can't remove VM 300 - protection mode enabled", nil}, // protected and running
		{"/nodes/pve1/qemu/100", "", 500, "VM 100 is running - destroy failed", nil},
		{"/nodes/pve2/qemu/105", "", 500, "VM 105 is running - destroy failed", nil}, // paused
		{"/nodes/pve1/lxc/200", "", 500, "unable to destroy CT 200 - container is running", nil},
		{"/nodes/pve1/qemu/999", "", 500, "Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist", nil},
		{"/nodes/pve1/lxc/103", "", 500, "Configuration file 'nodes/pve1/lxc/103.conf' does not exist", nil},
		{"/nodes/pve1/qemu/103", AuditTokenID, 403, "Permission check failed (/vms/103, VM.Allocate)", nil},
		{"/nodes/pve1/qemu/103?purge=maybe", "", 400, "Parameter verification failed.", []string{"purge"}},
		{"/nodes/pve1/qemu/103?destroy-unreferenced-disks=2", "", 400, "Parameter verification failed.", []string{"destroy-unreferenced-disks"}},
		{"/nodes/pve1/qemu/103?skiplock=1", "", 400, "Parameter verification failed.", []string{"skiplock"}}, // proxbus never sends it
		{"/nodes/pve1/lxc/200?force=1", "", 400, "Parameter verification failed.", []string{"force"}},        // nor this
	}
	for _, tt := range tests {
		r := do("DELETE", tt.path, tt.token)
		var params []string
		for k := range r.errors {
			params = append(params, k)
		}
		slices.Sort(params)
		if r.status != tt.status || r.message != tt.message || !slices.Equal(params, tt.params) {
			t.Errorf("DELETE %s = %d %q %v, want %d %q %v", tt.path, r.status, r.message, params, tt.status, tt.message, tt.params)
		}
	}
	if n := len(s.Tasks()); n != 0 {
		t.Errorf("%d tasks started by refusals", n)
	}
	for _, vmid := range []int64{100, 101, 103, 105, 200, 300} {
		if _, ok := s.Guest(vmid); !ok {
			t.Errorf("guest %d removed by a refusal", vmid)
		}
	}
}

// TestDeleteEffects pins a destroy that runs: a UPID at once, the guest held (lock destroyed)
// while the worker runs, then gone from its node, /cluster/resources and the storages'
// content; the worker's log names the freed volumes as LVM and RBD print them and the purge.
func TestDeleteEffects(t *testing.T) {
	t.Parallel()
	s, do := delSim(t, time.Hour)
	r := do("DELETE", "/nodes/pve2/lxc/201?purge=1&destroy-unreferenced-disks=1", "")
	var upid string
	if r.status != 200 || json.Unmarshal(r.data, &upid) != nil {
		t.Fatalf("DELETE = %d %s %s", r.status, r.message, r.data)
	}
	u, err := proxmox.ParseUPID(upid)
	if err != nil || u.Type != "vzdestroy" || u.Node != "pve2" || u.ID != "201" {
		t.Fatalf("UPID %q (%v), want a vzdestroy of 201 on pve2", upid, err)
	}
	if g, ok := s.Guest(201); !ok || g.Lock != "destroyed" || !g.Busy {
		t.Errorf("while the worker runs: %+v (exists %v), want lock destroyed and busy", g, ok)
	}
	if r := do("POST", "/nodes/pve2/lxc/201/status/start", ""); r.status != 500 || !strings.Contains(r.message, "got timeout") {
		t.Errorf("start while destroying = %d %q, want the lock timeout", r.status, r.message)
	}
	if r := do("GET", "/cluster/resources?type=vm", ""); !strings.Contains(string(r.data), `"lock":"destroyed"`) {
		t.Errorf("resources while destroying lack the destroyed lock: %s", r.data)
	}

	s.mu.Lock()
	task := s.state.tasks[len(s.state.tasks)-1]
	half, all := task.log(0.5), task.log(1)
	task.end = time.Now() // the worker is done
	s.mu.Unlock()
	want := []string{`  Logical volume "vm-201-disk-0" successfully removed.`, "Removing image: 100% complete...done.",
		"purging CT 201 from related configurations.."}
	if !slices.Equal(all, want) || len(half) != 1 {
		t.Errorf("log = %q (half-way %q), want %q", all, half, want)
	}

	if _, ok := s.Guest(201); ok {
		t.Fatal("guest 201 still exists after its destroy task")
	}
	if r := do("GET", "/cluster/resources?type=vm", ""); strings.Contains(string(r.data), `"vmid":201`) {
		t.Errorf("/cluster/resources still lists 201: %s", r.data)
	}
	if r := do("GET", "/nodes/pve2/lxc/201/config", ""); r.status != 500 || !strings.Contains(r.message, "does not exist") {
		t.Errorf("config after destroy = %d %q", r.status, r.message)
	}
	for _, st := range []string{"local-lvm", "ceph"} {
		if r := do("GET", "/nodes/pve2/storage/"+st+"/content", ""); strings.Contains(string(r.data), "vm-201-") {
			t.Errorf("%s still holds 201's volumes: %s", st, r.data)
		}
	}
	if r := do("GET", "/nodes/pve2/tasks/"+upid+"/status", ""); !strings.Contains(string(r.data), `"exitstatus":"OK"`) {
		t.Errorf("task status %s", r.data)
	}
}

// TestDeleteOwnedVolumesOnly pins which volumes a destroy frees (the guest's own, CD-ROMs
// and other guests' volumes untouched) and the template check: a template whose base volume
// a linked clone uses cannot be destroyed (the worker fails, the template stays).
func TestDeleteOwnedVolumesOnly(t *testing.T) {
	t.Parallel()
	s, do := delSim(t, -1)
	s.AddGuest(GuestSpec{VMID: 320, Node: "pve1", Name: "linked", Config: map[string]string{
		"scsi0": "local-lvm:base-9000-disk-0/vm-320-disk-0,size=4G",
		"scsi1": "ceph:vm-100-disk-1,size=100G", // attached from another guest
		"ide2":  "local:iso/debian.iso,media=cdrom",
		"ide0":  "local-lvm:vm-320-cloudinit,media=cdrom",
	}})
	s.mu.Lock()
	got := ownedVolumes(s.state.guests[320])
	s.mu.Unlock()
	if want := []string{"local-lvm:vm-320-cloudinit", "local-lvm:base-9000-disk-0/vm-320-disk-0"}; !slices.Equal(got, want) {
		t.Errorf("owned volumes of 320 = %q, want %q", got, want)
	}

	r := do("DELETE", "/nodes/pve1/qemu/9000?purge=1", "")
	var upid string
	if r.status != 200 || json.Unmarshal(r.data, &upid) != nil {
		t.Fatalf("DELETE template = %d %s", r.status, r.message)
	}
	tasks := s.Tasks()
	if last := tasks[len(tasks)-1]; last.ExitStatus != "base volume 'local-lvm:base-9000-disk-0' is still in use by linked cloned" {
		t.Errorf("template destroy task = %+v", last)
	}
	if _, ok := s.Guest(9000); !ok {
		t.Error("the template was removed although a linked clone uses it")
	}
	if r := do("DELETE", "/nodes/pve1/qemu/320", ""); r.status != 200 {
		t.Fatalf("DELETE clone = %d %s", r.status, r.message)
	}
	if _, ok := s.Guest(100); !ok {
		t.Error("destroying 320 removed guest 100")
	}
	if r := do("DELETE", "/nodes/pve1/qemu/9000", ""); r.status != 200 {
		t.Fatalf("DELETE template again = %d %s", r.status, r.message)
	}
	if _, ok := s.Guest(9000); ok {
		t.Error("the template stays after its linked clone is gone")
	}
}
