package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/proxbus/proxbus/bench/internal/harness"
)

// Goals of the issue.
const (
	goalDrain = 1.10 // drain ≤ 110 % of the ideal
	// goalPVERequests: Proxmox requests per command with the watch (issue #36).
	goalPVERequests = 5
	goalDeliveries  = 1.05 // deliveries per command
	goalRSSGrowth   = 1.20 // peak RSS at the largest backlog ≤ 120 % of the smallest's: "flat"
)

// report prints the table and the details of every run.
func report(w io.Writer, cfg config, rs []runResult) {
	interval := "default"
	if cfg.watchInterval > 0 {
		interval = cfg.watchInterval.String()
	}
	fmt.Fprintf(w, "# fleet: vm.snapshot.create over %d guests on %d endpoints × max_parallel %d; %d replicas × --concurrency %d, MaxAckPending %d; tasks %s; --task-watch-interval %s; %s, %d CPUs\n\n",
		cfg.guests, cfg.endpoints, cfg.maxParallel, cfg.replicas, cfg.concurrency, cfg.maxAckPending, cfg.task, interval, runtime.Version(), runtime.NumCPU())
	fmt.Fprintln(w, "| backlog | load | waiting | drain | ideal | drain ÷ ideal | deliveries / cmd | Redis cmds / cmd: executed (sent) | Proxmox req / cmd | peak RSS per replica | cold queueing p50 / p99 | hot queueing p50 / p99 | results |")
	fmt.Fprintln(w, "|---:|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|")
	for _, r := range rs {
		n := r.spec.n
		load := "uniform"
		if r.spec.hotShare > 0 {
			load = fmt.Sprintf("%.0f %% on %d hot guests", r.spec.hotShare*100, cfg.hotGuests)
		}
		results := fmt.Sprintf("%d", r.results)
		if !r.complete {
			results = fmt.Sprintf("**%d of %d**", r.results, n)
		}
		if others := statusesBut(r.statuses, 201); others != "" {
			results += " (" + others + ")"
		}
		hot := "–"
		if len(r.hotQueue) > 0 {
			hot = pq(r.hotQueue)
		}
		wait := "watch"
		if r.spec.poll {
			wait = "per-task poll"
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %.3f | %.2f | %.1f (%.1f) | %.1f | %s | %s | %s | %s |\n",
			n, load, wait, secs(r.drain), secs(r.ideal), r.drain.Seconds()/r.ideal.Seconds(),
			float64(r.deliveries)/float64(n), float64(sumCounts(r.redis))/float64(n), float64(sumCounts(r.redisSent))/float64(n),
			float64(sumCounts(r.pve))/float64(n),
			mibList(r.replicaHWM), pq(r.coldQueue), hot, results)
	}
	fmt.Fprintln(w)
	for _, r := range rs {
		n := r.spec.n
		fmt.Fprintf(w, "- **%s** (load average %.1f at its start):\n", r.spec, r.load)
		fmt.Fprintf(w, "  slots busy with tasks %.0f %% of the drain (Σ task time ÷ (drain × %d)); task started → done p50 %s; first step → result p50 %s (commands that never waited)\n",
			r.utilization*100, cfg.endpoints*cfg.maxParallel, ms(harness.Percentile(r.task, 50)), ms(harness.Percentile(r.hold, 50)))
		fmt.Fprintf(w, "  a task's end → its done step p50 / p90 %s / %s (%d tasks)\n",
			ms(harness.Percentile(r.endSeen, 50)), ms(harness.Percentile(r.endSeen, 90)), len(r.endSeen))
		if len(r.handling) > 0 {
			mean := r.handlingSum / time.Duration(len(r.handling))
			fmt.Fprintf(w, "  answering delivery in the pipeline (claim to outcome stored, waiting in the process for a guard included) p50 %s, mean %s\n",
				ms(harness.Percentile(r.handling, 50)), ms(mean))
		}
		var perEndpoint []string
		for _, b := range r.endpointBusy {
			perEndpoint = append(perEndpoint, fmt.Sprintf("%.1f", b.Seconds()/r.drain.Seconds()))
		}
		fmt.Fprintf(w, "  mean running tasks per endpoint %s of %d; deliveries per command (the answering delivery's number) cold %.2f, hot %.2f; last cold result at %s\n",
			strings.Join(perEndpoint, " / "), cfg.maxParallel, r.coldDeliveries.mean(), r.hotDeliveries.mean(), secs(r.coldDrain))
		fmt.Fprintf(w, "  ack pending mean %.1f, max %d (MaxAckPending %d); %d commands waited (%d waiting steps); %d replays\n",
			r.ackPendingAvg, r.ackPendingMax, cfg.maxAckPending, r.waited, r.waitSteps, r.replays)
		fmt.Fprintf(w, "  Redis commands executed per command (INFO commandstats, inside Lua scripts included): %s\n", formatPerCommand(r.redis, n, 6))
		fmt.Fprintf(w, "  Redis commands sent per command (round trips, at a counting proxy): %.2f: %s\n",
			float64(sumCounts(r.redisSent))/float64(n), formatPerCommand(toInt64(r.redisSent), n, 6))
		fmt.Fprintf(w, "  Proxmox per command: %s; NetBox per command: %s\n", formatPerCommand(byRoute(r.pve), n, 5),
			formatPerCommand(byRoute(r.netbox), n, 4))
		for status, why := range r.failures {
			fmt.Fprintf(w, "  a %d result: %s\n", status, why)
		}
		fmt.Fprintf(w, "  replicas' CPU %s; nats-server peak RSS %s; cold publish → result p50 / p99 %s\n",
			cpuList(r.replicaCPU), harness.MiB(r.natsHWM), pq(r.coldEndToEnd))
	}
	fmt.Fprintln(w)
	verdicts(w, cfg, rs)
}

// verdicts compares the figures with the goals.
func verdicts(w io.Writer, cfg config, rs []runResult) {
	for _, r := range rs {
		ratio := r.drain.Seconds() / r.ideal.Seconds()
		d := float64(r.deliveries) / float64(r.spec.n)
		fmt.Fprintf(w, "- %s: drain %.3f × ideal (goal ≤ %.2f: %s); %.2f deliveries per command (goal ≤ %.2f: %s)",
			r.spec, ratio, goalDrain, met(ratio <= goalDrain), d, goalDeliveries, met(d <= goalDeliveries))
		if !r.spec.poll {
			q := float64(sumCounts(r.pve)) / float64(r.spec.n)
			fmt.Fprintf(w, "; %.1f Proxmox requests per command (goal ≤ %d: %s)", q, goalPVERequests, met(q <= goalPVERequests))
		}
		fmt.Fprintln(w)
	}
	type group struct {
		share float64
		poll  bool
	}
	byShare := map[group][]runResult{}
	for _, r := range rs {
		k := group{r.spec.hotShare, r.spec.poll}
		byShare[k] = append(byShare[k], r)
	}
	for k, group := range byShare {
		share := k.share
		if len(group) < 2 {
			continue
		}
		small, large := group[0], group[len(group)-1]
		ok := true
		var parts []string
		for i := range min(len(small.replicaHWM), len(large.replicaHWM)) {
			g := float64(large.replicaHWM[i]) / float64(max(small.replicaHWM[i], 1))
			ok = ok && g <= goalRSSGrowth
			parts = append(parts, fmt.Sprintf("×%.2f", g))
		}
		fmt.Fprintf(w, "- peak RSS, hot share %.0f %%, backlog %d → %d: %s per replica (goal flat, ≤ ×%.1f: %s)\n",
			share*100, small.spec.n, large.spec.n, strings.Join(parts, " "), goalRSSGrowth, met(ok))
	}
	for _, hot := range rs {
		if hot.spec.hotShare == 0 {
			continue
		}
		for _, uni := range rs {
			if uni.spec.n != hot.spec.n || uni.spec.hotShare != 0 || uni.spec.poll != hot.spec.poll {
				continue
			}
			a, b := harness.Percentile(uni.coldQueue, 99), harness.Percentile(hot.coldQueue, 99)
			fmt.Fprintf(w, "- n=%d: p99 queueing of the commands on the other %d guests: %s without hot guests, %s with %.0f %% of the commands on %d hot guests (×%.2f)\n",
				hot.spec.n, cfg.guests-cfg.hotGuests, secs(a), secs(b), hot.spec.hotShare*100, cfg.hotGuests, b.Seconds()/max(a.Seconds(), 1e-9))
		}
	}
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// pq renders the p50 and p99 of sorted durations.
func pq(sorted []time.Duration) string {
	if len(sorted) == 0 {
		return "–"
	}
	return secs(harness.Percentile(sorted, 50)) + " / " + secs(harness.Percentile(sorted, 99))
}

func secs(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func mibList(bs []int64) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = fmt.Sprintf("%.0f", float64(b)/(1<<20))
	}
	return strings.Join(parts, " / ") + " MiB"
}

func cpuList(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.1f", d.Seconds())
	}
	return strings.Join(parts, " / ") + " s"
}

func toInt64(m map[string]int) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = int64(v)
	}
	return out
}

// byRoute sums request counts over node names and drops the API prefix:
// "GET /api2/json/nodes/pve2/qemu/{n}/snapshot" counts as "GET nodes/{node}/qemu/{n}/snapshot".
func byRoute(m map[string]int) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		method, path, _ := strings.Cut(k, " ")
		path = strings.TrimPrefix(strings.TrimPrefix(path, "/api2/json"), "/")
		parts := strings.Split(path, "/")
		for i := 1; i < len(parts); i++ {
			switch {
			case parts[i-1] == "nodes":
				parts[i] = "{node}"
			case strings.HasPrefix(parts[i], "UPID:"):
				parts[i] = "{upid}"
			}
		}
		out[method+" "+strings.Join(parts, "/")] += int64(v)
	}
	return out
}

// statusesBut lists the result statuses other than want, "409×3, 502×1".
func statusesBut(m map[int]int, want int) string {
	var parts []string
	for status := 100; status < 600; status++ {
		if n := m[status]; n > 0 && status != want {
			parts = append(parts, fmt.Sprintf("%d×%d", status, n))
		}
	}
	return strings.Join(parts, ", ")
}
