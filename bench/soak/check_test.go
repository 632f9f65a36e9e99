package main

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestResourceOf pins how a PVE guest path is split into vmid and the rest.
func TestResourceOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path string
		vmid int64
		rest string
		ok   bool
	}{
		{"/nodes/pve1/qemu/100/status/start", 100, "status/start", true},
		{"/nodes/pve2/lxc/201/snapshot/s1", 201, "snapshot/s1", true},
		{"/nodes/pve1/status", 0, "", false},
		{"/storage", 0, "", false},
		{"/nodes/pve1/qemu/x/config", 0, "", false},
	}
	for _, tt := range tests {
		vmid, rest, ok := resourceOf(tt.path)
		if vmid != tt.vmid || rest != tt.rest || ok != tt.ok {
			t.Errorf("resourceOf(%q) = %d, %q, %v; want %d, %q, %v", tt.path, vmid, rest, ok, tt.vmid, tt.rest, tt.ok)
		}
	}
}

// TestGuestOps pins the writes a successful power verb makes: two for a forced container reboot.
func TestGuestOps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		verb, data string
		vmid       int64
		ops        int
	}{
		{"vm.start", `{"vm":100}`, 100, 1},
		{"vm.reboot", `{"vm":200,"force":true}`, 200, 2},
		{"vm.reboot", `{"vm":100,"force":true}`, 100, 1},
		{"vm.snapshot.create", `{"vm":100,"snapshot":"a"}`, 0, 0},
	}
	for _, tt := range tests {
		vmid, ops := guestOps(tt.verb, tt.data)
		if vmid != tt.vmid || ops != tt.ops {
			t.Errorf("guestOps(%s, %s) = %d, %d; want %d, %d", tt.verb, tt.data, vmid, ops, tt.vmid, tt.ops)
		}
	}
}

// TestPlanMix checks the generator: deterministic per seed, the canary only in secret fields,
// poison and duplicates present, and Idempotency-Keys reused only within the reuse span.
func TestPlanMix(t *testing.T) {
	t.Parallel()
	const canary = "canary-pw-test"
	a := newGenerator(7, "r", canary, 40).plan(1000)
	b := newGenerator(7, "r", canary, 40).plan(1000)
	poison, dups, keyed := 0, 0, 0
	firstUse := map[string]int{}
	for i, p := range a {
		if p.cmd.ID != b[i].cmd.ID || string(p.cmd.Data) != string(b[i].cmd.Data) {
			t.Fatalf("plan %d differs between two runs with one seed", i)
		}
		if p.poison != nil {
			poison++
			continue
		}
		if p.dup {
			dups++
		}
		if strings.Contains(string(p.cmd.Data), canary) && p.cmd.Verb != "storage.pbs.create" && p.cmd.Verb != "vm.provision" {
			t.Errorf("%s (%s) carries the canary outside a secret field", p.cmd.ID, p.cmd.Verb)
		}
		if k := p.cmd.IdempotencyKey; k != "" {
			keyed++
			if f, ok := firstUse[k]; !ok {
				firstUse[k] = i
			} else if i-f > 40 {
				t.Errorf("key %s reused %d commands after its first use (span 40)", k, i-f)
			}
		}
	}
	if poison < 5 || poison > 40 || dups < 20 || dups > 90 || keyed < 100 {
		t.Errorf("mix: %d poison, %d duplicates, %d keyed of 1000", poison, dups, keyed)
	}
}

// TestCheckPower pins the attribution of power writes: a command that sent its write twice is
// flagged, two commands that wrote once each are not.
func TestCheckPower(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p1 := &planned{cmd: events.Command{ID: "c1", Verb: "vm.reboot"}, guest: 100, ops: 1}
	p2 := &planned{cmd: events.Command{ID: "c2", Verb: "vm.reboot"}, guest: 100, ops: 1}
	w := func(sec int) writeRec {
		return writeRec{Method: "POST", Path: "/nodes/pve1/qemu/100/status/reboot", Status: 200, At: t0.Add(time.Duration(sec) * time.Second)}
	}
	tests := []struct {
		name   string
		writes []writeRec
		want   int
	}{
		{"one each", []writeRec{w(1), w(11)}, 0},
		{"first sent twice", []writeRec{w(1), w(5), w(11)}, 1},
		{"before any start", []writeRec{{Method: "POST", Path: "/nodes/pve1/qemu/100/status/reboot", At: t0.Add(-time.Second)}}, 1},
		// finding 7: c2's started step was dropped, so timing gives its write to c1; its done
		// step names the task.
		{"the task's UPID wins over timing", []writeRec{w(1), {Method: "POST", Path: "/nodes/pve1/qemu/100/status/reboot", Status: 200,
			UPID: "U2", At: t0.Add(5 * time.Second)}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &collected{started: map[string][]time.Time{"c1": {t0}, "c2": {t0.Add(10 * time.Second)}}, upids: map[string]string{"U2": "c2"}}
			rep := &report{}
			rep.checkPower(tt.writes, []*planned{p1, p2}, c)
			if len(rep.dupWrites) != tt.want {
				t.Errorf("flagged %v, want %d items", rep.dupWrites, tt.want)
			}
		})
	}
}

// TestFaultsLostAnswer checks that a lost answer applies the write, closes the connection
// unanswered and records the write with its UPID.
func TestFaultsLostAnswer(t *testing.T) {
	t.Parallel()
	f := &faults{}
	f.setLostRate(1)
	sim := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":"UPID:pve1:1:2:3:qmstart:100:u:"}`))
	})
	srv := httptest.NewServer(f.pve(sim))
	t.Cleanup(srv.Close)
	resp, err := http.Post(srv.URL+"/api2/json/nodes/pve1/qemu/100/status/start", "application/x-www-form-urlencoded", strings.NewReader("vmid=100"))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got an answer (%s), want a closed connection", resp.Status)
	}
	recs := f.writes.all()
	if len(recs) != 1 || !recs[0].Lost || recs[0].UPID == "" || recs[0].Params["vmid"] != "100" || recs[0].Path != "/nodes/pve1/qemu/100/status/start" {
		t.Fatalf("write log = %+v", recs)
	}
	if f.lostAnswers.Load() != 1 {
		t.Errorf("lost answers = %d, want 1", f.lostAnswers.Load())
	}
}

// cmd returns a planned command of the soak's endpoint (guest and ops filled as the
// generator fills them).
func cmd(id, verb, data, key string) *planned {
	p := &planned{cmd: events.Command{ID: id, Source: soakSource, Verb: verb, Type: "proxbus." + verb, IdempotencyKey: key,
		Data: []byte(data)}}
	p.guest, p.ops = guestOps(verb, data)
	return p
}

// TestWriteResource pins the resource a PVE write is counted against.
func TestWriteResource(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rec  writeRec
		want string
	}{
		{writeRec{Method: "POST", Path: "/storage", Params: map[string]string{"storage": "s1"}}, "storage:s1"},
		{writeRec{Method: "POST", Path: "/nodes/pve1/qemu/9000/clone", Params: map[string]string{"newid": "1001"}}, "vm:1001"},
		{writeRec{Method: "POST", Path: "/nodes/pve1/qemu/1001/move_disk"}, "vm:1001"},
		{writeRec{Method: "POST", Path: "/nodes/pve1/qemu/1001/status/start"}, "vm:1001"},
		{writeRec{Method: "POST", Path: "/nodes/pve1/lxc/200/snapshot", Params: map[string]string{"snapname": "a"}}, "snap:200/a"},
		{writeRec{Method: "DELETE", Path: "/nodes/pve1/qemu/100/snapshot/a"}, "snapdel:100/a"},
		{writeRec{Method: "POST", Path: "/nodes/pve1/qemu/100/status/reboot"}, "power:100"},
		{writeRec{Method: "POST", Path: "/nodes/pve1/status"}, ""},
	}
	for _, tt := range tests {
		if got := writeResource(tt.rec); got != tt.want {
			t.Errorf("writeResource(%s %s) = %q, want %q", tt.rec.Method, tt.rec.Path, got, tt.want)
		}
	}
}

// TestPlanResource pins the resource a command writes and the steps that precede its write.
func TestPlanResource(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p    *planned
		want string
		step string // a step name that must be accepted ("" : any step)
	}{
		{cmd("c", "storage.pbs.create", `{"storage":"s1","datastore":"d"}`, ""), "storage:s1", "create_storage"},
		{cmd("c", "vm.provision", `{"new_vmid":1001}`, ""), "vm:1001", ""},
		{cmd("c", "vm.snapshot.create", `{"vm":100,"snapshot":"a"}`, ""), "snap:100/a", "create_snapshot"},
		{cmd("c", "vm.snapshot.delete", `{"vm":200,"snapshot":"a"}`, ""), "snapdel:200/a", "delete_snapshot"},
		{cmd("c", "vm.reboot", `{"vm":200,"force":true}`, ""), "power:200", "reboot_vm"},
		{cmd("c", "vm.list", `{}`, ""), "", ""},
		{&planned{cmd: events.Command{ID: "p"}, poison: &poison{kind: "data_not_json"}}, "", ""},
	}
	for _, tt := range tests {
		got, steps := planResource(tt.p)
		if got != tt.want {
			t.Errorf("planResource(%s %s) = %q, want %q", tt.p.cmd.Verb, tt.p.cmd.Data, got, tt.want)
		}
		if tt.step != "" && !steps[tt.step] {
			t.Errorf("planResource(%s): steps %v do not accept %s", tt.p.cmd.Verb, steps, tt.step)
		}
		if tt.want != "" && tt.step == "" && steps != nil {
			t.Errorf("planResource(%s): steps %v, want any (nil)", tt.p.cmd.Verb, steps)
		}
	}
}

// TestAttribute pins how writes are given to commands: the candidate with the latest started
// step of the write's kind before it, else the first candidate, except unowned power writes.
func TestAttribute(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	plan := []*planned{
		cmd("a", "storage.pbs.create", `{"storage":"s1","datastore":"d"}`, "k"),
		cmd("b", "storage.pbs.create", `{"storage":"s1","datastore":"d"}`, "k"), // its key twin
		cmd("p", "vm.start", `{"vm":100}`, ""),
	}
	step := func(id, name string, s int) stepLine {
		return stepLine{Command: id, Step: name, Status: string(events.StepStarted), At: at(s)}
	}
	storage := func(s int) writeRec {
		return writeRec{Method: "POST", Path: "/storage", Params: map[string]string{"storage": "s1"}, Status: 200, At: at(s)}
	}
	power := writeRec{Method: "POST", Path: "/nodes/pve1/qemu/100/status/start", Status: 200, UPID: "U1", At: at(5)}
	tests := []struct {
		name  string
		recs  []writeRec
		tasks []simpve.TaskInfo
		steps []stepLine
		want  map[string]int // command id → writes attributed
		eff   map[string]int // command id → effective writes
	}{
		{"latest started step wins", []writeRec{storage(5)}, nil,
			[]stepLine{step("a", "create_storage", 1), step("b", "create_storage", 3)}, map[string]int{"b": 1}, map[string]int{"b": 1}},
		{"a step after the write does not count", []writeRec{storage(2)}, nil,
			[]stepLine{step("a", "create_storage", 1), step("b", "create_storage", 3)}, map[string]int{"a": 1}, map[string]int{"a": 1}},
		{"another step name does not count", []writeRec{storage(5)}, nil,
			[]stepLine{step("a", "create_storage", 1), step("b", "read_storage", 3)}, map[string]int{"a": 1}, map[string]int{"a": 1}},
		{"no step: the first candidate", []writeRec{storage(5)}, nil, nil, map[string]int{"a": 1}, map[string]int{"a": 1}},
		{"not answered 200: not a write", []writeRec{{Method: "POST", Path: "/storage", Params: map[string]string{"storage": "s1"}, Status: 500, At: at(5)}},
			nil, nil, map[string]int{}, map[string]int{}},
		{"a power write without a start stays unattributed", []writeRec{power}, nil, nil, map[string]int{}, map[string]int{}},
		{"a failed task is a write without effect", []writeRec{power}, []simpve.TaskInfo{{UPID: "U1", ExitStatus: "ERROR"}},
			[]stepLine{step("p", "start_vm", 4)}, map[string]int{"p": 1}, map[string]int{}},
		{"the step naming the write's task wins over timing",
			[]writeRec{{Method: "POST", Path: "/storage", Params: map[string]string{"storage": "s1"}, Status: 200, UPID: "U2", At: at(5)}}, nil,
			[]stepLine{step("a", "create_storage", 1), step("b", "create_storage", 3), {Command: "a", Step: "create_storage", Status: "done", UPID: "U2", At: at(6)}},
			map[string]int{"a": 1}, map[string]int{"a": 1}},
		{"a power write without a start, known by its task", []writeRec{power}, nil,
			[]stepLine{{Command: "p", Step: "start_vm", Status: "done", UPID: "U1", At: at(6)}}, map[string]int{"p": 1}, map[string]int{"p": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &collected{steps: tt.steps, upids: taskOwners(tt.steps, nil)}
			got := attribute(tt.recs, tt.tasks, plan, c)
			for _, id := range []string{"a", "b", "p"} {
				eff := 0
				for _, w := range got[id] {
					if w.effective {
						eff++
					}
				}
				if len(got[id]) != tt.want[id] || eff != tt.eff[id] {
					t.Errorf("%s: %d writes (%d effective), want %d (%d)", id, len(got[id]), eff, tt.want[id], tt.eff[id])
				}
			}
		})
	}
}

// TestCheckAnswers pins the first-hand, not-executed and dead-letter checks.
func TestCheckAnswers(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	res := func(status int, result, reason string, replayed bool) resultEv {
		return resultEv{eventID: "x.result", at: t0, res: events.Result{Status: status, Result: result, Reason: reason, Replayed: replayed}}
	}
	ok := res(200, "ok", "", false)
	wrote := []written{{rec: writeRec{Method: "POST", Path: "/nodes/pve1/qemu/100/status/start", At: t0}, resource: "power:100", effective: true}}
	tests := []struct {
		name                              string
		p                                 *planned
		twin                              bool       // a second plan command shares its Idempotency-Key
		twinResults                       []resultEv // that command's results
		results                           []resultEv
		dlq                               []string
		writes                            []written
		firstHand, twins, notExec, notAll int
		deadDone                          int
	}{
		{"one first-hand result", cmd("c", "vm.start", `{"vm":100}`, ""), false, nil, []resultEv{ok, res(200, "ok", "", true)}, nil, nil, 0, 0, 0, 0, 0},
		{"two first-hand messages", cmd("c", "vm.start", `{"vm":100}`, ""), false, nil, []resultEv{ok, ok}, nil, nil, 1, 0, 0, 0, 0},
		{"a replay only", cmd("c", "vm.start", `{"vm":100}`, ""), false, nil, []resultEv{res(200, "ok", "", true)}, nil, nil, 1, 0, 0, 0, 0},
		{"a key twin answered by a replay", cmd("c", "vm.start", `{"vm":100}`, "k"), true, []resultEv{ok},
			[]resultEv{res(200, "ok", "", true)}, nil, nil, 0, 1, 0, 0, 0},
		{"key twins both answered by replays", cmd("c", "vm.start", `{"vm":100}`, "k"), true, []resultEv{res(200, "ok", "", true)},
			[]resultEv{res(200, "ok", "", true)}, nil, nil, 1, 0, 0, 0, 0},
		{"a key twin with no answer", cmd("c", "vm.start", `{"vm":100}`, "k"), true, []resultEv{ok}, nil, []string{"max_deliveries"}, nil, 1, 0, 0, 0, 0},
		{"dead letter only", cmd("c", "vm.start", `{"vm":100}`, ""), false, nil, nil, []string{"invalid_command"}, nil, 1, 0, 0, 0, 0},
		{"503 not executed without a write", cmd("c", "vm.start", `{"vm":100}`, ""), false, nil,
			[]resultEv{res(503, "failed", "attempts_exhausted", false)}, []string{"max_deliveries"}, nil, 0, 0, 0, 1, 0},
		{"503 not executed that wrote", cmd("c", "vm.start", `{"vm":100}`, ""), false, nil,
			[]resultEv{res(503, "failed", "attempts_exhausted", false)}, []string{"max_deliveries"}, wrote, 0, 0, 1, 1, 1},
		{"503 of the old consumer that wrote", cmd("c", "vm.start", `{"vm":100}`, ""), false, nil,
			[]resultEv{res(503, "failed", "delivery_attempts_exhausted", false)}, nil, wrote, 0, 0, 1, 1, 0},
		{"dead letter of a finished command", cmd("c", "vm.start", `{"vm":100}`, ""), false, nil, []resultEv{ok}, []string{"max_deliveries"}, nil, 0, 0, 0, 0, 1},
		{"dead letter of a refused command", cmd("c", "vm.start", `{"vm":100}`, ""), false, nil,
			[]resultEv{res(409, "refused", "vm_not_running", false)}, []string{"max_deliveries"}, nil, 0, 0, 0, 0, 1},
		{"poison: a 400 and its dead letter", &planned{cmd: events.Command{ID: "c"}, poison: &poison{kind: "unknown_verb"}}, false, nil,
			[]resultEv{res(400, "refused", "invalid_command", false)}, []string{"invalid_command"}, nil, 0, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan := []*planned{tt.p}
			if tt.twin {
				plan = append([]*planned{cmd("c2", tt.p.cmd.Verb, string(tt.p.cmd.Data), tt.p.cmd.IdempotencyKey)}, plan...)
			}
			c := &collected{results: map[string][]resultEv{"c": tt.results, "c2": tt.twinResults}, dlq: map[string][]string{}}
			if tt.dlq != nil {
				c.dlq["c"] = tt.dlq
			}
			rep := &report{}
			rep.checkAnswers(plan, map[string]time.Time{"c": t0}, c, map[string][]written{"c": tt.writes}, finalState{})
			if len(rep.firstHandNot1) != tt.firstHand || rep.twinReplays != tt.twins || len(rep.notExecuted) != tt.notExec ||
				rep.notExecutedAll != tt.notAll || len(rep.deadDone) != tt.deadDone {
				t.Errorf("firstHandNot1 %v, twins %d, notExecuted %v (of %d), deadDone %v; want %d, %d, %d (of %d), %d",
					rep.firstHandNot1, rep.twinReplays, rep.notExecuted, rep.notExecutedAll, rep.deadDone,
					tt.firstHand, tt.twins, tt.notExec, tt.notAll, tt.deadDone)
			}
		})
	}
}

// TestJudge pins the comparison of an answer with the simulator's final state.
func TestJudge(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ans := func(status int, result, reason string) resultEv {
		return resultEv{at: t0, res: events.Result{Status: status, Result: result, Reason: reason}}
	}
	w := func(res, path string, sec int, effective bool) written {
		return written{rec: writeRec{Method: "POST", Path: path, At: t0.Add(time.Duration(sec) * time.Second)}, resource: res, effective: effective}
	}
	snapCreate := cmd("c", "vm.snapshot.create", `{"vm":100,"snapshot":"a"}`, "")
	snapDelete := cmd("c", "vm.snapshot.delete", `{"vm":100,"snapshot":"a"}`, "")
	pbs := cmd("c", "storage.pbs.create", `{"storage":"s1","datastore":"d1"}`, "")
	start := cmd("c", "vm.start", `{"vm":100}`, "")
	reboot := cmd("c", "vm.reboot", `{"vm":100}`, "")
	provision := cmd("c", "vm.provision", `{"new_vmid":1001}`, "")
	with := finalState{snapshots: map[int64]map[string]bool{100: {"a": true}}, storages: map[string]string{"s1": "d1"},
		guests: map[int64]bool{1001: true}}
	without := finalState{snapshots: map[int64]map[string]bool{100: {}}, storages: map[string]string{}, guests: map[int64]bool{}}
	other := finalState{storages: map[string]string{"s1": "d2"}}
	createW := w("snap:100/a", "/nodes/pve1/qemu/100/snapshot", 0, true)
	deleteW := w("snapdel:100/a", "/nodes/pve1/qemu/100/snapshot/a", 1, true)
	tests := []struct {
		name      string
		p         *planned
		a         resultEv
		ws        []written
		effective map[string][]written
		fs        finalState
		decided   bool
		wrong     bool
	}{
		{"create 201, snapshot there", snapCreate, ans(201, "created", ""), []written{createW}, nil, with, true, false},
		{"create 201, snapshot missing", snapCreate, ans(201, "created", ""), []written{createW}, nil, without, true, true},
		{"create 201, deleted later", snapCreate, ans(201, "created", ""), []written{createW}, map[string][]written{"snapdel:100/a": {deleteW}}, without, true, false},
		{"create 502 finalization failed is a success", snapCreate, ans(502, "created", "netbox_journal_finalization_failed"), nil, nil, with, true, false},
		{"create 502 unconfirmed, write took effect", snapCreate, ans(502, "failed", "proxmox_write_unconfirmed"), []written{createW}, nil, with, true, true},
		{"create 502, no write", snapCreate, ans(502, "failed", "proxmox_unreachable"), nil, nil, without, true, false},
		{"create 502, its task failed", snapCreate, ans(502, "failed", "task_failed"), []written{w("snap:100/a", "/x", 0, false)}, nil, without, true, false},
		{"delete 200, gone", snapDelete, ans(200, "ok", ""), []written{deleteW}, nil, without, true, false},
		{"delete 200, still there", snapDelete, ans(200, "already_absent", ""), nil, nil, with, true, true},
		{"delete 200 before its create ran", snapDelete, ans(200, "already_absent", ""), nil,
			map[string][]written{"snap:100/a": {w("snap:100/a", "/x", 5, true)}}, with, true, false},
		{"pbs 201 with its datastore", pbs, ans(201, "created", ""), nil, nil, with, true, false},
		{"pbs 200 with another datastore", pbs, ans(200, "already_present", ""), nil, nil, other, true, true},
		{"pbs 409 conflict, other datastore", pbs, ans(409, "refused", "storage_conflict"), nil, nil, other, true, false},
		{"pbs 409 conflict, same datastore", pbs, ans(409, "refused", "storage_conflict"), nil, nil, with, true, true},
		{"pbs 201, no storage", pbs, ans(201, "created", ""), nil, nil, without, true, true},
		{"4xx that wrote", start, ans(409, "refused", "vm_not_running"), []written{w("power:100", "/x", 0, true)}, nil, with, true, true},
		{"4xx without a write", start, ans(410, "refused", "command_expired"), nil, nil, with, true, false},
		{"power 502 whose write took effect", start, ans(502, "failed", "proxmox_write_unconfirmed"), []written{w("power:100", "/x", 0, true)}, nil, with, true, true},
		{"reboot 502 unconfirmed: by contract", reboot, ans(502, "failed", "proxmox_write_unconfirmed"), []written{w("power:100", "/x", 0, true)}, nil, with, false, false},
		{"power 200: not judged", start, ans(200, "ok", ""), nil, nil, with, false, false},
		{"provision 201, guest there", provision, ans(201, "created", ""), nil, nil, with, true, false},
		{"provision 201, no guest", provision, ans(201, "created", ""), nil, nil, without, true, true},
		{"provision 502: by contract", provision, ans(502, "failed", "relocate_disk_failed"), []written{w("vm:1001", "/x", 0, true)}, nil, without, false, false},
		{"a read: not judged", cmd("c", "vm.list", `{}`, ""), ans(200, "ok", ""), nil, nil, with, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			decided, wrong := judge(tt.p, tt.a, tt.ws, tt.effective, tt.fs)
			if decided != tt.decided || (wrong != "") != tt.wrong {
				t.Errorf("judge = %v, %q; want decided %v, wrong %v", decided, wrong, tt.decided, tt.wrong)
			}
		})
	}
}

// TestParseKillSchedule pins --cluster-kills.
func TestParseKillSchedule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    []plannedKill
		wantErr bool
	}{
		{"commands@0.2,events@0.45,meta@0.7", []plannedKill{{roleCommands, 0.2}, {roleEvents, 0.45}, {roleMeta, 0.7}}, false},
		{" meta@0 , meta@1 ", []plannedKill{{roleMeta, 0}, {roleMeta, 1}}, false},
		{"", nil, false},
		{"leader@0.5", nil, true},
		{"meta", nil, true},
		{"meta@1.5", nil, true},
		{"events@0.5,commands@0.2", nil, true},
	}
	for _, tt := range tests {
		got, err := parseKillSchedule(tt.in)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("parseKillSchedule(%q) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestTaskOwners pins which command a task UPID belongs to.
func TestTaskOwners(t *testing.T) {
	t.Parallel()
	res := func(upid, key string, replayed bool) resultEv {
		return resultEv{res: events.Result{Replayed: replayed, IdempotencyKey: key, Output: json.RawMessage(`{"upids":["` + upid + `"]}`)}}
	}
	tests := []struct {
		name    string
		steps   []stepLine
		results map[string][]resultEv
		want    map[string]string
	}{
		{"a step names it", []stepLine{{Command: "a", UPID: "UPID:1"}}, nil, map[string]string{"UPID:1": "a"}},
		{"a first-hand result names it", nil, map[string][]resultEv{"a": {res("UPID:1", "", false)}}, map[string]string{"UPID:1": "a"}},
		{"a replay of its own record names it", nil, map[string][]resultEv{"a": {res("UPID:1", "", true)}}, map[string]string{"UPID:1": "a"}},
		{"a keyed replay may be the twin's: skipped", nil, map[string][]resultEv{"b": {res("UPID:1", "k", true)}}, map[string]string{}},
		{"the first-hand claim wins over a replay", nil, map[string][]resultEv{"a": {res("UPID:1", "", false)}, "b": {res("UPID:1", "", true)}},
			map[string]string{"UPID:1": "a"}},
	}
	for _, tt := range tests {
		if got := taskOwners(tt.steps, tt.results); !maps.Equal(got, tt.want) {
			t.Errorf("%s: taskOwners = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestUPIDsIn pins how task UPIDs are read from a result's output.
func TestUPIDsIn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		output string
		want   []string
	}{
		{`{"upids":["UPID:a","UPID:b"],"vmid":"100"}`, []string{"UPID:a", "UPID:b"}},
		{`{"clone_upid":"UPID:c","relocate_upids":{"scsi0":"UPID:d"}}`, []string{"UPID:c", "UPID:d"}},
		{`{"name":"x"}`, nil},
		{``, nil},
	}
	for _, tt := range tests {
		got := upidsIn(json.RawMessage(tt.output))
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("upidsIn(%s) = %v, want %v", tt.output, got, tt.want)
		}
	}
}

// TestDLQCommandID pins how a dead letter is matched to its command in both content modes.
func TestDLQCommandID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		header map[string]string
		body   string
		want   string
	}{
		{map[string]string{"ce-id": "c1"}, `{}`, "c1"},
		{map[string]string{"Proxbus-Dlq-Msg-Id": "c2-dup"}, `{}`, "c2"},
		{nil, `{"specversion":"1.0","id":"c3","source":"urn:x"}`, "c3"},
		{nil, `not json`, ""},
	}
	for _, tt := range tests {
		m := rawMsg{header: nats.Header{}, data: []byte(tt.body)}
		for k, v := range tt.header {
			m.header.Set(k, v)
		}
		if got := dlqCommandID(m); got != tt.want {
			t.Errorf("dlqCommandID(%v, %s) = %q, want %q", tt.header, tt.body, got, tt.want)
		}
	}
}

// TestClusterLoad checks the cluster-mode load: at least 30 % of the commands act on the two
// hot guests, every producer gets a fair share, and without the cluster options the plan is
// the single-mode plan (same commands for a seed).
func TestClusterLoad(t *testing.T) {
	t.Parallel()
	single := newGenerator(3, "r", "canary", 60).plan(450)
	same := newGenerator(3, "r", "canary", 60).withLoad(0, nil).plan(450)
	for i := range single {
		if single[i].cmd.ID != same[i].cmd.ID || string(single[i].cmd.Data) != string(same[i].cmd.Data) || same[i].producerName() != producerNATSGo {
			t.Fatalf("command %d differs without cluster options", i)
		}
	}
	for _, seed := range []uint64{1, 2, 3} {
		plan := newGenerator(seed, "r", "canary", 60).withLoad(defaultHotShare, producerNames).plan(450)
		hot := 0
		per := map[string]int{}
		for _, p := range plan {
			if p.onHotGuest() {
				hot++
			}
			per[p.producerName()]++
		}
		if hot*100 < 30*len(plan) {
			t.Errorf("seed %d: %d of %d commands on the hot guests, want at least 30%%", seed, hot, len(plan))
		}
		for _, name := range producerNames {
			if per[name] < len(plan)/5 {
				t.Errorf("seed %d: producer %s sends %d of %d", seed, name, per[name], len(plan))
			}
		}
	}
}

// TestSDKEvent checks that the SDK producer's event carries what a command needs in both modes.
func TestSDKEvent(t *testing.T) {
	t.Parallel()
	c := events.Command{ID: "c1", Source: soakSource, Verb: "vm.start", Type: "proxbus.vm.start", EndpointID: 1, HasEndpointID: true,
		IdempotencyKey: "k1", Actor: "soak", Data: []byte(`{"vm":100}`)}
	ev, err := sdkEvent(c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ev.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"id":"c1"`, `"endpointid":1`, `"idempotencykey":"k1"`, `"actor":"soak"`, `"data":{"vm":100}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("structured event %s lacks %s", b, want)
		}
	}
}
