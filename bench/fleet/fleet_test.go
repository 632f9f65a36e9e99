package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// TestPlan pins the load's shape: the hot share lands on the hot guests only, every endpoint
// gets the same share of the work, and the cold commands cycle over the other guests.
func TestPlan(t *testing.T) {
	tests := []struct {
		name     string
		n        int
		hotShare float64
		wantHot  int
	}{
		{"uniform", 3000, 0, 0},
		{"30 % hot", 3000, 0.3, 900},
		{"30 % hot, a backlog not a multiple of the guests", 1000, 0.3, 300},
		{"small", 300, 0.3, 90},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const endpoints, hotGuests = 3, 10
			guests := fleetGuests(1000, endpoints)
			cmds := plan("r", tt.n, guests, endpoints, hotGuests, tt.hotShare)
			if len(cmds) != tt.n {
				t.Fatalf("plan has %d commands, want %d", len(cmds), tt.n)
			}
			hot, perEndpoint, ids := 0, make([]int, endpoints), map[string]bool{}
			for _, c := range cmds {
				ids[c.id] = true
				perEndpoint[c.guest.endpoint]++
				isHotGuest := c.guest.index < hotGuests
				switch {
				case c.hot:
					hot++
					if !isHotGuest {
						t.Errorf("hot command %s on guest %d, not a hot guest", c.id, c.guest.index)
					}
				case tt.hotShare > 0 && isHotGuest:
					t.Errorf("cold command %s on hot guest %d", c.id, c.guest.index)
				}
			}
			if hot != tt.wantHot {
				t.Errorf("%d hot commands, want %d", hot, tt.wantHot)
			}
			if len(ids) != tt.n {
				t.Errorf("%d distinct ids for %d commands", len(ids), tt.n)
			}
			// 1,000 guests do not split evenly over 3 endpoints: each pass over them gives
			// endpoint 1 one command more.
			slack := tt.n/len(guests) + 1
			for ep, got := range perEndpoint {
				if want := tt.n / endpoints; got < want-slack || got > want+slack {
					t.Errorf("endpoint %d has %d commands, want %d ± %d", ep+1, got, want, slack)
				}
			}
		})
	}
}

// TestCommandData pins the command: vm.snapshot.create on the guest's endpoint, with a
// snapshot name PVE accepts (no "-").
func TestCommandData(t *testing.T) {
	p := plan("fab1", 5, fleetGuests(10, 3), 3, 2, 0)[4]
	c := p.command()
	if c.Verb != "vm.snapshot.create" || c.EndpointID != int64(p.guest.endpoint+1) || !c.HasEndpointID {
		t.Errorf("command %+v: want vm.snapshot.create on endpoint %d", c, p.guest.endpoint+1)
	}
	if want := `{"snapshot":"sfab1x4","vm":10004}`; string(c.Data) != want {
		t.Errorf("data %s, want %s", c.Data, want)
	}
}

// TestParseCommandStats reads INFO commandstats and refuses lines it cannot read.
func TestParseCommandStats(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    map[string]int64
		wantErr bool
	}{
		{"two commands", "# Commandstats\r\ncmdstat_evalsha:calls=20,usec=100,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n" +
			"cmdstat_client|setinfo:calls=6,usec=3,usec_per_call=0.50\r\n", map[string]int64{"evalsha": 20, "client|setinfo": 6}, false},
		{"empty", "# Commandstats\r\n", map[string]int64{}, false},
		{"no calls", "cmdstat_get:usec=3\r\n", nil, true},
		{"bad number", "cmdstat_get:calls=x\r\n", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCommandStats(tt.raw)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %t", err, tt.wantErr)
			}
			if !tt.wantErr && !maps.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestStatsDelta leaves out the benchmark's own INFO and the commands that did not run.
func TestStatsDelta(t *testing.T) {
	before := map[string]int64{"info": 1, "evalsha": 10, "ping": 3}
	after := map[string]int64{"info": 2, "evalsha": 30, "ping": 3, "get": 4}
	if got, want := statsDelta(before, after), map[string]int64{"evalsha": 20, "get": 4}; !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestByRoute folds node names and task ids into one route each.
func TestByRoute(t *testing.T) {
	in := map[string]int{
		"GET /api2/json/nodes/pve1/tasks/UPID:pve1:0001:0002:6B0E:qmsnapshot:10000:u@pve!t:/status": 2,
		"GET /api2/json/nodes/pve2/tasks/UPID:pve2:0003:0004:6B0E:qmsnapshot:10001:u@pve!t:/status": 3,
		"POST /api2/json/nodes/pve3/qemu/{n}/snapshot":                                              1,
		"GET /api/extras/journal-entries/{n}/":                                                      4,
	}
	want := map[string]int64{
		"GET nodes/{node}/tasks/{upid}/status": 5,
		"POST nodes/{node}/qemu/{n}/snapshot":  1,
		"GET api/extras/journal-entries/{n}/":  4,
	}
	if got := byRoute(in); !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestFinishedLines reads the answering delivery and its duration of each command.
func TestFinishedLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.log")
	log := `{"level":"INFO","msg":"proxbus serving"}
{"level":"INFO","msg":"command finished","command_id":"a-1","delivery":1,"duration":2300000000}
{"level":"INFO","msg":"command finished","command_id":"a-2","delivery":3,"duration":2400000000}
`
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	got := map[string]finished{}
	if err := finishedLines(path, got); err != nil {
		t.Fatal(err)
	}
	want := map[string]finished{"a-1": {1, 2300 * time.Millisecond}, "a-2": {3, 2400 * time.Millisecond}}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestParseFlags pins the defaults that depend on other flags.
func TestParseFlags(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		wantN       []int
		wantTask    time.Duration
		wantPending int
		wantErr     bool
	}{
		{"defaults", nil, []int{1000, 10000}, 2 * time.Second, 48, false},
		{"short", []string{"-short"}, []int{300}, 100 * time.Millisecond, 48, false},
		{"short with -n", []string{"-short", "-n", "50"}, []int{50}, 100 * time.Millisecond, 48, false},
		{"max-ack-pending follows concurrency", []string{"-concurrency", "4"}, []int{1000, 10000}, 2 * time.Second, 12, false},
		{"bad backlog", []string{"-n", "0"}, nil, 0, 0, true},
		{"bad hot share", []string{"-hot", "1"}, nil, 0, 0, true},
		{"bad task spread", []string{"-task-spread", "1"}, nil, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseFlags(tt.args, io.Discard)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %t", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if !slices.Equal(c.backlogs, tt.wantN) || c.task != tt.wantTask || c.maxAckPending != tt.wantPending {
				t.Errorf("got n %v, task %s, max ack pending %d; want %v, %s, %d", c.backlogs, c.task, c.maxAckPending, tt.wantN, tt.wantTask, tt.wantPending)
			}
		})
	}
}

// TestEndSeen pins the pairing of the simulators' tasks with the commands' task steps: per
// guest in start order, a guest whose counts differ left out.
func TestEndSeen(t *testing.T) {
	guests := fleetGuests(2, 1)
	cmds := plan("r", 4, guests, 1, 1, 0) // two commands on each guest
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	col := &collector{tracks: map[string]*track{}}
	var stats []simpve.TaskStat
	for i, p := range cmds {
		start := at.Add(time.Duration(i) * time.Minute)
		col.tracks[p.id] = &track{started: start, done: start.Add(2*time.Second + time.Duration(10*(i+1))*time.Millisecond)}
		if p.guest.index == 0 {
			upid := fmt.Sprintf("UPID:pve1:%08X:00000000:%08X:qmsnapshot:%d:bench@pve!fleet:", i, start.Unix(), p.guest.vmid)
			stats = append(stats, simpve.TaskStat{UPID: upid, Type: "qmsnapshot", Begun: start, End: start.Add(2 * time.Second)})
		}
	}
	// guest 1's one task is missing: its commands are left out
	got := endSeen(cmds, col, stats)
	var want []time.Duration
	for i, p := range cmds {
		if p.guest.index == 0 {
			want = append(want, time.Duration(10*(i+1))*time.Millisecond)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("endSeen = %v, want %v", got, want)
	}
}
