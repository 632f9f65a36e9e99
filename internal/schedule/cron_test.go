package schedule

import (
	"errors"
	"testing"
	"time"
)

// TestCronNextAcrossDST pins when a cron schedule with a time zone fires across
// daylight-saving changes, computed as nats-server computes it (server/cron.go, which this
// package ports): the firing follows the zone's wall clock, a wall-clock time the
// spring-forward night skips does not fire that night, and one the fall-back night repeats
// fires at both instants. The embedded nats-server evaluates cron against its own wall clock,
// so a test cannot move it across a real change; this pins the arithmetic instead, and the
// firing ids it gives.
func TestCronNextAcrossDST(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no time zone data: %v", err)
	}
	utc := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name, cron string
		loc        *time.Location
		after      string
		want       []string // the next firings, in UTC
	}{
		{"02:00 Berlin across spring forward", "0 0 2 * * *", berlin, "2026-03-27T12:00:00Z",
			// 02:00 CET is 01:00Z; on 29 March 02:00 does not exist (01:59:59 CET → 03:00 CEST)
			[]string{"2026-03-28T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-31T00:00:00Z"}},
		{"03:00 Berlin across spring forward", "0 0 3 * * *", berlin, "2026-03-27T12:00:00Z",
			[]string{"2026-03-28T02:00:00Z", "2026-03-29T01:00:00Z", "2026-03-30T01:00:00Z"}},
		{"02:30 Berlin across fall back", "0 30 2 * * *", berlin, "2026-10-23T12:00:00Z",
			// 02:30 happens twice on 25 October: 02:30 CEST (00:30Z) and 02:30 CET (01:30Z)
			[]string{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"}},
		{"04:00 Berlin across fall back", "0 0 4 * * *", berlin, "2026-10-23T12:00:00Z",
			[]string{"2026-10-24T02:00:00Z", "2026-10-25T03:00:00Z", "2026-10-26T03:00:00Z"}},
		{"@daily in UTC", "@daily", nil, "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-26T00:00:00Z"}},
		{"every 15 s on weekdays", "*/15 * * * * mon-fri", time.UTC, "2026-12-04T23:59:50Z", // a Friday
			[]string{"2026-12-07T00:00:00Z", "2026-12-07T00:00:15Z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := ParseCron(tc.cron)
			if err != nil {
				t.Fatal(err)
			}
			at := utc(tc.after)
			for i, w := range tc.want {
				next, err := c.Next(at, tc.loc)
				if err != nil {
					t.Fatal(err)
				}
				if !next.Equal(utc(w)) {
					t.Fatalf("firing %d after %s = %s, want %s", i+1, at.UTC().Format(time.RFC3339), next.UTC().Format(time.RFC3339), w)
				}
				at = next
			}
		})
	}
}

// TestParseCronRefuses pins the expressions nats-server refuses, so schedule.add answers them
// 422 instead of the server's publish error.
func TestParseCronRefuses(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{"", "* * * * *", "0 0 2 * * * *", "60 * * * * *", "0 0 24 * * *", "0 0 0 0 * *",
		"0 0 0 * 13 *", "0 0 0 * * 7", "5-1 * * * * *", "*/0 * * * * *", "a * * * * *", "1-2-3 * * * * *", "@every 1h"} {
		if _, err := ParseCron(expr); !errors.Is(err, ErrPattern) {
			t.Errorf("ParseCron(%q) = %v, want ErrPattern", expr, err)
		}
	}
}
