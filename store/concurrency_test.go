package store_test

import (
	"context"
	"fmt"
	"sync"
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
			states := make([]store.ClaimState, n)
			errs := make([]error, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					c, err := e.s.Claim(context.Background(), tt.req(i))
					states[i], errs[i] = c.State, err
				})
			}
			close(start)
			wg.Wait()
			counts := map[store.ClaimState]int{}
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("claim %d: %v", i, errs[i])
				}
				counts[states[i]]++
			}
			if counts[store.Claimed] != 1 || counts[tt.others] != n-1 {
				t.Fatalf("outcomes %v, want 1 claimed and %d %v", counts, n-1, tt.others)
			}
		})
	}
}
