package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuMark is a reading of this process's and the machine's CPU time.
type cpuMark struct {
	at            time.Time
	self          time.Duration // user + system time of this process
	busy, total   uint64        // jiffies of /proc/stat's cpu line: not idle or iowait, and all
	machineStatOK bool
}

// cpuUse is the CPU spent between two marks, in cores.
type cpuUse struct{ self, machine float64 }

func markCPU() cpuMark {
	m := cpuMark{at: time.Now()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		m.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return m
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return m
	}
	for i, f := range fields[1:] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return m
		}
		m.total += n
		if i != 3 && i != 4 { // idle, iowait
			m.busy += n
		}
	}
	m.machineStatOK = true
	return m
}

// since returns the cores used from m to now.
func (m cpuMark) since() cpuUse {
	n := markCPU()
	wall := n.at.Sub(m.at).Seconds()
	u := cpuUse{self: (n.self - m.self).Seconds() / wall}
	if m.machineStatOK && n.machineStatOK && n.total > m.total {
		u.machine = float64(n.busy-m.busy) / float64(n.total-m.total) * float64(cores())
	}
	return u
}

// cores is the number of CPUs /proc/stat counts.
func cores() int {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 1
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "cpu") && len(l) > 3 && l[3] >= '0' && l[3] <= '9' {
			n++
		}
	}
	return max(n, 1)
}
