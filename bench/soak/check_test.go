package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &collected{started: map[string][]time.Time{"c1": {t0}, "c2": {t0.Add(10 * time.Second)}}}
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
