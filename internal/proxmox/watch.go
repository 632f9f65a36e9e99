package proxmox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of a [WatchConfig].
const (
	// DefaultWatchBusy is the watch's interval while a task runs or is waited for.
	DefaultWatchBusy = 150 * time.Millisecond
	// DefaultWatchIdle is its interval when nothing runs.
	DefaultWatchIdle = 2 * time.Second
	// DefaultWatchResources is how long the watch goes without a newer read of the cluster's
	// guests before it reads them itself.
	DefaultWatchResources = 2 * time.Second
	// WatchLogEvery is how long a watched task is waited for before its log is first read
	// for progress, and the least time between two reads.
	WatchLogEvery = 3 * time.Second
)

// ErrWatching: [Client.Watch] was called while another watch of the client runs.
var ErrWatching = errors.New("proxmox: the client is already watched")

// Task is one Proxmox task as the cluster's task lists show it.
type Task struct {
	UPID string
	Node string
	Type string // worker type, "qmstart", "vzdump"
	ID   string // the worker's id, usually the vmid; may be empty
	// User started it: "root@pam", or a token's full id "proxbus@pve!demo".
	User      string
	StartTime time.Time
	// Running is true while it runs; then EndTime is zero and ExitStatus "".
	Running    bool
	EndTime    time.Time
	ExitStatus string // "OK", "WARNINGS: n" or the error
	// ByProxbus says the client's own token started it; CommandID names the command that did,
	// when one of this process's commands waits or waited for it.
	ByProxbus bool
	CommandID string
}

// OK reports whether a task that ended succeeded ("OK" or "WARNINGS: n").
func (t Task) OK() bool { return !t.Running && taskOK(t.ExitStatus) }

// VMID is the task's guest, 0 when its id is not a vmid.
func (t Task) VMID() int64 {
	n, err := strconv.ParseInt(t.ID, 10, 64)
	if err != nil || n < 100 {
		return 0
	}
	return n
}

// Guest changes a watch reports ([GuestChange].Change).
const (
	GuestCreated  = "created"
	GuestRemoved  = "removed"
	GuestStarted  = "started"
	GuestStopped  = "stopped"
	GuestPaused   = "paused"
	GuestResumed  = "resumed"
	GuestMigrated = "migrated"
	GuestRenamed  = "renamed"
)

// GuestChange is one change of a guest the watch saw: in the cluster's resources between two
// reads (created, removed, started, stopped, migrated, renamed), or as a task that ended well
// (paused, resumed: /cluster/resources shows a paused VM as running).
type GuestChange struct {
	VMID int64
	Name string
	Node string
	Type string // "qemu" or "lxc"
	// Change is one of the Guest* constants; From and To are the nodes of a migration and the
	// names of a rename, "" otherwise.
	Change   string
	From, To string
	// At is when the watch saw it; UPID the task that made it, when a task did.
	At   time.Time
	UPID string
}

// WatchConfig configures [Client.Watch]. Zero fields take the defaults.
type WatchConfig struct {
	// Busy is the interval while a task runs on the cluster or is waited for (default
	// DefaultWatchBusy, or the client's fixed task poll interval, see [WithTaskPollInterval]);
	// Idle the interval otherwise (DefaultWatchIdle).
	Busy, Idle time.Duration
	// Resources is how long the watch goes without a newer read of /cluster/resources (its
	// own, or the client's locates', which it diffs as they come) before it reads it itself
	// (default DefaultWatchResources); negative: guests are not watched.
	Resources time.Duration
	// Share, when set, says how many watches of the same endpoint (one per replica) share
	// what they see, and this one's rank among them (0 to n-1): each replica wakes its
	// waiters from the task ends the others see ([Client.TaskEnded]), so each watch runs its
	// rounds n times further apart, its busy rounds in its own slot of a wall-clock grid of
	// Busy (rank × Busy after each multiple of n × Busy): together the watches look every Busy,
	// in turn. nil, or n below 2: the watch looks alone.
	Share func() (n, rank int)
	// OnTask is called with every task at its start (Running) and its end, oldest start
	// first; OnGuest with every guest change. Both run on the watch's goroutine and must
	// return quickly. Tasks that ended before the watch began are not reported.
	OnTask  func(Task)
	OnGuest func(GuestChange)
	// OnEnd, when set, is called at once with every task end the watch sees, also one whose
	// OnTask report waits a round for its command id: replicas pass it on to wake each
	// other's waiters ([Client.TaskEnded]). It runs on the watch's goroutine.
	OnEnd func(Task)
}

// watchSlot holds a client's running watch, nil when none.
type watchSlot struct{ atomic.Pointer[watcher] }

// watching is c's running watch, nil when none.
func (c *Client) watching() *watcher {
	if c.watch == nil {
		return nil
	}
	return c.watch.Load()
}

// watcher is the state of one running [Client.Watch].
type watcher struct {
	c   *Client
	cfg WatchConfig

	mu      sync.Mutex
	waits   map[string]*taskWait // by UPID
	cmds    map[string]string    // UPID → command id, for tasks our commands started
	kick    chan struct{}        // a wait was added
	stopped bool

	// the goroutine's own state
	first    bool
	running  map[string]Task // tasks seen running
	ended    map[string]int  // tasks whose end was reported → the round that saw it
	held     map[string]bool // our tasks whose start (UPID) or end (UPID/end) waits a round for its command id
	lost     map[string]int  // running tasks neither listed nor indexed → rounds so
	round    int
	guests   map[int64]ClusterResource
	guestsAt time.Time // when the read of the guests last diffed started
}

// taskWait is the commands waiting for one task.
type taskWait struct {
	node    string
	start   time.Time
	done    chan struct{} // closed at the end (or when the watch stops)
	exit    string
	stopped bool // the watch stopped before the end: poll instead
	refs    int
	unseen  int // rounds that did not list the task
}

// Watch watches the cluster's tasks and guests until ctx ends, and returns ctx's error (or
// ErrWatching when another watch of c runs). Each round reads GET /cluster/tasks (every node's
// running tasks and its latest ended ones, as its nodes broadcast them at each task's start
// and end), and, for a task that left that list without its end being seen, the node's task
// index since the task's start (GET /nodes/{node}/tasks?source=archive&since=…); it diffs
// every newer read of GET /cluster/resources?type=vm the client's locates made, and reads it
// itself when none was made for cfg.Resources. A round follows the last after
// cfg.Busy while a task runs or is waited for, else after cfg.Idle; a new wait wakes an idle
// watch. The cost to the cluster is one request per round, whatever the tasks in flight.
//
// While it runs, [Client.WaitTask] waits on it instead of polling the task's status, and reads
// a waited task's log for progress (under [WithTaskProgress]) only when its worker type
// reports progress (backups, migrations, disk moves, downloads, clones, restores), first after
// WatchLogEvery and then at most every WatchLogEvery. A failed read is logged and retried next round.
func (c *Client) Watch(ctx context.Context, cfg WatchConfig) error {
	if cfg.Busy <= 0 {
		cfg.Busy = DefaultWatchBusy
		if c.taskPoll > 0 && c.taskPoll != AdaptiveTaskPoll {
			cfg.Busy = c.taskPoll
		}
	}
	cfg.Idle = cmp.Or(max(cfg.Idle, 0), DefaultWatchIdle)
	cfg.Resources = cmp.Or(cfg.Resources, DefaultWatchResources)
	w := &watcher{c: c, cfg: cfg, waits: map[string]*taskWait{}, cmds: map[string]string{}, kick: make(chan struct{}, 1),
		first: true, running: map[string]Task{}, ended: map[string]int{}, held: map[string]bool{}, lost: map[string]int{}}
	if c.watch == nil || !c.watch.CompareAndSwap(nil, w) {
		return ErrWatching
	}
	defer func() {
		c.watch.CompareAndSwap(w, nil)
		w.stop()
	}()
	for {
		began := time.Now()
		w.pass(ctx)
		t := time.NewTimer(w.interval())
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-w.kick:
			// a wait came: the next round is the next busy one
			t.Stop()
			pause := w.busyPause(time.Now())
			if n, _ := w.share(); n < 2 {
				pause = time.Until(began.Add(cfg.Busy))
			}
			t = time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		case <-t.C:
		}
	}
}

// interval is the pause before the next round.
func (w *watcher) interval() time.Duration {
	w.mu.Lock()
	waited := len(w.waits) > 0
	w.mu.Unlock()
	if waited || len(w.running) > 0 {
		return w.busyPause(time.Now())
	}
	return w.scaled(w.cfg.Idle)
}

// share is Share's answer, (1, 0) without one.
func (w *watcher) share() (n, rank int) {
	if w.cfg.Share == nil {
		return 1, 0
	}
	n, rank = w.cfg.Share()
	if n < 2 {
		return 1, 0
	}
	return n, ((rank % n) + n) % n
}

// scaled is d times the watches sharing the endpoint.
func (w *watcher) scaled(d time.Duration) time.Duration {
	n, _ := w.share()
	return d * time.Duration(n)
}

// busyPause is the pause from now to the next busy round: Busy alone; shared by n watches,
// the next start of this watch's slot in the wall-clock grid (see WatchConfig.Share), at
// least half a Busy away.
func (w *watcher) busyPause(now time.Time) time.Duration {
	n, rank := w.share()
	if n < 2 {
		return w.cfg.Busy
	}
	period := w.cfg.Busy * time.Duration(n)
	next := now.Truncate(period).Add(w.cfg.Busy * time.Duration(rank))
	for next.Sub(now) < w.cfg.Busy/2 {
		next = next.Add(period)
	}
	return next.Sub(now)
}

// stop wakes every waiter with "watch stopped": they go on polling.
func (w *watcher) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	for upid, tw := range w.waits {
		tw.stopped = true
		close(tw.done)
		delete(w.waits, upid)
	}
}

// note records that the command ctx names (see [WithCommandID]) started upid.
func (w *watcher) note(ctx context.Context, upid string) {
	id, _ := ctx.Value(commandKey{}).(string)
	if id == "" {
		return
	}
	w.mu.Lock()
	w.cmds[upid] = id
	w.mu.Unlock()
}

// await registers a wait for upid on node; nil when the watch has stopped. Release it with
// release.
func (w *watcher) await(node, upid string) *taskWait {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return nil
	}
	tw := w.waits[upid]
	if tw == nil {
		u, _ := ParseUPID(upid)
		tw = &taskWait{node: node, start: u.StartTime, done: make(chan struct{})}
		w.waits[upid] = tw
	}
	tw.refs++
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return tw
}

// release ends one wait for upid.
func (w *watcher) release(upid string, tw *taskWait) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if tw.refs--; tw.refs <= 0 && w.waits[upid] == tw {
		delete(w.waits, upid)
	}
}

// wake ends the waits for t, which ended.
func (w *watcher) wake(t Task) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if tw := w.waits[t.UPID]; tw != nil {
		tw.exit = t.ExitStatus
		close(tw.done)
		delete(w.waits, t.UPID)
	}
}

// pass is one round: the tasks, then (when due) the guests.
func (w *watcher) pass(ctx context.Context) {
	w.round++
	if err := w.tasks(ctx); err != nil {
		w.c.log.LogAttrs(ctx, slog.LevelDebug, "watch: tasks not read", slog.String("err", err.Error()))
	}
	if w.cfg.Resources > 0 {
		if err := w.readGuests(ctx); err != nil {
			w.c.log.LogAttrs(ctx, slog.LevelDebug, "watch: guests not read", slog.String("err", err.Error()))
		}
	}
	w.first = false
}

// tasks reads the cluster's task list and reports what changed since the last round.
func (w *watcher) tasks(ctx context.Context) error {
	list, err := getList(ctx, w.c, request{method: http.MethodGet, path: "/cluster/tasks"}, taskOf)
	if err != nil {
		return err
	}
	slices.SortStableFunc(list, func(a, b Task) int { return a.StartTime.Compare(b.StartTime) })
	listed := make(map[string]bool, len(list))
	for _, t := range list {
		listed[t.UPID] = true
		w.seen(t)
	}
	// tasks that left the list unseen ended (more ended than the list keeps), and waited tasks
	// the list does not show: their node's index says how they ended
	since := map[string]time.Time{}
	for upid, t := range w.running {
		if !listed[upid] {
			since[t.Node] = earliest(since, t.Node, t.StartTime)
		}
	}
	w.mu.Lock()
	for upid, tw := range w.waits {
		if listed[upid] || w.running[upid].UPID != "" {
			continue
		}
		if tw.unseen++; tw.unseen >= 2 {
			since[tw.node] = earliest(since, tw.node, tw.start)
		}
	}
	w.mu.Unlock()
	for node, from := range since {
		if err := w.archive(ctx, node, from); err != nil {
			w.c.log.LogAttrs(ctx, slog.LevelDebug, "watch: task index not read", slog.String("node", node), slog.String("err", err.Error()))
			continue
		}
		// a task neither listed nor indexed (the index rotated) is given up after a few rounds
		for upid, t := range w.running {
			if t.Node == node && !listed[upid] {
				if w.lost[upid]++; w.lost[upid] >= watchLostRounds {
					delete(w.running, upid)
					delete(w.lost, upid)
				}
			}
		}
	}
	for upid, r := range w.ended {
		if !listed[upid] && w.round-r > 10 {
			delete(w.ended, upid)
		}
	}
	return nil
}

// earliest is the earlier of m[k] (when set) and t.
func earliest(m map[string]time.Time, k string, t time.Time) time.Time {
	if cur, ok := m[k]; ok && cur.Before(t) {
		return cur
	}
	return t
}

// seen handles one listed (or indexed) task.
func (w *watcher) seen(t Task) {
	if _, done := w.ended[t.UPID]; done {
		if !t.Running {
			w.ended[t.UPID] = w.round
		}
		return
	}
	t.ByProxbus = t.User == w.c.cfg.TokenID
	w.mu.Lock()
	t.CommandID = w.cmds[t.UPID]
	w.mu.Unlock()
	if t.Running {
		if _, known := w.running[t.UPID]; known {
			return
		}
		if t.ByProxbus && t.CommandID == "" && !w.held[t.UPID] && !w.first {
			w.held[t.UPID] = true // the command that started it may not have noted it yet
			return
		}
		delete(w.held, t.UPID)
		w.running[t.UPID] = t
		w.report(t)
		return
	}
	_, known := w.running[t.UPID]
	if !w.held[t.UPID+"/end"] && w.cfg.OnEnd != nil {
		w.cfg.OnEnd(t)
	}
	if t.ByProxbus && t.CommandID == "" && !w.held[t.UPID+"/end"] && !w.first {
		w.held[t.UPID+"/end"] = true // its report waits as its start's did; its waiters do not
		w.wake(t)
		return
	}
	w.ended[t.UPID] = w.round
	delete(w.running, t.UPID)
	delete(w.lost, t.UPID)
	delete(w.held, t.UPID)
	delete(w.held, t.UPID+"/end")
	w.mu.Lock()
	delete(w.cmds, t.UPID)
	w.mu.Unlock()
	w.wake(t)
	if w.first && !known {
		return // history: it ended before the watch began
	}
	if !known {
		start := t
		start.Running, start.EndTime, start.ExitStatus = true, time.Time{}, ""
		w.report(start)
	}
	w.report(t)
	if t.OK() {
		w.taskChange(t)
	}
}

// report passes t to OnTask.
func (w *watcher) report(t Task) {
	if w.cfg.OnTask != nil {
		w.cfg.OnTask(t)
	}
}

// archive reads node's task index from since on (GET /nodes/{node}/tasks?source=archive) and handles the tasks it lists that the watch
// knows running or someone waits for.
func (w *watcher) archive(ctx context.Context, node string, since time.Time) error {
	path := "/nodes/" + url.PathEscape(node) + "/tasks"
	for page := 0; page < watchIndexPages; page++ {
		q := url.Values{"source": {"archive"}, "since": {strconv.FormatInt(since.Unix(), 10)},
			"start": {strconv.Itoa(page * watchIndexPage)}, "limit": {strconv.Itoa(watchIndexPage)}}
		list, err := getList(ctx, w.c, request{method: http.MethodGet, path: path, query: q}, taskOf)
		if err != nil {
			return err
		}
		slices.SortStableFunc(list, func(a, b Task) int { return a.StartTime.Compare(b.StartTime) })
		for _, t := range list {
			w.mu.Lock()
			_, waited := w.waits[t.UPID]
			w.mu.Unlock()
			if _, known := w.running[t.UPID]; (known || waited) && !t.Running {
				w.seen(t)
			}
		}
		if len(list) < watchIndexPage {
			return nil
		}
	}
	return nil
}

// watchLostRounds is how many rounds a running task may be missing from both the list and its
// node's index before the watch forgets it.
const watchLostRounds = 5

// A node's task index is read in pages of watchIndexPage tasks (PVE's limit 0 lists none),
// at most watchIndexPages of them per round.
const (
	watchIndexPage  = 500
	watchIndexPages = 4
)

// taskOf reads one entry of a task list; a token's task, listed with user and tokenid apart,
// gets the token's full id as User.
func taskOf(m map[string]string) Task {
	t := Task{UPID: m["upid"], Node: m["node"], Type: m["type"], ID: m["id"], User: m["user"],
		StartTime: time.Unix(flatInt(m, "starttime"), 0).UTC()}
	if tok := m["tokenid"]; tok != "" {
		t.User += "!" + tok
	}
	st := m["status"]
	if st == "" || st == "RUNNING" {
		t.Running = true
		return t
	}
	t.ExitStatus = st
	t.EndTime = time.Unix(flatInt(m, "endtime"), 0).UTC()
	return t
}

// taskChange reports the guest change a task that ended well made, when the resources do
// not show it (pause and resume).
func (w *watcher) taskChange(t Task) {
	var change string
	switch t.Type {
	case "qmpause", "qmsuspend":
		change = GuestPaused
	case "qmresume":
		change = GuestResumed
	default:
		return
	}
	g := GuestChange{VMID: t.VMID(), Node: t.Node, Type: string(GuestQEMU), Change: change, At: t.EndTime, UPID: t.UPID}
	if r, ok := w.guests[g.VMID]; ok {
		g.Name = r.Name
	}
	if w.cfg.OnGuest != nil && g.VMID != 0 {
		w.cfg.OnGuest(g)
	}
}

// readGuests reports how the cluster's guests changed (the first read reports nothing). It
// diffs the client's newest read of them when one started since the last it diffed: the
// commands' locates read them often, and the watch then sends no request of its own. Only
// when none did for cfg.Resources (scaled) does it read them itself, through the same
// coalescer as the locates (a read it shares with them serves both).
func (w *watcher) readGuests(ctx context.Context) error {
	if at, list := w.c.resources.newestVM(); at.After(w.guestsAt) {
		w.diffGuests(at, list)
	}
	if time.Since(w.guestsAt) < w.scaled(w.cfg.Resources) {
		return nil
	}
	if _, err := w.c.ClusterResources(ctx, ResourceVM); err != nil {
		return err
	}
	if at, list := w.c.resources.newestVM(); at.After(w.guestsAt) {
		w.diffGuests(at, list)
	}
	return nil
}

// diffGuests reports how the guests changed from the last read diffed to list, a read that
// started at at.
func (w *watcher) diffGuests(at time.Time, list []ClusterResource) {
	w.guestsAt = at
	now := time.Now().UTC()
	cur := make(map[int64]ClusterResource, len(list))
	for _, r := range list {
		if r.VMID != 0 {
			cur[r.VMID] = r
		}
	}
	prev := w.guests
	w.guests = cur
	if prev == nil || w.cfg.OnGuest == nil {
		return
	}
	ids := make([]int64, 0, len(cur)+len(prev))
	for id := range cur {
		ids = append(ids, id)
	}
	for id := range prev {
		if _, ok := cur[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		for _, g := range guestChanges(prev[id], cur[id], now) {
			w.cfg.OnGuest(g)
		}
	}
}

// guestChanges are the changes from a to b, one guest's resources at two reads (a zero value:
// absent).
func guestChanges(a, b ClusterResource, at time.Time) []GuestChange {
	base := func(r ClusterResource, change string) GuestChange {
		return GuestChange{VMID: r.VMID, Name: r.Name, Node: r.Node, Type: r.Type, Change: change, At: at}
	}
	switch {
	case a.VMID == 0 && b.VMID == 0:
		return nil
	case a.VMID == 0:
		return []GuestChange{base(b, GuestCreated)}
	case b.VMID == 0:
		return []GuestChange{base(a, GuestRemoved)}
	}
	var out []GuestChange
	if a.Node != b.Node && a.Node != "" && b.Node != "" {
		g := base(b, GuestMigrated)
		g.From, g.To = a.Node, b.Node
		out = append(out, g)
	}
	if a.Name != b.Name {
		g := base(b, GuestRenamed)
		g.From, g.To = a.Name, b.Name
		out = append(out, g)
	}
	switch {
	case a.Status != "running" && b.Status == "running" && a.Status != "unknown":
		out = append(out, base(b, GuestStarted))
	case a.Status == "running" && b.Status == "stopped":
		out = append(out, base(b, GuestStopped))
	}
	return out
}

// commandKey carries the id of the command a context works for.
type commandKey struct{}

// TaskEnded tells c's running watch (if any) that t ended, as another replica's watch saw it:
// the commands waiting for it are woken at once. The watch still reports t itself when it
// sees it. t must have ended (Running false).
func (c *Client) TaskEnded(t Task) {
	if w := c.watching(); w != nil && !t.Running {
		w.wake(t)
	}
}

// progressTypes are the worker types whose logs report progress (tasklog.go): only their
// logs are read while a watched task is waited for.
var progressTypes = map[string]bool{
	BackupTaskType: true, MigrateTaskQEMU: true, MigrateTaskLXC: true,
	"qmmove": true, "move_volume": true, "download": true, "qmclone": true, "vzclone": true,
	"qmrestore": true, "vzrestore": true, "imgcopy": true, "qmimport": true,
}

// WithCommandID returns a context under which the tasks this package starts or waits for are
// attributed to command id ([Task].CommandID) by a running [Client.Watch].
func WithCommandID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, commandKey{}, id)
}

// waitWatched waits for upid on the running watch w; watched false when the watch stopped
// before the task ended (the caller then polls).
func (c *Client) waitWatched(ctx context.Context, w *watcher, node, upid string) (watched bool, err error) {
	w.note(ctx, upid)
	tw := w.await(node, upid)
	if tw == nil {
		return false, nil
	}
	defer w.release(upid, tw)
	hook := progressHook(ctx)
	logEvery := WatchLogEvery
	if c.taskPoll > 0 && c.taskPoll != AdaptiveTaskPoll {
		logEvery = c.taskPoll
	}
	var tl *taskLog
	var logTick <-chan time.Time
	if u, err := ParseUPID(upid); hook != nil && (err != nil || progressTypes[u.Type]) {
		tl = newTaskLog(node, upid)
		tick := time.NewTicker(logEvery)
		defer tick.Stop()
		logTick = tick.C
	}
	for {
		select {
		case <-ctx.Done():
			return true, fmt.Errorf("proxmox: waiting for task %s: %w", upid, ctx.Err())
		case <-logTick:
			c.reportProgress(ctx, tl, hook)
		case <-tw.done:
			if tw.stopped {
				return false, nil
			}
			if taskOK(tw.exit) {
				return true, nil
			}
			if strings.TrimSpace(tw.exit) == "" {
				tw.exit = "unknown"
			}
			return true, &TaskError{UPID: upid, Node: node, ExitStatus: scrub(tw.exit, c.secrets),
				LogError: scrub(c.taskLogError(ctx, node, upid, tw.exit), c.secrets)}
		}
	}
}
