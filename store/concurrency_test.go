package store_test

import (
	"fmt"
	"testing"

	"github.com/proxbus/proxbus/store"
)

// TestConcurrentClaims pins single-flight: 20 claimers racing for one command, or for one
// Idempotency-Key with different command ids, yield exactly one Claimed; the others are told
// to wait.
func TestConcurrentClaims(t *testing.T) {
	t.Parallel()
	const n = 20
	tests := []struct {
		name   string
		req    func(i int) store.ClaimRequest
		others store.ClaimState
	}{
		{
			name:   "same command",
			req:    func(i int) store.ClaimRequest { return req(cmdA, scope, "fp1", fmt.Sprintf("owner-%d", i)) },
			others: store.Busy,
		},
		{
			name: "same key, different commands",
			req: func(i int) store.ClaimRequest {
				return req(store.CommandKey{Source: "/netbox/webhook/7", ID: fmt.Sprintf("cmd-%d", i)}, scope, "fp1", fmt.Sprintf("owner-%d", i))
			},
			others: store.IdemInFlight,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			counts := map[store.ClaimState]int{}
			for _, c := range e.raceClaims(t, n, tt.req) {
				counts[c.State]++
			}
			if counts[store.Claimed] != 1 || counts[tt.others] != n-1 {
				t.Fatalf("outcomes %v, want 1 claimed and %d %v", counts, n-1, tt.others)
			}
		})
	}
}
