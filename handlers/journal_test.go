package handlers

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// commentsRun is a run with just what comments() reads.
func commentsRun(cmd events.Command, endpointName string, prep prepared) *run {
	return &run{
		cmd:      cmd,
		endpoint: netbox.Endpoint{ID: cmd.EndpointID, Name: endpointName},
		prep:     prep,
		started:  time.Date(2026, 11, 29, 19, 4, 5, 0, time.FixedZone("CET", 3600)),
	}
}

func TestComments(t *testing.T) {
	t.Parallel()
	const secret = "0b7c9d4e-secret-value"
	prep := prepared{
		secrets: []string{secret},
		bullets: []Bullet{{"storage", "pbs1"}, {"server", "pbs.example.com"}},
	}
	cmd := events.Command{ID: "c-1", Source: "netbox", Verb: "storage.pbs.create", EndpointID: 7, HasEndpointID: true}
	tests := []struct {
		name     string
		cmd      events.Command
		endpoint string
		out      Outcome
		upid     string
		want     string
	}{
		{
			name:     "created with key, upid and endpoint name",
			cmd:      func() events.Command { c := cmd; c.IdempotencyKey = "k-1"; c.Actor = "alice"; return c }(),
			endpoint: "pve-a",
			out:      Outcome{Status: 201, Result: ResultCreated},
			upid:     "UPID:pve1:0001:task",
			want: "- verb: storage.pbs.create\n- actor: alice\n- result: created\n- command_id: c-1\n" +
				"- idempotency_key: k-1\n- proxmox_task_upid: UPID:pve1:0001:task\n- endpoint: 7 (pve-a)\n" +
				"- dispatched_at: 2026-11-29T18:04:05Z\n- storage: pbs1\n- server: pbs.example.com\n",
		},
		{
			name: "failure with detail and fields, default actor",
			cmd:  cmd,
			out: Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxRefused,
				Detail: "bad value " + secret, Fields: []string{"password", "port"}},
			want: "- verb: storage.pbs.create\n- actor: proxbus\n- result: failed\n- command_id: c-1\n" +
				"- endpoint: 7\n- dispatched_at: 2026-11-29T18:04:05Z\n" +
				"- error_detail: proxmox_refused: bad value [redacted] (fields: password, port)\n" +
				"- storage: pbs1\n- server: pbs.example.com\n",
		},
		{
			name: "reason only",
			cmd:  cmd,
			out:  Outcome{Status: 409, Result: ResultRefused, Reason: ReasonStorageConflict},
			want: "- verb: storage.pbs.create\n- actor: proxbus\n- result: refused\n- command_id: c-1\n" +
				"- endpoint: 7\n- dispatched_at: 2026-11-29T18:04:05Z\n- error_detail: storage_conflict\n" +
				"- storage: pbs1\n- server: pbs.example.com\n",
		},
		{
			name: "newlines cannot inject Markdown",
			cmd:  func() events.Command { c := cmd; c.Actor = "eve\n- result: ok\r\n# title"; return c }(),
			out:  Outcome{Status: 200, Result: ResultAlreadyPresent},
			want: "- verb: storage.pbs.create\n- actor: eve - result: ok  # title\n- result: already_present\n" +
				"- command_id: c-1\n- endpoint: 7\n- dispatched_at: 2026-11-29T18:04:05Z\n" +
				"- storage: pbs1\n- server: pbs.example.com\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := commentsRun(tt.cmd, tt.endpoint, prep).comments(tt.out, tt.upid)
			if got != tt.want {
				t.Errorf("comments =\n%s\nwant\n%s", got, tt.want)
			}
			if strings.Contains(got, secret) {
				t.Errorf("comments carry the secret:\n%s", got)
			}
		})
	}
}

func TestJournalKind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		want   netbox.Kind
	}{
		{201, netbox.KindSuccess},
		{200, netbox.KindInfo},
		{0, netbox.KindInfo},
		{400, netbox.KindWarning},
		{409, netbox.KindWarning},
		{422, netbox.KindWarning},
		{502, netbox.KindWarning},
	}
	for _, tt := range tests {
		if got := (Outcome{Status: tt.status}).journalKind(); got != tt.want {
			t.Errorf("journalKind(%d) = %v, want %v", tt.status, got, tt.want)
		}
	}
}

func TestProxmoxFailure(t *testing.T) {
	t.Parallel()
	refused := &proxmox.APIError{Method: "POST", Path: "/storage", Status: 400, Message: "Parameter verification failed.",
		Params: map[string]string{"server": "bad", "datastore": "bad"}}
	tests := []struct {
		name      string
		err       error
		wantClass failure
		want      Outcome
	}{
		{
			name: "refusal",
			err:  fmt.Errorf("create: %w", refused),
			want: Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxRefused, ProxmoxStatus: 400,
				Fields: []string{"datastore", "server"}, Detail: "Parameter verification failed."},
		},
		{
			name:      "transient API status",
			err:       &proxmox.APIError{Method: "GET", Path: "/storage", Status: 503},
			wantClass: unavailable,
			want:      Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxUnreachable},
		},
		{
			name:      "unreachable",
			err:       fmt.Errorf("dial: %w", proxmox.ErrUnreachable),
			wantClass: unavailable,
			want:      Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxUnreachable},
		},
		{
			name:      "errTransient",
			err:       fmt.Errorf("x: %w", errTransient),
			wantClass: unavailable,
			want:      Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxUnreachable},
		},
		{
			name:      "a panic is a failed attempt",
			err:       fmt.Errorf("%w: boom", errInternal),
			wantClass: attemptFailed,
			want:      Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxUnreachable},
		},
		{
			name:      "an unknown error is a failed attempt, not an outcome",
			err:       errors.New("boom"),
			wantClass: attemptFailed,
			want:      Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxUnreachable},
		},
		{
			name: "a failed task is the outcome",
			err:  &proxmox.TaskError{UPID: "UPID:pve1:1", ExitStatus: "boom"},
			want: Outcome{Status: 502, Result: ResultFailed, Reason: ReasonTaskFailed, UPID: "UPID:pve1:1", Detail: "task exit status: boom"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, class := classify(tt.err)
			if class != tt.wantClass {
				t.Errorf("class = %v, want %v", class, tt.wantClass)
			}
			if tt.want.Reason == ReasonProxmoxUnreachable {
				tt.want.Detail = tt.err.Error()
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("classify = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
