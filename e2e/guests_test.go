package e2e_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/guestconfig"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// guestCommand builds a command of any verb for endpoint 1.
func (e *env) guestCommand(verb, data string) events.Command {
	c := e.command(data)
	c.Verb, c.Type = verb, "proxbus."+verb
	return c
}

// guestCase is one guest verb and the outcome it must have.
type guestCase struct {
	name       string
	verb, data string
	wantStatus int
	wantResult string
	wantReason string
	// check inspects the simulator afterwards.
	check func(t *testing.T, e *env, res events.Result)
}

func runGuestCases(t *testing.T, e *env, cases []guestCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := e.send(e.guestCommand(tc.verb, tc.data))
			if res.Status != tc.wantStatus || res.Result != tc.wantResult || res.Reason != tc.wantReason {
				t.Fatalf("got %d %s %q (%s), want %d %s %q", res.Status, res.Result, res.Reason, res.Detail, tc.wantStatus, tc.wantResult, tc.wantReason)
			}
			if tc.check != nil {
				tc.check(t, e, res)
			}
		})
	}
}

func wantGuestStatus(vmid int64, status string) func(*testing.T, *env, events.Result) {
	return func(t *testing.T, e *env, _ events.Result) {
		t.Helper()
		g, ok := e.pve.Guest(vmid)
		if !ok || g.Status != status {
			t.Errorf("guest %d status %q, want %q", vmid, g.Status, status)
		}
	}
}

// TestGuestPower pins contract §9 guest power, run in order on one demo cluster: every result
// code, containers, name and vmid resolution.
func TestGuestPower(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.pve.FailTask("pve3", simpve.DemoAppVMID, "command 'qm shutdown' failed: exit code 255")
	runGuestCases(t, e, []guestCase{
		{"start a stopped VM by vmid string", "vm.start", `{"vm":"101"}`, 200, "ok", "", func(t *testing.T, e *env, res events.Result) {
			wantGuestStatus(101, "running")(t, e, res)
			var out struct {
				VMID  string   `json:"vmid"`
				UPIDs []string `json:"upids"`
			}
			if err := json.Unmarshal(res.Output, &out); err != nil || out.VMID != "101" || len(out.UPIDs) != 1 || !strings.HasPrefix(out.UPIDs[0], "UPID:pve2:") {
				t.Errorf("output %s", res.Output)
			}
		}},
		{"start a running VM by name", "vm.start", `{"vm":"web-01"}`, 200, "already_running", "", nil},
		{"vmid as a number", "vm.start", `{"vm":100}`, 200, "already_running", "", nil},
		{"stop a stopped container", "vm.stop", `{"vm":201}`, 200, "already_stopped", "", nil},
		{"force-stop a running container", "vm.stop", `{"vm":"ct-pve3","force":true}`, 200, "ok", "", wantGuestStatus(202, "stopped")},
		{"reboot a stopped VM", "vm.reboot", `{"vm":103}`, 409, "refused", "vm_not_running", nil},
		{"suspend a container", "vm.suspend", `{"vm":200}`, 409, "refused", "unsupported_for_container", nil},
		{"suspend a running VM", "vm.suspend", `{"vm":"web-01"}`, 200, "ok", "", wantGuestStatus(100, "paused")},
		{"resume it", "vm.resume", `{"vm":100}`, 200, "ok", "", wantGuestStatus(100, "running")},
		{"forced container reboot is stop then start", "vm.reboot", `{"vm":200,"force":true}`, 200, "ok", "", func(t *testing.T, e *env, res events.Result) {
			var out struct{ UPIDs []string }
			_ = json.Unmarshal(res.Output, &out)
			if len(out.UPIDs) != 2 || !strings.Contains(out.UPIDs[0], ":vzstop:") || !strings.Contains(out.UPIDs[1], ":vzstart:") {
				t.Errorf("upids %v, want vzstop then vzstart", out.UPIDs)
			}
			wantGuestStatus(200, "running")(t, e, res)
		}},
		{"reboot a running VM", "vm.reboot", `{"vm":100}`, 200, "ok", "", wantGuestStatus(100, "running")},
		{"a name matching two guests", "vm.start", `{"vm":"dup"}`, 409, "refused", "vm_ambiguous", nil},
		{"unknown name", "vm.start", `{"vm":"nope"}`, 404, "refused", "vm_not_found", nil},
		{"unknown vmid", "vm.stop", `{"vm":"4242"}`, 404, "refused", "vm_not_found", nil},
		{"the task fails", "vm.stop", `{"vm":102}`, 502, "failed", "task_failed", func(t *testing.T, e *env, res events.Result) {
			if !strings.Contains(res.Detail, "exit code 255") {
				t.Errorf("detail %q lacks the exit status", res.Detail)
			}
		}},
		{"invalid vm", "vm.start", `{"vm":"bad name!"}`, 422, "refused", "invalid_body", nil},
		{"vmid below 100", "vm.start", `{"vm":42}`, 422, "refused", "invalid_body", nil},
	})

	// Journal: refusals before the guest was found are not journaled; VM 100 journals on its
	// NetBox VM; guests without one on the endpoint with the vmid.
	var onVM, onEndpoint101 int
	for _, je := range e.netbox.JournalEntries() {
		switch {
		case je.ObjectType == "virtualization.virtualmachine" && je.ObjectID == 1:
			onVM++
		case je.ObjectType == "netbox_proxbox.proxmoxendpoint" && strings.Contains(je.Comments, "- vmid: 101"):
			onEndpoint101++
		}
		if strings.Contains(je.Comments, "vm_not_found") || strings.Contains(je.Comments, "vm_ambiguous") {
			t.Errorf("a resolution refusal was journaled: %s", je.Comments)
		}
	}
	if onVM != 5 || onEndpoint101 != 1 {
		t.Errorf("journal entries on NetBox VM 1: %d (want 5), on the endpoint for 101: %d (want 1)", onVM, onEndpoint101)
	}
}

// TestGuestIdempotencyByNameOrVMID: a name and the vmid it resolves to are the same request.
func TestGuestIdempotencyByNameOrVMID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	first := e.guestCommand("vm.start", `{"vm":"db-01"}`)
	first.IdempotencyKey = "start-db"
	if r := e.send(first); r.Status != 200 || r.Result != "ok" {
		t.Fatalf("first %d %s", r.Status, r.Result)
	}
	again := e.guestCommand("vm.start", `{"vm":101}`)
	again.IdempotencyKey = "start-db"
	if r := e.send(again); !r.Replayed || r.Result != "ok" {
		t.Fatalf("replay %+v", r)
	}
	starts := 0
	for _, task := range e.pve.Tasks() {
		if task.Type == "qmstart" && task.VMID == 101 {
			starts++
		}
	}
	if starts != 1 {
		t.Errorf("qmstart tasks = %d, want 1", starts)
	}
}

// TestSnapshots pins the snapshot verbs for VMs and containers, and the reserved name.
func TestSnapshots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	list := func(t *testing.T, vm string) []map[string]any {
		t.Helper()
		res := e.send(e.guestCommand("vm.snapshot.list", fmt.Sprintf(`{"vm":%q}`, vm)))
		if res.Status != 200 {
			t.Fatalf("list %s: %d %s", vm, res.Status, res.Reason)
		}
		var out struct{ Snapshots []map[string]any }
		if err := json.Unmarshal(res.Output, &out); err != nil {
			t.Fatalf("list output %s", res.Output)
		}
		return out.Snapshots
	}
	names := func(snaps []map[string]any) []string {
		var n []string
		for _, s := range snaps {
			n = append(n, s["name"].(string))
		}
		slices.Sort(n)
		return n
	}
	if got := names(list(t, "200")); !slices.Equal(got, []string{"base", "before-update", "experiment"}) {
		t.Fatalf("container snapshots %v (current must not be listed)", got)
	}
	runGuestCases(t, e, []guestCase{
		{"create with memory on a container (ignored)", "vm.snapshot.create", `{"vm":200,"snapshot":"snap1","description":"d","include_memory":true}`, 201, "created", "", nil},
		{"create with memory on a VM", "vm.snapshot.create", `{"vm":"web-01","snapshot":"mem1","include_memory":true}`, 201, "created", "", nil},
		{"rollback and start", "vm.snapshot.rollback", `{"vm":201,"snapshot":"base","start":true}`, 200, "ok", "", wantGuestStatus(201, "running")},
		{"delete", "vm.snapshot.delete", `{"vm":200,"snapshot":"snap1"}`, 200, "ok", "", nil},
		{"delete a missing snapshot", "vm.snapshot.delete", `{"vm":200,"snapshot":"ghost"}`, 200, "already_absent", "", nil},
		{"create current", "vm.snapshot.create", `{"vm":200,"snapshot":"current"}`, 422, "refused", "reserved_snapshot_name", nil},
		{"rollback current", "vm.snapshot.rollback", `{"vm":100,"snapshot":"current"}`, 422, "refused", "reserved_snapshot_name", nil},
		{"delete current", "vm.snapshot.delete", `{"vm":100,"snapshot":"current"}`, 422, "refused", "reserved_snapshot_name", nil},
		{"bad snapshot name", "vm.snapshot.create", `{"vm":100,"snapshot":"1bad"}`, 422, "refused", "invalid_body", nil},
	})
	memory := map[string]bool{}
	for _, s := range list(t, "100") {
		memory[s["name"].(string)] = s["has_memory"].(bool)
		if s["created"] == "" {
			t.Errorf("snapshot %v without created", s)
		}
	}
	if !memory["mem1"] {
		t.Errorf("VM snapshot with memory: has_memory %v", memory)
	}
	for _, s := range list(t, "200") {
		if s["name"] == "snap1" {
			t.Errorf("deleted snapshot still listed")
		}
	}
	for _, rec := range e.pve.RequestLog() {
		if strings.Contains(rec.Path, "/snapshot/current") {
			t.Errorf("a request named current: %s %s", rec.Method, rec.Path)
		}
	}
}

// TestNodeReboot pins node.reboot: the node goes away, the verb answers ok, journaled on the
// endpoint.
func TestNodeReboot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	runGuestCases(t, e, []guestCase{
		{"reboot pve3", "node.reboot", `{"node":"pve3"}`, 200, "ok", "", func(t *testing.T, e *env, _ events.Result) {
			if n := e.pve.Requests("POST", "/nodes/pve3/status"); n != 1 {
				t.Errorf("reboot requests %d", n)
			}
			entries := e.netbox.JournalEntries()
			if len(entries) != 1 || entries[0].ObjectType != "netbox_proxbox.proxmoxendpoint" || !strings.Contains(entries[0].Comments, "- node: pve3") {
				t.Errorf("journal %+v", entries)
			}
		}},
		{"bad node name", "node.reboot", `{"node":"-x"}`, 422, "refused", "invalid_body", nil},
	})
}

// TestVMConfigGet pins vm.config.get: the parsed configuration, not journaled.
func TestVMConfigGet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	res := e.send(e.guestCommand("vm.config.get", `{"vm":"db-01"}`))
	if res.Status != 200 || res.Result != "ok" {
		t.Fatalf("%d %s %s", res.Status, res.Reason, res.Detail)
	}
	var cfg guestconfig.Config
	if err := json.Unmarshal(res.Output, &cfg); err != nil {
		t.Fatalf("output: %v", err)
	}
	if cfg.VMID != "101" || cfg.Node != "pve2" || cfg.Type != "qemu" || cfg.Firmware != "ovmf" || cfg.Machine != "q35" || len(cfg.NICs) != 3 || len(cfg.PCI) == 0 || len(cfg.USB) == 0 {
		t.Errorf("config %+v", cfg)
	}
	for _, d := range cfg.Disks {
		if strings.Contains(d.Volume, "cloudinit") {
			t.Errorf("cloud-init drive listed as a disk: %+v", d)
		}
	}
	ct := e.send(e.guestCommand("vm.config.get", `{"vm":200}`))
	if ct.Status != 200 || !strings.Contains(string(ct.Output), `"type":"lxc"`) {
		t.Errorf("container config %d %s", ct.Status, ct.Output)
	}
	if n := len(e.netbox.JournalEntries()); n != 0 {
		t.Errorf("reads journaled %d entries", n)
	}
}

// TestVMList pins vm.list: vmids as strings ordered numerically, templates marked, node filter.
func TestVMList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.pve.AddGuest(simpve.GuestSpec{VMID: 99, Node: "pve2", Name: "low"})
	e.start()
	list := func(data string) []map[string]any {
		t.Helper()
		res := e.send(e.guestCommand("vm.list", data))
		if res.Status != 200 {
			t.Fatalf("vm.list %d %s", res.Status, res.Reason)
		}
		var out struct{ VMs []map[string]any }
		if err := json.Unmarshal(res.Output, &out); err != nil {
			t.Fatalf("output %s", res.Output)
		}
		return out.VMs
	}
	all := list(`{}`)
	var ids []string
	for _, v := range all {
		ids = append(ids, v["vmid"].(string))
		if v["vmid"] == "9000" && v["template"] != true {
			t.Errorf("template not marked: %v", v)
		}
	}
	if len(ids) < 3 || ids[0] != "99" || ids[1] != "100" || ids[len(ids)-1] != "9000" {
		t.Errorf("order %v, want 99, 100, … 9000", ids)
	}
	for _, v := range list(`{"node":"pve2"}`) {
		if v["node"] != "pve2" {
			t.Errorf("node filter leaked %v", v)
		}
	}
}

// TestResumedGuestCommandsNeverWriteTwice: a replica recorded the dispatch of a guest verb and
// died; the redelivery confirms by reading (ok when the effect is in place) or answers
// proxmox_write_unconfirmed, and never sends the write again.
func TestResumedGuestCommandsNeverWriteTwice(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, verb, data string
		wantStatus       int
		wantReason       string
	}{
		{"start whose effect is in place", "vm.start", `{"vm":100}`, 200, ""},
		{"stop whose effect is not in place", "vm.stop", `{"vm":100}`, 502, "proxmox_write_unconfirmed"},
		{"reboot cannot be confirmed", "vm.reboot", `{"vm":100}`, 502, "proxmox_write_unconfirmed"},
		{"snapshot created", "vm.snapshot.create", `{"vm":200,"snapshot":"base"}`, 201, ""},
		{"snapshot deleted", "vm.snapshot.delete", `{"vm":200,"snapshot":"gone"}`, 200, ""},
		{"node reboot", "node.reboot", `{"node":"pve2"}`, 502, "proxmox_write_unconfirmed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cmd := e.guestCommand(tc.verb, tc.data)
			e.deadReplica(cmd, 200*time.Millisecond, true, "write")
			time.Sleep(300 * time.Millisecond)
			tasksBefore := len(e.pve.Tasks())
			e.start()
			res := e.send(cmd)
			if res.Status != tc.wantStatus || res.Reason != tc.wantReason {
				t.Fatalf("got %d %s (%s), want %d %q", res.Status, res.Reason, res.Detail, tc.wantStatus, tc.wantReason)
			}
			if n := len(e.pve.Tasks()); n != tasksBefore {
				t.Errorf("tasks %d → %d: the resumed command wrote again", tasksBefore, n)
			}
			for _, rec := range e.pve.RequestLog() {
				if rec.Method != "GET" {
					t.Errorf("a write after resuming: %s %s", rec.Method, rec.Path)
				}
			}
		})
	}
}

// TestLostPowerAnswerIsConfirmed: Proxmox applied a start but its answer was lost; the verb
// confirms by reading instead of sending the start again.
func TestLostPowerAnswerIsConfirmed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start()
	e.pve.DropAnswerAfterApply("POST", "/nodes/pve2/qemu/101/status/start", 1)
	res := e.send(e.guestCommand("vm.start", `{"vm":101}`))
	if res.Status != 200 || res.Result != "ok" {
		t.Fatalf("%d %s %s %s", res.Status, res.Result, res.Reason, res.Detail)
	}
	if n := e.pve.Requests("POST", "/nodes/pve2/qemu/101/status/start"); n != 1 {
		t.Errorf("starts sent = %d, want 1", n)
	}
}
