package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
)

// TestScheduleCLI pins `proxbus schedule add|list|remove` (contract §10, §11) against a
// replica on the embedded nats-server: a schedule every second fires vm.list, and list shows
// its next firing and its last firing (id <name>.<firing time>) with that command's 200; a
// schedule with a secret in its data is refused 422 secret_not_sealed naming the field and
// never its value; an approval cannot be scheduled; remove removes it; a schedule written
// under proxbus.schedule.> by hand is listed as having no record (its firings are refused)
// and remove removes it too.
func TestScheduleCLI(t *testing.T) {
	t.Parallel()
	env, r := devInfra(t)
	serveDev(t, env, r.Prefix)
	natsArgs := []string{"--nats-url", env.NATSURL}
	store := []string{"--redis-url", r.URL, "--redis-key-prefix", r.Prefix}

	code, out, errOut := runCLI(t, append([]string{"schedule", "add", "tick", "vm.list", "--every", "1s", "--endpoint", "1", "--actor", "alice"}, natsArgs...)...)
	if code != 0 || !strings.Contains(out, "schedule tick fires vm.list on endpoint 1 (@every 1s); next firing ") {
		t.Fatalf("schedule add: %d %q %q", code, out, errOut)
	}
	var view ScheduleView
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		_, out, _ = runCLI(t, append(append([]string{"schedule", "list", "--output", "json"}, natsArgs...), store...)...)
		if json.Unmarshal([]byte(out), &view) == nil && view.LastResult != nil {
			break
		}
	}
	if view.Name != "tick" || view.Pattern != "@every 1s" || view.Actor != "alice" || view.Next == nil || view.LastResult == nil {
		t.Fatalf("schedule list never showed a firing's result: %q", out)
	}
	if !regexp.MustCompile(`^tick\.\d{8}T\d{6}Z$`).MatchString(view.LastID) || view.LastResult.Status != 200 || view.LastResult.CommandSource != "urn:proxbus:schedule:tick" {
		t.Errorf("last firing %s: %+v", view.LastID, view.LastResult)
	}
	_, text, _ := runCLI(t, append(append([]string{"schedule", "list"}, natsArgs...), store...)...)
	for _, want := range []string{"NAME", "tick", "@every 1s", "vm.list", "1 schedules"} {
		if !strings.Contains(text, want) {
			t.Errorf("schedule list lacks %q:\n%s", want, text)
		}
	}

	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"a secret", []string{"schedule", "add", "pbs", "storage.pbs.create", "--every", "1h", "--endpoint", "1", "--data",
			`{"storage":"pbs1","server":"pbs","datastore":"ds1","username":"u@pbs!t","password":"hunter2-canary","fingerprint":"` + strings.Repeat("AB:", 31) + `AB"}`},
			1, "422 secret_not_sealed (data.password)"},
		{"an approval", []string{"schedule", "add", "ok", "command.approve", "--every", "1h", "--endpoint", "1", "--data", `{"command_id":"a","command_source":"b"}`},
			1, "422 schedule_verb_not_allowed (verb)"},
		{"two patterns", []string{"schedule", "add", "x", "vm.list", "--every", "1h", "--cron", "@daily", "--endpoint", "1"}, 2, "exactly one of"},
		{"remove", []string{"schedule", "remove", "tick"}, 0, "removed schedule tick"},
		{"remove again", []string{"schedule", "remove", "tick"}, 1, "404 schedule_not_found"},
	}
	for _, tc := range cases {
		code, out, errOut := runCLI(t, append(tc.args, natsArgs...)...)
		if code != tc.code || !strings.Contains(out+errOut, tc.want) || strings.Contains(out+errOut, "hunter2-canary") {
			t.Errorf("%s: code %d (want %d), output %q, want it to say %q", tc.name, code, tc.code, out+errOut, tc.want)
		}
	}
	if _, out, _ := runCLI(t, append(append([]string{"schedule", "list"}, natsArgs...), store...)...); !strings.Contains(out, "0 schedules") {
		t.Errorf("schedule list after remove:\n%s", out)
	}

	// a schedule written under proxbus.schedule.> by hand: listed as having no record, removable
	nc, err := nats.Connect(env.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := (consumer.Schedules{JS: js, Subjects: events.NewSubjects("")}).Add(ctx, events.Schedule{Name: "byhand", Every: time.Hour, Verb: "vm.list", EndpointID: 1}); err != nil {
		t.Fatal(err)
	}
	if _, out, _ := runCLI(t, append(append([]string{"schedule", "list"}, natsArgs...), store...)...); !strings.Contains(out, "byhand") || !strings.Contains(out, "no record") {
		t.Errorf("schedule list lacks the schedule without a record:\n%s", out)
	}
	if code, out, errOut := runCLI(t, append([]string{"schedule", "remove", "byhand"}, natsArgs...)...); code != 0 || !strings.Contains(out, "removed schedule byhand") {
		t.Errorf("schedule remove byhand: %d %q %q", code, out, errOut)
	}
}
