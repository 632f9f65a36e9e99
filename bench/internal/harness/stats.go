package harness

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Median returns the median of xs (0 for none).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// MedianDuration returns the median of ds (the 50th percentile by nearest rank; 0 for none),
// leaving ds as it is.
func MedianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return Percentile(s, 50)
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of sorted by the nearest-rank method.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// PeakRSS returns the process's peak resident set size (VmHWM) in bytes, or 0 when
// /proc/self/status cannot be read.
func PeakRSS() int64 { return procStatus("VmHWM:") }

// RSS returns the process's current resident set size (VmRSS) in bytes, or 0.
func RSS() int64 { return procStatus("VmRSS:") }

func procStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// MiB renders bytes as mebibytes with one decimal.
func MiB(b int64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MiB" }

// TimeWait returns the number of TCP sockets in TIME_WAIT (from /proc/net/sockstat), or -1.
func TimeWait() int {
	raw, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "TCP:" {
			continue
		}
		for i := 1; i+1 < len(f); i++ {
			if f[i] == "tw" {
				n, err := strconv.Atoi(f[i+1])
				if err != nil {
					return -1
				}
				return n
			}
		}
	}
	return -1
}

// CoolDown waits (at most limit) until fewer than max sockets are in TIME_WAIT, so that one
// run's closed connections cannot exhaust the ephemeral ports of the next. It returns how
// long it waited.
func CoolDown(max int, limit time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < limit {
		if n := TimeWait(); n < 0 || n < max {
			break
		}
		time.Sleep(time.Second)
	}
	return time.Since(start)
}
