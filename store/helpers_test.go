package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/testenv"
	"github.com/proxbus/proxbus/store"
)

// env is one test's store on its own key prefix, with a fake clock.
type env struct {
	s     *store.Store
	clk   *testenv.Clock
	redis *testenv.Redis
}

// newEnv returns a store on the test Redis with a unique prefix and a fake clock; mod may
// change the options before the store is built.
func newEnv(t *testing.T, mod func(*store.Options)) *env {
	t.Helper()
	r := testenv.StartRedis(t)
	clk := testenv.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	opts := store.Options{Prefix: r.Prefix, Now: clk.Now}
	if mod != nil {
		mod(&opts)
	}
	s, err := store.New(r.Client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &env{s: s, clk: clk, redis: r}
}

var (
	cmdA  = store.CommandKey{Source: "/netbox/webhook/7", ID: "cmd-a"}
	cmdB  = store.CommandKey{Source: "/netbox/webhook/7", ID: "cmd-b"}
	cmdC  = store.CommandKey{Source: "urn:proxbus:cli", ID: "cmd-c"}
	scope = &store.IdemScope{EndpointID: 1, Verb: "storage.pbs.create", Resource: "pbs1", Key: "key-1"}
)

// mustClaim claims and fails the test unless the outcome is want.
func (e *env) mustClaim(t *testing.T, req store.ClaimRequest, want store.ClaimState) store.Claim {
	t.Helper()
	c, err := e.s.Claim(context.Background(), req)
	if err != nil {
		t.Fatalf("claim %+v: %v", req.Command, err)
	}
	if c.State != want {
		t.Fatalf("claim %+v: state %v, want %v", req.Command, c.State, want)
	}
	return c
}

// mustComplete claims req as a new command and completes it with result.
func (e *env) mustComplete(t *testing.T, req store.ClaimRequest, result string) store.Lease {
	t.Helper()
	c := e.mustClaim(t, req, store.Claimed)
	if err := e.s.Complete(context.Background(), c.Lease, []byte(result)); err != nil {
		t.Fatalf("complete: %v", err)
	}
	return c.Lease
}

// wantErr fails the test unless errors.Is(err, want) (want nil: err must be nil).
func wantErr(t *testing.T, op string, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", op, err, want)
	}
}

func req(c store.CommandKey, idem *store.IdemScope, fp, owner string) store.ClaimRequest {
	return store.ClaimRequest{Command: c, Idem: idem, Fingerprint: fp, Owner: owner}
}

// raceClaims makes n claims at once, req(i) for the i-th, and returns their outcomes in
// order; a claim that fails fails the test.
func (e *env) raceClaims(t *testing.T, n int, req func(i int) store.ClaimRequest) []store.Claim {
	t.Helper()
	claims := make([]store.Claim, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			claims[i], errs[i] = e.s.Claim(context.Background(), req(i))
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	return claims
}
