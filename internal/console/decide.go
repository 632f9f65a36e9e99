package console

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/handlers"
)

// DefaultActor is the actor of the decisions an operator makes in the console when
// [Config.Actor] is empty.
const DefaultActor = "console:operator"

// Source is the source of the commands the console publishes (its decisions).
const Source = "urn:proxbus:console"

// maxReason is the longest reason a decision may give, in bytes (as command.approve,
// command.reject and command.cancel take it).
const maxReason = 1024

// decision is one of the decisions an operator can make on a command from its page.
type decision struct {
	// Verb is the control verb published.
	Verb string
	// Button and Question label the confirmation page.
	Button, Question string
	// ReasonRequired is set when the decision must say why.
	ReasonRequired bool
	// Applies says whether the decision is offered for cmd.
	Applies func(cmd Command) bool
}

// decisions are the console's decisions by their path segment.
var decisions = map[string]decision{
	"approve": {Verb: "command.approve", Button: "Approve", Question: "Approve %s %s?",
		Applies: func(c Command) bool { return c.State() == handlers.StateAwaitingApproval }},
	"reject": {Verb: "command.reject", Button: "Reject", Question: "Reject %s %s?", ReasonRequired: true,
		Applies: func(c Command) bool { return c.State() == handlers.StateAwaitingApproval }},
	"cancel": {Verb: "command.cancel", Button: "Cancel command", Question: "Cancel %s %s?",
		Applies: func(c Command) bool { return !c.Final() }},
}

// decisionOf reads the {ref} and {action} path values: the command and the decision asked
// for, or a problem page answered and false.
func (c *Console) decisionOf(w http.ResponseWriter, r *http.Request, s session) (Command, string, decision, bool) {
	action := r.PathValue("action")
	d, ok := decisions[action]
	if !ok {
		c.problem(w, r, s, http.StatusNotFound, "No such page", "A command can be approved, rejected or cancelled, nothing else.")
		return Command{}, "", d, false
	}
	cmd, ok := c.ix.Get(r.PathValue("ref"))
	if !ok {
		c.problem(w, r, s, http.StatusNotFound, "Command not found",
			fmt.Sprintf("No command %q is among the newest %d commands the console holds: decide on it with `proxbus %s ID`.", r.PathValue("ref"), c.cfg.History, action))
		return cmd, "", d, false
	}
	return cmd, action, d, true
}

func (c *Console) decideConfirm(w http.ResponseWriter, r *http.Request, s session) {
	cmd, action, d, ok := c.decisionOf(w, r, s)
	if !ok {
		return
	}
	detail := fmt.Sprintf("%s is published on the commands stream with command_id %s and command_source %s, as %s. Its answer shows on its own page.",
		d.Verb, cmd.ID, cmd.Source, c.actor())
	if !d.Applies(cmd) {
		detail = fmt.Sprintf("The command is %s now: %s will most likely be refused. ", cmd.State(), d.Verb) + detail
	}
	c.render(w, http.StatusOK, "confirm", c.view(s, "commands", d.Button+"?", confirmData{
		Question: fmt.Sprintf(d.Question, cmd.Verb, cmd.ID), Detail: detail,
		Action: cmdURL(cmd.Ref) + "/" + action, Button: d.Button, Back: cmdURL(cmd.Ref),
		Reason: true, ReasonRequired: d.ReasonRequired,
	}))
}

// decide publishes the decision on the command, as the console's actor, and shows the
// command's page with a link to the decision's.
func (c *Console) decide(w http.ResponseWriter, r *http.Request, s session) {
	cmd, action, d, ok := c.decisionOf(w, r, s)
	if !ok {
		return
	}
	reason := strings.Join(strings.Fields(r.PostFormValue("reason")), " ") // one line, as the verbs take it
	switch {
	case d.ReasonRequired && reason == "":
		c.problem(w, r, s, http.StatusBadRequest, "Not sent", "A rejection needs a reason: go back and say why (it is journaled and in the command's result).")
		return
	case len(reason) > maxReason || !utf8.ValidString(reason) || strings.ContainsFunc(reason, unicode.IsControl):
		c.problem(w, r, s, http.StatusBadRequest, "Not sent", fmt.Sprintf("The reason has %d bytes; give at most %d of printable UTF-8 text.", len(reason), maxReason))
		return
	}
	data, err := json.Marshal(handlers.DecisionInput{CommandID: cmd.ID, CommandSource: cmd.Source, Reason: reason})
	if err != nil {
		c.problem(w, r, s, http.StatusInternalServerError, "Not sent", "The decision could not be encoded: "+err.Error())
		return
	}
	dc := events.Command{ID: newCommandID(), Source: Source, Verb: d.Verb, Time: c.cfg.Now().UTC(), Actor: c.actor(), Data: data}
	if err := c.publish(r.Context(), dc); err != nil {
		c.log.Warn("console: decision not published", "verb", d.Verb, "command_id", cmd.ID, "err", err)
		c.problem(w, r, s, http.StatusBadGateway, "Not sent",
			fmt.Sprintf("%s was not published on the commands stream: %v. Nothing was decided; try again, or use `proxbus %s %s`.", d.Verb, err, action, cmd.ID))
		return
	}
	c.log.Info("console: decision published", "verb", d.Verb, "command_id", cmd.ID, "command_source", cmd.Source,
		"decision_id", dc.ID, "actor", dc.Actor, "via", s.via)
	back := url.Values{"sent": {d.Verb}, "as": {events.Ref(dc.Source, dc.ID)}}
	http.Redirect(w, r, cmdURL(cmd.Ref)+"?"+back.Encode(), http.StatusSeeOther)
}

// publishWait bounds a decision's publish: a publish the NATS server refuses for want of
// permission is never answered, only reported to the connection.
const publishWait = 10 * time.Second

// ErrNotPermitted is wrapped by the error of a decision the NATS server did not let the
// replica's user publish.
var ErrNotPermitted = errors.New("the NATS user of this replica may not publish it")

// publish publishes dc on the commands stream and waits for the stream's acknowledgement.
func (c *Console) publish(ctx context.Context, dc events.Command) error {
	msg, err := events.EncodeBinary(c.cfg.Subjects, dc)
	if err != nil {
		return err
	}
	wait := c.publishWait
	if wait <= 0 {
		wait = publishWait
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	_, err = c.cfg.JetStream.PublishMsg(ctx, msg)
	if err == nil {
		return nil
	}
	if last := c.cfg.JetStream.Conn().LastError(); errors.Is(last, nats.ErrPermissionViolation) && strings.Contains(last.Error(), msg.Subject) {
		return fmt.Errorf("%w (the server refused %s: allow it to the user in the NATS server's permissions, e.g. deploy/nats/accounts.conf, or decide with the approver user's CLI)",
			ErrNotPermitted, msg.Subject)
	}
	return err
}

// actor is who the console's decisions are made as.
func (c *Console) actor() string {
	if c.cfg.Actor == "" {
		return DefaultActor
	}
	return c.cfg.Actor
}

// newCommandID is a fresh id for a command the console publishes.
func newCommandID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "console-" + hex.EncodeToString(b)
}

// cmdURL is the page of the command with ref.
func cmdURL(ref string) string { return Path + "/commands/" + url.PathEscape(ref) }
