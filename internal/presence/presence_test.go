package presence

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/proxbus/proxbus/internal/testenv"
)

// TestCheck pins what a client learns of a prefix: unknown (naming the prefixes that are
// served), served by a running replica, or served by one not seen for a while.
func TestCheck(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t)
	ctx := context.Background()
	now := time.Now()
	served, stale := r.Prefix+"-a", r.Prefix+"-b"
	t.Cleanup(func() { r.Client.Del(context.Background(), key(served), key(stale)) })
	if _, err := Check(ctx, r.Client, served, now); !errors.Is(err, ErrNotServed) {
		t.Fatalf("nothing announced: err %v, want ErrNotServed", err)
	}
	if err := Announce(ctx, r.Client, served, "replica-1", now); err != nil {
		t.Fatal(err)
	}
	if err := Announce(ctx, r.Client, stale, "replica-2", now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		prefix      string
		wantRunning bool
		wantErr     string
	}{
		{served, true, ""},
		{stale, false, ""},
		{r.Prefix + "-typo", false, `"` + served + `"`},
	}
	for _, tt := range tests {
		running, err := Check(ctx, r.Client, tt.prefix, now)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.prefix, err)
		case tt.wantErr != "" && (!errors.Is(err, ErrNotServed) || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: err %v, want ErrNotServed naming %s", tt.prefix, err, tt.wantErr)
		case running != tt.wantRunning:
			t.Errorf("%s: running %v, want %v", tt.prefix, running, tt.wantRunning)
		}
	}
}
