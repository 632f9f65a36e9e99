package events

import (
	"strings"
	"testing"
)

// TestSubjectNames pins every subject and stream name for the default and a custom prefix.
func TestSubjectNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		subj   Subjects
		call   func(Subjects) string
		expect string
	}{
		{"default commands filter", NewSubjects(""), Subjects.CommandsFilter, "proxbus.cmd.>"},
		{"zero value is default", Subjects{}, Subjects.CommandsFilter, "proxbus.cmd.>"},
		{"command", NewSubjects(""), func(s Subjects) string { return s.Command("storage.pbs.create") }, "proxbus.cmd.storage.pbs.create"},
		{"events filter", NewSubjects(""), Subjects.EventsFilter, "proxbus.evt.>"},
		{"step", NewSubjects(""), func(s Subjects) string { return s.Step("abc") }, "proxbus.evt.abc.step"},
		{"result", NewSubjects(""), func(s Subjects) string { return s.Result("abc") }, "proxbus.evt.abc.result"},
		{"journal", NewSubjects(""), func(s Subjects) string { return s.Journal("abc") }, "proxbus.evt.abc.journal"},
		{"follow", NewSubjects(""), func(s Subjects) string { return s.Follow("abc") }, "proxbus.evt.abc.>"},
		{"dlq filter", NewSubjects(""), Subjects.DLQFilter, "proxbus.dlq.>"},
		{"dlq verb", NewSubjects(""), func(s Subjects) string { return s.DLQ("vm.start") }, "proxbus.dlq.vm.start"},
		{"dlq no verb", NewSubjects(""), func(s Subjects) string { return s.DLQ("") }, "proxbus.dlq.unknown"},
		{"dlq wildcard verb", NewSubjects(""), func(s Subjects) string { return s.DLQ("vm.>") }, "proxbus.dlq.unknown"},
		{"commands stream", NewSubjects(""), Subjects.CommandsStream, "PROXBUS_COMMANDS"},
		{"events stream", NewSubjects(""), Subjects.EventsStream, "PROXBUS_EVENTS"},
		{"dlq stream", NewSubjects(""), Subjects.DLQStream, "PROXBUS_DLQ"},
		{"custom command", NewSubjects("acme.pb-2"), func(s Subjects) string { return s.Command("vm.list") }, "acme.pb-2.cmd.vm.list"},
		{"custom events filter", NewSubjects("acme.pb-2"), Subjects.EventsFilter, "acme.pb-2.evt.>"},
		{"custom result", NewSubjects("acme.pb-2"), func(s Subjects) string { return s.Result("r") }, "acme.pb-2.evt.r.result"},
		{"custom dlq", NewSubjects("acme.pb-2"), func(s Subjects) string { return s.DLQ("") }, "acme.pb-2.dlq.unknown"},
		{"custom commands stream", NewSubjects("acme.pb-2"), Subjects.CommandsStream, "ACME_PB_2_COMMANDS"},
		{"custom events stream", NewSubjects("acme.pb-2"), Subjects.EventsStream, "ACME_PB_2_EVENTS"},
		{"custom dlq stream", NewSubjects("acme.pb-2"), Subjects.DLQStream, "ACME_PB_2_DLQ"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.call(tc.subj); got != tc.expect {
				t.Errorf("got %q, want %q", got, tc.expect)
			}
		})
	}
}

// TestVerbOf pins the inverse of Command: concrete subjects under the prefix only.
func TestVerbOf(t *testing.T) {
	t.Parallel()
	s := NewSubjects("")
	tests := []struct {
		subject string
		verb    string
		ok      bool
	}{
		{"proxbus.cmd.vm.start", "vm.start", true},
		{"proxbus.cmd.storage.pbs.create", "storage.pbs.create", true},
		{"proxbus.cmd.", "", false},
		{"proxbus.cmd", "", false},
		{"proxbus.evt.x.step", "", false},
		{"other.cmd.vm.start", "", false},
		{"proxbus.cmd.vm..start", "", false},
		{"proxbus.cmd.vm.*", "", false},
		{"proxbus.cmd.>", "", false},
		{"proxbus.cmd.vm start", "", false},
		{"proxbusx.cmd.vm.start", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.subject, func(t *testing.T) {
			t.Parallel()
			verb, ok := s.VerbOf(tc.subject)
			if verb != tc.verb || ok != tc.ok {
				t.Errorf("VerbOf(%q) = %q, %v; want %q, %v", tc.subject, verb, ok, tc.verb, tc.ok)
			}
		})
	}
	if verb, ok := NewSubjects("a.b").VerbOf(NewSubjects("a.b").Command("vm.list")); !ok || verb != "vm.list" {
		t.Errorf("custom prefix round trip = %q, %v", verb, ok)
	}
}

// TestRef pins the event-subject token: simple ids are used as they are, others are hashed.
func TestRef(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 129)
	tests := []struct {
		name, source, id, want string
	}{
		{"simple", "/netbox/webhook/7", "cmd-42_A", "cmd-42_A"},
		{"128 chars is simple", "s", strings.Repeat("a", 128), strings.Repeat("a", 128)},
		{"slash and space hashed (pinned)", "/netbox/webhook/7", "weird id/1", "h4cbcfa3fc74d84fef9601731c770efd9"},
		{"129 chars hashed (pinned)", "urn:proxbus:cli", long, "hc2ca1971d43201339558aca1b5ae37ff"},
		{"dot hashed", "s", "a.b", Ref("s", "a.b")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Ref(tc.source, tc.id)
			if got != tc.want {
				t.Errorf("Ref = %q, want %q", got, tc.want)
			}
			if strings.ContainsAny(got, ".*> ") || len(got) > 128 {
				t.Errorf("Ref %q is not a single subject token", got)
			}
		})
	}
	if Ref("a", "x.y") == Ref("b", "x.y") {
		t.Error("hashed ref does not depend on the source")
	}
	if got := Ref("a", "x.y"); len(got) != 33 || got[0] != 'h' {
		t.Errorf("hashed ref %q is not h + 32 hex digits", got)
	}
	c := Command{ID: "weird id/1", Source: "/netbox/webhook/7"}
	if c.Ref() != "h4cbcfa3fc74d84fef9601731c770efd9" {
		t.Errorf("Command.Ref = %q", c.Ref())
	}
}
