package main

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	simnetbox "github.com/proxbus/proxbus/sim/netbox"
	simpve "github.com/proxbus/proxbus/sim/pve"
)

// report is the soak's verdict.
type report struct {
	published, poison, dups int
	lost                    []string // command ids with neither a result nor a dead letter
	multiple                []string // command ids with more than one first-hand (not replayed) result
	dupWrites               []string // resources written more often than their commands allow
	inProgress              []string // journal entry ids still in_progress
	leaks                   []leak
	statuses                map[string]int // "status result" → count (first result per command)
	latencies               []time.Duration
	span                    time.Duration
	completed               int
	writes                  map[string]int // kind of Proxmox write → applied count
	// redisRestarts are when Redis was restarted (its data lost): flagged items that span one
	// are marked, since Redis holds the command identities, Idempotency-Key windows, leases,
	// progress checkpoints and pending journal repairs.
	redisRestarts []time.Time
	spanning      int
}

// spans reports whether a restart of Redis happened between from and to.
func (rep *report) spans(from, to time.Time) bool {
	for _, t := range rep.redisRestarts {
		if !t.Before(from) && !t.After(to) {
			return true
		}
	}
	return false
}

// mark annotates a flagged item that spans a Redis restart.
func (rep *report) mark(item string, from, to time.Time) string {
	if rep.spans(from, to) {
		rep.spanning++
		return item + "  [spans the Redis restart]"
	}
	return item
}

// firstHand returns the results of a command that are not replays.
func firstHand(rs []resultEv) []resultEv {
	var out []resultEv
	seen := map[string]bool{}
	for _, r := range rs {
		if !r.res.Replayed && !seen[r.eventID] {
			seen[r.eventID] = true
			out = append(out, r)
		}
	}
	return out
}

// checkOutcomes fills lost, multiple, statuses and latency.
func (rep *report) checkOutcomes(plan []*planned, published map[string]time.Time, c *collected) {
	rep.statuses = map[string]int{}
	var first, last time.Time
	for _, p := range plan {
		id := p.cmd.ID
		pubAt, ok := published[id]
		if !ok {
			continue
		}
		rep.published++
		if p.poison != nil {
			rep.poison++
		}
		rs := c.results[id]
		if len(rs) == 0 && len(c.dlq[id]) == 0 || p.poison != nil && len(c.dlq[id]) == 0 {
			rep.lost = append(rep.lost, id)
			continue
		}
		if fh := firstHand(rs); len(fh) > 1 {
			rep.multiple = append(rep.multiple, id)
		}
		if len(rs) == 0 {
			rep.statuses["dead letter only"]++
			continue
		}
		r := rs[0]
		for _, x := range rs[1:] {
			if x.at.Before(r.at) {
				r = x
			}
		}
		key := fmt.Sprintf("%s %d %s %s", r.res.Verb, r.res.Status, r.res.Result, r.res.Reason)
		if r.res.Replayed {
			key += " (replayed)"
		}
		rep.statuses[strings.TrimSpace(key)]++
		if p.poison == nil && !r.at.IsZero() {
			rep.latencies = append(rep.latencies, r.at.Sub(pubAt))
			rep.completed++
			if first.IsZero() || pubAt.Before(first) {
				first = pubAt
			}
			if r.at.After(last) {
				last = r.at
			}
		}
	}
	rep.span = last.Sub(first)
	slices.Sort(rep.latencies)
}

// resourceOf parses a PVE path "/nodes/{node}/{type}/{vmid}/…" into vmid and the rest.
func resourceOf(path string) (vmid int64, rest string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(parts) < 4 || parts[0] != "nodes" || (parts[2] != "qemu" && parts[2] != "lxc") {
		return 0, "", false
	}
	v, err := strconv.ParseInt(parts[3], 10, 64)
	if err != nil {
		return 0, "", false
	}
	return v, strings.Join(parts[4:], "/"), true
}

// taskOK reports whether a task ended with an effect: "OK", "WARNINGS: n", or still running.
func taskOK(t simpve.TaskInfo) bool {
	return t.Running || t.ExitStatus == "OK" || strings.HasPrefix(t.ExitStatus, "WARNINGS")
}

// checkWrites counts the writes that took effect in the PVE simulator (answered 200, whether
// or not the answer reached proxbus, and, for a task, ended OK) per resource, and compares
// them with what the commands allow:
//   - storage creates per storage id, clones/creates per new vmid, move_disk per (vmid, disk),
//     resizes and starts per new vmid, snapshot creates and deletes per (vmid, name): at most 1;
//   - power writes on the shared guests: see checkPower.
func (rep *report) checkWrites(recs []writeRec, tasks []simpve.TaskInfo, plan []*planned, c *collected) {
	rep.writes = map[string]int{}
	byUPID := map[string]simpve.TaskInfo{}
	for _, t := range tasks {
		byUPID[t.UPID] = t
	}
	per := map[string]int{}
	first, last := map[string]time.Time{}, map[string]time.Time{}
	var powerWrites []writeRec
	for _, r := range recs {
		if r.Status != http.StatusOK {
			continue
		}
		if r.UPID != "" {
			if t, ok := byUPID[r.UPID]; ok && !taskOK(t) {
				rep.writes["task failed (no effect)"]++
				continue
			}
		}
		var key, kind string
		vmid, rest, isGuest := resourceOf(r.Path)
		switch {
		case r.Path == "/storage":
			kind, key = "storage create", "storage "+r.Params["storage"]
		case r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/clone"):
			kind, key = "clone", "new vmid "+r.Params["newid"]
		case r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/qemu"):
			kind, key = "create", "new vmid "+r.Params["vmid"]
		case isGuest && rest == "move_disk":
			kind, key = "move_disk", fmt.Sprintf("vmid %d disk %s", vmid, r.Params["disk"])
		case isGuest && rest == "resize":
			kind, key = "resize", fmt.Sprintf("vmid %d resize %s", vmid, r.Params["disk"])
		case isGuest && rest == "config":
			kind = "config update" // idempotent re-application is not a second effect; counted only
		case isGuest && rest == "snapshot":
			kind, key = "snapshot create", fmt.Sprintf("vmid %d snapshot %s", vmid, r.Params["snapname"])
		case isGuest && r.Method == http.MethodDelete && strings.HasPrefix(rest, "snapshot/"):
			kind, key = "snapshot delete", fmt.Sprintf("vmid %d snapshot delete %s", vmid, strings.TrimPrefix(rest, "snapshot/"))
		case isGuest && strings.HasPrefix(rest, "status/") && vmid >= firstNewVMID:
			kind, key = "provision start", fmt.Sprintf("new vmid %d %s", vmid, rest)
		case isGuest && strings.HasPrefix(rest, "status/"):
			kind = "power"
			powerWrites = append(powerWrites, r)
		case strings.HasSuffix(r.Path, "/status"):
			kind = "node reboot"
		default:
			kind = r.Method + " other"
		}
		rep.writes[kind]++
		if key != "" {
			per[key]++
			if first[key].IsZero() {
				first[key] = r.At
			}
			last[key] = r.At
		}
	}
	for _, k := range slices.Sorted(maps.Keys(per)) {
		if per[k] > 1 {
			rep.dupWrites = append(rep.dupWrites, rep.mark(fmt.Sprintf("%s: %d writes", k, per[k]), first[k], last[k]))
		}
	}
	rep.checkPower(powerWrites, plan, c)
}

// checkPower attributes every power write on a shared guest to the command that was running
// on the guest then: the one with the latest "started" step at or before the write (commands
// for one guest never run at once, so that is the command that sent it). A command with more
// writes than it makes (one; two for a forced container reboot) wrote twice.
func (rep *report) checkPower(writes []writeRec, plan []*planned, c *collected) {
	type start struct {
		at time.Time
		p  *planned
	}
	starts := map[int64][]start{}
	for _, p := range plan {
		if p.guest == 0 {
			continue
		}
		for _, at := range c.started[p.cmd.ID] {
			starts[p.guest] = append(starts[p.guest], start{at, p})
		}
	}
	for _, ss := range starts {
		slices.SortFunc(ss, func(a, b start) int { return a.at.Compare(b.at) })
	}
	count := map[*planned][]time.Time{}
	for _, w := range writes {
		vmid, _, _ := resourceOf(w.Path)
		var owner *planned
		for _, s := range starts[vmid] {
			if s.at.After(w.At) {
				break
			}
			owner = s.p
		}
		if owner == nil {
			rep.dupWrites = append(rep.dupWrites, fmt.Sprintf("guest %d: a power write at %s that no command had started",
				vmid, w.At.Format("15:04:05.000")))
			continue
		}
		count[owner] = append(count[owner], w.At)
	}
	for _, p := range plan {
		if ts := count[p]; len(ts) > p.ops {
			rep.dupWrites = append(rep.dupWrites, rep.mark(fmt.Sprintf("guest %d: %s %s sent %d power writes (makes %d)",
				p.guest, p.cmd.Verb, p.cmd.ID, len(ts), p.ops), ts[0], ts[len(ts)-1]))
		}
	}
}

// checkJournal lists the entries whose terminal update never arrived.
// ends maps a command id to its first result (nil: unknown); an in_progress entry spans a Redis
// restart when the restart came between its creation and its command's result.
func (rep *report) checkJournal(entries []simnetbox.Entry, canary string, ends map[string]time.Time) int {
	for _, e := range entries {
		if strings.Contains(e.Comments, "- result: in_progress") {
			item := "entry " + strconv.FormatInt(e.ID, 10)
			if i := strings.Index(e.Comments, "- command_id: "); i >= 0 {
				item += " (" + strings.TrimSpace(strings.SplitN(e.Comments[i+len("- command_id: "):], "\n", 2)[0]) + ")"
			}
			end := time.Now()
			if id := commandOf(e.Comments); id != "" && ends != nil && !ends[id].IsZero() {
				end = ends[id]
			}
			rep.inProgress = append(rep.inProgress, rep.mark(item, e.Created, end))
		}
		if strings.Contains(e.Comments, canary) {
			rep.leaks = append(rep.leaks, leak{"journal comment", "entry " + strconv.FormatInt(e.ID, 10)})
		}
	}
	return len(entries)
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// failed reports whether any of the zeros is not zero.
func (rep *report) failed() bool {
	return len(rep.lost) > 0 || len(rep.multiple) > 0 || len(rep.dupWrites) > 0 || len(rep.inProgress) > 0 || len(rep.leaks) > 0
}

func listSome(w io.Writer, title string, items []string) {
	fmt.Fprintf(w, "%-44s %d\n", title, len(items))
	for i, s := range items {
		if i == 20 {
			fmt.Fprintf(w, "    … %d more\n", len(items)-20)
			break
		}
		fmt.Fprintf(w, "    %s\n", s)
	}
}

func (rep *report) print(w io.Writer) {
	fmt.Fprintf(w, "\n== outcomes (first result per command) ==\n")
	for _, k := range slices.Sorted(maps.Keys(rep.statuses)) {
		fmt.Fprintf(w, "  %6d  %s\n", rep.statuses[k], k)
	}
	fmt.Fprintf(w, "\n== Proxmox writes applied ==\n")
	for _, k := range slices.Sorted(maps.Keys(rep.writes)) {
		fmt.Fprintf(w, "  %6d  %s\n", rep.writes[k], k)
	}
	fmt.Fprintf(w, "\n== checks ==\n")
	fmt.Fprintf(w, "%-44s %d (%d poison, %d duplicate publishes)\n", "published commands", rep.published, rep.poison, rep.dups)
	listSome(w, "lost (no result, no dead letter)", rep.lost)
	listSome(w, "more than one first-hand result", rep.multiple)
	listSome(w, "duplicate Proxmox writes", rep.dupWrites)
	listSome(w, "journal entries still in_progress", rep.inProgress)
	leaks := make([]string, 0, len(rep.leaks))
	for _, l := range rep.leaks {
		leaks = append(leaks, l.String())
	}
	listSome(w, "canary occurrences", leaks)
	if rep.spanning > 0 {
		fmt.Fprintf(w, "%-44s %d\n", "  of the flagged items, spanning a Redis restart", rep.spanning)
	}
	fmt.Fprintf(w, "\n== latency (publish → result) and throughput ==\n")
	fmt.Fprintf(w, "  p50 %s  p90 %s  p99 %s  max %s\n", percentile(rep.latencies, .50).Round(time.Millisecond),
		percentile(rep.latencies, .90).Round(time.Millisecond), percentile(rep.latencies, .99).Round(time.Millisecond),
		percentile(rep.latencies, 1).Round(time.Millisecond))
	if rep.span > 0 {
		fmt.Fprintf(w, "  %d commands completed in %s: %.1f commands/s\n", rep.completed, rep.span.Round(time.Second),
			float64(rep.completed)/rep.span.Seconds())
	}
}

// commandOf returns the command_id bullet of a journal comment ("" when there is none).
func commandOf(comments string) string {
	i := strings.Index(comments, "- command_id: ")
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(strings.SplitN(comments[i+len("- command_id: "):], "\n", 2)[0])
}
