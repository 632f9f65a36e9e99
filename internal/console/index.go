package console

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/store"
)

// states are the values of the list's status filter: the command states of contract §4, in
// the order a command goes through them. The console tells them from a command's events alone
// (it holds no lease): confirming is shown by `proxbus status`, not here.
var states = []handlers.State{
	handlers.StateReceived, handlers.StateWaiting, handlers.StateAwaitingApproval, handlers.StateRunning,
	handlers.StateDone, handlers.StateExpired, handlers.StateCancelled, handlers.StateRejected, handlers.StateFailed,
}

// Command is what the console knows of one command, read from its events. A Command handed
// out by the [index] is a copy: it never changes under its reader.
type Command struct {
	Ref, ID, Source, Verb, Actor string
	EndpointID                   *int64
	// First and Last are the times of its first and newest events.
	First, Last time.Time
	// Steps are its step events in seq order.
	Steps []events.Step
	// Result is its first-hand result (or the first replay seen when the first-hand one is
	// older than the history); ResultAt is that event's time. Replays counts the replays seen.
	Result   *events.Result
	ResultAt time.Time
	Replays  int
	// Repaired is the journal event saying its pending journal update was applied.
	Repaired *events.JournalRepaired
	// Instance is the replica that published its newest event.
	Instance string

	version uint64 // the index's version when it last changed
	order   uint64 // when it was first seen: the list is newest first
	// row is the command's list row as rendered at version rowVersion (see [index.keepRow]).
	row        string
	rowVersion uint64
}

// cachedRow is the command's list row rendered when it was as it is now, if there is one.
func (c Command) cachedRow() (string, bool) {
	return c.row, c.row != "" && c.rowVersion == c.version
}

// awaitingApproval is the detail of the waiting step a command awaiting approval publishes
// (contract §4b).
const awaitingApproval = "awaiting approval"

// State is the command's state (contract §4), by the rules of [handlers.StatusOf] applied to
// its events: its result's end state (done, expired, cancelled, rejected, failed) once it has
// one; else awaiting_approval while its newest step is the approval wait; waiting while that
// step waits or retries; running once it has any other step; received before.
func (c Command) State() handlers.State {
	var approval *store.Approval
	if n := len(c.Steps); c.Result == nil && n > 0 {
		last := c.Steps[n-1]
		if last.Step == "approval" && last.Status == events.StepWaiting && last.Detail == awaitingApproval {
			approval = &store.Approval{Decision: store.DecisionPending}
		}
	}
	st, ok := handlers.StatusOf(time.Time{}, store.Inspection{}, approval, c.Steps, c.Result)
	switch {
	case !ok:
		return handlers.StateReceived
	case st.State == handlers.StateReceived && len(c.Steps) > 0:
		return handlers.StateRunning // a replica has published its steps: it works on it
	}
	return st.State
}

// Final reports whether the command is in an end state: nothing can be decided on it any more.
func (c Command) Final() bool { return c.State().Final() }

// Target is what the command acts on, as far as its events tell: the guest (vmid and name),
// node or storage its result's output names (vm.provision's new_vmid, new_name and
// target_node included), the command a decision names; before a result, or when the output
// names none of them, the guest and node of the newest Proxmox task its steps name (the
// task's UPID); else "".
func (c Command) Target() string {
	if t := c.outputTarget(); t != "" {
		return t
	}
	for i := len(c.Steps) - 1; i >= 0; i-- {
		if t := upidTarget(c.Steps[i].UPID); t != "" {
			return t
		}
	}
	return ""
}

// outputTarget is the target its result's output names, or "".
func (c Command) outputTarget() string {
	if c.Result == nil || len(c.Result.Output) == 0 {
		return ""
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(c.Result.Output, &raw) != nil {
		return ""
	}
	str := func(key string) string { // a string or a number
		var s string
		if json.Unmarshal(raw[key], &s) == nil {
			return s
		}
		var n json.Number
		if json.Unmarshal(raw[key], &n) == nil {
			return n.String()
		}
		return ""
	}
	return targetText(cmp.Or(str("vmid"), str("new_vmid")), cmp.Or(str("name"), str("new_name")),
		cmp.Or(str("node"), str("target_node")), str("storage"), str("command_id"))
}

// targetText says what a command acts on from what is known of it.
func targetText(vmid, name, node, storage, commandID string) string {
	var parts []string
	switch {
	case vmid != "" && name != "":
		parts = append(parts, "VM "+vmid+" ("+name+")")
	case vmid != "":
		parts = append(parts, "VM "+vmid)
	case storage != "":
		parts = append(parts, "storage "+storage)
	case commandID != "":
		parts = append(parts, "command "+commandID)
	}
	if node != "" {
		if len(parts) > 0 {
			parts = append(parts, "on")
		}
		parts = append(parts, "node "+node)
	}
	return strings.Join(parts, " ")
}

// upidTarget is the guest and node of a Proxmox task's UPID, or "". A UPID is
// "UPID:node:pid:pstart:starttime:type:id:user:" (pve-common PVE::Tools::upid_encode); its id
// is the guest's vmid for a guest's task, else another name or empty.
func upidTarget(upid string) string {
	f := strings.Split(upid, ":")
	if len(f) < 8 || f[0] != "UPID" || f[1] == "" {
		return ""
	}
	vmid := f[6]
	if _, err := strconv.ParseUint(vmid, 10, 32); err != nil {
		vmid = ""
	}
	return targetText(vmid, "", f[1], "", "")
}

// Attempts is the highest attempt any of its steps names (1 when it has none).
func (c Command) Attempts() int {
	n := 1
	for _, s := range c.Steps {
		n = max(n, s.Attempt)
	}
	return n
}

// Duration is how long the command has taken: from its first event to its result, or to now
// while it has none.
func (c Command) Duration(now time.Time) time.Duration {
	end := now
	if c.Result != nil {
		end = c.ResultAt
	}
	return max(end.Sub(c.First), 0)
}

// Current says where the command is: its newest step and that step's state ("" when it has
// no step, or has been answered: its state says how it ended).
func (c Command) Current() string {
	if len(c.Steps) == 0 || c.Result != nil {
		return ""
	}
	s := c.Steps[len(c.Steps)-1]
	return s.Step + " " + string(s.Status)
}

// Replica is a proxbus instance seen publishing events.
type Replica struct {
	Instance  string
	LastEvent time.Time
	// Events counts its events seen; InFlight the commands without a result whose newest
	// event it published.
	Events   int
	InFlight int
}

// Filter selects commands of the list; a zero field matches everything.
type Filter struct {
	Verb, State, Actor string
	// Endpoint is an endpoint id in decimal ("" for any).
	Endpoint string
	// Query matches a command whose id or ref contains it.
	Query string
}

// Match reports whether c passes every set field of f.
func (f Filter) Match(c *Command) bool {
	switch {
	case f.Verb != "" && c.Verb != f.Verb,
		f.State != "" && string(c.State()) != f.State,
		f.Actor != "" && c.Actor != f.Actor,
		f.Endpoint != "" && (c.EndpointID == nil || strconv.FormatInt(*c.EndpointID, 10) != f.Endpoint),
		f.Query != "" && !strings.Contains(c.ID, f.Query) && !strings.Contains(c.Ref, f.Query):
		return false
	}
	return true
}

// index is the console's memory of the events stream: the newest limit commands, the
// replicas seen, and a version that grows with every change, for live pages to wait on. It is
// safe for concurrent use.
type index struct {
	mu       sync.RWMutex
	limit    int
	byRef    map[string]*Command
	order    []*Command // oldest first; evicted from the front
	replicas map[string]*Replica
	pve      []PVEEvent // Proxmox's own events, oldest first (proxmox.go)
	version  uint64
	next     uint64
	lastSeq  uint64        // events-stream sequence of the newest event applied
	changed  chan struct{} // closed and replaced on every change
}

func newIndex(limit int) *index {
	return &index{limit: limit, byRef: map[string]*Command{}, replicas: map[string]*Replica{}, changed: make(chan struct{})}
}

// Changed returns a channel closed at the next change.
func (ix *index) Changed() <-chan struct{} {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.changed
}

// Version is the version of the newest change.
func (ix *index) Version() uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.version
}

// apply records one event of the events stream (seq is its stream sequence). Events that
// are not a step, result or journal event of a command are ignored; so is an event at or
// below the newest sequence applied (an ordered consumer's redelivery after a reset).
func (ix *index) apply(seq uint64, ev events.Received) {
	ix.mu.Lock()
	pve := ix.applyPVE(ev)
	ix.mu.Unlock()
	if pve {
		return
	}
	instance := strings.TrimPrefix(ev.Source, "urn:proxbus:")
	var probe struct {
		CommandID     string `json:"command_id"`
		CommandSource string `json:"command_source"`
	}
	if json.Unmarshal(ev.Data, &probe) != nil || probe.CommandID == "" {
		return
	}
	kind := ev.Type[strings.LastIndexByte(ev.Type, '.')+1:]
	var (
		step    events.Step
		result  events.Result
		journal events.JournalRepaired
		err     error
	)
	switch kind {
	case "step":
		err = json.Unmarshal(ev.Data, &step)
	case "result":
		err = json.Unmarshal(ev.Data, &result)
	case "repaired":
		err = json.Unmarshal(ev.Data, &journal)
	default:
		return
	}
	if err != nil {
		return
	}

	ix.mu.Lock()
	defer ix.mu.Unlock()
	if seq != 0 && seq <= ix.lastSeq {
		return
	}
	ix.lastSeq = max(ix.lastSeq, seq)
	ref := events.Ref(probe.CommandSource, probe.CommandID)
	c := ix.byRef[ref]
	if c == nil {
		if kind == "repaired" {
			return // the command is older than the history
		}
		ix.next++
		c = &Command{Ref: ref, ID: probe.CommandID, Source: probe.CommandSource, First: ev.Time, order: ix.next}
		ix.byRef[ref] = c
		ix.order = append(ix.order, c)
		ix.evict()
	}
	switch kind {
	case "step":
		c.Verb = step.Verb
		c.Actor = cmp.Or(c.Actor, step.Actor)
		if c.EndpointID == nil {
			c.EndpointID = step.EndpointID
		}
		i, _ := slices.BinarySearchFunc(c.Steps, step.Seq, func(s events.Step, seq int) int { return s.Seq - seq })
		c.Steps = slices.Insert(c.Steps, i, step)
	case "result":
		c.Verb = result.Verb
		c.Actor = cmp.Or(c.Actor, result.Actor)
		if c.EndpointID == nil {
			c.EndpointID = result.EndpointID
		}
		switch {
		case result.Replayed:
			c.Replays++
			if c.Result == nil {
				c.Result, c.ResultAt = &result, ev.Time
			}
		case c.Result == nil || c.Result.Replayed:
			c.Result, c.ResultAt = &result, ev.Time
		}
	case "repaired":
		c.Repaired = &journal
	}
	if ev.Time.Before(c.First) || c.First.IsZero() {
		c.First = ev.Time
	}
	c.Last = maxTime(c.Last, ev.Time)
	c.Instance = instance
	r := ix.replicas[instance]
	if r == nil {
		r = &Replica{Instance: instance}
		ix.replicas[instance] = r
	}
	r.Events++
	r.LastEvent = maxTime(r.LastEvent, ev.Time)
	ix.version++
	c.version = ix.version
	close(ix.changed)
	ix.changed = make(chan struct{})
}

// evict drops the oldest commands beyond the limit; the caller holds mu.
func (ix *index) evict() {
	drop := len(ix.order) - ix.limit
	if drop <= 0 {
		return
	}
	for _, c := range ix.order[:drop] {
		delete(ix.byRef, c.Ref)
	}
	clear(ix.order[:drop]) // append moves the live part to a new array when this one is full
	ix.order = ix.order[drop:]
}

// keepRow remembers html as the list row of c (a copy the index handed out) while the
// command has not changed since. Only a finished command's row is kept: a running one shows
// how long it has taken so far.
func (ix *index) keepRow(c Command, html string) {
	if c.Result == nil {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if held := ix.byRef[c.Ref]; held != nil && held.version == c.version {
		held.row, held.rowVersion = html, c.version
	}
}

// Get returns a copy of the command with ref, or of the one command whose id is ref.
func (ix *index) Get(ref string) (Command, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if c, ok := ix.byRef[ref]; ok {
		return c.copy(), true
	}
	var found *Command
	for _, c := range ix.byRef {
		if c.ID == ref {
			if found != nil {
				return Command{}, false // ambiguous: the list's search shows both
			}
			found = c
		}
	}
	if found == nil {
		return Command{}, false
	}
	return found.copy(), true
}

// List returns copies of the newest limit commands matching f, newest first, and how many
// match in all.
func (ix *index) List(f Filter, limit int) ([]Command, int) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []Command
	total := 0
	for i := len(ix.order) - 1; i >= 0; i-- {
		c := ix.order[i]
		if !f.Match(c) {
			continue
		}
		total++
		if len(out) < limit {
			out = append(out, c.copy())
		}
	}
	return out, total
}

// ChangedSince returns copies of the commands matching f that changed after version since,
// newest first, at most limit of them, and the index's version.
func (ix *index) ChangedSince(since uint64, f Filter, limit int) ([]Command, uint64) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var out []Command
	for i := len(ix.order) - 1; i >= 0 && len(out) < limit; i-- {
		if c := ix.order[i]; c.version > since && f.Match(c) {
			out = append(out, c.copy())
		}
	}
	return out, ix.version
}

// Replicas returns the replicas seen, most recently active first, with the commands each
// has in flight.
func (ix *index) Replicas() []Replica {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	inFlight := map[string]int{}
	for _, c := range ix.order {
		if c.Result == nil {
			inFlight[c.Instance]++
		}
	}
	out := make([]Replica, 0, len(ix.replicas))
	for _, r := range ix.replicas {
		rc := *r
		rc.InFlight = inFlight[r.Instance]
		out = append(out, rc)
	}
	slices.SortFunc(out, func(a, b Replica) int {
		if c := b.LastEvent.Compare(a.LastEvent); c != 0 {
			return c
		}
		return strings.Compare(a.Instance, b.Instance)
	})
	return out
}

// Len is the number of commands held.
func (ix *index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.order)
}

// copy returns c with its own slices and result, so nothing the index changes later shows.
func (c *Command) copy() Command {
	cc := *c
	cc.Steps = slices.Clone(c.Steps)
	if c.Result != nil {
		r := *c.Result
		cc.Result = &r
	}
	if c.Repaired != nil {
		j := *c.Repaired
		cc.Repaired = &j
	}
	return cc
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
