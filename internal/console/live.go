package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// heartbeat is how often a quiet live stream sends a comment, so proxies keep it open and a
// dead client is noticed.
const heartbeat = 15 * time.Second

// liveUpdate renders what changed after version since: the name and JSON data of the event
// to send (name "" sends nothing), and whether the stream is complete after it.
type liveUpdate func(since uint64) (name string, data any, done bool, err error)

// serveLive runs a Server-Sent Events stream: an update at once unless the index is still
// at version since (the version the page was rendered at; 0 for none), then one after each change
// of the index, at most one per LiveInterval, until the client goes, the console stops, or
// the update says the stream is complete (a "done" event follows; the page then stops
// listening). Every event's data is scrubbed of the configured secrets.
func (c *Console) serveLive(w http.ResponseWriter, r *http.Request, since uint64, update liveUpdate) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil { // the headers now: the browser's EventSource opens at once
		return
	}
	send := func(name string, data any) error {
		b, err := json.Marshal(data)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, c.scrub(b)); err != nil {
			return err
		}
		return rc.Flush()
	}
	first := since == 0
	pause := time.NewTimer(0)
	defer pause.Stop()
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		changed := c.ix.Changed()
		version := c.ix.Version()
		if version != since || first {
			first = false
			name, data, done, err := update(since)
			if err != nil {
				c.log.Error("console: live update not rendered", "path", r.URL.Path, "err", err)
				return
			}
			since = version
			if name != "" {
				if err := send(name, data); err != nil {
					return // the client went away
				}
			}
			if done {
				_ = send("done", struct{}{})
				return
			}
			pause.Reset(c.cfg.LiveInterval)
			select { // updates are at least LiveInterval apart
			case <-r.Context().Done():
				return
			case <-c.done:
				return
			case <-pause.C:
			}
			continue
		}
		select {
		case <-r.Context().Done():
			return
		case <-c.done:
			return
		case <-changed:
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// rowUpdate is one row of the commands list: its HTML, or, when Remove, the id of a row that
// no longer matches the filter.
type rowUpdate struct {
	ID     string `json:"id"`
	HTML   string `json:"html,omitempty"`
	Remove bool   `json:"remove,omitempty"`
}

// rowsEvent is the data of a "rows" event: the rows to insert, replace or remove, newest
// first, and the number of commands matching the filter.
type rowsEvent struct {
	Rows  []rowUpdate `json:"rows"`
	Total int         `json:"total"`
	Held  int         `json:"held"`
}

// htmlEvent is the data of an "html" event: the new content of the element with id Target.
type htmlEvent struct {
	Target string `json:"target"`
	HTML   string `json:"html"`
}

// liveCommands streams the rows of the commands list that changed, filtered as the page is.
func (c *Console) liveCommands(w http.ResponseWriter, r *http.Request, _ session) {
	q := r.URL.Query()
	f, limit := filterOf(q), min(c.limitOf(q), maxLiveRows)
	since, _ := strconv.ParseUint(q.Get("since"), 10, 64) // the version the page shows
	c.serveLive(w, r, since, func(since uint64) (string, any, bool, error) {
		changed, _ := c.ix.ChangedSince(since, Filter{}, limit)
		ev := rowsEvent{Rows: make([]rowUpdate, 0, len(changed))}
		for _, cmd := range changed {
			id := "c-" + cmd.Ref
			if !f.Match(&cmd) {
				ev.Rows = append(ev.Rows, rowUpdate{ID: id, Remove: true})
				continue
			}
			html, err := c.row(cmd)
			if err != nil {
				return "", nil, false, err
			}
			ev.Rows = append(ev.Rows, rowUpdate{ID: id, HTML: html})
		}
		_, ev.Total = c.ix.List(f, 0)
		ev.Held = c.ix.Len()
		return "rows", ev, false, nil
	})
}

// liveCommand streams one command's timeline and result until it has its result.
func (c *Console) liveCommand(w http.ResponseWriter, r *http.Request, s session) {
	ref := r.PathValue("ref")
	c.serveLive(w, r, 0, func(uint64) (string, any, bool, error) {
		cmd, ok := c.ix.Get(ref)
		if !ok {
			return "", nil, false, nil
		}
		html, err := c.fragment("command", "detail", c.commandData(cmd, s))
		if err != nil {
			return "", nil, false, err
		}
		return "html", htmlEvent{Target: "detail", HTML: html}, cmd.Result != nil, nil
	})
}

// liveReplicas streams the replicas table.
func (c *Console) liveReplicas(w http.ResponseWriter, r *http.Request, _ session) {
	c.serveLive(w, r, 0, func(uint64) (string, any, bool, error) {
		html, err := c.fragment("replicas", "replicas", c.ix.Replicas())
		if err != nil {
			return "", nil, false, err
		}
		return "html", htmlEvent{Target: "replicas", HTML: html}, false, nil
	})
}
