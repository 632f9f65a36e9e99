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
	CommandID     string     `json:"command_id"`
	CommandSource string     `json:"command_source"`
	Verb          string     `json:"verb"`
	Seq           int        `json:"seq"`
	Step          string     `json:"step"`
	Status        StepStatus `json:"status"`
	UPID          string     `json:"upid,omitempty"`
	Detail        string     `json:"detail,omitempty"`
	// Attempt counts the command's attempts, 1 first; only a failed attempt starts another
	// (waiting spends none).
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
}

// Result is the data of a command's one result event (type proxbus.<verb>.result). Status has
// HTTP semantics; Result is the outcome word; Reason the machine-readable error code; Fields
// names fields (never values); Output is the verb's own payload. JournalFinalized and Replayed
// are always present in the JSON, the optional fields only when set.
type Result struct {
	CommandID        string          `json:"command_id"`
	CommandSource    string          `json:"command_source"`
	Verb             string          `json:"verb"`
	EndpointID       *int64          `json:"endpoint_id,omitempty"`
	Status           int             `json:"status"`
	Result           string          `json:"result"`
	Reason           string          `json:"reason,omitempty"`
	Detail           string          `json:"detail,omitempty"`
	Fields           []string        `json:"fields,omitempty"`
	ProxmoxStatus    int             `json:"proxmox_status,omitempty"`
	JournalEntryURL  string          `json:"journal_entry_url,omitempty"`
	JournalFinalized bool            `json:"journal_finalized"`
	Replayed         bool            `json:"replayed"`
	IdempotencyKey   string          `json:"idempotency_key,omitempty"`
	Output           json.RawMessage `json:"output,omitempty"`
}

// JournalRepaired is the data of a journal event (type proxbus.journal.repaired): a terminal
// journal update that failed earlier has now been applied.
type JournalRepaired struct {
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
