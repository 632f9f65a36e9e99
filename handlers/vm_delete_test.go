package handlers

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestVMDeleteDecode pins vm.delete's data: the defaults (purge and
// destroy_unreferenced_disks true, stop_first false) are part of the request fingerprint, so
// a body that spells them out is the same request; wrong types name their field.
func TestVMDeleteDecode(t *testing.T) {
	t.Parallel()
	fp := func(t *testing.T, data string) string {
		t.Helper()
		p, out := VMDelete().prepare(json.RawMessage(data))
		if out != nil {
			t.Fatalf("prepare(%s) = %+v", data, out)
		}
		return p.fingerprint
	}
	if a, b := fp(t, `{"vm":100}`), fp(t, `{"vm":"100","purge":true,"destroy_unreferenced_disks":true,"stop_first":false}`); a != b {
		t.Errorf("defaults spelled out change the fingerprint: %s vs %s", a, b)
	}
	if a, b := fp(t, `{"vm":100}`), fp(t, `{"vm":100,"purge":false}`); a == b {
		t.Error("purge false has the fingerprint of the default")
	}
	for data, field := range map[string]string{
		`{"vm":100,"purge":"yes"}`:                  "purge",
		`{"vm":100,"destroy_unreferenced_disks":1}`: "destroy_unreferenced_disks",
		`{"vm":100,"stop_first":"true"}`:            "stop_first",
		`{"vm":99}`:                                 "vm",
		`{"purge":true}`:                            "vm",
		`{"vm":"-bad-"}`:                            "vm",
	} {
		_, out := VMDelete().prepare(json.RawMessage(data))
		if out == nil || out.Status != 422 || out.Reason != ReasonInvalidBody || !slices.Equal(out.Fields, []string{field}) {
			t.Errorf("prepare(%s) = %+v, want 422 invalid_body naming %s", data, out, field)
		}
	}
}

// deleteResult handles one vm.delete as a first delivery and returns its result.
func (e *rtEnv) deleteResult(t *testing.T, id, data string) events.Result {
	t.Helper()
	return e.resultOf(t, "vm.delete", id, data)
}

// pveWrites returns the simulator's non-GET requests as "METHOD path?params".
func pveWrites(sim *simpve.Server) []string {
	var out []string
	for _, r := range sim.RequestLog() {
		if r.Method != http.MethodGet {
			line := r.Method + " " + r.Path
			if len(r.Params) > 0 {
				line += "?" + r.Params.Encode()
			}
			out = append(out, line)
		}
	}
	return out
}

// TestVMDeleteOutcomes pins every outcome of vm.delete through the real pipeline against the
// simulator: the writes it sends (and that refusals send none), purge and
// destroy-unreferenced-disks as PVE parameters, the output, PVE's refusals of a guest that
// changed between the read and the DELETE, and the journal of an already absent guest on its
// NetBox VM.
func TestVMDeleteOutcomes(t *testing.T) {
	t.Parallel()
	const del103 = "DELETE /nodes/pve1/qemu/103?destroy-unreferenced-disks=1&purge=1"
	tests := []struct {
		name       string
		setup      func(e *rtEnv)
		data       string
		status     int
		result     string
		reason     string
		writes     []string
		tasks      []string // worker types of the output's upids
		gone       int64    // a vmid that must not exist afterwards
		journaled  bool     // a finalized journal entry
		detailLike string
	}{
		{name: "stopped VM", data: `{"vm":103}`, status: 200, result: ResultOK,
			writes: []string{del103}, tasks: []string{"qmdestroy"}, gone: 103, journaled: true},
		{name: "without purge nor unreferenced disks", data: `{"vm":103,"purge":false,"destroy_unreferenced_disks":false}`, status: 200, result: ResultOK,
			writes: []string{"DELETE /nodes/pve1/qemu/103?destroy-unreferenced-disks=0&purge=0"}, tasks: []string{"qmdestroy"}, gone: 103, journaled: true},
		{name: "stopped container by name", data: `{"vm":"ct-pve2"}`, status: 200, result: ResultOK,
			writes: []string{"DELETE /nodes/pve2/lxc/201?destroy-unreferenced-disks=1&purge=1"}, tasks: []string{"vzdestroy"}, gone: 201, journaled: true},
		{name: "running VM", data: `{"vm":"web-01"}`, status: 409, result: ResultRefused, reason: ReasonVMRunning, journaled: true,
			detailLike: "stop_first: true"},
		{name: "paused VM", data: `{"vm":105}`, status: 409, result: ResultRefused, reason: ReasonVMRunning, journaled: true},
		{name: "running container", data: `{"vm":200}`, status: 409, result: ResultRefused, reason: ReasonVMRunning, journaled: true},
		{name: "stop first, then delete", data: `{"vm":100,"stop_first":true}`, status: 200, result: ResultOK,
			writes: []string{"POST /nodes/pve1/qemu/100/status/stop", "DELETE /nodes/pve1/qemu/100?destroy-unreferenced-disks=1&purge=1"},
			tasks:  []string{"qmstop", "qmdestroy"}, gone: 100, journaled: true},
		{name: "stop first, a stopped guest is not stopped", data: `{"vm":103,"stop_first":true}`, status: 200, result: ResultOK,
			writes: []string{del103}, tasks: []string{"qmdestroy"}, gone: 103, journaled: true},
		{name: "protected, even with stop_first", setup: func(e *rtEnv) {
			e.pve.AddGuest(simpve.GuestSpec{VMID: 330, Node: "pve3", Name: "guarded", Status: "running", Config: map[string]string{"protection": "1"}})
		}, data: `{"vm":"guarded","stop_first":true}`, status: 409, result: ResultRefused, reason: ReasonVMProtected, journaled: true,
			detailLike: "protection: 1"},
		{name: "protected demo VM", data: `{"vm":"db-01"}`, status: 409, result: ResultRefused, reason: ReasonVMProtected, journaled: true},
		{name: "a vmid no guest has", data: `{"vm":777}`, status: 200, result: ResultAlreadyAbsent, journaled: true},
		{name: "a name nothing has", data: `{"vm":"never-was"}`, status: 404, result: ResultRefused, reason: ReasonVMNotFound},
		{name: "an ambiguous name", data: `{"vm":"dup"}`, status: 409, result: ResultRefused, reason: ReasonVMAmbiguous},
		{name: "started between the read and the DELETE", setup: func(e *rtEnv) {
			e.pve.FailNext("DELETE", "/nodes/pve1/qemu/103", 1, 500, "VM 103 is running - destroy failed")
		}, data: `{"vm":103}`, status: 409, result: ResultRefused, reason: ReasonVMRunning, writes: []string{del103}, journaled: true},
		{name: "protected between the read and the DELETE", setup: func(e *rtEnv) {
			e.pve.FailNext("DELETE", "/nodes/pve1/qemu/103", 1, 500, "can't remove VM 103 - protection mode enabled")
		}, data: `{"vm":103}`, status: 409, result: ResultRefused, reason: ReasonVMProtected, writes: []string{del103}, journaled: true},
		{name: "gone from its node but still listed", setup: func(e *rtEnv) {
			e.pve.FailNext("DELETE", "/nodes/pve1/qemu/103", 1, 500, "Configuration file 'nodes/pve1/qemu-server/103.conf' does not exist")
		}, data: `{"vm":103}`, status: 502, result: ResultFailed, reason: ReasonProxmoxRefused, writes: []string{del103}, journaled: true},
		{name: "the destroy task fails", setup: func(e *rtEnv) {
			e.pve.FailTask("pve1", 103, "can't lock file '/var/lock/qemu-server/lock-103.conf' - got timeout")
		}, data: `{"vm":103}`, status: 502, result: ResultFailed, reason: ReasonTaskFailed, writes: []string{del103}, journaled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newRTEnv(t)
			if tt.setup != nil {
				tt.setup(e)
			}
			res := e.deleteResult(t, "del", tt.data)
			if res.Status != tt.status || res.Result != tt.result || res.Reason != tt.reason {
				t.Fatalf("result %d %s %q (%s), want %d %s %q", res.Status, res.Result, res.Reason, res.Detail, tt.status, tt.result, tt.reason)
			}
			if !strings.Contains(res.Detail, tt.detailLike) {
				t.Errorf("detail %q, want it to say %q", res.Detail, tt.detailLike)
			}
			if got := pveWrites(e.pve); !slices.Equal(got, tt.writes) {
				t.Errorf("writes %q, want %q", got, tt.writes)
			}
			if res.Finalized() != tt.journaled {
				t.Errorf("journal finalized %v, want %v", res.Finalized(), tt.journaled)
			}
			if tt.gone != 0 {
				if _, exists := e.pve.Guest(tt.gone); exists {
					t.Errorf("guest %d still exists", tt.gone)
				}
			}
			if tt.status != 200 {
				return
			}
			var out struct {
				VMID  string   `json:"vmid"`
				Node  string   `json:"node"`
				UPIDs []string `json:"upids"`
			}
			if err := json.Unmarshal(res.Output, &out); err != nil || out.UPIDs == nil {
				t.Fatalf("output %s (%v), want vmid, node and upids", res.Output, err)
			}
			var types []string
			for _, u := range out.UPIDs {
				p, err := proxmox.ParseUPID(u)
				if err != nil {
					t.Fatalf("upid %q: %v", u, err)
				}
				types = append(types, p.Type)
			}
			if !slices.Equal(types, tt.tasks) {
				t.Errorf("output upids are %v tasks, want %v", types, tt.tasks)
			}
		})
	}
}

// TestVMDeleteAgain: deleting a guest, then the same vmid again, answers ok then
// already_absent, with one DELETE; the repeat is journaled on the guest's NetBox VM, which
// outlives the Proxmox guest. The guest's name no longer resolves: 404 vm_not_found.
func TestVMDeleteAgain(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t)
	if res := e.deleteResult(t, "first", `{"vm":"web-01","stop_first":true}`); res.Status != 200 || res.Result != ResultOK {
		t.Fatalf("first delete %d %s %s", res.Status, res.Reason, res.Detail)
	}
	again := e.deleteResult(t, "again", `{"vm":100}`)
	if again.Status != 200 || again.Result != ResultAlreadyAbsent || !again.Finalized() {
		t.Fatalf("again %d %s (finalized %v)", again.Status, again.Result, again.Finalized())
	}
	if !strings.Contains(string(again.Output), `"vmid":"100"`) || !strings.Contains(string(again.Output), `"upids":[]`) {
		t.Errorf("already_absent output %s", again.Output)
	}
	byName := e.deleteResult(t, "by-name", `{"vm":"web-01"}`)
	if byName.Status != 404 || byName.Reason != ReasonVMNotFound {
		t.Errorf("by name after the delete: %d %s", byName.Status, byName.Reason)
	}
	if n := e.pve.Requests("DELETE", "/nodes/pve1/qemu/100"); n != 1 {
		t.Errorf("DELETEs = %d, want 1", n)
	}
	onVM := 0
	for _, je := range e.nb.JournalEntries() {
		if je.ObjectType == "virtualization.virtualmachine" && je.ObjectID == 1 {
			onVM++
			if !strings.Contains(je.Comments, "- verb: vm.delete") || !strings.Contains(je.Comments, "- purge: true") {
				t.Errorf("journal comment %q", je.Comments)
			}
		}
	}
	if onVM != 2 {
		t.Errorf("journal entries on NetBox VM 1: %d, want 2 (the delete and the repeat)", onVM)
	}
}

// TestVMDeleteLostAnswer: Proxmox destroyed the guest but the DELETE's answer was lost; the
// pipeline confirms by reading that the guest is gone (200 ok) and never sends a second
// DELETE.
func TestVMDeleteLostAnswer(t *testing.T) {
	t.Parallel()
	e := newRTEnv(t)
	e.pve.DropAnswerAfterApply("DELETE", "/nodes/pve1/qemu/103", 1)
	res := e.deleteResult(t, "lost", `{"vm":103}`)
	if res.Status != 200 || res.Result != ResultOK || !res.Finalized() {
		t.Fatalf("%d %s %s %s", res.Status, res.Result, res.Reason, res.Detail)
	}
	if n := e.pve.Requests("DELETE", "/nodes/pve1/qemu/103"); n != 1 {
		t.Errorf("DELETEs = %d, want 1", n)
	}
}
