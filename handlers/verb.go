package handlers

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/store"
)

// Access says whether a verb changes Proxmox. Reads skip the allow_writes check, idempotency
// and the journal (contract §4); control verbs skip the gate too.
type Access int

const (
	// Read verbs only look.
	Read Access = iota
	// Write verbs change Proxmox and go through every pipeline step.
	Write
	// Control verbs act on other commands (command.approve, command.reject): no endpoint, no
	// Proxmox and no journal of their own; the pipeline runs them itself.
	Control
)

// Bullet is one "- name: value" line of a journal comment. Values must never be secrets.
type Bullet struct{ Name, Value string }

// Spec defines a verb. In is the validated input; its JSON form (with secret-named fields
// removed) is the request fingerprint of the Idempotency-Key window.
type Spec[In any] struct {
	// Name is the verb, e.g. "storage.pbs.create".
	Name string
	// Access is Read or Write.
	Access Access
	// Decode reads and validates the data through f; every problem is reported with f.Fail or by
	// the typed getters. The result is used only when f has no failures.
	Decode func(f *Fields) In
	// Locate (optional) resolves the input against Proxmox before idempotency — a read, such as
	// a guest name to its vmid — and returns the resolved input. Its errors are mapped like a
	// dispatch's; an outcome reached here is answered without a journal.
	Locate func(ctx context.Context, c *proxmox.Client, in In) (In, error)
	// Resource is the resource id that scopes the Idempotency-Key (storage id, vmid, node).
	Resource func(In) string
	// Exclusive (optional) names the guest or node the command must hold alone while it runs
	// (store.KindGuest or store.KindNode, and its id): commands on one guest never overlap.
	Exclusive func(In) (kind, id string)
	// JournalVMID (optional) is the vmid whose NetBox VM carries the journal entry (contract §6);
	// without it, or when NetBox has no such VM, the entry goes on the endpoint.
	JournalVMID func(In) int64
	// Secrets returns the write-only values of the input, cut out of every text proxbus emits.
	Secrets func(In) []string
	// Describe returns the verb's own journal bullets (never a secret).
	Describe func(In) []Bullet
	// Dispatch performs the verb, sending every Proxmox write through [Exec.Write]. A returned
	// error means the verb did not reach an outcome: the pipeline maps it, waits for an
	// unavailable dependency when nothing was written, and confirms (Confirm) when a write may
	// have taken effect. A verb never decides itself whether a write may be repeated.
	Dispatch func(ctx context.Context, x *Exec, in In) (Outcome, error)
	// Confirm (write verbs, optional) tells by reading whether the verb's write took effect,
	// when its answer was lost or an earlier attempt stopped after it may have been sent, and
	// returns the outcome it finds; it never sends that write again. Nil means the write cannot
	// be confirmed by reading (a reboot): the command answers 502 proxmox_write_unconfirmed.
	Confirm func(ctx context.Context, x *Exec, in In) (Outcome, error)
	// Gone (write verbs, optional) answers a command that had started on resource (its
	// located resource id, "" when unknown), may have sent the writes named in sent (nil: any),
	// and whose object can no longer be located when it resumes: its answer, and true, when
	// the object being gone tells (a delete whose DELETE may have left has its effect); false
	// leaves the pipeline's 502 proxmox_write_unconfirmed.
	Gone func(resource string, sent []string) (Outcome, bool)
	// Cancellable (write verbs, optional) names the writes (their steps) whose Proxmox task
	// may be stopped when the command is cancelled after it started (contract §4 "Cancel"),
	// each with what stopping it leaves behind, for the result's detail. Without it a started
	// command is finished, not cancelled.
	Cancellable map[string]string
}

// Verb is a [Spec] with its input type erased, as the pipeline and the registry hold it.
type Verb interface {
	// VerbName is the verb's name.
	VerbName() string
	// VerbAccess is Read or Write.
	VerbAccess() Access
	// VerbCancellable is [Spec.Cancellable].
	VerbCancellable() map[string]string
	prepare(data json.RawMessage) (prepared, *Outcome)
	prepareSealed(data json.RawMessage, s sealing) (prepared, *Outcome)
}

// prepared is a validated command, ready to run.
type prepared struct {
	resource    string
	fingerprint string
	secrets     []string
	bullets     []Bullet
	journalVMID int64
	exclusiveOn func(endpointID int64) (store.ResourceKey, bool)
	// locate resolves the command against Proxmox; nil once resolved or when nothing needs it.
	locate   func(ctx context.Context, c *proxmox.Client) (prepared, error)
	dispatch func(ctx context.Context, x *Exec) (Outcome, error)
	confirm  func(ctx context.Context, x *Exec) (Outcome, error)  // nil: cannot be confirmed
	gone     func(resource string, sent []string) (Outcome, bool) // nil: no answer of its own
}

// VerbName implements [Verb].
func (s Spec[In]) VerbName() string { return s.Name }

// VerbAccess implements [Verb].
func (s Spec[In]) VerbAccess() Access { return s.Access }

// VerbCancellable implements [Verb].
func (s Spec[In]) VerbCancellable() map[string]string { return s.Cancellable }

// prepare validates data with no sealing key and plain secrets allowed.
func (s Spec[In]) prepare(data json.RawMessage) (prepared, *Outcome) {
	return s.prepareSealed(data, sealing{})
}

// prepareSealed validates data, opening sealed secret fields with sealed.opener to check them
// and refusing plain ones when sealed.require.
func (s Spec[In]) prepareSealed(data json.RawMessage, sealed sealing) (prepared, *Outcome) {
	f, err := newFields(data)
	if err != nil {
		return prepared{}, invalidBody(nil, "data must be a JSON object")
	}
	if out := sealed.notSealed(data); out != nil {
		return prepared{}, out
	}
	f.sealing = sealed
	in := s.Decode(f)
	if out := f.outcome(); out != nil {
		return prepared{}, out
	}
	p, err := s.bind(in)
	if err != nil {
		return prepared{}, invalidBody(nil, "data cannot be fingerprinted")
	}
	if s.Locate != nil {
		p.locate = func(ctx context.Context, c *proxmox.Client) (prepared, error) {
			located, err := s.Locate(ctx, c, in)
			if err != nil {
				return prepared{}, err
			}
			return s.bind(located)
		}
	}
	return p, nil
}

// exclusive is the resource the command must hold alone, if any.
func (p prepared) exclusive(endpointID int64) (store.ResourceKey, bool) {
	if p.exclusiveOn == nil {
		return store.ResourceKey{}, false
	}
	return p.exclusiveOn(endpointID)
}

// bind derives everything the pipeline needs from a (validated, possibly located) input.
func (s Spec[In]) bind(in In) (prepared, error) {
	fp, err := fingerprint(in)
	if err != nil {
		return prepared{}, err
	}
	p := prepared{
		resource:    s.Resource(in),
		fingerprint: fp,
		dispatch:    func(ctx context.Context, x *Exec) (Outcome, error) { return s.Dispatch(ctx, x, in) },
		gone:        s.Gone,
	}
	if s.Confirm != nil {
		p.confirm = func(ctx context.Context, x *Exec) (Outcome, error) { return s.Confirm(ctx, x, in) }
	}
	if s.Secrets != nil {
		p.secrets = s.Secrets(in)
	}
	if s.Describe != nil {
		p.bullets = s.Describe(in)
	}
	if s.JournalVMID != nil {
		p.journalVMID = s.JournalVMID(in)
	}
	if s.Exclusive != nil {
		kind, id := s.Exclusive(in)
		p.exclusiveOn = func(endpointID int64) (store.ResourceKey, bool) {
			return store.ResourceKey{EndpointID: endpointID, Kind: kind, ID: id}, id != ""
		}
	}
	return p, nil
}

// Registry maps verb names to verbs.
type Registry struct{ verbs map[string]Verb }

// NewRegistry registers verbs; a name registered twice keeps the last one.
func NewRegistry(verbs ...Verb) *Registry {
	r := &Registry{verbs: make(map[string]Verb, len(verbs))}
	for _, v := range verbs {
		r.verbs[v.VerbName()] = v
	}
	return r
}

// Lookup returns the verb with this name.
func (r *Registry) Lookup(name string) (Verb, bool) {
	v, ok := r.verbs[name]
	return v, ok
}

// Names returns the registered verb names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.verbs))
	for n := range r.verbs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Builtin returns every verb proxbus implements: one row per verb.
func Builtin() []Verb {
	return []Verb{
		StoragePBSCreate(),
		StoragePBSUpdate(),
		StoragePBSDelete(),
		VMStart(),
		VMStop(),
		VMReboot(),
		VMSuspend(),
		VMResume(),
		VMSnapshotList(),
		VMSnapshotCreate(),
		VMSnapshotDelete(),
		VMSnapshotRollback(),
		NodeReboot(),
		VMConfigGet(),
		VMList(),
		VMProvision(),
		CTProvision(),
		VMBackup(),
		VMMigrate(),
		VMDelete(),
		VMRestore(),
		VMBackupList(),
		VMBackupDelete(),
		CommandApprove(),
		CommandReject(),
		CommandCancel(),
		ScheduleAdd(),
		ScheduleRemove(),
	}
}
