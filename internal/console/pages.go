package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/deadletter"
	"github.com/proxbus/proxbus/internal/schedule"
	"github.com/proxbus/proxbus/store"
)

// pageNames are the templates under templates/, each parsed with layout.html.
var pageNames = []string{"login", "problem", "commands", "command", "deadletters", "deadletter", "confirm", "repairs", "approvals", "schedules", "replicas", "proxmox"}

// parsePages parses every page with the layout and the shared fragments.
func parsePages(funcs template.FuncMap) (map[string]*template.Template, error) {
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/fragments.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// view is what every page template gets: the page's own data under Data.
type view struct {
	Title string
	// Nav is the section the page belongs to, for the navigation bar.
	Nav string
	// Role and Via say who is looking; CSRF is the token of its forms.
	Role, Via, CSRF string
	// Live is the URL of the page's live stream; "" when it has none.
	Live string
	Now  time.Time
	Data any
}

func (c *Console) view(s session, nav, title string, data any) view {
	return view{Title: title, Nav: nav, Role: s.role.String(), Via: s.via, CSRF: c.guard.csrfToken(s), Now: c.cfg.Now().UTC(), Data: data}
}

// problem answers status with a page saying what went wrong and what to do.
func (c *Console) problem(w http.ResponseWriter, r *http.Request, s session, status int, title, detail string) {
	v := c.view(s, "", title, problemData{Status: status, Detail: detail})
	c.render(w, status, "problem", v)
}

type problemData struct {
	Status int
	Detail string
}

// unauthorized answers 401 with the login form and nothing else; live streams get a bare 401.
func (c *Console) unauthorized(w http.ResponseWriter, r *http.Request, message string) {
	if strings.HasPrefix(r.URL.Path, Path+"/live/") || r.Header.Get("Accept") == "text/event-stream" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte("401 unauthorized: log in at " + Path + "/login\n"))
		return
	}
	next := r.URL.RequestURI()
	if r.Method != http.MethodGet || !strings.HasPrefix(next, Path) {
		next = Path + "/commands"
	}
	c.render(w, http.StatusUnauthorized, "login", c.view(session{}, "", "Log in", loginData{Message: message, Next: next, Enabled: c.guard.enabled()}))
}

type loginData struct {
	Message, Next string
	// Enabled is false when no token is configured: nobody can log in.
	Enabled bool
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if s := c.guard.identify(r); s.role != roleNone {
		http.Redirect(w, r, Path+"/commands", http.StatusSeeOther)
		return
	}
	next := r.URL.Query().Get("next")
	c.render(w, http.StatusOK, "login", c.view(session{}, "", "Log in", loginData{Next: safeNext(next), Enabled: c.guard.enabled()}))
}

// login checks the token of the login form and sets the session cookie; a wrong or missing
// token is answered 401 with the form again.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		c.problem(w, r, session{}, http.StatusForbidden, "Request refused", "A login must come from the console's own login form.")
		return
	}
	next := safeNext(r.PostFormValue("next"))
	ro := c.guard.tokenRole(r.PostFormValue("token"))
	if ro == roleNone {
		c.log.Info("console: login refused", "remote", r.RemoteAddr)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		c.render(w, http.StatusUnauthorized, "login", c.view(session{}, "", "Log in",
			loginData{Message: "That token is not valid here. Give the console's read token or its operator token.", Next: next, Enabled: c.guard.enabled()}))
		return
	}
	http.SetCookie(w, c.guard.issueCookie(ro, c.guard.cookieSecure(r)))
	c.log.Info("console: login", "role", ro.String(), "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	s := c.guard.identify(r)
	if s.role != roleNone && !c.guard.checkCSRF(r, s) {
		c.problem(w, r, s, http.StatusForbidden, "Request refused", "The form was stale or came from another site. Reload the page and try again.")
		return
	}
	http.SetCookie(w, clearCookie(c.guard.cookieSecure(r)))
	http.Redirect(w, r, Path+"/login", http.StatusSeeOther)
}

// safeNext is where a login may send the browser: a console path, nothing else.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Path+"/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") || strings.HasPrefix(next, Path+"/login") {
		return Path + "/commands"
	}
	return next
}

// listData is the commands page.
type listData struct {
	Filter   Filter
	Rows     template.HTML // the rows, rendered by [Console.rows]
	Empty    bool
	Total    int
	Limit    int
	Held     int
	Verbs    []string
	States   []handlers.State
	FilterOn bool
	// Static is set when the list is too long to update live (more than maxLiveRows).
	Static bool
}

// filterOf reads the list's filter from the query.
func filterOf(q url.Values) Filter {
	return Filter{
		Verb: strings.TrimSpace(q.Get("verb")), State: strings.TrimSpace(q.Get("status")),
		Endpoint: strings.TrimSpace(q.Get("endpoint")), Actor: strings.TrimSpace(q.Get("actor")),
		Query: strings.TrimSpace(q.Get("q")),
	}
}

// limitOf reads ?limit= (1 … History), else the default.
func (c *Console) limitOf(q url.Values) int {
	n, err := strconv.Atoi(q.Get("limit"))
	if err != nil || n <= 0 {
		return c.cfg.ListLimit
	}
	return min(n, c.cfg.History)
}

func (c *Console) commandsPage(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	f, limit := filterOf(q), c.limitOf(q)
	version := c.ix.Version() // before the list: a change in between is sent again, not lost
	rows, total := c.ix.List(f, limit)
	html, err := c.rows(rows)
	if err != nil {
		c.log.Error("console: rows not rendered", "err", err)
		http.Error(w, "the page could not be rendered; see the replica's log", http.StatusInternalServerError)
		return
	}
	d := listData{Filter: f, Rows: html, Empty: len(rows) == 0, Total: total, Limit: limit, Held: c.ix.Len(),
		Verbs: c.cfg.Verbs, States: states, FilterOn: f != Filter{}, Static: limit > maxLiveRows}
	v := c.view(s, "commands", "Commands", d)
	if !d.Static {
		q.Set("since", strconv.FormatUint(version, 10))
		v.Live = Path + "/live/commands?" + q.Encode()
	}
	c.render(w, http.StatusOK, "commands", v)
}

// maxLiveRows is the longest list that updates live: a browser lays out the whole table at
// each update, which at ten thousand rows takes longer than the updates are apart.
const maxLiveRows = 1000

// rows renders the list rows of cmds, reusing each finished command's row as rendered
// before (rendering is nearly all of a long list's time).
func (c *Console) rows(cmds []Command) (template.HTML, error) {
	var b strings.Builder
	for _, cmd := range cmds {
		row, err := c.row(cmd)
		if err != nil {
			return "", err
		}
		b.WriteString(row)
	}
	return template.HTML(b.String()), nil // each row was escaped by its template
}

// row is cmd's list row: the one kept since it last changed, or rendered now (and kept).
func (c *Console) row(cmd Command) (string, error) {
	if row, ok := cmd.cachedRow(); ok {
		return row, nil
	}
	row, err := c.fragment("commands", "row", cmd)
	if err != nil {
		return "", err
	}
	c.ix.keepRow(cmd, row)
	return row, nil
}

// commandData is one command's page.
type commandData struct {
	C        Command
	Timeline timeline
	Output   string
	Finished bool
	// Sent is the verb of a decision just published on the command, SentAs that decision's
	// ref (the page a decision redirects to).
	Sent, SentAs string
	// Decide are the decisions offered to an operator (approve, reject, cancel), in order.
	Decide []string
}

func (c *Console) commandData(cmd Command, s session) commandData {
	d := commandData{C: cmd, Timeline: layout(cmd, c.cfg.Now()), Finished: cmd.Result != nil}
	if s.role >= roleOperator {
		for _, a := range []string{"approve", "reject", "cancel"} {
			if decisions[a].Applies(cmd) {
				d.Decide = append(d.Decide, a)
			}
		}
	}
	if cmd.Result != nil && len(cmd.Result.Output) > 0 {
		d.Output = indentJSON(cmd.Result.Output)
	}
	return d
}

func (c *Console) commandPage(w http.ResponseWriter, r *http.Request, s session) {
	ref := r.PathValue("ref")
	cmd, ok := c.ix.Get(ref)
	if !ok {
		c.problem(w, r, s, http.StatusNotFound, "Command not found",
			fmt.Sprintf("No command %q is among the newest %d commands the console holds. It may be older, not published yet, or its id may be shared by several sources: search the list for it.", ref, c.cfg.History))
		return
	}
	d := c.commandData(cmd, s)
	d.Sent, d.SentAs = r.URL.Query().Get("sent"), r.URL.Query().Get("as")
	v := c.view(s, "commands", cmd.Verb+" "+cmd.ID, d)
	if cmd.Result == nil {
		v.Live = Path + "/live/commands/" + url.PathEscape(cmd.Ref)
	}
	c.render(w, http.StatusOK, "command", v)
}

// deadLettersData is the dead-letter list.
type deadLettersData struct {
	Letters []deadletter.DeadLetter
	Error   string
}

// deadLetterLimit is how many dead letters the list shows, the newest.
const deadLetterLimit = 500

func (c *Console) deadLettersPage(w http.ResponseWriter, r *http.Request, s session) {
	letters, err := deadletter.List(r.Context(), c.cfg.JetStream, c.cfg.Subjects, deadLetterLimit)
	d := deadLettersData{Letters: letters}
	status := http.StatusOK
	if err != nil {
		d.Error, status = "The dead-letter stream cannot be read now: "+err.Error(), http.StatusServiceUnavailable
	}
	slices.Reverse(d.Letters) // newest first
	c.render(w, status, "deadletters", c.view(s, "deadletters", "Dead letters", d))
}

// deadLetterData is one dead letter's page.
type deadLetterData struct {
	L       deadletter.DeadLetter
	Headers [][2]string
	Body    string
	// JustReplayed is set on the page a replay redirects to; Replayed is that replay (its
	// command id is "" when the letter had none readable).
	JustReplayed bool
	Replayed     deadletter.ReplayRecord
}

// seqOf reads the {seq} path value.
func seqOf(r *http.Request) (uint64, bool) {
	n, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	return n, err == nil && n > 0
}

func (c *Console) letter(w http.ResponseWriter, r *http.Request, s session) (deadletter.DeadLetter, bool) {
	seq, ok := seqOf(r)
	if !ok {
		c.problem(w, r, s, http.StatusNotFound, "Dead letter not found", "A dead letter is named by its sequence number in the dead-letter stream, a positive integer.")
		return deadletter.DeadLetter{}, false
	}
	d, err := deadletter.Get(r.Context(), c.cfg.JetStream, c.cfg.Subjects, seq)
	switch {
	case errors.Is(err, deadletter.ErrNotFound):
		c.problem(w, r, s, http.StatusNotFound, "Dead letter not found", fmt.Sprintf("The dead-letter stream holds no letter %d (purged, or never there).", seq))
		return d, false
	case err != nil:
		c.problem(w, r, s, http.StatusServiceUnavailable, "Dead letters unavailable", "The dead-letter stream cannot be read now: "+err.Error())
		return d, false
	}
	return d, true
}

func (c *Console) deadLetterPage(w http.ResponseWriter, r *http.Request, s session) {
	l, ok := c.letter(w, r, s)
	if !ok {
		return
	}
	q := r.URL.Query()
	d := deadLetterData{L: l, Body: bodyText(l.Data), JustReplayed: q.Has("replayed"),
		Replayed: deadletter.ReplayRecord{CommandID: q.Get("replayed"), CommandSource: q.Get("source")}}
	d.Replayed.CommandSeq, _ = strconv.ParseUint(q.Get("seq"), 10, 64)
	for k, vs := range l.Header {
		for _, v := range vs {
			d.Headers = append(d.Headers, [2]string{k, v})
		}
	}
	slices.SortFunc(d.Headers, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	c.render(w, http.StatusOK, "deadletter", c.view(s, "deadletters", fmt.Sprintf("Dead letter %d", l.Seq), d))
}

// confirmData is a page that asks before it acts.
type confirmData struct {
	Question, Detail, Action, Button string
	Fields                           [][2]string
	Back                             string
	// Reason asks for a reason (a text field), ReasonRequired insists on one.
	Reason, ReasonRequired bool
}

func (c *Console) replayConfirm(w http.ResponseWriter, r *http.Request, s session) {
	l, ok := c.letter(w, r, s)
	if !ok {
		return
	}
	detail := fmt.Sprintf("Its redacted copy is published again on %s as a new command (id suffixed -replay-%d), once however often this is confirmed.", l.OriginalSubject, l.Seq)
	if len(l.Replays) > 0 {
		detail += fmt.Sprintf(" It was replayed %d time(s) before.", len(l.Replays))
	}
	c.render(w, http.StatusOK, "confirm", c.view(s, "deadletters", "Replay?", confirmData{
		Question: fmt.Sprintf("Replay dead letter %d?", l.Seq), Detail: detail,
		Action: fmt.Sprintf("%s/deadletters/%d/replay", Path, l.Seq), Button: "Replay", Back: fmt.Sprintf("%s/deadletters/%d", Path, l.Seq),
	}))
}

func (c *Console) replay(w http.ResponseWriter, r *http.Request, s session) {
	seq, ok := seqOf(r)
	if !ok {
		c.problem(w, r, s, http.StatusNotFound, "Dead letter not found", "A dead letter is named by its sequence number, a positive integer.")
		return
	}
	rec, err := deadletter.Replay(r.Context(), c.cfg.JetStream, c.cfg.Subjects, seq)
	switch {
	case errors.Is(err, deadletter.ErrNotFound):
		c.problem(w, r, s, http.StatusNotFound, "Dead letter not found", fmt.Sprintf("The dead-letter stream holds no letter %d.", seq))
		return
	case err != nil && rec.CommandSeq == 0:
		c.problem(w, r, s, http.StatusBadGateway, "Not replayed", "The dead letter was not published again: "+err.Error()+". Nothing changed; try again.")
		return
	case err != nil:
		c.log.Warn("console: replayed, but the replay marker was not stored", "dead_letter_seq", seq, "err", err)
	}
	c.log.Info("console: dead letter replayed", "dead_letter_seq", seq, "command_id", rec.CommandID, "via", s.via)
	back := url.Values{"replayed": {rec.CommandID}, "source": {rec.CommandSource}, "seq": {strconv.FormatUint(rec.CommandSeq, 10)}}
	http.Redirect(w, r, fmt.Sprintf("%s/deadletters/%d?%s", Path, seq, back.Encode()), http.StatusSeeOther)
}

func (c *Console) purgeConfirm(w http.ResponseWriter, r *http.Request, s session) {
	letters, err := deadletter.List(r.Context(), c.cfg.JetStream, c.cfg.Subjects, 0)
	if err != nil {
		c.problem(w, r, s, http.StatusServiceUnavailable, "Dead letters unavailable", "The dead-letter stream cannot be read now: "+err.Error())
		return
	}
	before := c.cfg.Now().UTC()
	c.render(w, http.StatusOK, "confirm", c.view(s, "deadletters", "Purge?", confirmData{
		Question: fmt.Sprintf("Purge all %d dead letters?", len(letters)),
		Detail:   "Every dead letter stored before " + before.Format(time.RFC3339) + " is removed for good, with its replay records; letters stored after this page was shown are kept.",
		Action:   Path + "/deadletters/purge", Button: "Purge", Back: Path + "/deadletters",
		Fields: [][2]string{{"before", before.Format(time.RFC3339Nano)}},
	}))
}

func (c *Console) purge(w http.ResponseWriter, r *http.Request, s session) {
	before, err := time.Parse(time.RFC3339Nano, r.PostFormValue("before"))
	if err != nil {
		c.problem(w, r, s, http.StatusBadRequest, "Not purged", "The form's before field is not an RFC 3339 time; open the purge page again.")
		return
	}
	n, err := deadletter.Purge(r.Context(), c.cfg.JetStream, c.cfg.Subjects, before)
	if err != nil {
		c.problem(w, r, s, http.StatusBadGateway, "Not purged", "The dead-letter stream was not purged: "+err.Error())
		return
	}
	c.log.Info("console: dead letters purged", "letters", n, "before", before, "via", s.via)
	http.Redirect(w, r, Path+"/deadletters", http.StatusSeeOther)
}

// storeData is a page read from the store.
type storeData[T any] struct {
	Items []T
	Error string
}

func (c *Console) repairsPage(w http.ResponseWriter, r *http.Request, s session) {
	d, status := readStore(r, c.cfg.Store, Store.PendingRepairs)
	c.render(w, status, "repairs", c.view(s, "repairs", "Pending journal repairs", d))
}

func (c *Console) approvalsPage(w http.ResponseWriter, r *http.Request, s session) {
	d, status := readStore(r, c.cfg.Store, Store.PendingApprovals)
	c.render(w, status, "approvals", c.view(s, "approvals", "Awaiting approval", d))
}

// scheduleRow is one schedule as the schedules page shows it.
type scheduleRow struct {
	store.Schedule
	// Next is its next firing (zero when it fires no more); LastRef the event ref of its last
	// firing's command ("" before its first).
	Next    time.Time
	LastRef string
}

func (c *Console) schedulesPage(w http.ResponseWriter, r *http.Request, s session) {
	d, status := readStore(r, c.cfg.Store, Store.Schedules)
	rows := storeData[scheduleRow]{Error: d.Error, Items: make([]scheduleRow, 0, len(d.Items))}
	now := c.cfg.Now()
	for _, sc := range d.Items {
		row := scheduleRow{Schedule: sc, Next: nextFiring(sc, now)}
		if sc.LastID != "" {
			row.LastRef = events.Ref(events.ScheduleSource(sc.Name), sc.LastID)
		}
		rows.Items = append(rows.Items, row)
	}
	c.render(w, status, "schedules", c.view(s, "schedules", "Schedules", rows))
}

// nextFiring is sc's next firing after now: the one nats-server announced with its last
// firing while it is ahead, else computed as nats-server computes it; zero when none.
func nextFiring(sc store.Schedule, now time.Time) time.Time {
	if sc.Next.After(now) {
		return sc.Next
	}
	es := events.Schedule{Name: sc.Name, TZ: sc.TZ}
	if es.SetPattern(sc.Pattern) != nil {
		return time.Time{}
	}
	next, ok := schedule.NextFiring(es, sc.MadeAt, now)
	if !ok {
		return time.Time{}
	}
	return next
}

// readStore lists what list returns, or says why it cannot.
func readStore[T any](r *http.Request, st Store, list func(Store, context.Context) ([]T, error)) (storeData[T], int) {
	if st == nil {
		return storeData[T]{Error: "This replica has no store to read them from."}, http.StatusServiceUnavailable
	}
	items, err := list(st, r.Context())
	if err != nil {
		return storeData[T]{Error: "The store (Redis) cannot be read now: " + err.Error()}, http.StatusServiceUnavailable
	}
	return storeData[T]{Items: items}, http.StatusOK
}

func (c *Console) replicasPage(w http.ResponseWriter, r *http.Request, s session) {
	v := c.view(s, "replicas", "Replicas", c.ix.Replicas())
	v.Live = Path + "/live/replicas"
	c.render(w, http.StatusOK, "replicas", v)
}

// Helpers of the templates.

func (c *Console) funcs() template.FuncMap {
	return template.FuncMap{
		"time":     func(t time.Time) string { return fmtTime(t) },
		"clock":    func(t time.Time) string { return fmtClock(t) },
		"dur":      shortDuration,
		"ago":      func(t time.Time) string { return ago(c.cfg.Now(), t) },
		"endpoint": endpointText,
		"pct":      func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) + "%" },
		"progress": progressText,
		"cmdURL":   cmdURL,
		"refOf":    events.Ref,
		"rowID":    func(ref string) string { return "c-" + ref },
		"now":      func() time.Time { return c.cfg.Now() },
		"add":      func(a, b int) int { return a + b },
		"storeKey": func(k store.CommandKey) string { return events.Ref(k.Source, k.ID) },
		"webURL":   netboxPage,
	}
}

// netboxPage is the NetBox web page of an object whose API URL is apiURL: the URL without its
// /api path segment (http://netbox/api/extras/journal-entries/7/ is shown at
// http://netbox/extras/journal-entries/7/, also under a path prefix). A URL with no /api
// segment is returned as it is.
func netboxPage(apiURL string) string {
	u, err := url.Parse(apiURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return apiURL
	}
	before, after, ok := strings.Cut(u.Path, "/api/")
	if !ok {
		return apiURL
	}
	u.Path, u.RawPath = before+"/"+after, ""
	return u.String()
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000")
}

func fmtClock(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("15:04:05.000")
}

// ago says how long before now t was ("3.2s ago"), or how long after ("in 4s").
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	if d := now.Sub(t); d >= 0 {
		return shortDuration(d) + " ago"
	}
	return "in " + shortDuration(t.Sub(now))
}

func endpointText(id *int64) string {
	if id == nil {
		return "—"
	}
	return strconv.FormatInt(*id, 10)
}

// progressText is "1.2 GiB of 32 GiB (4%)" or "40%".
func progressText(p *events.Progress) string {
	if p == nil || p.Total <= 0 {
		return ""
	}
	pct := 100 * p.Done / p.Total
	if p.Unit == events.ProgressBytes {
		return fmt.Sprintf("%s of %s (%d%%)", bytesText(p.Done), bytesText(p.Total), pct)
	}
	return fmt.Sprintf("%d%%", pct)
}

func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// indentJSON pretty-prints a JSON document with its strings as they read (a stored
// "\u003c" shows as "<": the page escapes it); anything else is returned as it is.
func indentJSON(raw []byte) string {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) != nil || d.More() {
		return string(raw)
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if e.Encode(v) != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// maxBodyShown bounds how much of a dead letter's body its page shows.
const maxBodyShown = 64 << 10

// bodyText is a dead letter's body for people: indented JSON, else the text, cut short.
func bodyText(b []byte) string {
	s := indentJSON(b)
	if len(s) > maxBodyShown {
		s = s[:maxBodyShown] + "\n… (cut: the body has " + strconv.Itoa(len(b)) + " bytes)"
	}
	return strings.ToValidUTF8(s, "�")
}
