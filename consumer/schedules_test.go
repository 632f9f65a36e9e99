package consumer

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/testenv"
)

// TestSchedulesFireDistinctCommands runs a schedule every second on the embedded nats-server
// (contract §11): each firing reaches the handler as its own command, id
// "<name>.<firing time>", source urn:proxbus:schedule:<name>, time = the firing time, expires =
// the firing time + the window, the schedule's actor; List shows it; Remove stops it: no
// firing is stored after a command published once Remove returned, while another schedule
// fires twice more.
func TestSchedulesFireDistinctCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	rec := &recorder{}
	e.start(t, rec)
	schedules := Schedules{JS: e.js, Subjects: e.s}
	ctx := ctxT(t)
	tick := events.Schedule{Name: "tick", Every: time.Second, Verb: "vm.start", EndpointID: 1, Data: []byte(`{"vm":100}`),
		Actor: "alice", Window: time.Minute}
	if err := schedules.Add(ctx, tick); err != nil {
		t.Fatal(err)
	}
	list, err := schedules.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "tick" || list[0].Every != time.Second || list[0].Verb != "vm.start" || list[0].Made.IsZero() {
		t.Fatalf("List = %+v, want the tick schedule", list)
	}
	fired := func(name string) []events.Command {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		var out []events.Command
		for _, c := range rec.cmds {
			if c.Firing != nil && c.Firing.Name == name {
				out = append(out, c)
			}
		}
		return out
	}
	eventually(t, 20*time.Second, "three firings", func() bool { return len(fired("tick")) >= 3 })

	idRE := regexp.MustCompile(`^tick\.\d{8}T\d{6}Z$`)
	seen := map[string]bool{}
	for _, c := range fired("tick") {
		if seen[c.ID] {
			t.Errorf("firing %s handled twice", c.ID)
		}
		seen[c.ID] = true
		if !idRE.MatchString(c.ID) || c.ID != events.FiringID("tick", c.Time) || c.Source != "urn:proxbus:schedule:tick" {
			t.Errorf("firing id %s source %s time %v", c.ID, c.Source, c.Time)
		}
		if !c.Expires.Equal(c.Time.Add(time.Minute)) || c.Actor != "alice" || c.EndpointID != 1 || string(c.Data) != `{"vm":100}` {
			t.Errorf("firing %s: expires %v actor %q endpoint %d data %s", c.ID, c.Expires, c.Actor, c.EndpointID, c.Data)
		}
		if c.Firing.Next.Sub(c.Time) != time.Second {
			t.Errorf("firing %s announces its next at %v", c.ID, c.Firing.Next)
		}
	}

	if found, err := schedules.Remove(ctx, "tick"); err != nil || !found {
		t.Fatalf("Remove = %v, %v", found, err)
	}
	if found, err := schedules.Remove(ctx, "tick"); err != nil || found {
		t.Fatalf("Remove again = %v, %v; want false", found, err)
	}
	after := e.publish(t, binaryCommand(e.s, "vm.list", "after-remove", `{}`))
	if err := schedules.Add(ctx, events.Schedule{Name: "other", Every: time.Second, Verb: "vm.list", EndpointID: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "two firings of another schedule", func() bool { return len(fired("other")) >= 2 })
	rec.mu.Lock()
	for i, c := range rec.cmds {
		if c.Firing != nil && c.Firing.Name == "tick" && rec.deliveries[i].StreamSeq > after {
			t.Errorf("tick fired %s after it was removed", c.ID)
		}
	}
	rec.mu.Unlock()
	if list, err := schedules.List(ctx); err != nil || len(list) != 1 || list[0].Name != "other" {
		t.Errorf("List after Remove = %+v, %v", list, err)
	}
}

// TestProvisionAllowsSchedulesOnOlderStream pins that provisioning an existing commands
// stream made before schedules adds the schedule subjects, AllowMsgSchedules and roll-ups,
// keeps its messages, and says so (what streams apply prints).
func TestProvisionAllowsSchedulesOnOlderStream(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	old := StreamConfigs(testConfig())[0]
	old.Subjects, old.AllowMsgSchedules, old.AllowRollup = []string{"proxbus.cmd.>"}, false, false
	if _, err := n.JS.CreateStream(ctxT(t), old); err != nil {
		t.Fatalf("create old stream: %v", err)
	}
	if _, err := n.JS.Publish(ctxT(t), "proxbus.cmd.vm.start", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	changes, err := ProvisionWith(ctxT(t), n.JS, testConfig(), ProvisionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(lines(changes), "\n")
	for _, want := range []string{
		"stream PROXBUS_COMMANDS: AllowMsgSchedules false → true",
		"stream PROXBUS_COMMANDS: AllowRollup false → true",
		"stream PROXBUS_COMMANDS: Subjects [proxbus.cmd.>] → [proxbus.cmd.> proxbus.schedule.>]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("changes:\n%s\nwant the line %q", got, want)
		}
	}
	st, err := n.JS.Stream(ctxT(t), "PROXBUS_COMMANDS")
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; !c.AllowMsgSchedules || !c.AllowRollup || st.CachedInfo().State.Msgs != 1 {
		t.Errorf("stream after provisioning: AllowMsgSchedules %v AllowRollup %v, %d messages", c.AllowMsgSchedules, c.AllowRollup, st.CachedInfo().State.Msgs)
	}
	again, err := ProvisionWith(ctxT(t), n.JS, testConfig(), ProvisionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := lines(again); l[0] != "stream PROXBUS_COMMANDS: unchanged" {
		t.Errorf("second provisioning = %q, want the commands stream unchanged", l)
	}
}

// TestCheckServerVersion pins that proxbus refuses a nats-server older than 2.14 (cron
// schedules with time zones), naming the version it found.
func TestCheckServerVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		version string
		ok      bool
	}{
		{"2.14.0", true}, {"2.15.2", true}, {"v2.14.1", true}, {"3.0.0", true}, {"2.14.0-beta.1", true},
		{"2.13.9", false}, {"2.9.25", false}, {"2.12.0", false}, {"1.99.99", false}, {"", false}, {"garbage", false},
	} {
		err := CheckServerVersion(tc.version)
		switch {
		case tc.ok && err != nil:
			t.Errorf("CheckServerVersion(%q) = %v, want nil", tc.version, err)
		case !tc.ok && (!errors.Is(err, ErrServerTooOld) || (tc.version != "" && !strings.Contains(err.Error(), tc.version))):
			t.Errorf("CheckServerVersion(%q) = %v, want ErrServerTooOld naming the version", tc.version, err)
		}
	}
	n := testenv.StartNATS(t)
	if err := CheckServerVersion(n.JS.Conn().ConnectedServerVersion()); err != nil {
		t.Errorf("the embedded server: %v", err)
	}
}

// TestCronScheduleInZoneFires pins that the embedded nats-server takes a cron schedule with a
// time zone (Nats-Schedule-Time-Zone, nats-server 2.14) and fires it on whole seconds; when
// it fires across a daylight-saving change is internal/schedule's TestCronNextAcrossDST (a
// running server's clock cannot be moved).
func TestCronScheduleInZoneFires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	rec := &recorder{}
	e.start(t, rec)
	sc := events.Schedule{Name: "zoned", Cron: "* * * * * *", TZ: "Europe/Berlin", Verb: "vm.list", EndpointID: 1}
	if err := (Schedules{JS: e.js, Subjects: e.s}).Add(ctxT(t), sc); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "two firings", func() bool { return rec.count() >= 2 })
	for _, id := range rec.ids() {
		if !regexp.MustCompile(`^zoned\.\d{8}T\d{6}Z$`).MatchString(id) {
			t.Errorf("firing id %s", id)
		}
	}
}

// TestScheduleAddReplaces pins that adding a schedule under a name in use replaces it (the
// schedule message rolls up its subject): one message, the new definition.
func TestScheduleAddReplaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	schedules := Schedules{JS: e.js, Subjects: e.s}
	ctx := ctxT(t)
	for _, verb := range []string{"vm.start", "vm.stop"} {
		if err := schedules.Add(ctx, events.Schedule{Name: "x", Every: time.Hour, Verb: verb, EndpointID: 1, Data: []byte(`{"vm":100}`)}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := schedules.List(ctx)
	if err != nil || len(list) != 1 || list[0].Verb != "vm.stop" {
		t.Fatalf("List = %+v, %v; want the one schedule, replaced", list, err)
	}
	if n := e.streamMsgs(t, e.s.CommandsStream()); n != 1 {
		t.Errorf("the commands stream holds %d messages, want the one schedule", n)
	}
	if names, err := schedules.Names(ctx); err != nil || len(names) != 1 || !names["x"] {
		t.Errorf("Names = %v, %v", names, err)
	}
}
