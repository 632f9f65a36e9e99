package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/proxbus/proxbus/events"
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

// cmdDecide publishes command.approve or command.reject (verb) on the command ID from
// --source (contract §4b) as --actor, who must not be the command's own actor, and waits for
// its answer: a line saying what was decided with --output text, the result document with
// --output json. Without --nats-url it works on a running `proxbus dev`.
func cmdDecide(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) error {
	name := map[string]string{"command.approve": "approve", "command.reject": "reject"}[verb]
	fs := newFlagSet(name, stderr)
	natsURL := addNATSURLFlag(fs)
	natsSec := addNATSSecurityFlags(fs, app.InboxApprover)
	prefix := addSubjectPrefixFlag(fs, "subject prefix")
	source := fs.str("source", defaultSource, "the source of the command decided on")
	reason := fs.str("reason", "", "why (optional; journaled with the decision, and in a rejected command's result)")
	actor := fs.str("actor", "", "who decides (required; recorded in the command's journal entry; not the command's own actor)")
	timeout := fs.duration("timeout", time.Minute, "how long to wait for the answer")
	output := outputFlag(fs)
	id, err := fs.parseWithArg(args)
	if err != nil {
		return err
	}
	format, err := outputOf(output)
	if err != nil {
		return err
	}
	switch {
	case id == "":
		return fmt.Errorf("%w: proxbus %s ID --actor NAME: the id of the command awaiting approval is required (proxbus pending lists them)", errUsage, name)
	case *actor == "":
		return fmt.Errorf("%w: --actor is required: who %ss, recorded in the command's journal entry (it must not be the command's own actor)", errUsage, name)
	}
	fs.natsFromDev(stderr, natsURL, prefix)
	nc, js, err := app.ConnectClient(*natsURL, natsSec.security())
	if err != nil {
		return err
	}
	defer nc.Close()
	data, _ := json.Marshal(handlers.DecisionInput{CommandID: id, CommandSource: *source, Reason: *reason})
	cmd := events.Command{ID: newCLICommandID(), Source: defaultSource, Verb: verb, Time: time.Now().UTC(), Actor: *actor, Data: data}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := app.SendCommand(ctx, js, events.NewSubjects(*prefix), cmd, app.SendOptions{})
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

// cmdPending lists the commands awaiting approval (contract §4b), oldest first: a table with
// --output text, one JSON line per approval with --output json. Without --redis-url it reads
// the store of a running `proxbus dev`.
func cmdPending(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return storeList[store.Approval]{
		name:   "pending",
		list:   func(ctx context.Context, st *store.Store) ([]store.Approval, error) { return st.PendingApprovals(ctx) },
		header: "COMMAND\tSOURCE\tVERB\tENDPOINT\tREQUESTER\tWAITING SINCE\tEXPIRES\tWHAT",
		row: func(a store.Approval) string {
			expires := "-"
			if !a.Expires.IsZero() {
				expires = a.Expires.UTC().Format(time.RFC3339)
			}
			return fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s", a.Command.ID, a.Command.Source, a.Verb, a.EndpointID, a.Requester,
				a.RequestedAt.UTC().Format(time.RFC3339), expires, a.Summary)
		},
		footer: func(n int) string {
			return fmt.Sprintf("%d awaiting approval (proxbus approve|reject ID --actor NAME)", n)
		},
	}.run(ctx, args, stdout, stderr)
}
