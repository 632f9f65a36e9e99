package events

import "net/http"

// InvalidCommandResult is the 400 invalid_command result for a poison message whose id is
// readable, and the origin to publish it under. ok is false when p is nil or no id could be
// read: then no result is published. The result is refused, reason invalid_command, and
// Detail = p.Reason (a fixed phrase, never a value from the message).
func InvalidCommandResult(p *PoisonError) (Result, Origin, bool) {
	if p == nil || p.ID == "" {
		return Result{}, Origin{}, false
	}
	o := Origin{ID: p.ID, Source: p.Source, Verb: p.Verb}
	return Result{
		CommandID:     p.ID,
		CommandSource: p.Source,
		Verb:          p.Verb,
		Status:        http.StatusBadRequest,
		Result:        ResultRefused,
		Reason:        ReasonInvalidCommand,
		Detail:        p.Reason,
	}, o, true
}
