package client

import "context"

// Decision names a command another command decides on (contract §4, §4b): approve, reject or
// cancel it.
type Decision struct {
	// Source and ID identify the command decided on (`proxbus pending` lists those awaiting
	// approval).
	Source, ID string
	// Reason is why, in the decider's words (optional): journaled with the decision, and in a
	// rejected or cancelled command's result detail.
	Reason string
	// Actor is who decides; "" is the client's (see [WithActor]). An approval or rejection
	// needs an actor other than the command's own (403 approver_is_requester).
	Actor string
}

// Approve sends command.approve for d's command and returns its result: 200 ok once the
// decision is kept, or a refusal (404 command_not_found, 409 not_awaiting_approval, 403
// approver_is_requester). The approved command then runs on its own.
func (c *Client) Approve(ctx context.Context, d Decision) (Result, error) {
	return c.decide(ctx, CommandApprove{CommandID: d.ID, CommandSource: d.Source, Reason: d.Reason}, d.Actor)
}

// Reject sends command.reject for d's command and returns its result, as [Client.Approve];
// the rejected command is answered 403 approval_rejected.
func (c *Client) Reject(ctx context.Context, d Decision) (Result, error) {
	return c.decide(ctx, CommandReject{CommandID: d.ID, CommandSource: d.Source, Reason: d.Reason}, d.Actor)
}

// Cancel sends command.cancel for d's command and returns its result: a command that has not
// started, or whose Proxmox task can be stopped, is answered 410 command_cancelled; any other
// started command is finished and the cancel answers 409 not_cancellable (contract §4).
func (c *Client) Cancel(ctx context.Context, d Decision) (Result, error) {
	return c.decide(ctx, CommandCancel{CommandID: d.ID, CommandSource: d.Source, Reason: d.Reason}, d.Actor)
}

func (c *Client) decide(ctx context.Context, in Input, actor string) (Result, error) {
	return c.Send(ctx, Command{Input: in, Actor: actor})
}
