package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDefaultSetsOnlyZeroValues(t *testing.T) {
	t.Parallel()
	unset, set, negative := 0, 3, -time.Second
	Default(&unset, 8)
	Default(&set, 8)
	Default(&negative, time.Minute)
	if unset != 8 || set != 3 || negative != -time.Second {
		t.Errorf("Default: unset→%d, set→%d, negative→%v; want 8, 3 (kept), -1s (kept for validation)", unset, set, negative)
	}
}

func TestNonNegativeNamesTheFirstNegativeSetting(t *testing.T) {
	t.Parallel()
	if err := NonNegative("store", Named("A", 0), Named("B", time.Second)); err != nil {
		t.Fatalf("no negative setting: %v", err)
	}
	err := NonNegative("store", Named("A", 1), Named("LeaseTTL", -time.Second), Named("C", -1))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "store: ") || !strings.Contains(err.Error(), "LeaseTTL is negative") {
		t.Fatalf("got %v, want an ErrInvalid naming store and LeaseTTL", err)
	}
}
