package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/proxbus/proxbus/store"
)

// TestFinishUnstarted pins that an outcome given without running (expiry, cancellation) is
// stored only for a command that never started: a done command keeps its result and a running
// one, even under an expired lease, is left to be resumed.
func TestFinishUnstarted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		before     func(t *testing.T, e *env)
		want       store.RecordState
		wantResult string
		// then is the claim state the command gets afterwards.
		then store.ClaimState
	}{
		{name: "never started", before: func(*testing.T, *env) {}, want: store.Absent, then: store.Done},
		{name: "done", before: func(t *testing.T, e *env) {
			e.mustComplete(t, req(cmdA, nil, "fp1", "old"), "first")
		}, want: store.Finished, wantResult: "first", then: store.Done},
		{name: "running", before: func(t *testing.T, e *env) {
			e.mustClaim(t, req(cmdA, nil, "fp1", "old"), store.Claimed)
		}, want: store.Running, then: store.Busy},
		{name: "running under an expired lease", before: func(t *testing.T, e *env) {
			e.mustClaim(t, req(cmdA, nil, "fp1", "old"), store.Claimed)
			e.clk.Advance(store.DefaultLeaseTTL + time.Second)
		}, want: store.Running, then: store.Resumed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newEnv(t, nil)
			tt.before(t, e)
			state, raw, err := e.s.FinishUnstarted(ctx, cmdA, []byte("expired"))
			if err != nil {
				t.Fatal(err)
			}
			if state != tt.want || string(raw) != tt.wantResult {
				t.Fatalf("FinishUnstarted = %v %q, want %v %q", state, raw, tt.want, tt.wantResult)
			}
			c := e.mustClaim(t, req(cmdA, nil, "fp1", "next"), tt.then)
			if tt.then != store.Done {
				return
			}
			want := tt.wantResult
			if tt.want == store.Absent {
				want = "expired"
			}
			if string(c.Result) != want {
				t.Errorf("stored result %q, want %q", c.Result, want)
			}
			if ttl := e.redis.Client.PTTL(ctx, e.redis.Prefix+":cmd:"+cmdA.Hash()).Val(); ttl <= 0 {
				t.Errorf("record TTL %v: it must expire with the dedupe window", ttl)
			}
		})
	}
}
