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

// TestGuestOps pins the guest and the most writes a command makes on it: two for a forced
// container reboot and for vm.delete with stop_first, one for vm.backup, vm.migrate and a
// plain vm.delete; a soak VM named by its name is its vmid.
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
		{"vm.backup", `{"vm":102,"storage":"local"}`, 102, 1},
		{"vm.migrate", `{"vm":103,"target_node":"pve2","with_local_disks":true}`, 103, 1},
		{"vm.migrate", `{"vm":"soak-1001","target_node":"pve2"}`, 1001, 1},
		{"vm.delete", `{"vm":1001,"stop_first":true}`, 1001, 2},
		{"vm.delete", `{"vm":"soak-1002","stop_first":true}`, 1002, 2},
		{"vm.delete", `{"vm":1001}`, 1001, 1},
		{"vm.delete", `{"vm":"db-01"}`, 0, 0},
		{"vm.provision", `{"new_vmid":1001}`, 0, 0},
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
		if strings.Contains(string(p.cmd.Data), canary) && p.cmd.Verb != "storage.pbs.create" && p.cmd.Verb != "vm.provision" &&
			p.cmd.Verb != "ct.provision" && p.cmd.Verb != "storage.pbs.update" {
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

// TestPlanGuestVerbs checks the mix's vm.backup, vm.migrate and vm.delete: a few percent each;
// backups of the shared power guests into "local" or a PBS storage of the plan; migrations of
// migrateGuests or of soak VMs provisioned at least ownVMAge commands before, with local disks,
// to a demo node; deletes of soak VMs only (never a shared guest) with stop_first, some by
// name; and their guest and write count filled in.
func TestPlanGuestVerbs(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3} {
		plan := newGenerator(seed, "r", "canary", 80).plan(2000)
		provisionedAt := map[int64]int{}
		per := map[string]int{}
		byName := 0
		for i, p := range plan {
			if p.poison != nil {
				continue
			}
			var d struct {
				VM             vmRef       `json:"vm"`
				NewVMID        json.Number `json:"new_vmid"`
				Storage        string      `json:"storage"`
				TargetNode     string      `json:"target_node"`
				WithLocalDisks bool        `json:"with_local_disks"`
				StopFirst      bool        `json:"stop_first"`
			}
			if err := json.Unmarshal(p.cmd.Data, &d); err != nil {
				t.Fatalf("seed %d: %s %s: %v", seed, p.cmd.ID, p.cmd.Data, err)
			}
			if p.cmd.Verb == "vm.provision" {
				if n, err := d.NewVMID.Int64(); err == nil {
					if _, seen := provisionedAt[n]; !seen {
						provisionedAt[n] = i
					}
				}
				continue
			}
			vm, _ := d.VM.Int64()
			if strings.HasPrefix(d.VM.String(), ownVMNamePrefix) {
				byName++
			}
			// ownOK: a soak VM provisioned ownVMAge commands before (or vmid firstNewVMID, never made).
			ownOK := func() bool {
				at, ok := provisionedAt[vm]
				return vm == firstNewVMID || ok && i-at >= ownVMAge
			}
			switch p.cmd.Verb {
			case "vm.backup":
				per[p.cmd.Verb]++
				if !slices.ContainsFunc(powerGuests, func(g powerGuest) bool { return g.vmid == vm }) ||
					d.Storage != "local" && !strings.HasPrefix(d.Storage, "soak-r-pbs") || p.guest != vm || p.ops != 1 {
					t.Errorf("seed %d: %s %s (guest %d, ops %d)", seed, p.cmd.Verb, p.cmd.Data, p.guest, p.ops)
				}
			case "vm.migrate":
				per[p.cmd.Verb]++
				if !slices.Contains(migrateGuests, vm) && !ownOK() || !d.WithLocalDisks || !slices.Contains(pveNodes, d.TargetNode) ||
					p.guest != vm || p.ops != 1 {
					t.Errorf("seed %d: %s %s at %d (guest %d, ops %d)", seed, p.cmd.Verb, p.cmd.Data, i, p.guest, p.ops)
				}
			case "vm.delete":
				per[p.cmd.Verb]++
				if vm < firstNewVMID || !ownOK() || !d.StopFirst || p.guest != vm || p.ops != 2 {
					t.Errorf("seed %d: %s %s at %d (guest %d, ops %d)", seed, p.cmd.Verb, p.cmd.Data, i, p.guest, p.ops)
				}
			}
		}
		for _, verb := range []string{"vm.backup", "vm.migrate", "vm.delete"} {
			if per[verb] < 30 || per[verb] > 120 {
				t.Errorf("seed %d: %d %s of 2000, want 1.5–6%%", seed, per[verb], verb)
			}
		}
		if byName == 0 {
			t.Errorf("seed %d: no vm.migrate or vm.delete names a soak VM by its name", seed)
		}
	}
}

// TestCheckGuestWrites pins the attribution of writes on a guest to the commands on it: a
// command that sent a write twice is flagged, commands that wrote once each are not; vm.delete
// with stop_first may send two (stop, DELETE); a vzdump's guest is its vmid parameter; a
// command whose step events were lost is known by its journal entry.
func TestCheckGuestWrites(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	p1 := cmd("c1", "vm.reboot", `{"vm":100}`, "")
	p2 := cmd("c2", "vm.reboot", `{"vm":100}`, "")
	bk := cmd("bk", "vm.backup", `{"vm":100,"storage":"local"}`, "")
	mg := cmd("mg", "vm.migrate", `{"vm":"soak-1001","target_node":"pve2","with_local_disks":true}`, "")
	del := cmd("del", "vm.delete", `{"vm":1001,"stop_first":true}`, "")
	p3 := cmd("c3", "vm.stop", `{"vm":100,"force":true}`, "") // its step events are lost: only its journal entry shows it
	plan := []*planned{p1, p2, bk, mg, del, p3}
	w := func(sec int) writeRec {
		return writeRec{Method: "POST", Path: "/nodes/pve1/qemu/100/status/reboot", Status: 200, At: at(sec)}
	}
	vzdump := func(sec int, upid string) writeRec {
		return writeRec{Method: "POST", Path: "/nodes/pve1/vzdump", Params: map[string]string{"vmid": "100", "storage": "local"},
			Status: 200, UPID: upid, At: at(sec)}
	}
	migrate := func(sec int) writeRec {
		return writeRec{Method: "POST", Path: "/nodes/pve1/qemu/1001/migrate", Params: map[string]string{"target": "pve2"}, Status: 200, At: at(sec)}
	}
	stop := func(sec int) writeRec {
		return writeRec{Method: "POST", Path: "/nodes/pve2/qemu/1001/status/stop", Status: 200, At: at(sec)}
	}
	destroy := func(sec int) writeRec {
		return writeRec{Method: "DELETE", Path: "/nodes/pve2/qemu/1001", Status: 200, At: at(sec)}
	}
	tests := []struct {
		name   string
		writes []writeRec
		want   int
	}{
		{"one each", []writeRec{w(1), w(11)}, 0},
		{"first sent twice", []writeRec{w(1), w(5), w(11)}, 1},
		{"before any start", []writeRec{{Method: "POST", Path: "/nodes/pve1/qemu/100/status/reboot", At: at(-1)}}, 1},
		// c2's started step was dropped (its events leader died), so timing gives its write to c1; its done
		// step names the task.
		{"the task's UPID wins over timing", []writeRec{w(1), {Method: "POST", Path: "/nodes/pve1/qemu/100/status/reboot", Status: 200,
			UPID: "U2", At: at(5)}}, 0},
		{"a backup's vzdump is the backup's, by its vmid parameter", []writeRec{w(1), w(11), vzdump(21, "")}, 0},
		{"a vzdump sent twice", []writeRec{w(1), w(11), vzdump(21, ""), vzdump(22, "")}, 1},
		{"a vzdump whose task the backup names, before its started step", []writeRec{w(1), w(11), vzdump(19, "UB")}, 0},
		{"a migration", []writeRec{migrate(31)}, 0},
		{"a migration sent twice", []writeRec{migrate(31), migrate(32)}, 1},
		{"a delete's stop and DELETE", []writeRec{migrate(31), stop(41), destroy(42)}, 0},
		{"a delete that stopped twice", []writeRec{stop(41), stop(42), destroy(43)}, 1},
		{"a DELETE before any command on the guest started", []writeRec{destroy(29)}, 1},
		{"a write whose step events were lost, by its command's journal entry", []writeRec{w(1), w(11), vzdump(21, ""),
			{Method: "POST", Path: "/nodes/pve1/qemu/100/status/stop", Status: 200, At: at(51)}}, 0},
		{"a DELETE while only the migration had started: the migration's second write", []writeRec{migrate(31), destroy(39)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &collected{started: map[string][]time.Time{"c1": {at(0)}, "c2": {at(10)}, "bk": {at(20)}, "mg": {at(30)}, "del": {at(40), at(41)}},
				upids: map[string]string{"U2": "c2", "UB": "bk"}, journaled: map[string][]time.Time{"c3": {at(50)}}}
			rep := &report{}
			rep.checkGuestWrites(tt.writes, plan, c)
			if len(rep.dupWrites) != tt.want {
				t.Errorf("flagged %v, want %d items", rep.dupWrites, tt.want)
			}
		})
	}
}

// TestCheckWritesKinds pins how checkWrites counts the writes of vm.backup, vm.migrate and
// vm.delete (not as provision writes of a soak VM) and that a guest is destroyed once.
func TestCheckWritesKinds(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	prov := cmd("pr", "vm.provision", `{"new_vmid":1001}`, "")
	del := cmd("del", "vm.delete", `{"vm":1001,"stop_first":true}`, "")
	del2 := cmd("del2", "vm.delete", `{"vm":1001,"stop_first":true}`, "")
	bk := cmd("bk", "vm.backup", `{"vm":100,"storage":"local"}`, "")
	mg := cmd("mg", "vm.migrate", `{"vm":1001,"target_node":"pve3"}`, "")
	plan := []*planned{prov, del, del2, bk, mg}
	recs := []writeRec{
		{Method: "POST", Path: "/nodes/pve1/qemu/9000/clone", Params: map[string]string{"newid": "1001"}, Status: 200, At: at(1)},
		{Method: "POST", Path: "/nodes/pve1/qemu/1001/status/start", Status: 200, At: at(2)},
		{Method: "POST", Path: "/nodes/pve1/vzdump", Params: map[string]string{"vmid": "100"}, Status: 200, At: at(3)},
		{Method: "POST", Path: "/nodes/pve1/qemu/1001/migrate", Params: map[string]string{"target": "pve3"}, Status: 200, At: at(4)},
		{Method: "POST", Path: "/nodes/pve3/qemu/1001/status/stop", Status: 200, At: at(5)},
		{Method: "DELETE", Path: "/nodes/pve3/qemu/1001", Status: 200, At: at(6)},
	}
	c := &collected{started: map[string][]time.Time{"bk": {at(3)}, "mg": {at(4)}, "del": {at(5), at(6)}, "del2": {at(7)}}, upids: map[string]string{}}
	rep := &report{}
	rep.checkWrites(recs, nil, plan, c)
	want := map[string]int{"clone": 1, "provision start": 1, "backup": 1, "migrate": 1, "delete stop": 1, "delete": 1}
	if !maps.Equal(rep.writes, want) || len(rep.dupWrites) != 0 {
		t.Errorf("writes %v, flagged %v; want %v, none", rep.writes, rep.dupWrites, want)
	}
	rep = &report{}
	rep.checkWrites(append(recs, writeRec{Method: "DELETE", Path: "/nodes/pve3/qemu/1001", Status: 200, At: at(8)}), nil, plan, c)
	if len(rep.dupWrites) != 1 || !strings.Contains(rep.dupWrites[0], "vmid 1001 delete: 2 writes") {
		t.Errorf("a second DELETE of 1001: flagged %v, want the vmid's two deletes", rep.dupWrites)
	}
	// a container's create counts once per new vmid: a second is a duplicate write
	ct := writeRec{Method: "POST", Path: "/nodes/pve2/lxc", Params: map[string]string{"vmid": "1002"}, Status: 200, At: at(9)}
	rep = &report{}
	rep.checkWrites(append(recs, ct, ct), nil, append(plan, cmd("ct", "ct.provision", `{"new_vmid":1002}`, "")), c)
	if rep.writes["container create"] != 2 || len(rep.dupWrites) != 1 || !strings.Contains(rep.dupWrites[0], "new vmid 1002: 2 writes") {
		t.Errorf("two creates of CT 1002: writes %v, flagged %v, want them flagged", rep.writes, rep.dupWrites)
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
		{writeRec{Method: "PUT", Path: "/storage/s1"}, "storageput:s1"},
		{writeRec{Method: "DELETE", Path: "/storage/s1"}, "storagedel:s1"},
		{writeRec{Method: "POST", Path: "/nodes/pve1/qemu/9000/clone", Params: map[string]string{"newid": "1001"}}, "vm:1001"},
		{writeRec{Method: "POST", Path: "/nodes/pve1/qemu/1001/move_disk"}, "vm:1001"},
		{writeRec{Method: "POST", Path: "/nodes/pve1/qemu/1001/status/start"}, "vm:1001"},
		{writeRec{Method: "POST", Path: "/nodes/pve3/lxc", Params: map[string]string{"vmid": "1002"}}, "vm:1002"},
		{writeRec{Method: "POST", Path: "/nodes/pve3/lxc/1002/status/start"}, "vm:1002"},
		{writeRec{Method: "POST", Path: "/nodes/pve1/lxc/200/snapshot", Params: map[string]string{"snapname": "a"}}, "snap:200/a"},
		{writeRec{Method: "DELETE", Path: "/nodes/pve1/qemu/100/snapshot/a"}, "snapdel:100/a"},
		{writeRec{Method: "POST", Path: "/nodes/pve1/qemu/100/status/reboot"}, "power:100"},
		{writeRec{Method: "POST", Path: "/nodes/pve1/qemu/100/status/stop"}, "power:100"},
		{writeRec{Method: "POST", Path: "/nodes/pve1/status"}, ""},
		{writeRec{Method: "POST", Path: "/nodes/pve2/vzdump", Params: map[string]string{"vmid": "101", "storage": "local"}}, "backup:101"},
		{writeRec{Method: "POST", Path: "/nodes/pve1/qemu/1001/migrate", Params: map[string]string{"target": "pve2"}}, "migrate:1001"},
		{writeRec{Method: "POST", Path: "/nodes/pve1/qemu/103/migrate"}, "migrate:103"},
		{writeRec{Method: "DELETE", Path: "/nodes/pve2/qemu/1001"}, "delete:1001"},
		{writeRec{Method: "POST", Path: "/nodes/pve2/qemu/1001/status/stop"}, "delete:1001"},
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
		{cmd("c", "storage.pbs.update", `{"storage":"s1","fingerprint":"AB"}`, ""), "storageput:s1", "update_storage"},
		{cmd("c", "storage.pbs.delete", `{"storage":"s1"}`, ""), "storagedel:s1", "delete_storage"},
		{cmd("c", "vm.provision", `{"new_vmid":1001}`, ""), "vm:1001", ""},
		{cmd("c", "vm.restore", `{"archive":"local:backup/vzdump-qemu-100-2026_11_30-02_00_00.vma.zst","vmid":1002,"target_node":"pve1"}`, ""), "vm:1002", ""},
		{cmd("c", "ct.provision", `{"new_vmid":1003}`, ""), "vm:1003", ""},
		{cmd("c", "vm.snapshot.create", `{"vm":100,"snapshot":"a"}`, ""), "snap:100/a", "create_snapshot"},
		{cmd("c", "vm.snapshot.delete", `{"vm":200,"snapshot":"a"}`, ""), "snapdel:200/a", "delete_snapshot"},
		{cmd("c", "vm.reboot", `{"vm":200,"force":true}`, ""), "power:200", "reboot_vm"},
		{cmd("c", "vm.backup", `{"vm":100,"storage":"local"}`, ""), "backup:100", "backup_vm"},
		{cmd("c", "vm.migrate", `{"vm":"soak-1001","target_node":"pve2"}`, ""), "migrate:1001", "migrate_vm"},
		{cmd("c", "vm.delete", `{"vm":1001,"stop_first":true}`, ""), "delete:1001", "stop_vm"},
		{cmd("c", "vm.delete", `{"vm":"soak-1001","stop_first":true}`, ""), "delete:1001", "delete_vm"},
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

// TestAttributeGuestVerbs pins the attribution of the writes of vm.backup, vm.migrate and
// vm.delete: to their own commands, never to the provision of the soak VM they act on, by
// the step of their write's kind or, when their steps were lost, their journal entry;
// without either (and a task) they stay unattributed.
func TestAttributeGuestVerbs(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	plan := []*planned{
		cmd("pr", "vm.provision", `{"new_vmid":1001}`, ""),
		cmd("mg", "vm.migrate", `{"vm":"soak-1001","target_node":"pve2","with_local_disks":true}`, ""),
		cmd("del", "vm.delete", `{"vm":1001,"stop_first":true}`, ""),
		cmd("bk", "vm.backup", `{"vm":100,"storage":"local"}`, ""),
		cmd("pw", "vm.stop", `{"vm":100,"force":true}`, ""),
	}
	step := func(id, name string, s float64) stepLine {
		return stepLine{Command: id, Step: name, Status: string(events.StepStarted), At: at(s)}
	}
	allSteps := []stepLine{step("pr", "clone_template", 1), step("mg", "migrate_vm", 10), step("del", "stop_vm", 20),
		step("del", "delete_vm", 21), step("bk", "backup_vm", 30), step("pw", "stop_vm", 40)}
	rec := func(method, path string, s float64, params map[string]string) writeRec {
		return writeRec{Method: method, Path: path, Params: params, Status: 200, At: at(s)}
	}
	recs := []writeRec{
		rec("POST", "/nodes/pve1/qemu/9000/clone", 2, map[string]string{"newid": "1001"}),
		rec("POST", "/nodes/pve1/qemu/1001/migrate", 11, map[string]string{"target": "pve2"}),
		rec("POST", "/nodes/pve2/qemu/1001/status/stop", 20.5, nil),
		rec("DELETE", "/nodes/pve2/qemu/1001", 22, nil),
		rec("POST", "/nodes/pve1/vzdump", 31, map[string]string{"vmid": "100", "storage": "local"}),
		rec("POST", "/nodes/pve1/qemu/100/status/stop", 41, nil),
	}
	tests := []struct {
		name      string
		steps     []stepLine
		journaled map[string][]time.Time
		want      map[string]int
	}{
		{"each its own", allSteps, nil, map[string]int{"pr": 1, "mg": 1, "del": 2, "bk": 1, "pw": 1}},
		{"no steps of the guest verbs: only the provision's clone", allSteps[:1], nil, map[string]int{"pr": 1}},
		{"steps lost, journal entries written", allSteps[:1], map[string][]time.Time{"mg": {at(9)}, "del": {at(19)}, "bk": {at(29)}},
			map[string]int{"pr": 1, "mg": 1, "del": 2, "bk": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &collected{steps: tt.steps, upids: taskOwners(tt.steps, nil), journaled: tt.journaled}
			got := attribute(recs, nil, plan, c)
			for _, p := range plan {
				if id := p.cmd.ID; len(got[id]) != tt.want[id] {
					t.Errorf("%s: %d writes %v, want %d", id, len(got[id]), got[id], tt.want[id])
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
	restore := cmd("c", "vm.restore", `{"archive":"local:backup/vzdump-qemu-100-2026_11_30-02_00_00.vma.zst","vmid":1001,"target_node":"pve1"}`, "")
	with := finalState{snapshots: map[int64]map[string]bool{100: {"a": true}}, storages: map[string]string{"s1": "d1"},
		guests: map[int64]bool{1001: true}}
	without := finalState{snapshots: map[int64]map[string]bool{100: {}}, storages: map[string]string{}, guests: map[int64]bool{}}
	other := finalState{storages: map[string]string{"s1": "d2"}}
	createW := w("snap:100/a", "/nodes/pve1/qemu/100/snapshot", 0, true)
	deleteW := w("snapdel:100/a", "/nodes/pve1/qemu/100/snapshot/a", 1, true)
	// The new verbs: p is published 10 s before its answer (at t0).
	pub := t0.Add(-10 * time.Second)
	out := func(status int, result, reason, output string) resultEv {
		a := ans(status, result, reason)
		a.res.Output = json.RawMessage(output)
		return a
	}
	wm := func(res, method, path string, sec int, effective bool, params map[string]string) written {
		return written{rec: writeRec{Method: method, Path: path, Params: params, At: t0.Add(time.Duration(sec) * time.Second)}, resource: res, effective: effective}
	}
	backup := cmd("c", "vm.backup", `{"vm":100,"storage":"local"}`, "")
	vzdumpW := wm("backup:100", "POST", "/nodes/pve1/vzdump", -5, true, map[string]string{"vmid": "100"})
	const volid = "local:backup/vzdump-qemu-100-2026_01_01-00_00_00.vma.zst"
	backedUp := finalState{backups: map[string]bool{volid: true}}
	migrate := cmd("c", "vm.migrate", `{"vm":"soak-1001","target_node":"pve2","with_local_disks":true}`, "")
	migW := func(target string, sec int, effective bool) written {
		return wm("migrate:1001", "POST", "/nodes/pve1/qemu/1001/migrate", sec, effective, map[string]string{"target": target})
	}
	onNode := func(node string) finalState {
		return finalState{guests: map[int64]bool{1001: true}, nodes: map[int64]string{1001: node}}
	}
	gone := finalState{guests: map[int64]bool{1001: false}, nodes: map[int64]string{}}
	vmDelete := cmd("c", "vm.delete", `{"vm":1001,"stop_first":true}`, "")
	stopW := wm("delete:1001", "POST", "/nodes/pve2/qemu/1001/status/stop", -5, true, nil)
	destroyW := wm("delete:1001", "DELETE", "/nodes/pve2/qemu/1001", -4, true, nil)
	rotate := cmd("c", "storage.pbs.update", `{"storage":"s1","fingerprint":"AB"}`, "")
	retire := cmd("c", "storage.pbs.delete", `{"storage":"s1"}`, "")
	putW := wm("storageput:s1", "PUT", "/storage/s1", -5, true, nil)
	retireW := wm("storagedel:s1", "DELETE", "/storage/s1", -4, true, nil)
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
		{"restore 201, guest there", restore, ans(201, "created", ""), nil, nil, with, true, false},
		{"restore 201, no guest", restore, ans(201, "created", ""), nil, nil, without, true, true},
		{"restore 502: a failed restore leaves what it restored", restore, ans(502, "failed", "task_failed"), []written{w("vm:1001", "/nodes/pve1/qemu", 0, true)}, nil, with, false, false},
		{"restore 409 vm_exists, no write", restore, ans(409, "refused", "vm_exists"), nil, nil, with, true, false},
		{"provision 201, deleted later", provision, ans(201, "created", ""), nil, map[string][]written{"delete:1001": {destroyW}}, without, true, false},
		{"provision 201, only stopped by a delete", provision, ans(201, "created", ""), nil, map[string][]written{"delete:1001": {stopW}}, without, true, true},
		{"backup 201, volume listed", backup, out(201, "created", "", `{"volid":"`+volid+`"}`), []written{vzdumpW}, nil, backedUp, true, false},
		{"backup 201, volume not listed", backup, out(201, "created", "", `{"volid":"local:backup/other.vma.zst"}`), []written{vzdumpW}, nil, backedUp, true, true},
		{"backup 201 without volid", backup, out(201, "created", "", `{"storage":"local"}`), []written{vzdumpW}, nil, backedUp, true, true},
		{"backup 502 finalization failed, volume listed", backup, out(502, "created", "netbox_journal_finalization_failed", `{"volid":"`+volid+`"}`),
			[]written{vzdumpW}, nil, backedUp, true, false},
		{"backup 409 storage unavailable", backup, ans(409, "refused", "backup_storage_unavailable"), nil, nil, backedUp, true, false},
		{"backup 409 that wrote", backup, ans(409, "refused", "backup_storage_unavailable"), []written{vzdumpW}, nil, backedUp, true, true},
		{"backup 502 whose vzdump took effect", backup, ans(502, "failed", "proxmox_write_unconfirmed"), []written{vzdumpW}, nil, backedUp, true, true},
		{"backup 502 task failed", backup, ans(502, "failed", "task_failed"), []written{wm("backup:100", "POST", "/nodes/pve1/vzdump", -5, false, nil)},
			nil, backedUp, true, false},
		{"migrate ok by its migration, moved on later", migrate, ans(200, "ok", ""), []written{migW("pve2", -5, true)}, nil, onNode("pve3"), true, false},
		{"migrate ok, its migration went elsewhere", migrate, ans(200, "ok", ""), []written{migW("pve3", -5, true)}, nil, onNode("pve3"), true, true},
		{"migrate ok, its migration failed, on the target", migrate, ans(200, "ok", ""), []written{migW("pve2", -5, false)}, nil, onNode("pve2"), true, false},
		{"migrate already_present, on the target", migrate, ans(200, "already_present", ""), nil, nil, onNode("pve2"), true, false},
		{"migrate already_present, elsewhere", migrate, ans(200, "already_present", ""), nil, nil, onNode("pve1"), true, true},
		{"migrate already_present, moved on by another command", migrate, ans(200, "already_present", ""), nil,
			map[string][]written{"migrate:1001": {migW("pve3", 5, true)}}, onNode("pve3"), false, false},
		{"migrate already_present, a migration before it was published", migrate, ans(200, "already_present", ""), nil,
			map[string][]written{"migrate:1001": {migW("pve3", -20, true)}}, onNode("pve3"), true, true},
		{"migrate already_present, deleted by another command", migrate, ans(200, "already_present", ""), nil,
			map[string][]written{"delete:1001": {destroyW}}, gone, false, false},
		{"migrate ok, guest gone and nothing deleted it", migrate, ans(200, "ok", ""), nil, nil, gone, true, true},
		{"migrate 409 precondition failed", migrate, ans(409, "refused", "migration_precondition_failed"), nil, nil, onNode("pve1"), true, false},
		{"migrate 404 that wrote", migrate, ans(404, "refused", "vm_not_found"), []written{migW("pve2", -5, true)}, nil, gone, true, true},
		{"404 vm_not_found of a guest that exists", cmd("c", "vm.start", `{"vm":1001}`, ""), ans(404, "refused", "vm_not_found"), nil, nil,
			onNode("pve3"), true, true},
		{"404 vm_not_found of a read, the guest exists", cmd("c", "vm.config.get", `{"vm":1001}`, ""), ans(404, "refused", "vm_not_found"), nil, nil,
			onNode("pve3"), true, true},
		{"404 vm_not_found by name, the guest exists", migrate, ans(404, "refused", "vm_not_found"), nil, nil, onNode("pve1"), true, true},
		{"404 vm_not_found, provisioned after", migrate, ans(404, "refused", "vm_not_found"), nil,
			map[string][]written{"vm:1001": {w("vm:1001", "/nodes/pve1/qemu/9000/clone", 5, true)}}, onNode("pve1"), true, false},
		{"404 vm_not_found, the guest is gone", migrate, ans(404, "refused", "vm_not_found"), nil, nil, gone, true, false},
		{"migrate 502 whose migration took effect", migrate, ans(502, "failed", "proxmox_write_unconfirmed"), []written{migW("pve2", -5, true)},
			nil, onNode("pve2"), true, true},
		{"delete ok, gone", vmDelete, ans(200, "ok", ""), []written{stopW, destroyW}, nil, gone, true, false},
		{"delete ok, still there", vmDelete, ans(200, "ok", ""), []written{stopW}, nil, onNode("pve2"), true, true},
		{"delete already_absent, provisioned after", vmDelete, ans(200, "already_absent", ""), nil,
			map[string][]written{"vm:1001": {w("vm:1001", "/nodes/pve1/qemu/9000/clone", 5, true)}}, onNode("pve1"), false, false},
		{"delete already_absent, provisioned before it was published", vmDelete, ans(200, "already_absent", ""), nil,
			map[string][]written{"vm:1001": {w("vm:1001", "/nodes/pve1/qemu/9000/clone", -20, true)}}, onNode("pve1"), true, true},
		{"delete 502 unconfirmed after its stop only", vmDelete, ans(502, "failed", "proxmox_write_unconfirmed"), []written{stopW}, nil, onNode("pve2"), true, false},
		{"delete 502 whose DELETE took effect", vmDelete, ans(502, "failed", "proxmox_write_unconfirmed"), []written{stopW, destroyW}, nil, gone, true, true},
		{"pbs 201, retired later", pbs, ans(201, "created", ""), nil, map[string][]written{"storagedel:s1": {retireW}}, without, false, false},
		{"rotation ok: not judged", rotate, ans(200, "ok", ""), []written{putW}, nil, with, false, false},
		{"rotation 502 unconfirmed (a secret): by contract", rotate, ans(502, "failed", "proxmox_write_unconfirmed"), []written{putW}, nil, with, false, false},
		{"rotation 502 whose PUT took effect", rotate, ans(502, "failed", "proxmox_unreachable"), []written{putW}, nil, with, true, true},
		{"rotation 404 of a retired storage", rotate, ans(404, "refused", "storage_not_found"), nil, nil, without, true, false},
		{"retire ok, gone", retire, ans(200, "ok", ""), []written{retireW}, nil, without, true, false},
		{"retire already_absent, still there", retire, ans(200, "already_absent", ""), nil, nil, with, true, true},
		{"retire already_absent, created after", retire, ans(200, "already_absent", ""), nil,
			map[string][]written{"storage:s1": {wm("storage:s1", "POST", "/storage", 5, true, nil)}}, with, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			decided, wrong := judge(tt.p, tt.a, tt.ws, tt.effective, tt.fs, pub)
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
		IdempotencyKey: "k1", Actor: "soak", Data: []byte(`{"vm":100}`), Expires: time.Date(2026, 1, 2, 3, 4, 5, 6e8, time.UTC)}
	ev, err := sdkEvent(c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ev.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"id":"c1"`, `"endpointid":1`, `"idempotencykey":"k1"`, `"actor":"soak"`, `"expires":"2026-01-02T03:04:05.6Z"`, `"data":{"vm":100}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("structured event %s lacks %s", b, want)
		}
	}
}

// TestSameBackup: two vm.backup commands answering one volume is a wrong answer (one was told
// the other's backup), unless they are Idempotency-Key twins (one replays the other's answer);
// the plan publishes pairs of backups of one guest, back to back, to provoke it.
func TestSameBackup(t *testing.T) {
	t.Parallel()
	created := func(volid string) resultEv {
		return resultEv{res: events.Result{Status: 201, Output: json.RawMessage(`{"volid":"` + volid + `"}`)}}
	}
	backup := func(id, key string) *planned {
		return &planned{cmd: events.Command{ID: id, Verb: "vm.backup", IdempotencyKey: key}}
	}
	volids := map[string]*planned{}
	if other := sameBackup(volids, backup("a", ""), created("local:backup/x.vma.zst")); other != "" {
		t.Errorf("the first backup: %q", other)
	}
	if other := sameBackup(volids, backup("b", ""), created("local:backup/x.vma")); other != "" {
		t.Errorf("another volume: %q", other)
	}
	if other := sameBackup(volids, backup("c", ""), created("local:backup/x.vma.zst")); other != "a" {
		t.Errorf("the same volume as a: %q, want a", other)
	}
	keyed := map[string]*planned{}
	sameBackup(keyed, backup("k1", "key"), created("local:backup/y.vma"))
	if other := sameBackup(keyed, backup("k2", "key"), created("local:backup/y.vma")); other != "" {
		t.Errorf("an Idempotency-Key twin: %q", other)
	}

	g := newGenerator(1, "t", "canary", 50)
	pairs := 0
	plan := g.plan(3000)
	for i, p := range plan[1:] {
		prev := plan[i]
		if p.cmd.Verb == "vm.backup" && prev.cmd.Verb == "vm.backup" && strings.Contains(string(p.cmd.Data), `"compress":"0"`) {
			pairs++
		}
	}
	if pairs == 0 {
		t.Error("the plan has no back-to-back backups of one guest")
	}
}

// TestPlanExpiryBursts: with hot guests, a fifth of their commands expire a second after
// their publication (they may expire while the guest is busy, answered 410 with no write,
// which the checker's "a 4xx refusal sent no write" judges); nothing else expires.
func TestPlanExpiryBursts(t *testing.T) {
	t.Parallel()
	plan := newGenerator(3, "t", "canary", 50).withLoad(0.5, nil).plan(2000)
	expiring, hot := 0, 0
	for _, p := range plan {
		if p.expiresIn > 0 {
			expiring++
			if !slices.Contains(hotGuests, p.guest) && !strings.Contains(string(p.cmd.Data), "snapshot") {
				t.Errorf("%s expires but is not on a hot guest: %s", p.cmd.ID, p.cmd.Data)
			}
		}
		if slices.Contains(hotGuests, p.guest) {
			hot++
		}
	}
	if expiring == 0 || expiring > hot {
		t.Errorf("%d expiring commands of %d on hot guests", expiring, hot)
	}
	if newGenerator(3, "t", "canary", 50).plan(2000)[0].expiresIn != 0 {
		t.Error("a plan without hot guests has an expiring command")
	}
}

// TestPlanRestores checks the mix's vm.restore: a few percent, each of a demo backup into a
// vmid of its own that no provision or other restore uses (a key's replay repeats its
// command's), on pve1.
func TestPlanRestores(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3} {
		plan := newGenerator(seed, "r", "canary", 80).plan(2000)
		owner := map[string]string{} // vmid → the data of the command that first made it
		restores := 0
		for _, p := range plan {
			if p.poison != nil || (p.cmd.Verb != "vm.restore" && p.cmd.Verb != "vm.provision") {
				continue
			}
			var d struct {
				Archive    string      `json:"archive"`
				VMID       json.Number `json:"vmid"`
				NewVMID    json.Number `json:"new_vmid"`
				TargetNode string      `json:"target_node"`
			}
			if err := json.Unmarshal(p.cmd.Data, &d); err != nil {
				t.Fatalf("seed %d: %s: %v", seed, p.cmd.Data, err)
			}
			vmid := d.NewVMID.String()
			if p.cmd.Verb == "vm.restore" {
				restores++
				vmid = d.VMID.String()
				if d.Archive != demoBackupWeb && d.Archive != demoBackupCT || d.TargetNode != "pve1" || p.guest != 0 {
					t.Errorf("seed %d: %s %s (guest %d)", seed, p.cmd.Verb, p.cmd.Data, p.guest)
				}
			}
			if first, seen := owner[vmid]; seen && p.cmd.IdempotencyKey == "" && first != p.cmd.Verb {
				t.Errorf("seed %d: vmid %s made by a %s and a %s", seed, vmid, first, p.cmd.Verb)
			}
			owner[vmid] = p.cmd.Verb
		}
		if restores < 15 || restores > 80 {
			t.Errorf("seed %d: %d vm.restore of 2000, want about 2%%", seed, restores)
		}
	}
}

// TestPlanRotations checks the mix's PBS rotations: each rotated or retired storage is one
// the plan created at least ownVMAge commands before, none is retired twice, none is rotated
// after its retirement was drawn (reuses of an Idempotency-Key repeat an earlier command and
// are left out), and every kind occurs.
func TestPlanRotations(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3} {
		plan := newGenerator(seed, "r", "canary", 80).plan(2000)
		created, retired, keys := map[string]int{}, map[string]bool{}, map[string]bool{}
		per := map[string]int{}
		for i, p := range plan {
			var d struct {
				Storage string `json:"storage"`
			}
			if p.poison != nil || json.Unmarshal(p.cmd.Data, &d) != nil || !strings.HasPrefix(d.Storage, "soak-r-rot") {
				continue
			}
			if k := p.cmd.IdempotencyKey; k != "" {
				if keys[k] {
					continue // a reuse: the same command again
				}
				keys[k] = true
			}
			per[p.cmd.Verb]++
			if p.cmd.Verb == "storage.pbs.create" {
				created[d.Storage] = i
				continue
			}
			if at, ok := created[d.Storage]; !ok || i-at < ownVMAge || retired[d.Storage] {
				t.Errorf("seed %d: %s %s at %d (created at %d, %v; retired %v)", seed, p.cmd.Verb, p.cmd.Data, i, at, ok, retired[d.Storage])
			}
			if p.cmd.Verb == "storage.pbs.delete" {
				retired[d.Storage] = true
			}
		}
		for _, verb := range []string{"storage.pbs.create", "storage.pbs.update", "storage.pbs.delete"} {
			if per[verb] == 0 {
				t.Errorf("seed %d: no %s of a rotation storage in 2000 commands", seed, verb)
			}
		}
	}
}
