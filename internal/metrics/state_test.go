package metrics

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/consumer"
	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/buildinfo"
)

// TestBuildInfo: proxbus_build_info is 1 with the build's version and commit.
func TestBuildInfo(t *testing.T) {
	t.Parallel()
	m, _ := newTestMetrics(t, Options{Build: buildinfo.Info{Version: "v1.2.3", Commit: "0123456789ab"}})
	text := scrape(t, m)
	if !strings.Contains(text, `proxbus_build_info{commit="0123456789ab",goversion="go`) || !strings.Contains(text, `version="v1.2.3"} 1`) {
		t.Errorf("scrape lacks the build info:\n%s", grepLines(text, "proxbus_build_info"))
	}
}

// TestWaitingCommands: a delivery handed back to wait counts its command as waiting, aged
// from its arrival, until a later delivery here answers it or its pause plus the grace passed.
func TestWaitingCommands(t *testing.T) {
	t.Parallel()
	m, clk := newTestMetrics(t, Options{})
	disp := map[string]events.Disposition{}
	h := m.Middleware(consumer.HandlerFunc(func(_ context.Context, cmd events.Command, _ events.Delivery) events.Disposition {
		return disp[cmd.ID]
	}))
	arrived := clk.t
	deliver := func(id string) {
		h.Handle(context.Background(), events.Command{Verb: "vm.start", ID: id, Source: "/t"}, events.Delivery{Number: 1, Stored: arrived})
	}
	disp["a"] = events.Disposition{Action: events.Redeliver, Delay: time.Second}
	disp["b"] = events.Disposition{Action: events.Redeliver, Delay: time.Minute}
	deliver("a")
	deliver("b")
	clk.t = clk.t.Add(10 * time.Second)
	want := func(n, age string) {
		t.Helper()
		text := scrape(t, m)
		for _, w := range []string{"\nproxbus_commands_waiting " + n + "\n", "\nproxbus_command_oldest_waiting_seconds " + age + "\n"} {
			if !strings.Contains(text, w) {
				t.Errorf("scrape lacks %q:\n%s", strings.TrimSpace(w), grepLines(text, "waiting"))
			}
		}
	}
	want("2", "10")
	disp["a"] = events.Disposition{Action: events.Ack}
	deliver("a")
	want("1", "10")
	clk.t = clk.t.Add(time.Minute + waitGrace) // b's pause and grace passed: it went elsewhere
	want("0", "0")
}

// TestPendingApprovalsAtScrape: the count and the oldest's age come from the store at scrape
// time; a failed read omits both.
func TestPendingApprovalsAtScrape(t *testing.T) {
	t.Parallel()
	var fail bool
	var m *Metrics
	m, _ = newTestMetrics(t, Options{PendingApprovals: func(context.Context) (int, time.Time, error) {
		if fail {
			return 0, time.Time{}, errors.New("down")
		}
		return 2, m.now().Add(-90 * time.Second), nil
	}})
	text := scrape(t, m)
	for _, w := range []string{"\nproxbus_approvals_pending 2\n", "\nproxbus_approval_oldest_pending_seconds 90\n"} {
		if !strings.Contains(text, w) {
			t.Errorf("scrape lacks %q", strings.TrimSpace(w))
		}
	}
	fail = true
	if text := scrape(t, m); strings.Contains(text, "\nproxbus_approvals_pending ") {
		t.Error("a failed read produced a sample")
	}
}

// TestConsumerAndDependencies: proxbus_consumer_ready follows the consumer, and
// proxbus_dependency_up each dependency.
func TestConsumerAndDependencies(t *testing.T) {
	t.Parallel()
	m, _ := newTestMetrics(t, Options{
		ConsumerReady: func() bool { return true },
		Dependencies:  func() map[string]bool { return map[string]bool{"netbox": true, "proxmox/2": false} },
	})
	text := scrape(t, m)
	for _, w := range []string{"\nproxbus_consumer_ready 1\n", `proxbus_dependency_up{dependency="netbox"} 1`, `proxbus_dependency_up{dependency="proxmox/2"} 0`} {
		if !strings.Contains(text, w) {
			t.Errorf("scrape lacks %q", strings.TrimSpace(w))
		}
	}
}

// TestNames lists every family, with histogram suffixes, before any sample was recorded.
func TestNames(t *testing.T) {
	t.Parallel()
	m, _ := newTestMetrics(t, Options{PendingRepairs: func(context.Context) (int, error) { return 0, errors.New("down") }})
	names := m.Names()
	for _, want := range []string{"proxbus_commands_total", "proxbus_proxmox_request_duration_seconds_bucket",
		"proxbus_journal_repairs_pending", "proxbus_commands_waiting", "proxbus_build_info", "process_resident_memory_bytes", "go_goroutines"} {
		if !slices.Contains(names, want) {
			t.Errorf("Names lacks %s", want)
		}
	}
	for _, absent := range []string{"proxbus_commands_total_bucket", "proxbus_approvals_pending"} {
		if slices.Contains(names, absent) {
			t.Errorf("Names has %s", absent)
		}
	}
}

// grepLines returns the lines of text containing s.
func grepLines(text, s string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}
