package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/events"
	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
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

	// The checks of checkAnswers.
	firstHandNot1  []string // commands without exactly one replayed:false result
	twinReplays    int      // Idempotency-Key twins whose one answer is a replay of their twin's
	notExecuted    []string // answered 503 "not executed" although a Proxmox write is theirs
	notExecutedAll int      // first-hand 503 attempts_exhausted answers in all
	mismatches     []string // answers the simulator's final state contradicts, or another command's answer
	decided        int      // answers the final state could judge
	deadDone       []string // dead letters of commands that wrote or finished

	// The checks of checkApprovals.
	approvals     approvalCounts
	approvalWrong []string // decisions not honoured, or a rejection nobody made
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
//     resizes and starts per new vmid, snapshot creates and deletes per (vmid, name), guest
//     destroys (DELETE) per vmid: at most 1;
//   - power writes on the shared guests, backups (POST /nodes/{node}/vzdump, its guest the
//     vmid parameter), migrations and vm.delete's stop and DELETE: see checkGuestWrites.
func (rep *report) checkWrites(recs []writeRec, tasks []simpve.TaskInfo, plan []*planned, c *collected) {
	rep.writes = map[string]int{}
	byUPID := map[string]simpve.TaskInfo{}
	for _, t := range tasks {
		byUPID[t.UPID] = t
	}
	per := map[string]int{}
	first, last := map[string]time.Time{}, map[string]time.Time{}
	var guestWrites []writeRec
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
		case strings.HasPrefix(r.Path, "/storage/") && r.Method == http.MethodPut:
			kind = "storage update" // setting the same options again is not a second effect; counted only
		case strings.HasPrefix(r.Path, "/storage/") && r.Method == http.MethodDelete:
			kind, key = "storage delete", "storage "+strings.TrimPrefix(r.Path, "/storage/")+" delete"
		case r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/clone"):
			kind, key = "clone", "new vmid "+r.Params["newid"]
		case r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/qemu"):
			kind, key = "create", "new vmid "+r.Params["vmid"] // a provision's import or a restore
		case r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/lxc"):
			kind, key = "container create", "new vmid "+r.Params["vmid"] // a ct.provision or a restore
		case r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/vzdump"):
			kind = "backup"
			guestWrites = append(guestWrites, r)
		case isGuest && r.Method == http.MethodPost && rest == "migrate":
			kind = "migrate"
			guestWrites = append(guestWrites, r)
		case isGuest && r.Method == http.MethodDelete && rest == "":
			kind, key = "delete", fmt.Sprintf("vmid %d delete", vmid)
			guestWrites = append(guestWrites, r)
		case isGuest && rest == "status/stop" && vmid >= firstNewVMID: // provisions never stop
			kind = "delete stop"
			guestWrites = append(guestWrites, r)
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
			guestWrites = append(guestWrites, r)
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
	rep.checkGuestWrites(guestWrites, plan, c)
}

// writeGuest is the vmid a write on a guest acts on: the path's guest, or vzdump's vmid
// parameter (its path names the node only); 0 for other writes.
func writeGuest(r writeRec) int64 {
	if vmid, _, ok := resourceOf(r.Path); ok {
		return vmid
	}
	if r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/vzdump") {
		if vmid, err := strconv.ParseInt(r.Params["vmid"], 10, 64); err == nil {
			return vmid
		}
	}
	return 0
}

// checkGuestWrites attributes every write on a guest that a command of the plan with that
// guest (planned.guest) makes — power writes on the shared guests, vzdumps, migrations,
// vm.delete's stop and DELETE — to the command that sent it: the command on that guest whose
// step or result names the write's task (UPID), else — the answer was lost, or those events
// — the one with the latest "started" write step (guestWriteSteps) or journal entry creation
// at or before the write (commands for one guest never run at once, and each writes its
// entry once it holds the guest, so that is the command that was running; the entry counts
// when its step events were lost, as while the events stream's leader is down). A
// command with more writes than it makes (planned.ops: one; two for a forced container reboot
// and for vm.delete with stop_first) wrote twice; a write no command on its guest had started
// is flagged too.
func (rep *report) checkGuestWrites(writes []writeRec, plan []*planned, c *collected) {
	type start struct {
		at time.Time
		p  *planned
	}
	starts := map[int64][]start{}
	for _, p := range plan {
		if p.guest == 0 {
			continue
		}
		for _, at := range slices.Concat(c.started[p.cmd.ID], c.journaled[p.cmd.ID]) {
			starts[p.guest] = append(starts[p.guest], start{at, p})
		}
	}
	for _, ss := range starts {
		slices.SortFunc(ss, func(a, b start) int { return a.at.Compare(b.at) })
	}
	byID := map[string]*planned{}
	for _, p := range plan {
		byID[p.cmd.ID] = p
	}
	count := map[*planned][]time.Time{}
	for _, w := range writes {
		vmid := writeGuest(w)
		if p := byID[c.upids[w.UPID]]; w.UPID != "" && p != nil && p.guest == vmid {
			count[p] = append(count[p], w.At)
			continue
		}
		var owner *planned
		for _, s := range starts[vmid] {
			if s.at.After(w.At) {
				break
			}
			owner = s.p
		}
		if owner == nil {
			rep.dupWrites = append(rep.dupWrites, fmt.Sprintf("guest %d: %s %s at %s, a write no command on the guest had started",
				vmid, w.Method, w.Path, w.At.Format("15:04:05.000")))
			continue
		}
		count[owner] = append(count[owner], w.At)
	}
	for _, p := range plan {
		if ts := count[p]; len(ts) > p.ops {
			rep.dupWrites = append(rep.dupWrites, rep.mark(fmt.Sprintf("guest %d: %s %s sent %d writes on it (makes at most %d)",
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
	return len(rep.lost) > 0 || len(rep.multiple) > 0 || len(rep.dupWrites) > 0 || len(rep.inProgress) > 0 || len(rep.leaks) > 0 ||
		len(rep.firstHandNot1) > 0 || len(rep.notExecuted) > 0 || len(rep.mismatches) > 0 || len(rep.deadDone) > 0 ||
		len(rep.approvalWrong) > 0
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
	listSome(w, "not exactly one first-hand result", rep.firstHandNot1)
	fmt.Fprintf(w, "%-44s %d (not counted: by contract §5 a twin's replay is its one answer)\n",
		"  Idempotency-Key twins answered by a replay", rep.twinReplays)
	listSome(w, "503 not executed, yet it wrote", rep.notExecuted)
	fmt.Fprintf(w, "%-44s %d\n", "  503 attempts_exhausted answers in all", rep.notExecutedAll)
	listSome(w, "answers contradicted by the Proxmox state", rep.mismatches)
	fmt.Fprintf(w, "%-44s %d\n", "  answers the final state could judge", rep.decided)
	listSome(w, "approval decisions not honoured", rep.approvalWrong)
	a := rep.approvals
	fmt.Fprintf(w, "%-44s %d sent (%d taken: %d approved, %d rejected, %d early, %d with a reason; %d refused), %d not sent (answered before)\n",
		"  approval decisions", a.sent, a.approved+a.rejected, a.approved, a.rejected, a.early, a.withReason, a.refused, a.skipped)
	fmt.Fprintf(w, "%-44s %s %s\n", "  slowest waited-for decision → answer", a.slowest.Round(time.Millisecond), a.slowestOf)
	listSome(w, "duplicate Proxmox writes", rep.dupWrites)
	listSome(w, "journal entries still in_progress", rep.inProgress)
	listSome(w, "dead letters of commands that wrote/finished", rep.deadDone)
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

// entryTimes maps every command id to when its journal entries were created (a command
// resumed after its entry's creation was lost writes a second one).
func entryTimes(entries []simnetbox.Entry) map[string][]time.Time {
	out := map[string][]time.Time{}
	for _, e := range entries {
		if id := commandOf(e.Comments); id != "" {
			out[id] = append(out[id], e.Created)
		}
	}
	return out
}

// commandOf returns the command_id bullet of a journal comment ("" when there is none).
func commandOf(comments string) string {
	i := strings.Index(comments, "- command_id: ")
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(strings.SplitN(comments[i+len("- command_id: "):], "\n", 2)[0])
}

// Reasons of a 503 that says a command was not executed: it ran out of attempts (the new
// lifecycle) or of deliveries (consumer.ReasonDeliveryAttemptsExhausted, the old one).
var notExecutedReasons = map[string]bool{"attempts_exhausted": true, "delivery_attempts_exhausted": true}

// successWords are the result words of an outcome that took effect or found it in place.
var successWords = map[string]bool{"created": true, "already_present": true, "ok": true, "already_running": true,
	"already_stopped": true, "already_absent": true}

// succeeded reports whether r is a success: a 2xx, or a 502 that only says the terminal
// journal update failed (contract §4 step 6: the result keeps the real outcome).
func succeeded(r events.Result) bool {
	if r.Status >= 200 && r.Status < 300 {
		return true
	}
	return r.Reason == "netbox_journal_finalization_failed" && successWords[r.Result]
}

// failedServer reports whether r is a 5xx failure (not a success with a failed journal update).
func failedServer(r events.Result) bool { return r.Status >= 500 && !succeeded(r) }

// written is one write the PVE simulator applied (answered 200), attributed to a command.
type written struct {
	rec      writeRec
	resource string
	// effective: the write had an effect (no task, or a task that ended OK).
	effective bool
}

// same reports whether o is the same simulator write as w.
func (w written) same(o written) bool {
	return w.rec.Method == o.rec.Method && w.rec.Path == o.rec.Path && w.rec.At.Equal(o.rec.At) && w.rec.UPID == o.rec.UPID
}

func (w written) String() string {
	return fmt.Sprintf("%s %s at %s", w.rec.Method, w.rec.Path, w.rec.At.Format("15:04:05.000"))
}

// writeResource names what a PVE write acts on, as planResource names what a command acts
// on: "storage:<id>" (its create), "storageput:<id>", "storagedel:<id>", "backup:<vmid>" (a vzdump), "migrate:<vmid>", "delete:<vmid>" (the
// DELETE of a guest, and the stop of a soak VM, which only vm.delete's stop_first sends),
// "vm:<new vmid>" (every other write on a soak VM or container: its provision's), "snap:<vmid>/<name>",
// "snapdel:<vmid>/<name>", "power:<vmid>"; "" for a write no command of the plan makes.
func writeResource(r writeRec) string {
	vmid, rest, isGuest := resourceOf(r.Path)
	switch {
	case r.Path == "/storage" && r.Method == http.MethodPost:
		return "storage:" + r.Params["storage"]
	case strings.HasPrefix(r.Path, "/storage/") && r.Method == http.MethodPut:
		return "storageput:" + strings.TrimPrefix(r.Path, "/storage/")
	case strings.HasPrefix(r.Path, "/storage/") && r.Method == http.MethodDelete:
		return "storagedel:" + strings.TrimPrefix(r.Path, "/storage/")
	case r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/vzdump") && writeGuest(r) != 0:
		return "backup:" + strconv.FormatInt(writeGuest(r), 10)
	case isGuest && r.Method == http.MethodPost && rest == "migrate":
		return "migrate:" + strconv.FormatInt(vmid, 10)
	case isGuest && (r.Method == http.MethodDelete && rest == "" || vmid >= firstNewVMID && rest == "status/stop"):
		return "delete:" + strconv.FormatInt(vmid, 10)
	case r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/clone"):
		return "vm:" + r.Params["newid"]
	case r.Method == http.MethodPost && (strings.HasSuffix(r.Path, "/qemu") || strings.HasSuffix(r.Path, "/lxc")):
		return "vm:" + r.Params["vmid"]
	case r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/lxc"):
		return "vm:" + r.Params["vmid"]
	case isGuest && vmid >= firstNewVMID:
		return "vm:" + strconv.FormatInt(vmid, 10)
	case isGuest && rest == "snapshot" && r.Method == http.MethodPost:
		return fmt.Sprintf("snap:%d/%s", vmid, r.Params["snapname"])
	case isGuest && r.Method == http.MethodDelete && strings.HasPrefix(rest, "snapshot/"):
		return fmt.Sprintf("snapdel:%d/%s", vmid, strings.TrimPrefix(rest, "snapshot/"))
	case isGuest && strings.HasPrefix(rest, "status/"):
		return "power:" + strconv.FormatInt(vmid, 10)
	}
	return ""
}

// cmdData is the part of a command's data that names its resource.
type cmdData struct {
	VM         vmRef       `json:"vm"`
	Snapshot   string      `json:"snapshot"`
	Storage    string      `json:"storage"`
	NewVMID    json.Number `json:"new_vmid"`
	VMID       json.Number `json:"vmid"` // vm.restore's target
	Datastore  string      `json:"datastore"`
	TargetNode string      `json:"target_node"`
}

func parseCmdData(p *planned) (cmdData, bool) {
	var d cmdData
	if p.poison != nil || json.Unmarshal(p.cmd.Data, &d) != nil {
		return d, false
	}
	return d, true
}

// planResource is the resource command p writes ("" for reads and poison) and the names of
// the steps it starts right before such a write (nil: any step).
func planResource(p *planned) (string, map[string]bool) {
	d, ok := parseCmdData(p)
	if !ok {
		return "", nil
	}
	switch p.cmd.Verb {
	case "storage.pbs.create":
		return "storage:" + d.Storage, map[string]bool{"create_storage": true}
	case "storage.pbs.update":
		return "storageput:" + d.Storage, map[string]bool{"update_storage": true}
	case "storage.pbs.delete":
		return "storagedel:" + d.Storage, map[string]bool{"delete_storage": true}
	case "vm.provision", "ct.provision":
		return "vm:" + d.NewVMID.String(), nil
	case "vm.restore":
		return "vm:" + d.VMID.String(), nil
	case "vm.snapshot.create":
		return "snap:" + d.VM.String() + "/" + d.Snapshot, map[string]bool{"create_snapshot": true}
	case "vm.snapshot.delete":
		return "snapdel:" + d.VM.String() + "/" + d.Snapshot, map[string]bool{"delete_snapshot": true}
	}
	if p.guest == 0 {
		return "", nil
	}
	vmid := strconv.FormatInt(p.guest, 10)
	switch {
	case p.cmd.Verb == "vm.backup":
		return "backup:" + vmid, backupSteps
	case p.cmd.Verb == "vm.migrate":
		return "migrate:" + vmid, migrateSteps
	case p.cmd.Verb == "vm.delete":
		return "delete:" + vmid, deleteSteps
	case isPowerVerb(p.cmd.Verb):
		return "power:" + vmid, powerSteps
	}
	return "", nil
}

// guestOpResource reports whether res is a write on a guest that checkGuestWrites attributes
// (power, backup, migrate, delete): one no step or task attributes stays unattributed here.
func guestOpResource(res string) bool {
	kind, _, _ := strings.Cut(res, ":")
	return kind == "power" || kind == "backup" || kind == "migrate" || kind == "delete"
}

// attribute gives every write the simulator applied to the plan command that sent it: among
// the commands of the write's resource (a command, its Idempotency-Key twins, other commands
// of the same storage or guest), the one whose step or result names the write's task (UPID), else
// the one with the latest started step of that write's kind at or before the write (for a
// write on a guest by a power verb, vm.backup, vm.migrate or vm.delete, also the latest
// creation of a candidate's journal entry, as in checkGuestWrites); when none had started such
// a step (its step event was lost), the first of them in the plan, except for
// the writes on a guest of power verbs, vm.backup, vm.migrate and vm.delete, which stay
// unattributed (checkGuestWrites flags those). It returns command id → its writes.
func attribute(recs []writeRec, tasks []simpve.TaskInfo, plan []*planned, c *collected) map[string][]written {
	byUPID := map[string]simpve.TaskInfo{}
	for _, t := range tasks {
		byUPID[t.UPID] = t
	}
	type cand struct {
		p     *planned
		steps map[string]bool
	}
	cands := map[string][]cand{}
	for _, p := range plan {
		if res, names := planResource(p); res != "" {
			cands[res] = append(cands[res], cand{p, names})
		}
	}
	starts := map[string][]stepLine{} // command id → its started steps
	for _, s := range c.steps {
		if s.Status == string(events.StepStarted) {
			starts[s.Command] = append(starts[s.Command], s)
		}
	}
	out := map[string][]written{}
	for _, r := range recs {
		if r.Status != http.StatusOK {
			continue
		}
		res := writeResource(r)
		cs := cands[res]
		if len(cs) == 0 {
			continue
		}
		w := written{rec: r, resource: res, effective: true}
		if t, ok := byUPID[r.UPID]; ok && r.UPID != "" && !taskOK(t) {
			w.effective = false
		}
		var owner *planned // by the task its step event names, else by the latest started step
		for _, cd := range cs {
			if r.UPID != "" && c.upids[r.UPID] == cd.p.cmd.ID {
				owner = cd.p
				break
			}
		}
		if owner == nil {
			var latest time.Time
			later := func(p *planned, at time.Time) {
				if !at.After(r.At) && !at.Before(latest) {
					owner, latest = p, at
				}
			}
			for _, cd := range cs {
				for _, s := range starts[cd.p.cmd.ID] {
					if cd.steps == nil || cd.steps[s.Step] {
						later(cd.p, s.At)
					}
				}
				if guestOpResource(res) { // one command at a time on a guest: its entry counts too
					for _, at := range c.journaled[cd.p.cmd.ID] {
						later(cd.p, at)
					}
				}
			}
		}
		if owner == nil && !guestOpResource(res) {
			owner = cs[0].p
		}
		if owner != nil {
			out[owner.cmd.ID] = append(out[owner.cmd.ID], w)
		}
	}
	return out
}

// judgeNotFound judges a 404 vm_not_found answer of p (see judge): whether it could be judged,
// and why it is contradicted.
func judgeNotFound(p *planned, effective map[string][]written, fs finalState, pub time.Time) (bool, string) {
	d, ok := parseCmdData(p)
	if !ok {
		return false, ""
	}
	vm, err := d.VM.Int64()
	if err != nil {
		return false, ""
	}
	if !fs.guests[vm] {
		return true, ""
	}
	if slices.ContainsFunc(effective["vm:"+strconv.FormatInt(vm, 10)], func(w written) bool { return !w.rec.At.Before(pub) }) {
		return false, "" // its provision wrote after p was published: it may not have existed yet
	}
	return true, fmt.Sprintf("guest %d exists (on %s) and was not created after the command", vm, fs.nodes[vm])
}

// finalState is what the Proxmox simulator holds at the end, for the resources of the plan.
type finalState struct {
	snapshots map[int64]map[string]bool // guest → its snapshot names
	storages  map[string]string         // storage id → its datastore (existing storages only)
	guests    map[int64]bool            // vmid → exists (every vm, new_vmid and restore's vmid of the plan)
	nodes     map[int64]string          // vmid → its node (existing guests only)
	backups   map[string]bool           // volume ids of the backups in the storages vm.backup names
}

// readFinalState reads the simulator's state of every guest, storage and new vmid (of a
// provision or a restore) the plan names, and the backups in every storage a vm.backup names (through the simulator's
// handler, on every node: a directory storage holds one list per node).
func readFinalState(pve *simpve.Server, plan []*planned) finalState {
	fs := finalState{snapshots: map[int64]map[string]bool{}, storages: map[string]string{}, guests: map[int64]bool{},
		nodes: map[int64]string{}, backups: map[string]bool{}}
	guest := func(vm int64) {
		if _, seen := fs.guests[vm]; seen {
			return
		}
		g, ok := pve.Guest(vm)
		fs.guests[vm] = ok
		if ok {
			fs.nodes[vm] = g.Node
		}
	}
	backupStorages := map[string]bool{}
	for _, p := range plan {
		d, ok := parseCmdData(p)
		if !ok {
			continue
		}
		if vm, err := d.VM.Int64(); err == nil {
			guest(vm)
			if _, seen := fs.snapshots[vm]; !seen {
				fs.snapshots[vm] = map[string]bool{}
				if g, ok := pve.Guest(vm); ok {
					for name := range g.Snapshots {
						fs.snapshots[vm][name] = true
					}
				}
			}
		}
		if d.Storage != "" {
			if sc, ok := pve.StorageConfig(d.Storage); ok {
				fs.storages[d.Storage] = sc["datastore"]
			}
			if p.cmd.Verb == "vm.backup" && !backupStorages[d.Storage] {
				backupStorages[d.Storage] = true
				maps.Copy(fs.backups, storageBackups(pve.Handler(), d.Storage))
			}
		}
		if vm, err := d.NewVMID.Int64(); err == nil {
			guest(vm)
		}
		if vm, err := d.VMID.Int64(); err == nil && p.cmd.Verb == "vm.restore" {
			guest(vm)
		}
	}
	return fs
}

// storageBackups returns the volume ids of the backups storage lists on any node of the demo
// cluster (GET …/storage/{storage}/content?content=backup through h, the simulator's
// handler, without the soak's faults); none for a storage that does not exist.
func storageBackups(h http.Handler, storage string) map[string]bool {
	out := map[string]bool{}
	for _, node := range pveNodes {
		req := httptest.NewRequest(http.MethodGet, simpve.APIPrefix+"/nodes/"+node+"/storage/"+url.PathEscape(storage)+"/content?content=backup", nil)
		req.Header.Set("Authorization", "PVEAPIToken="+pveTokenID+"="+pveSecret)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var body struct {
			Data []struct {
				VolID string `json:"volid"`
			} `json:"data"`
		}
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &body) != nil {
			continue
		}
		for _, v := range body.Data {
			out[v.VolID] = true
		}
	}
	return out
}

// answeredTwins reports, per command id, whether another command of the plan carries the same
// Idempotency-Key and has a first-hand (replayed false) result: a twin whose stored result a
// replay of this command may repeat (contract §5).
func answeredTwins(plan []*planned, c *collected) map[string]bool {
	firstHand := map[string][]string{} // key → ids of its commands with a first-hand result
	for _, p := range plan {
		k := p.cmd.IdempotencyKey
		if k == "" {
			continue
		}
		for _, r := range c.results[p.cmd.ID] {
			if !r.res.Replayed {
				firstHand[k] = append(firstHand[k], p.cmd.ID)
				break
			}
		}
	}
	out := map[string]bool{}
	for _, p := range plan {
		k := p.cmd.IdempotencyKey
		if k != "" && slices.ContainsFunc(firstHand[k], func(id string) bool { return id != p.cmd.ID }) {
			out[p.cmd.ID] = true
		}
	}
	return out
}

// checkAnswers runs the checks of issue "Honest outcomes under real crashes" over every
// published command (poison included where it applies):
//   - firstHandNot1: the events stream does not hold exactly one result with replayed false
//     (counted as stored messages). An Idempotency-Key twin with no first-hand result and a
//     replay, while another command with its key has a first-hand result, is counted in
//     twinReplays instead: by contract §5 that replay of its twin's stored result is its one
//     answer. (Twins that all have replays only are counted: someone's first answer is missing.)
//   - notExecuted: a first-hand 503 attempts_exhausted (or delivery_attempts_exhausted),
//     "not executed", for a command that has a Proxmox write attributed to it.
//   - mismatches: the command's first first-hand answer contradicts the simulator's final
//     state (see judge).
//   - deadDone: a non-poison command has a dead letter and a Proxmox write or a 2xx/4xx result.
func (rep *report) checkAnswers(plan []*planned, published map[string]time.Time, c *collected, attr map[string][]written, fs finalState) {
	twins := answeredTwins(plan, c)
	effective := map[string][]written{} // resource → every effective write, whoever sent it
	for _, ws := range attr {
		for _, w := range ws {
			if w.effective {
				effective[w.resource] = append(effective[w.resource], w)
			}
		}
	}
	volids := map[string]*planned{} // the volume each created vm.backup answered, by volid
	for _, p := range plan {
		id := p.cmd.ID
		if _, ok := published[id]; !ok {
			continue
		}
		rs := c.results[id]
		var fh []resultEv
		for _, r := range rs {
			if !r.res.Replayed {
				fh = append(fh, r)
			}
		}
		switch {
		case len(fh) == 1:
		case len(fh) == 0 && len(rs) > 0 && twins[id]:
			rep.twinReplays++
		default:
			item := fmt.Sprintf("%s %s: %d first-hand results, %d replays", p.cmd.Verb, id, len(fh), len(rs)-len(fh))
			if len(c.dlq[id]) > 0 {
				item += fmt.Sprintf(", dead letter %v", c.dlq[id])
			}
			rep.firstHandNot1 = append(rep.firstHandNot1, item)
		}
		ws := attr[id]
		for _, r := range fh {
			if r.res.Status == http.StatusServiceUnavailable && notExecutedReasons[r.res.Reason] {
				rep.notExecutedAll++
				if len(ws) > 0 {
					rep.notExecuted = append(rep.notExecuted, fmt.Sprintf("%s %s: 503 %s, yet wrote %d: %s", p.cmd.Verb, id,
						r.res.Reason, len(ws), ws[0]))
				}
				break
			}
		}
		if p.poison == nil && len(c.dlq[id]) > 0 {
			finished := ""
			for _, r := range rs {
				if r.res.Status >= 200 && r.res.Status < 500 {
					finished = fmt.Sprintf("result %d %s", r.res.Status, r.res.Result)
					break
				}
			}
			if len(ws) > 0 || finished != "" {
				rep.deadDone = append(rep.deadDone, fmt.Sprintf("%s %s: dead letter %v, %d writes, %s", p.cmd.Verb, id,
					c.dlq[id], len(ws), cmp.Or(finished, "no 2xx/4xx result")))
			}
		}
		if len(fh) == 0 {
			continue
		}
		first := fh[0]
		for _, r := range fh[1:] {
			if r.at.Before(first.at) {
				first = r
			}
		}
		decided, wrong := judge(p, first, ws, effective, fs, published[id])
		if other := sameBackup(volids, p, first); other != "" && wrong == "" {
			wrong = "command " + other + " answered the same volume"
		}
		if decided {
			rep.decided++
		}
		if wrong != "" {
			rep.mismatches = append(rep.mismatches, fmt.Sprintf("%s %s: answered %d %s %s, but %s", p.cmd.Verb, id,
				first.res.Status, first.res.Result, first.res.Reason, wrong))
		}
	}
}

// sameBackup remembers the volume a created vm.backup answer a of p names in volids and
// returns the command that answered it before, unless that is an Idempotency-Key twin of p
// (which answers its twin's): two backups answering one volid means one was told another's.
func sameBackup(volids map[string]*planned, p *planned, a resultEv) string {
	if p.cmd.Verb != "vm.backup" || a.res.Status != 201 {
		return ""
	}
	var out struct {
		VolID string `json:"volid"`
	}
	if json.Unmarshal(a.res.Output, &out) != nil || out.VolID == "" {
		return ""
	}
	other, seen := volids[out.VolID]
	if !seen {
		volids[out.VolID] = p
		return ""
	}
	if other.cmd.IdempotencyKey != "" && other.cmd.IdempotencyKey == p.cmd.IdempotencyKey {
		return ""
	}
	return other.cmd.ID
}

// judge compares answer a of command p, published at pub, with what Proxmox holds (ws: the
// writes attributed to p; effective: every effective write per resource; fs: the final
// state). It returns whether the answer could be judged and, when it is contradicted, why.
// Rules:
//   - a 4xx refusal sent no write;
//   - a 5xx failure had no effect: no effective write of p, except where the contract allows
//     one (a vm.provision or ct.provision that failed leaves what it created behind; a reboot answered
//     proxmox_write_unconfirmed cannot be proven by reading; a failed vm.restore leaves what
//     it restored, as PVE does; vm.delete's stop_first
//     stop may have taken effect, only its DELETE must not have);
//   - vm.snapshot.create succeeded → the snapshot exists, or a delete of it took effect;
//   - vm.snapshot.delete succeeded → the snapshot is absent, or a create of it took effect
//     after the answer;
//   - storage.pbs.create created/already_present → the storage exists with p's datastore;
//     storage_conflict → it exists with another datastore (neither judged once a delete of the
//     storage took effect);
//   - storage.pbs.delete ok/already_absent → the storage does not exist at the end, unless its
//     create wrote after p was published; storage.pbs.update successes are not judged (later
//     rotations change the storage), and one answered proxmox_write_unconfirmed (a secret,
//     which cannot be read back) neither;
//   - vm.provision, ct.provision or vm.restore succeeded → the new guest exists, or a DELETE of
//     it took effect;
//   - vm.backup created → the storage lists the backup (output volid);
//   - vm.migrate ok/already_present → p's own migration to target_node took effect, or (when
//     it has none) the guest is on target_node at the end, unless another command's migration
//     or DELETE of the guest took effect after p was published (then it is not judged); a
//     migration of p's to another node contradicts it;
//   - vm.delete ok/already_absent → the guest does not exist at the end, unless its provision
//     wrote after p was published (then it is not judged).
//
// A 404 vm_not_found of any command naming a guest (a read too) is contradicted when the
// guest exists at the end and nothing created it after p was published (a guest that moved
// meanwhile still existed: it is to be found where it is).
//
// Power successes are not judged: later commands change the guest's state.
func judge(p *planned, a resultEv, ws []written, effective map[string][]written, fs finalState, pub time.Time) (bool, string) {
	if a.res.Reason == "vm_not_found" {
		if decided, wrong := judgeNotFound(p, effective, fs, pub); wrong != "" {
			return decided, wrong
		}
	}
	res, _ := planResource(p)
	if res == "" {
		return false, ""
	}
	d, _ := parseCmdData(p)
	r := a.res
	switch {
	case r.Status >= 400 && r.Status < 500:
		if r.Reason == "storage_conflict" && len(effective["storagedel:"+d.Storage]) == 0 {
			ds, ok := fs.storages[d.Storage]
			switch {
			case !ok:
				return true, "the storage does not exist"
			case ds == d.Datastore:
				return true, "the storage exists with the datastore asked for"
			}
		}
		if len(ws) > 0 {
			return true, fmt.Sprintf("it wrote %d: %s", len(ws), ws[0])
		}
		return true, ""
	case failedServer(r):
		// a failed provision leaves what it created; so does a failed restore (PVE: "VM state is NOT cleaned up")
		if p.cmd.Verb == "vm.provision" || p.cmd.Verb == "ct.provision" || p.cmd.Verb == "vm.restore" ||
			(p.cmd.Verb == "vm.reboot" || p.cmd.Verb == "storage.pbs.update") && r.Reason == "proxmox_write_unconfirmed" {
			return false, ""
		}
		for _, w := range ws {
			if w.effective && !(p.cmd.Verb == "vm.delete" && w.rec.Method != http.MethodDelete) {
				return true, "its write took effect: " + w.String()
			}
		}
		return true, ""
	case !succeeded(r):
		return false, ""
	}
	vm, _ := d.VM.Int64()
	// since reports whether another command's effective write of resource res came at or
	// after p's publication.
	since := func(res string) bool {
		return slices.ContainsFunc(effective[res], func(w written) bool {
			return !w.rec.At.Before(pub) && !slices.ContainsFunc(ws, w.same)
		})
	}
	switch p.cmd.Verb {
	case "vm.snapshot.create":
		if fs.snapshots[vm][d.Snapshot] || len(effective["snapdel:"+d.VM.String()+"/"+d.Snapshot]) > 0 {
			return true, ""
		}
		return true, "the snapshot does not exist and no delete of it took effect"
	case "vm.snapshot.delete":
		if !fs.snapshots[vm][d.Snapshot] {
			return true, ""
		}
		for _, w := range effective["snap:"+d.VM.String()+"/"+d.Snapshot] {
			if w.rec.At.After(a.at) {
				return true, ""
			}
		}
		return true, "the snapshot still exists"
	case "storage.pbs.create":
		ds, ok := fs.storages[d.Storage]
		switch {
		case len(effective["storagedel:"+d.Storage]) > 0: // retired later
			return false, ""
		case !ok:
			return true, "the storage does not exist"
		case ds != d.Datastore:
			return true, fmt.Sprintf("the storage has datastore %q", ds)
		}
		return true, ""
	case "vm.provision", "ct.provision", "vm.restore":
		n := d.NewVMID
		if p.cmd.Verb == "vm.restore" {
			n = d.VMID
		}
		vmid, _ := n.Int64()
		if fs.guests[vmid] || slices.ContainsFunc(effective["delete:"+n.String()], func(w written) bool { return w.rec.Method == http.MethodDelete }) {
			return true, ""
		}
		return true, "the guest does not exist and no DELETE of it took effect"
	case "vm.backup":
		var out struct {
			VolID string `json:"volid"`
		}
		switch {
		case json.Unmarshal(r.Output, &out) != nil || out.VolID == "":
			return true, "its output names no volid"
		case !fs.backups[out.VolID]:
			return true, fmt.Sprintf("storage %s lists no backup %s", d.Storage, out.VolID)
		}
		return true, ""
	case "vm.migrate":
		var targets []string
		for _, w := range ws {
			if w.effective && w.rec.Method == http.MethodPost && strings.HasSuffix(w.rec.Path, "/migrate") {
				targets = append(targets, w.rec.Params["target"])
			}
		}
		node, exists := fs.nodes[p.guest]
		switch {
		case slices.Contains(targets, d.TargetNode):
			return true, ""
		case len(targets) > 0:
			return true, fmt.Sprintf("its migration took the guest to %s", strings.Join(targets, ", "))
		case since("migrate:"+strconv.FormatInt(p.guest, 10)) || since("delete:"+strconv.FormatInt(p.guest, 10)):
			return false, ""
		case !exists:
			return true, "the guest does not exist"
		case node != d.TargetNode:
			return true, "the guest is on " + node
		}
		return true, ""
	case "storage.pbs.delete":
		_, exists := fs.storages[d.Storage]
		switch {
		case since("storage:" + d.Storage): // its create ran after it
			return false, ""
		case exists:
			return true, "the storage still exists"
		}
		return true, ""
	case "vm.delete":
		switch {
		case !fs.guests[p.guest]:
			return true, ""
		case since("vm:" + strconv.FormatInt(p.guest, 10)):
			return false, ""
		}
		return true, "the guest still exists on " + fs.nodes[p.guest]
	}
	return false, ""
}
