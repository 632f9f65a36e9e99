package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/proxbus/proxbus/client"
	"github.com/proxbus/proxbus/handlers"
	"github.com/proxbus/proxbus/internal/app"
	"github.com/proxbus/proxbus/store"
)

// errNotDecided: command.approve or command.reject was refused; the message says why.
var errNotDecided = errors.New("not decided")

// newCLICommandID is a fresh command id for a command the CLI publishes.
func newCLICommandID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "cli-" + hex.EncodeToString(b)
}

// decideCmd is `proxbus approve|reject ID --actor NAME`: it publishes command.approve or
// command.reject on the command ID from --source (contract §4b) as --actor, who must not be
// the command's own actor, and waits for its answer: a line saying what was decided with
// --output text, the result document with --output json. Without --nats-url it works on a
// running `proxbus dev`.
type decideCmd struct {
	ID      string        `arg:"" optional:"" help:"The id of the command awaiting approval (proxbus pending lists them)."`
	Source  string        `name:"source" default:"${default_source}" help:"The source of the command decided on."`
	Actor   string        `name:"actor" help:"Who decides (required; recorded in the command's journal entry; not the command's own actor)."`
	Reason  string        `name:"reason" help:"Why (journaled with the decision, and in a rejected command's result)."`
	Timeout time.Duration `name:"timeout" default:"1m" help:"How long to wait for the answer."`
	natsFlags
	outputFlags
}

// Run publishes the decision and waits for its answer.
func (c *decideCmd) Run(e *cliEnv) error {
	ctx, stdout := e.ctx, e.stdout
	name := strings.Fields(e.command)[0]
	verb := "command." + name
	id := c.ID
	format, err := outputOf(&c.Output)
	if err != nil {
		return err
	}
	switch {
	case id == "":
		return fmt.Errorf("%w: proxbus %s ID --actor NAME: the id of the command awaiting approval is required (proxbus pending lists them)", errUsage, name)
	case c.Actor == "":
		return fmt.Errorf("%w: --actor is required: who %ss, recorded in the command's journal entry (it must not be the command's own actor)", errUsage, name)
	}
	conn, err := e.connectNATS(&c.natsFlags, app.InboxApprover)
	if err != nil {
		return err
	}
	defer conn.Close()
	pc, err := client.New(conn.js, client.WithSubjectPrefix(c.SubjectPrefix), client.WithSource(defaultSource), client.WithIDs(newCLICommandID))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(conn.ctx, c.Timeout)
	defer cancel()
	d := client.Decision{Source: c.Source, ID: id, Reason: c.Reason, Actor: c.Actor}
	decide := pc.Approve
	if verb == "command.reject" {
		decide = pc.Reject
	}
	res, err := decide(ctx, d)
	if err != nil {
		return err
	}
	if format == outputJSON {
		if err := writeJSONLine(stdout, res); err != nil {
			return err
		}
	}
	var out handlers.DecisionOutput
	_ = json.Unmarshal(res.Output, &out)
	if res.Status >= 400 {
		return fmt.Errorf("%w: %d %s: %s", errNotDecided, res.Status, res.Reason, res.Detail)
	}
	switch {
	case format != outputText:
	case out.Early:
		fmt.Fprintf(stdout, "%s id=%s: %s\n", out.Decision, id, res.Detail)
	default:
		fmt.Fprintf(stdout, "%s %s id=%s (requested by %s)\n", out.Decision, out.Verb, id, out.Requester)
	}
	return nil
}

// pendingCmd is `proxbus pending`: it lists the commands awaiting approval (contract §4b), oldest first: a table with
// --output text, one JSON line per approval with --output json. Without --redis-url it reads
// the store of a running `proxbus dev`.
type pendingCmd struct{ storeListFlags }

// Run prints the list.
func (c *pendingCmd) Run(e *cliEnv) error {
	return storeList[store.Approval]{
		list:   func(ctx context.Context, st *store.Store) ([]store.Approval, error) { return st.PendingApprovals(ctx) },
		header: "COMMAND\tSOURCE\tVERB\tENDPOINT\tREQUESTER\tWAITING SINCE\tEXPIRES\tWHAT\tPLAN",
		row: func(a store.Approval) string {
			expires := "-"
			if !a.Expires.IsZero() {
				expires = a.Expires.UTC().Format(time.RFC3339)
			}
			return fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s", a.Command.ID, a.Command.Source, a.Verb, a.EndpointID, a.Requester,
				a.RequestedAt.UTC().Format(time.RFC3339), expires, a.Summary, planSummary(a.Plan))
		},
		footer: func(n int) string {
			return fmt.Sprintf("%d awaiting approval (proxbus approve|reject ID --actor NAME)", n)
		},
	}.run(e, &c.storeListFlags)
}

// planSummary is one line of an approval's dry-run plan: the Proxmox writes it would send, in
// order, and where the plan stops; "-" when the approval has none.
func planSummary(raw json.RawMessage) string {
	var p handlers.Plan
	if len(raw) == 0 || json.Unmarshal(raw, &p) != nil {
		return "-"
	}
	writes := make([]string, len(p.Writes))
	for i, w := range p.Writes {
		writes[i] = w.Method + " " + w.Path
	}
	line := strings.Join(writes, ", ")
	if line == "" {
		line = "no write"
	}
	if !p.Complete {
		line += " (then stops: the rest needs Proxmox's answers)"
	}
	return line
}
