package netbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/netbox"
	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
)

// TestEndpointWriteGate pins how the write gate is read from ProxmoxEndpoint answers across
// netbox-proxbox versions, including shapes the simulator never gives: only allow_writes true
// with enabled not false opens it, and every closed gate says why.
func TestEndpointWriteGate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		body       string
		wantAllow  bool
		wantReason string
	}{
		{"0.0.22+: allow_writes true", `{"id":5,"name":"x","enabled":true,"allow_writes":true}`, true, ""},
		{"allow_writes true, no enabled field", `{"id":5,"allow_writes":true}`, true, ""},
		{"0.0.22+: allow_writes false", `{"id":5,"enabled":true,"allow_writes":false}`, false, netbox.ReasonAllowWritesFalse},
		{"before 0.0.22: no allow_writes", `{"id":5,"name":"x","enabled":true}`, false, netbox.ReasonAllowWritesAbsent},
		{"before 0.0.17: neither field", `{"id":5,"name":"x"}`, false, netbox.ReasonAllowWritesAbsent},
		{"custom field is not read", `{"id":5,"custom_fields":{"allow_writes":true}}`, false, netbox.ReasonAllowWritesAbsent},
		{"field false, custom field true", `{"id":5,"allow_writes":false,"custom_fields":{"allow_writes":true}}`, false, netbox.ReasonAllowWritesFalse},
		{"allow_writes null", `{"id":5,"allow_writes":null}`, false, netbox.ReasonAllowWritesInvalid},
		{"allow_writes string", `{"id":5,"allow_writes":"true"}`, false, netbox.ReasonAllowWritesInvalid},
		{"allow_writes number", `{"id":5,"allow_writes":1}`, false, netbox.ReasonAllowWritesInvalid},
		{"disabled endpoint", `{"id":5,"enabled":false,"allow_writes":true}`, false, netbox.ReasonEndpointDisabled},
		{"disabled and read-only", `{"id":5,"enabled":false,"allow_writes":false}`, false,
			netbox.ReasonEndpointDisabled + "; " + netbox.ReasonAllowWritesFalse},
		{"enabled null", `{"id":5,"enabled":null,"allow_writes":true}`, false, netbox.ReasonEnabledInvalid},
		{"enabled string", `{"id":5,"enabled":"yes","allow_writes":true}`, false, netbox.ReasonEnabledInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, stub(t, 200, "application/json", tc.body), simnetbox.TokenV1, time.Second)
			ep, err := c.Endpoint(context.Background(), 5)
			if err != nil {
				t.Fatalf("err = %v, want none: a readable answer is a gate decision", err)
			}
			if ep.AllowWrites != tc.wantAllow || ep.WritesClosedReason != tc.wantReason {
				t.Fatalf("AllowWrites, WritesClosedReason = %v, %q; want %v, %q",
					ep.AllowWrites, ep.WritesClosedReason, tc.wantAllow, tc.wantReason)
			}
		})
	}
}

// TestEndpointAnswers pins the errors of answers that are not a ProxmoxEndpoint: the gate
// stays closed and the caller learns NetBox could not answer (or refused the token).
func TestEndpointAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		ctype   string
		body    string
		wantErr error
	}{
		{"other id", 200, "application/json", `{"id":6,"allow_writes":true}`, netbox.ErrUnavailable},
		{"no id", 200, "application/json", `{"allow_writes":true}`, netbox.ErrUnavailable},
		{"html login page", 200, "text/html", `<html>login</html>`, netbox.ErrUnavailable},
		{"401", 401, "application/json", `{"detail":"Authentication credentials were not provided."}`, netbox.ErrUnauthorized},
		{"404", 404, "application/json", `{"detail":"No ProxmoxEndpoint matches the given query."}`, netbox.ErrNotFound},
		{"405", 405, "application/json", `{"detail":"Method not allowed"}`, netbox.ErrRejected},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, stub(t, tc.status, tc.ctype, tc.body), simnetbox.TokenV1, time.Second)
			ep, err := c.Endpoint(context.Background(), 5)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if ep.AllowWrites {
				t.Fatal("AllowWrites = true on an error")
			}
		})
	}
}
