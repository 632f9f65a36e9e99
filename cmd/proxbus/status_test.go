package main

import (
	"strings"
	"testing"
	"time"
)

// TestStatusAndCancelStarted pins `proxbus status` and `proxbus cancel` of a started command
// against a replica: a vm.backup whose vzdump runs is shown running, with its history; `cancel`
// asks the replica to stop the task and says so; the command ends 410 command_cancelled and
// `status` then shows it cancelled with the stopped task in its result; a command nobody knows
// is an error naming the flags to check.
func TestStatusAndCancelStarted(t *testing.T) {
	t.Parallel()
	env, r := devInfra(t)
	env.PVE.SetTaskDuration(time.Minute)
	serveDev(t, env, r.Prefix)
	nats := []string{"--nats-url", env.NATSURL}
	store := []string{"--redis-url", r.URL, "--redis-key-prefix", r.Prefix}
	both := append(append([]string{}, nats...), store...)
	if code, out, errOut := runCLI(t, append([]string{"send", "vm.backup", "--endpoint", "1", "--data", `{"vm":100,"storage":"local"}`,
		"--id", "st-backup", "--no-wait"}, nats...)...); code != 0 {
		t.Fatalf("send: %d %s %s", code, out, errOut)
	}
	var shown string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, shown, _ = runCLI(t, append([]string{"status", "st-backup"}, both...)...)
		if strings.Contains(shown, "backup_vm started") {
			break
		}
	}
	if !strings.Contains(shown, "vm.backup id=st-backup") || !strings.Contains(shown, ": running") || !strings.Contains(shown, "backup_vm started") {
		t.Fatalf("status while the vzdump runs:\n%s", shown)
	}
	code, out, errOut := runCLI(t, append([]string{"cancel", "st-backup", "--actor", "carol", "--reason", "wrong storage"}, both...)...)
	if code != 0 || !strings.Contains(out, "cancel requested for st-backup") {
		t.Fatalf("cancel: %d %q %q", code, out, errOut)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, shown, _ = runCLI(t, append([]string{"status", "st-backup"}, both...)...)
		if strings.Contains(shown, ": cancelled") {
			break
		}
	}
	for _, want := range []string{": cancelled", "result: 410 refused command_cancelled: cancelled by carol (wrong storage) after it started", "interrupted by signal"} {
		if !strings.Contains(shown, want) {
			t.Errorf("status after the cancel lacks %q:\n%s", want, shown)
		}
	}
	if code, out, errOut := runCLI(t, append([]string{"status", "nobody"}, both...)...); code != 1 || !strings.Contains(out+errOut, "--source") {
		t.Errorf("status of an unknown command: %d %q %q", code, out, errOut)
	}
}
