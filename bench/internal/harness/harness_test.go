package harness

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPattern(t *testing.T) {
	t.Parallel()
	tests := []struct{ path, want string }{
		{"/api/extras/journal-entries/17/", "/api/extras/journal-entries/{n}/"},
		{"/api2/json/storage", "/api2/json/storage"},
		{"/api2/json/nodes/pve1/qemu/10001/status/start", "/api2/json/nodes/pve1/qemu/{n}/status/start"},
	}
	for _, tc := range tests {
		if got := pattern(tc.path); got != tc.want {
			t.Errorf("pattern(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

// TestReadCommand pins the RESP parsing of the counting proxy: every command is copied
// byte for byte and named by its first element, pipelines included.
func TestReadCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		names []string
	}{
		{"one", "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", []string{"GET"}},
		{"pipeline", "*1\r\n$4\r\nping\r\n*3\r\n$7\r\nEVALSHA\r\n$2\r\nab\r\n$1\r\n0\r\n", []string{"PING", "EVALSHA"}},
		{"binary payload", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n", []string{"SET"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := bufio.NewReader(strings.NewReader(tc.in))
			var out bytes.Buffer
			w := bufio.NewWriter(&out)
			var got []string
			for range tc.names {
				name, err := readCommand(r, w)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, name)
			}
			_ = w.Flush()
			if strings.Join(got, ",") != strings.Join(tc.names, ",") {
				t.Errorf("names %v, want %v", got, tc.names)
			}
			if out.String() != tc.in {
				t.Errorf("copied %q, want %q", out.String(), tc.in)
			}
		})
	}
}

func TestPercentileAndMedian(t *testing.T) {
	t.Parallel()
	var d []time.Duration
	for i := 1; i <= 1000; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		p    float64
		want time.Duration
	}{{50, 500 * time.Millisecond}, {99, 990 * time.Millisecond}, {99.9, 999 * time.Millisecond}, {100, time.Second}}
	for _, tc := range tests {
		if got := Percentile(d, tc.p); got != tc.want {
			t.Errorf("p%v = %s, want %s", tc.p, got, tc.want)
		}
	}
	if got := Median([]float64{3, 1, 2, 10}); got != 2.5 {
		t.Errorf("median = %v, want 2.5", got)
	}
	unsorted := []time.Duration{3, 1, 4, 2}
	if got := MedianDuration(unsorted); got != 2 || unsorted[0] != 3 {
		t.Errorf("median duration = %s (input now %v), want 2ns and the input unchanged", got, unsorted)
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("percentile of nothing = %s", got)
	}
}

// TestStartProfiling: both files are written and closed by stop; a path that cannot be
// created is an error, and a trace that cannot start leaves no CPU profile running.
func TestStartProfiling(t *testing.T) {
	dir := t.TempDir()
	cpu, tr := filepath.Join(dir, "cpu.out"), filepath.Join(dir, "trace.out")
	stop, err := StartProfiling(cpu, tr)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, p := range []string{cpu, tr} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v, size %v", p, err, fi)
		}
	}
	if _, err := StartProfiling(cpu, filepath.Join(dir, "missing", "trace.out")); err == nil {
		t.Fatal("a trace path in a missing directory was accepted")
	}
	// The CPU profile started for the failed call was stopped: a new one can start.
	stop, err = StartProfiling(filepath.Join(dir, "cpu2.out"), "")
	if err != nil {
		t.Fatalf("CPU profile after a failed start: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
