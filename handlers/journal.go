package handlers

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/store"
)

// comments renders the journal entry's Markdown (contract §6): stable bullets, then the verb's
// own fields; never a secret.
func (r *run) comments(out Outcome, upid string) string {
	bullets := []Bullet{
		{"verb", r.cmd.Verb},
		{"actor", r.actor()},
		{"result", out.Result},
		{"command_id", r.cmd.ID},
	}
	if r.cmd.Producer != "" { // verified before the command reached the pipeline (package producers)
		bullets = append(bullets, Bullet{"producer", r.cmd.Producer})
	}
	if r.cmd.IdempotencyKey != "" {
		bullets = append(bullets, Bullet{"idempotency_key", r.cmd.IdempotencyKey})
	}
	if upid != "" {
		bullets = append(bullets, Bullet{"proxmox_task_upid", upid})
	}
	endpoint := strconv.FormatInt(r.cmd.EndpointID, 10)
	if r.endpoint.Name != "" {
		endpoint += " (" + r.endpoint.Name + ")"
	}
	bullets = append(bullets, Bullet{"endpoint", endpoint}, Bullet{"dispatched_at", r.started.UTC().Format(time.RFC3339)})
	bullets = append(bullets, r.approvalBullets()...)
	if out.Reason != "" {
		detail := out.Reason
		if out.Detail != "" {
			detail += ": " + out.Detail
		}
		if len(out.Fields) > 0 {
			detail += " (fields: " + strings.Join(out.Fields, ", ") + ")"
		}
		bullets = append(bullets, Bullet{"error_detail", detail})
	}
	bullets = append(bullets, r.prep.bullets...)
	bullets = append(bullets, out.Bullets...)
	var b strings.Builder
	for _, bl := range bullets {
		// One line per value: Markdown structure cannot be injected through it.
		b.WriteString("- ")
		b.WriteString(bl.Name)
		b.WriteString(": ")
		b.WriteString(netbox.OneLine(r.scrub(bl.Value)))
		b.WriteByte('\n')
	}
	return b.String()
}

func (r *run) actor() string {
	if r.cmd.Actor == "" {
		return "proxbus"
	}
	return r.cmd.Actor
}

// journalTarget is the object the command's journal entry is attached to (contract §6): the
// NetBox VM whose custom field proxmox_vm_id is the command's vmid when there is exactly one,
// else the endpoint (the verb's bullets carry the vmid).
func (r *run) journalTarget(ctx context.Context) (string, int64, error) {
	if r.prep.journalVMID == 0 {
		return netbox.ObjectTypeEndpoint, r.cmd.EndpointID, nil
	}
	vms, err := r.p.cfg.Journal.VMsByProxmoxID(ctx, r.prep.journalVMID)
	if err != nil {
		return "", 0, err
	}
	if len(vms) == 1 {
		return netbox.ObjectTypeVM, vms[0].ID, nil
	}
	return netbox.ObjectTypeEndpoint, r.cmd.EndpointID, nil
}

// finalize is contract §4 step 6: PATCH the write-ahead entry to its terminal state, retried;
// when it still fails the update is kept in Redis for repair (contract §6).
func (r *run) finalize(ctx context.Context, progress store.Progress, out Outcome, upid string) journalState {
	kind, comments := out.journalKind(), r.comments(out, upid)
	var err error
	for i := 0; i <= r.p.cfg.JournalRetries; i++ {
		if i > 0 {
			r.p.sleep(r.p.cfg.JournalRetryDelay)
		}
		if err = r.p.cfg.Journal.UpdateJournalEntry(ctx, progress.JournalID, kind, comments); err == nil {
			r.reach(crashJournaled, "terminal update")
			return journalState{url: progress.JournalURL, finalized: true}
		}
		r.log.Warn("journal: terminal update failed", "attempt", i+1, "err", err)
	}
	repair := store.Repair{
		Command: r.key(), EndpointID: r.cmd.EndpointID, JournalID: progress.JournalID, JournalURL: progress.JournalURL,
		Kind: string(kind), Comments: comments, Ref: r.cmd.Ref(), Verb: r.cmd.Verb,
		CreatedAt: r.p.cfg.Now(), NextAt: r.p.cfg.Now(), LastError: r.scrub(err.Error()),
	}
	if serr := r.p.cfg.Store.SaveRepair(ctx, repair); serr != nil {
		r.log.Error("journal: pending update could not be kept for repair", "err", serr, "journal_entry_url", progress.JournalURL)
	}
	return journalState{url: progress.JournalURL, finalized: false}
}
