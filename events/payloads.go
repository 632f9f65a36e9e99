package events

import (
	"encoding/json"
	"time"
)

// StepStatus is the state a step event reports.
type StepStatus string

// Step states (contract §3).
const (
	StepStarted  StepStatus = "started"
	StepDone     StepStatus = "done"
	StepError    StepStatus = "error"
	StepSkipped  StepStatus = "skipped"
	StepRetrying StepStatus = "retrying"
	StepRunning  StepStatus = "running"
	StepWaiting  StepStatus = "waiting"
)

// Step is the data of a step event (type proxbus.<verb>.step). Seq increases by one per
// command; the emitter fills CommandID, CommandSource and Verb from the [Origin].
type Step struct {
	// CommandID, CommandSource and Verb identify the command the step belongs to.
	CommandID     string `json:"command_id"`
	CommandSource string `json:"command_source"`
	Verb          string `json:"verb"`
	// Actor and EndpointID are the command's actor and endpoint (from the [Origin]); empty
	// and nil when unknown.
	Actor      string `json:"actor,omitempty"`
	EndpointID *int64 `json:"endpoint_id,omitempty"`
	// Producer is the verified producer key of a signed command (contract §8a), "" when the
	// command is not signed.
	Producer string `json:"producer,omitempty"`
	// Seq numbers the command's step events from 1, across its deliveries.
	Seq int `json:"seq"`
	// Step names the step; Status is its state.
	Step   string     `json:"step"`
	Status StepStatus `json:"status"`
	// UPID is the Proxmox task of the step; "" when it has none.
	UPID string `json:"upid,omitempty"`
	// Detail is what the step says (for StepWaiting, what the command waits for), secrets
	// redacted.
	Detail string `json:"detail,omitempty"`
	// Progress, on a StepRunning step of a long Proxmox task, is how far the task is, as
	// read from its log; nil when the log gives none.
	Progress *Progress `json:"progress,omitempty"`
	// Plan, on the StepWaiting step of a command awaiting approval, is its dry-run plan
	// (contract §4a, §4b: the outcome expected and the Proxmox writes it would send), for the
	// approvers; nil otherwise.
	Plan json.RawMessage `json:"plan,omitempty"`
	// Attempt counts the command's attempts, 1 first; only a failed attempt starts another
	// (waiting spends none).
	Attempt int `json:"attempt"`
	// At is when the step's state was reached; the event's time.
	At time.Time `json:"at"`
}

// Progress is how far a long Proxmox task is (contract §3): Done of Total, both counted in
// Unit, ProgressBytes or ProgressPercent (Total 100). Done never exceeds Total.
type Progress struct {
	Done  int64  `json:"done"`
	Total int64  `json:"total"`
	Unit  string `json:"unit"`
}

// Units of a [Progress].
const (
	ProgressBytes   = "bytes"
	ProgressPercent = "percent"
)

// Result is the data of a command's one result event (type proxbus.<verb>.result).
// Replayed is always present in the JSON, the optional fields only when set; journal_finalized
// only when a journal entry was written for the command (contract §3).
type Result struct {
	// CommandID, CommandSource and Verb identify the command.
	CommandID     string `json:"command_id"`
	CommandSource string `json:"command_source"`
	Verb          string `json:"verb"`
	// EndpointID is the command's endpoint; nil when it has none.
	EndpointID *int64 `json:"endpoint_id,omitempty"`
	// Actor is who asked (from the [Origin]); "" when unknown.
	Actor string `json:"actor,omitempty"`
	// Producer is the verified producer key of a signed command (contract §8a), "" when the
	// command is not signed.
	Producer string `json:"producer,omitempty"`
	// Status is an HTTP status (100–599).
	Status int `json:"status"`
	// Result is the outcome word; Reason is the machine-readable error code, "" when none.
	Result string `json:"result"`
	Reason string `json:"reason,omitempty"`
	// Detail is free text, secrets redacted; it never quotes a value of the command.
	Detail string `json:"detail,omitempty"`
	// Fields names the fields concerned, never their values.
	Fields []string `json:"fields,omitempty"`
	// ProxmoxStatus is Proxmox's HTTP status when Proxmox refused the command.
	ProxmoxStatus int `json:"proxmox_status,omitempty"`
	// JournalEntryURL is the command's NetBox journal entry; JournalFinalized, set exactly
	// when there is one, says whether its terminal update has been applied.
	JournalEntryURL  string `json:"journal_entry_url,omitempty"`
	JournalFinalized *bool  `json:"journal_finalized,omitempty"`
	// Replayed says whether the command's result had already been published and this one
	// repeats it.
	Replayed bool `json:"replayed"`
	// IdempotencyKey is the command's idempotencykey; "" when it has none.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Output is the verb's own JSON payload; secret-named members are redacted by the Emitter.
	Output json.RawMessage `json:"output,omitempty"`
}

// Finalized reports whether the command has a journal entry whose terminal update has been
// applied.
func (r Result) Finalized() bool { return r.JournalFinalized != nil && *r.JournalFinalized }

// JournalPending reports whether the command has a journal entry still waiting for its
// terminal update (journal_finalized: false).
func (r Result) JournalPending() bool { return r.JournalFinalized != nil && !*r.JournalFinalized }

// JournalRepaired is the data of a journal event (type proxbus.journal.repaired): a terminal
// journal update that failed earlier has now been applied.
type JournalRepaired struct {
	// CommandID is the command whose journal entry was repaired; JournalEntryURL is the entry.
	CommandID       string `json:"command_id"`
	JournalEntryURL string `json:"journal_entry_url"`
	// RepairedBy is RepairedByReplay or RepairedByRepairer.
	RepairedBy string `json:"repaired_by"`
}

// Values of JournalRepaired.RepairedBy.
const (
	RepairedByReplay   = "replay"
	RepairedByRepairer = "repairer"
)

// Result words and reasons this package itself produces.
const (
	ResultRefused        = "refused"
	ReasonInvalidCommand = "invalid_command"
)
