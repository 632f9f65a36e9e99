package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/proxbus/proxbus/internal/guestconfig"
	"github.com/proxbus/proxbus/internal/netbox"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// Result words (contract §9).
const (
	ResultCreated        = "created"
	ResultAlreadyPresent = "already_present"
	ResultAlreadyAbsent  = "already_absent"
	ResultOK             = "ok"
	ResultFailed         = "failed"
	ResultRefused        = "refused"
)

// Reasons: the machine-readable error codes of contract §4–§9.
const (
	ReasonEndpointIDRequired       = "endpoint_id_required"
	ReasonEndpointNotFound         = "endpoint_not_found"
	ReasonEndpointWritesDisabled   = "endpoint_writes_disabled"
	ReasonNetBoxUnavailable        = "netbox_unavailable"
	ReasonInvalidBody              = "invalid_body"
	ReasonInvalidCommand           = "invalid_command"
	ReasonIdempotencyKeyReused     = "idempotency_key_reused"
	ReasonJournalUnavailable       = "netbox_journal_unavailable"
	ReasonJournalFinalization      = "netbox_journal_finalization_failed"
	ReasonProxmoxRefused           = "proxmox_refused"
	ReasonProxmoxUnreachable       = "proxmox_unreachable"
	ReasonStorageConflict          = "storage_conflict"
	ReasonProxmoxCreateUnconfirmed = "proxmox_create_unconfirmed"
	ReasonVMNotFound               = "vm_not_found"
	ReasonVMAmbiguous              = "vm_ambiguous"
	ReasonVMNotRunning             = "vm_not_running"
	ReasonUnsupportedForContainer  = "unsupported_for_container"
	ReasonReservedSnapshotName     = "reserved_snapshot_name"
	ReasonSnapshotConflict         = "snapshot_conflict"
	ReasonSnapshotNotFound         = "snapshot_not_found"
	ReasonTaskFailed               = "task_failed"
	ReasonConfigReadFailed         = "config_read_failed"
	ReasonExtraNetworksLocked      = "extra_networks_locked"
	ReasonTargetStorageUnavailable = "target_storage_unavailable"
	// ReasonTemplateStorageNotShared: a cross-node vm.provision from a template with a
	// volume on storage that is not shared, which Proxmox refuses to clone to another node.
	ReasonTemplateStorageNotShared = "template_storage_not_shared"
	ReasonStorageLookupFailed      = "storage_lookup_failed"
	ReasonRelocateDiskFailed       = "relocate_disk_failed"
	ReasonProxmoxWriteUnconfirmed  = "proxmox_write_unconfirmed"
	ReasonAttemptsExhausted        = "attempts_exhausted"
)

// unconfirmedWrite is the outcome of a resumed command whose earlier attempt may have sent a
// write that cannot be confirmed by reading: it is never sent a second time.
func unconfirmedWrite() Outcome {
	return Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxWriteUnconfirmed,
		Detail: "an earlier attempt of this command may have sent the write and stopped; it is not sent twice"}
}

// ErrWriteUnconfirmed: reading could not find the effect of a write that may have been sent
// (its answer was lost, or an earlier attempt stopped after its mark); the command answers 502
// proxmox_write_unconfirmed and the write is never sent again. [Exec.Unconfirmed] makes one.
var ErrWriteUnconfirmed = errors.New("the write may have been sent, but reading cannot find its effect")

// unconfirmedError is ErrWriteUnconfirmed with the write's task (when known) and what was
// looked at.
type unconfirmedError struct{ upid, detail string }

func (e *unconfirmedError) Error() string {
	if e.detail == "" {
		return ErrWriteUnconfirmed.Error()
	}
	return ErrWriteUnconfirmed.Error() + ": " + e.detail
}

func (e *unconfirmedError) Unwrap() error { return ErrWriteUnconfirmed }

// errExtraNetworksLocked refuses extra NICs when the cloud network is enforced.
var errExtraNetworksLocked = errors.New("extra_networks are locked by enforce_cloud_network")

// fieldError is a field that is well-formed but refused against Proxmox's state (a bridge that
// does not exist on the node): 422 invalid_body naming the field.
type fieldError struct{ field string }

func (e fieldError) Error() string { return "invalid " + e.field }

// Result words of guest power verbs.
const (
	ResultAlreadyRunning = "already_running"
	ResultAlreadyStopped = "already_stopped"
)

// Outcome is what a verb (or the pipeline) concluded. Status carries HTTP semantics.
type Outcome struct {
	Status        int
	Result        string
	Reason        string
	Detail        string
	Fields        []string
	ProxmoxStatus int
	// UPID is the Proxmox task of the write, recorded in the journal.
	UPID string
	// Output is the verb's own payload, marshalled into the result's output.
	Output any
	// Bullets are the verb's journal bullets that only the outcome knows (a backup's volid and
	// size), after the ones its input gives ([Spec.Describe]). Never a secret.
	Bullets []Bullet
}

// journalKind is the NetBox journal kind for a terminal outcome (contract §6).
func (o Outcome) journalKind() netbox.Kind {
	switch {
	case o.Status == 201:
		return netbox.KindSuccess
	case o.Status < 400:
		return netbox.KindInfo
	default:
		return netbox.KindWarning
	}
}

// errTransient marks a failure that happened before any write and may succeed after a wait.
var errTransient = errors.New("transient failure before any write")

// errInternal marks a failure of proxbus itself (a panic, an unencodable result): a failed
// attempt.
var errInternal = errors.New("internal error")

// classify maps an error of a verb's Locate, Dispatch or Confirm to an outcome, or says that it
// is not an outcome: a dependency was unavailable (the command waits), or the attempt failed.
func classify(err error) (Outcome, failure) {
	var apiErr *proxmox.APIError
	var taskErr *proxmox.TaskError
	refused := func(status int, reason string) (Outcome, failure) {
		return Outcome{Status: status, Result: ResultRefused, Reason: reason}, final
	}
	var fieldErr fieldError
	var unconfirmed *unconfirmedError
	switch {
	case errors.As(err, &unconfirmed):
		out := unconfirmedWrite()
		out.UPID = unconfirmed.upid
		if unconfirmed.detail != "" {
			out.Detail = unconfirmed.detail
		}
		return out, final
	case errors.As(err, &fieldErr):
		return *invalidBody([]string{fieldErr.field}, ""), final
	case errors.Is(err, errExtraNetworksLocked):
		return refused(422, ReasonExtraNetworksLocked)
	case errors.Is(err, proxmox.ErrVMNotFound):
		out, f := refused(404, ReasonVMNotFound)
		out.Detail = guestLookupDetail(err)
		return out, f
	case errors.Is(err, proxmox.ErrVMAmbiguous):
		out, f := refused(409, ReasonVMAmbiguous)
		out.Detail = guestLookupDetail(err)
		return out, f
	case errors.Is(err, proxmox.ErrVMNotRunning):
		return refused(409, ReasonVMNotRunning)
	case errors.Is(err, proxmox.ErrUnsupportedForContainer):
		return refused(409, ReasonUnsupportedForContainer)
	case errors.Is(err, proxmox.ErrReservedSnapshotName):
		return refused(422, ReasonReservedSnapshotName)
	case errors.Is(err, guestconfig.ErrMalformed):
		return Outcome{Status: 502, Result: ResultFailed, Reason: ReasonConfigReadFailed, Detail: err.Error()}, final
	case errors.As(err, &taskErr):
		detail := "task exit status: " + taskErr.ExitStatus
		if taskErr.LogError != "" {
			detail += "; its log: " + taskErr.LogError
		}
		return Outcome{Status: 502, Result: ResultFailed, Reason: ReasonTaskFailed, UPID: taskErr.UPID, Detail: detail}, final
	case errors.Is(err, proxmox.ErrUnauthorized), netbox.ShouldWait(err):
		// A refused token is fixed by the operator, not by the command: it waits.
		return Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxUnreachable, Detail: err.Error()}, unavailable
	case errors.As(err, &apiErr) && !proxmox.IsTransient(err):
		return Outcome{
			Status: 502, Result: ResultFailed, Reason: ReasonProxmoxRefused,
			ProxmoxStatus: apiErr.Status, Fields: apiErr.ParamNames(), Detail: apiErr.Message,
		}, final
	case errors.Is(err, errTransient), proxmox.IsTransient(err), errors.Is(err, proxmox.ErrUnreachable),
		errors.Is(err, context.DeadlineExceeded):
		return Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxUnreachable, Detail: err.Error()}, unavailable
	default:
		return Outcome{Status: 502, Result: ResultFailed, Reason: ReasonProxmoxUnreachable, Detail: err.Error()}, attemptFailed
	}
}

// waitDetail is the detail of the `retrying` step of a command that waits for err before any
// write: a token refused by Proxmox (401) or by NetBox (401/403) says so and what to fix, an
// unavailable NetBox says it is NetBox; anything else is fallback. The texts are fixed, so
// consecutive waits for one cause publish one step.
func waitDetail(err error, fallback string) string {
	switch {
	case errors.Is(err, proxmox.ErrUnauthorized):
		return "Proxmox refused the endpoint's API token (HTTP 401); fix token_id or its secret in the endpoints file; nothing was written; waiting"
	case errors.Is(err, netbox.ErrUnauthorized):
		return fmt.Sprintf("NetBox refused the token (HTTP %d); fix --netbox-token (PROXBUS_NETBOX_TOKEN) or its permissions in NetBox; waiting",
			netbox.StatusOf(err))
	case errors.Is(err, netbox.ErrUnavailable):
		return "NetBox is unavailable; nothing was written; waiting"
	}
	return fallback
}

// guestLookupDetail is the detail of vm_not_found and vm_ambiguous when err is a failed guest
// lookup: where it looked (the endpoint's cluster resources, by vmid or exact name, the nodes
// listing guests) or the candidates a name matched (vmid, type, node), so the producer can
// address one by vmid. Only names, vmids and node names appear. Other errors give "".
func guestLookupDetail(err error) string {
	var le *proxmox.GuestLookupError
	if !errors.As(err, &le) {
		return ""
	}
	if len(le.Candidates) > 1 {
		parts := make([]string, len(le.Candidates))
		for i, g := range le.Candidates {
			parts[i] = fmt.Sprintf("%d (%s on %s)", g.VMID, g.Type, g.Node)
		}
		return fmt.Sprintf("name %q matches %d guests: %s; address one by vmid", le.Ref, len(le.Candidates), strings.Join(parts, ", "))
	}
	what := fmt.Sprintf("no guest named %q (names match exactly)", le.Ref)
	if le.ByVMID {
		what = "no guest with vmid " + le.Ref
	}
	if le.Guests == 0 {
		return what + " in the endpoint's cluster resources (/cluster/resources?type=vm lists no VM or container)"
	}
	return fmt.Sprintf("%s in the endpoint's cluster resources (/cluster/resources?type=vm: %d VMs and containers on nodes %s)",
		what, le.Guests, strings.Join(le.Nodes, ", "))
}
