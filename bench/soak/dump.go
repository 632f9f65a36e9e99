package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	simnetbox "github.com/proxbus/proxbus/internal/sim/netbox"
	simpve "github.com/proxbus/proxbus/internal/sim/pve"
)

// dumpJSONL writes one JSON line per item to dir/name (for investigating a failed run; the
// work directory is kept then). The plan holds the canary: it is the soak's own record and is
// not part of any scan.
func dumpJSONL[T any](dir, name string, items []T) error {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return fmt.Errorf("dump %s: %w", name, err)
	}
	enc := json.NewEncoder(f)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			_ = f.Close()
			return fmt.Errorf("dump %s: %w", name, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("dump %s: %w", name, err)
	}
	return nil
}

type planLine struct {
	ID, Verb, Key, Poison string
	Data                  json.RawMessage `json:",omitempty"`
	Dup                   bool
	Producer              string // natsgo, sdk-binary or sdk-structured
}

type resultLine struct {
	EventID string
	At      string
	Result  any
}

// dumpAll writes plan.jsonl, results.jsonl, pve-writes.jsonl, pve-tasks.jsonl, journal.jsonl and steps.jsonl into dir.
func dumpAll(dir string, plan []*planned, c *collected, writes []writeRec, tasks []simpve.TaskInfo, entries []simnetbox.Entry) error {
	lines := make([]planLine, 0, len(plan))
	for _, p := range plan {
		l := planLine{ID: p.cmd.ID, Verb: p.cmd.Verb, Key: p.cmd.IdempotencyKey, Dup: p.dup, Producer: p.producerName()}
		if json.Valid(p.cmd.Data) {
			l.Data = p.cmd.Data
		}
		if p.poison != nil {
			l.Poison = p.poison.kind
		}
		lines = append(lines, l)
	}
	var results []resultLine
	for _, p := range plan {
		for _, r := range c.results[p.cmd.ID] {
			results = append(results, resultLine{EventID: r.eventID, At: r.at.Format("15:04:05.000"), Result: r.res})
		}
	}
	for _, err := range []error{
		dumpJSONL(dir, "plan.jsonl", lines),
		dumpJSONL(dir, "results.jsonl", results),
		dumpJSONL(dir, "pve-writes.jsonl", writes),
		dumpJSONL(dir, "pve-tasks.jsonl", tasks),
		dumpJSONL(dir, "journal.jsonl", entries),
		dumpJSONL(dir, "steps.jsonl", c.steps),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}
