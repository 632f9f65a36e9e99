package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/config"
	"github.com/proxbus/proxbus/store"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func idemKeyName(prefix string, i store.IdemScope) string {
	return fmt.Sprintf("%s:idem:%s", prefix, sha(fmt.Sprintf("%d|%s|%s|%s", i.EndpointID, i.Verb, i.Resource, i.Key)))
}

// TestKeyNames pins the documented Redis key names, types and lifetimes (operators rely on
// them).
func TestKeyNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, func(o *store.Options) { o.Window = 45 * time.Second })
	p := e.redis.Prefix
	l := e.mustComplete(t, req(cmdA, scope, "fp1", "o1"), "r")
	guarded := req(cmdB, nil, "fp1", "o2")
	res := store.GuestResource(3, 105)
	guarded.Guards = store.Guards{Resource: &res, Slot: &store.SlotRequest{EndpointID: 3, Max: 2}}
	b := e.mustClaim(t, guarded, store.Claimed)
	if err := e.s.SaveRepair(ctx, store.Repair{Command: cmdA, Kind: "success"}); err != nil {
		t.Fatalf("save repair: %v", err)
	}
	if l.Token <= 0 {
		t.Fatalf("token %d", l.Token)
	}

	// a literal, so that a change of the hashing shows up here
	if got := (store.CommandKey{Source: "urn:proxbus:cli", ID: "abc"}).Hash(); got != "5e8b784c7b7ffbce71f72f65f1eb4d42eb14ebf29bef94aef4acbe4e2a29a448" {
		t.Fatalf("command hash %s changed", got)
	}

	tests := []struct {
		key    string
		typ    string
		ttlMax time.Duration // 0: no TTL
		ttlMin time.Duration
	}{
		{p + ":cmd:" + sha(cmdA.Source+"\n"+cmdA.ID), "hash", store.DefaultDedupeTTL, store.DefaultDedupeTTL - time.Minute},
		{p + ":cmd:" + sha(cmdB.Source+"\n"+cmdB.ID), "hash", store.DefaultDedupeTTL, store.DefaultDedupeTTL - time.Minute},
		{p + ":idem:" + sha("1|storage.pbs.create|pbs1|key-1"), "hash", 45 * time.Second, time.Second},
		{p + ":fence", "string", 0, 0},
		{p + ":repair:" + sha(cmdA.Source+"\n"+cmdA.ID), "hash", 0, 0},
		{p + ":repairs", "zset", 0, 0},
		{p + ":lock:3:guest:105", "hash", store.DefaultDedupeTTL, store.DefaultDedupeTTL - time.Minute},
		{p + ":slots:3", "zset", 2 * store.DefaultLeaseTTL, 2*store.DefaultLeaseTTL - time.Minute},
	}
	for _, tt := range tests {
		typ, err := e.redis.Client.Type(ctx, tt.key).Result()
		if err != nil || typ != tt.typ {
			t.Errorf("%s: type %q (%v), want %s", tt.key, typ, err, tt.typ)
			continue
		}
		ttl, err := e.redis.Client.PTTL(ctx, tt.key).Result()
		if err != nil {
			t.Fatalf("pttl %s: %v", tt.key, err)
		}
		if tt.ttlMax == 0 && ttl >= 0 {
			t.Errorf("%s: TTL %v, want none", tt.key, ttl)
		}
		if tt.ttlMax != 0 && (ttl > tt.ttlMax || ttl < tt.ttlMin) {
			t.Errorf("%s: TTL %v, want in [%v, %v]", tt.key, ttl, tt.ttlMin, tt.ttlMax)
		}
	}
	deadline := e.clk.Now().Add(store.DefaultLeaseTTL).UnixMilli()
	lock, err := e.redis.Client.HGetAll(ctx, p+":lock:3:guest:105").Result()
	if err != nil || lock["owner"] != "o2" || lock["token"] != fmt.Sprint(b.Lease.Token) ||
		lock["lease"] != fmt.Sprint(deadline) || lock["cmd"] != sha(cmdB.Source+"\n"+cmdB.ID) || len(lock) != 4 {
		t.Errorf("lock fields %v (%v), want the claim's owner o2, token %d, deadline %d and command", lock, err, b.Lease.Token, deadline)
	}
	slots, err := e.redis.Client.ZRangeWithScores(ctx, p+":slots:3", 0, -1).Result()
	if err != nil || len(slots) != 1 || slots[0].Member != "o2" || int64(slots[0].Score) != deadline {
		t.Errorf("slot holders %v (%v), want o2 scored %d", slots, err, deadline)
	}
	n, err := e.redis.Client.Keys(ctx, p+":*").Result()
	if err != nil || len(n) != len(tests) {
		t.Errorf("keys %v (%v), want exactly the %d above", n, err, len(tests))
	}
}

// TestOptionsDefaults pins the documented defaults.
func TestOptionsDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	s, err := store.New(e.redis.Client, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := s.Options()
	if o.Prefix != "proxbus" || o.DedupeTTL != 24*time.Hour || o.Window != 60*time.Second ||
		o.LeaseTTL != 30*time.Second || o.Now == nil {
		t.Fatalf("defaults %+v", o)
	}
	if err := e.s.Ping(context.Background()); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

// TestNewRefusesNegativeDurations: a negative TTL or window is a configuration error naming
// the field, never replaced by the default.
func TestNewRefusesNegativeDurations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		field string
		opts  store.Options
	}{
		{"DedupeTTL", store.Options{DedupeTTL: -time.Second}},
		{"Window", store.Options{Window: -time.Second}},
		{"LeaseTTL", store.Options{LeaseTTL: -time.Second}},
	} {
		if _, err := store.New(nil, tc.opts); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: err = %v, want config.ErrInvalid naming it", tc.field, err)
		}
	}
}
