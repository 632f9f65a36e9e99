package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
)

// stepEvent is a received step event of command c1 for the text printers.
func stepEvent(t *testing.T, st events.Step) events.Received {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return events.Received{Type: "proxbus.vm.start.step", Data: b}
}

// TestEventLineSteps pins `events` text lines for steps: numbered by the event's seq (which
// runs on across deliveries), the attempt shown only above 1, and the waiting and running
// statuses with their detail.
func TestEventLineSteps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		st   events.Step
		want string
	}{
		{"first attempt", events.Step{Seq: 1, Step: "claim", Status: events.StepDone, Attempt: 1},
			"--:--:-- c1 step 1 claim done"},
		{"second attempt keeps counting", events.Step{Seq: 7, Step: "start", Status: events.StepStarted, Attempt: 2},
			"--:--:-- c1 step 7 start started (attempt 2)"},
		{"waiting", events.Step{Seq: 3, Step: "claim", Status: events.StepWaiting, Attempt: 1, Detail: "another delivery of this command is running"},
			"--:--:-- c1 step 3 claim waiting — another delivery of this command is running"},
		{"running", events.Step{Seq: 4, Step: "wait_task", Status: events.StepRunning, Attempt: 3, UPID: "UPID:pve1:1", Detail: "40%"},
			"--:--:-- c1 step 4 wait_task running (attempt 3) UPID:pve1:1 — 40%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := eventLine("proxbus.evt.c1.step", stepEvent(t, tt.st)); got != tt.want {
				t.Errorf("line\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestProgressWaitingRunning pins send's progress for steps under way: waiting and running
// print a line with the time so far and keep the step running (its end still measures from
// its start); an attempt above 1 is shown.
func TestProgressWaitingRunning(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var buf bytes.Buffer
	p := newProgress(&buf, false)
	p.Step(events.Step{Seq: 1, Step: "claim", Status: events.StepStarted, Attempt: 1, At: t0})
	p.Step(events.Step{Seq: 2, Step: "claim", Status: events.StepWaiting, Attempt: 1, At: t0.Add(time.Second), Detail: "busy"})
	p.Step(events.Step{Seq: 3, Step: "claim", Status: events.StepDone, Attempt: 1, At: t0.Add(2 * time.Second)})
	p.Step(events.Step{Seq: 4, Step: "wait_task", Status: events.StepStarted, Attempt: 2, At: t0.Add(2 * time.Second)})
	p.Step(events.Step{Seq: 5, Step: "wait_task", Status: events.StepRunning, Attempt: 2, At: t0.Add(2500 * time.Millisecond)})
	p.Step(events.Step{Seq: 6, Step: "wait_task", Status: events.StepDone, Attempt: 2, At: t0.Add(5 * time.Second)})
	p.Close()
	want := []string{
		"  step 2 claim                  waiting      1.0s — busy",
		"  step 3 claim                  done         2.0s",
		"  step 5 wait_task              running     500ms  attempt 2",
		"  step 6 wait_task              done         3.0s  attempt 2",
	}
	if got := strings.TrimSuffix(buf.String(), "\n"); got != strings.Join(want, "\n") {
		t.Errorf("output:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

// TestResultTable pins vm.list's text table (vmid, name, node, type, status, vcpus, memory)
// and that other verbs and refused lists print none.
func TestResultTable(t *testing.T) {
	t.Parallel()
	out := `{"vms":[{"vmid":"100","name":"web-01","node":"pve1","type":"qemu","status":"running","vcpus":2,"memory_mb":2048,"uptime_s":5,"template":false},` +
		`{"vmid":"9000","name":"ubuntu-template","node":"pve1","type":"qemu","status":"stopped","vcpus":1,"memory_mb":1536,"template":true},` +
		`{"vmid":"200","name":"ct\u001b[31m","node":"pve2","type":"lxc","status":"stopped","vcpus":1,"memory_mb":512}]}`
	tests := []struct {
		name string
		res  events.Result
		want string
	}{
		{"vm.list", events.Result{Verb: "vm.list", Status: 200, Result: "ok", Output: json.RawMessage(out)},
			"VMID  NAME             NODE  TYPE  STATUS              VCPUS  MEMORY\n" +
				"100   web-01           pve1  qemu  running             2      2 GiB\n" +
				"9000  ubuntu-template  pve1  qemu  stopped (template)  1      1536 MiB\n" +
				"200   ct[31m           pve2  lxc   stopped             1      512 MiB\n"},
		{"another verb", events.Result{Verb: "vm.start", Status: 200, Output: json.RawMessage(out)}, ""},
		{"refused", events.Result{Verb: "vm.list", Status: 404, Reason: "endpoint_not_found"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := writeResultTable(&b, tt.res); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("table:\n%s\nwant:\n%s", b.String(), tt.want)
			}
		})
	}
}

// TestEventsEndsAfterResult pins `events --id`: it returns by itself after the command's
// result (so `events --id X --output json | jq` finishes), printing vm.list's table in text
// mode, while --follow keeps it open until interrupted.
func TestEventsEndsAfterResult(t *testing.T) {
	t.Parallel()
	env := devEnv(t)
	if code, out, errOut := runCLI(t, "send", "vm.list", "--endpoint", "1", "--id", "ev-list", "--nats-url", env.NATSURL); code != 0 || !strings.Contains(errOut, "VMID  NAME") {
		t.Fatalf("send vm.list: code %d\n%s\n%s", code, out, errOut)
	}
	for _, format := range []string{"text", "json"} {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		var out bytes.Buffer
		err := cmdEvents(ctx, []string{"--id", "ev-list", "--nats-url", env.NATSURL, "--output", format}, &out, io.Discard)
		ended := ctx.Err() == nil
		cancel()
		if err != nil || !ended {
			t.Fatalf("events --output %s: err %v, ended by itself %v", format, err, ended)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		switch format {
		case "text":
			if !strings.Contains(out.String(), "ev-list result vm.list 200 ok") || !strings.Contains(out.String(), "VMID  NAME") || !strings.Contains(out.String(), "web-01") {
				t.Errorf("events text:\n%s", out.String())
			}
		case "json":
			var last struct{ Subject string }
			if json.Unmarshal([]byte(lines[len(lines)-1]), &last) != nil || last.Subject != "proxbus.evt.ev-list.result" {
				t.Errorf("events json: last line %q, want the result", lines[len(lines)-1])
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newLineWriter()
	done := make(chan error, 1)
	go func() {
		done <- cmdEvents(ctx, []string{"--id", "ev-list", "--follow", "--nats-url", env.NATSURL, "--output", "json"}, w, io.Discard)
	}()
	for !strings.Contains(w.next(t), ".result") {
	}
	select {
	case err := <-done:
		t.Fatalf("events --follow returned after the result: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("events --follow returned %v", err)
	}
}

// TestEventLinePVE pins `events` text lines for Proxmox's own events (`events --pve`).
func TestEventLinePVE(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, kind string
		data       any
		want       string
	}{
		{"a failed task of the GUI", events.PVEKindTask,
			events.PVETask{EndpointID: 1, Type: "vzdump", VMID: 101, User: "alice@pve", Status: events.PVETaskError, ExitStatus: "job errors", UPID: "UPID:x"},
			"--:--:-- pve.1 task vzdump 101 error (job errors) by alice@pve UPID:x"},
		{"proxbus's task", events.PVEKindTask,
			events.PVETask{EndpointID: 1, Type: "qmstart", VMID: 100, User: "proxbus@pve!t", Status: events.PVETaskRunning, CommandID: "c1", UPID: "UPID:y"},
			"--:--:-- pve.1 task qmstart 100 running by proxbus@pve!t for c1 UPID:y"},
		{"a migration", events.PVEKindGuest, events.PVEGuest{VMID: 100, Name: "web-01", Change: "migrated", From: "pve1", To: "pve2"},
			"--:--:-- pve.1 guest 100 web-01 migrated pve1 → pve2"},
		{"a notification", events.PVEKindNotification, events.PVENotification{Severity: "error", Title: "backup failed"},
			"--:--:-- pve.1 notification error backup failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if got := eventLine("proxbus.evt.pve.1."+tt.kind, events.Received{Type: "proxbus.pve." + tt.kind, Data: b}); got != tt.want {
				t.Errorf("line\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}
