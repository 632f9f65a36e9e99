package events

import "testing"

// TestValidTraceParent pins which traceparent values are carried (W3C Trace Context level 1).
func TestValidTraceParent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tp   string
		want bool
	}{
		{testTraceParent, true},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future", true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", false},
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},
		{"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := validTraceParent(tc.tp); got != tc.want {
			t.Errorf("validTraceParent(%q) = %v, want %v", tc.tp, got, tc.want)
		}
	}
}
