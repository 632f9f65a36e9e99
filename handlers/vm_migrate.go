package handlers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxbus/proxbus/events"
	"github.com/proxbus/proxbus/internal/proxmox"
)

// ReasonMigrationPreconditionFailed (409): vm.migrate found, before any write, that the
// migration cannot or may not run: the target node is offline or not allowed for the guest
// (its storages, mapped devices or HA rules), the guest has disks on local storage and
// with_local_disks is false, a local CD-ROM image, local devices (PCI/USB passthrough,
// serial ports), a running VM with online false, or a target_storage the target cannot use.
// `detail` names every reason, `fields` the data fields that would change the answer.
const ReasonMigrationPreconditionFailed = "migration_precondition_failed"

// stepMigrateVM is vm.migrate's one write step.
const stepMigrateVM = "migrate_vm"

// MigrateInput is the data of vm.migrate (contract §9): the guest, the node to move it to,
// and how: online (a running VM live; default true), with_local_disks (consent to copy disks
// on local storage; default false), target_storage (where those go on the target).
type MigrateInput struct {
	GuestRef
	TargetNode     string `json:"target_node"`
	Online         bool   `json:"online"`
	WithLocalDisks bool   `json:"with_local_disks"`
	TargetStorage  string `json:"target_storage,omitempty"`
}

// decodeMigrate reads vm.migrate's data.
func decodeMigrate(f *Fields) MigrateInput {
	return MigrateInput{
		GuestRef:       decodeGuestRef(f),
		TargetNode:     f.String("target_node", true, nodeNamePattern.MatchString),
		Online:         f.Bool("online", true),
		WithLocalDisks: f.Bool("with_local_disks", false),
		TargetStorage:  f.String("target_storage", false, storageIDPattern.MatchString),
	}
}

// VMMigrate moves a VM or container to another node of its cluster (contract §9 vm.migrate):
// POST /nodes/{node}/{qemu|lxc}/{vmid}/migrate, waiting for the migration task with running
// progress steps; output {vmid, name, type, node (the target), source_node, upid}, 200 ok.
// Before any write it reads the cluster's nodes (a target_node not in the cluster → 422
// invalid_body, fields [target_node]) and, for a VM, PVE's migration preconditions (GET
// …/qemu/{vmid}/migrate); for a container its volumes and the storages' sharing. A guest
// already on target_node → 200 already_present, nothing written; every reason the
// migration cannot or may not run → 409 migration_precondition_failed naming them all. A
// running VM migrates live (online=1, with-local-disks=1 when it has local disks); a running
// container is restart-migrated (restart=1: shut down, moved, started on the target), since
// PVE cannot move a running container live. A lost answer, or an earlier attempt that stopped
// after sending, is confirmed by reading where the guest is and its migration tasks (a
// running one is waited for), never by a second migrate; so is the end of the hamigrate task
// PVE answers for an HA-managed guest. Exclusive on the guest; journals on its NetBox VM.
func VMMigrate() Verb {
	return onGuest(Spec[MigrateInput]{
		Name:   "vm.migrate",
		Access: Write,
		Decode: decodeMigrate,
		Describe: func(in MigrateInput) []Bullet {
			b := append(guestBullets(in.guest), Bullet{"target_node", in.TargetNode}, Bullet{"online", boolWord(in.Online)},
				Bullet{"with_local_disks", boolWord(in.WithLocalDisks)})
			if in.TargetStorage != "" {
				b = append(b, Bullet{"target_storage", in.TargetStorage})
			}
			return b
		},
		Dispatch: dispatchMigrate,
		Confirm:  confirmMigrate,
		Cancellable: map[string]string{stepMigrateVM: "the migration is aborted and the guest stays on its node; " +
			"what it had copied to the target is removed by Proxmox"},
	}, func(in *MigrateInput) *GuestRef { return &in.GuestRef })
}

// dispatchMigrate checks the migration, then sends it and waits for its task.
func dispatchMigrate(ctx context.Context, x *Exec, in MigrateInput) (Outcome, error) {
	g := in.guest
	if g.Node == in.TargetNode {
		detail := fmt.Sprintf("%s %d is on node %s already", guestWord(g), g.VMID, g.Node)
		x.Step(ctx, stepMigrateVM, events.StepSkipped, "", detail)
		return Outcome{Status: 200, Result: ResultAlreadyPresent, Detail: detail, Output: migrateOutput(g, g.Node, "")}, nil
	}
	req, refusal, err := preflightMigration(ctx, x.Proxmox, in)
	switch {
	case err != nil:
		return Outcome{}, err
	case refusal != nil:
		return *refusal, nil
	}
	var upid string
	_, err = x.Write(ctx, stepMigrateVM, migrationDetail(g, req), func(ctx context.Context) (Sent, error) {
		var err error
		upid, err = x.Proxmox.Migrate(ctx, g, req)
		return Sent{UPID: upid}, err
	})
	if err != nil {
		return Outcome{}, err
	}
	if u, perr := proxmox.ParseUPID(upid); perr == nil && u.Type == haMigrateTask {
		// An HA-managed guest: the task only asked the HA manager, whose own migration
		// follows; it is confirmed as a lost answer is.
		return confirmMigrate(ctx, x, in)
	}
	return Outcome{Status: 200, Result: ResultOK, UPID: upid, Output: migrateOutput(g, in.TargetNode, upid)}, nil
}

// haMigrateTask is the worker type of PVE's answer for an HA-managed guest: a task that asks
// the HA manager to migrate it (ha-manager migrate) and ends before the migration does.
const haMigrateTask = "hamigrate"

// migrationDetail says what the migrate step sends: "live migration to pve2 with local disks".
func migrationDetail(g proxmox.Guest, req proxmox.MigrateRequest) string {
	kind := "offline migration"
	switch {
	case req.Online:
		kind = "live migration"
	case req.Restart:
		kind = "restart migration (the container is shut down, moved and started again)"
	}
	d := kind + " to " + req.Target
	if req.WithLocalDisks {
		d += " with its local disks"
	}
	if req.TargetStorage != "" {
		d += ", local volumes to storage " + req.TargetStorage
	}
	return d
}

// migrateOutput is vm.migrate's output: the guest, where it is (node), where it came from and
// the migration task.
func migrateOutput(g proxmox.Guest, node, upid string) map[string]any {
	out := guestOutput(g, nil)
	out["node"] = node
	if node != g.Node {
		out["source_node"] = g.Node
	}
	if upid != "" {
		out["upid"] = upid
	}
	return out
}

// guestWord is "VM" or "CT", as PVE names guests.
func guestWord(g proxmox.Guest) string {
	if g.Type == proxmox.GuestLXC {
		return "CT"
	}
	return "VM"
}

// preflightMigration reads what the migration needs, before any write ([proxmox.Client.CheckMigration]),
// and returns the request to send, or the refusal: 422 for a target node not in the cluster,
// else 409 naming every reason.
func preflightMigration(ctx context.Context, c *proxmox.Client, in MigrateInput) (proxmox.MigrateRequest, *Outcome, error) {
	g := in.guest
	check, err := c.CheckMigration(ctx, g, proxmox.MigrationWish{Target: in.TargetNode, Online: in.Online,
		WithLocalDisks: in.WithLocalDisks, TargetStorage: in.TargetStorage})
	switch {
	case err != nil:
		return check.Request, nil, err
	case check.Nodes != nil:
		return check.Request, invalidBody([]string{"target_node"}, "target_node: not a node of the endpoint's cluster (its nodes: "+
			strings.Join(check.Nodes, ", ")+")"), nil
	case len(check.Reasons) == 0:
		return check.Request, nil, nil
	}
	return check.Request, &Outcome{Status: 409, Result: ResultRefused, Reason: ReasonMigrationPreconditionFailed, Fields: check.Fields,
		Detail: fmt.Sprintf("%s %d (%s) cannot migrate from %s to %s: %s", guestWord(g), g.VMID, g.Name, g.Node, in.TargetNode,
			strings.Join(check.Reasons, "; "))}, nil
}

// confirmMigrate tells, by reading, whether a migration whose answer was lost (or whose
// attempt stopped after sending) took place: the guest on target_node → 200 ok. While it is
// not, the guest's migration tasks on its node are read: a running one is waited for
// (however long it runs), a failed one started since the command arrived is the outcome (502
// task_failed); otherwise it keeps looking for up to ConfirmFor (the task may not be listed
// yet) and then answers 502 proxmox_write_unconfirmed. It never sends a second migrate.
func confirmMigrate(ctx context.Context, x *Exec, in MigrateInput) (Outcome, error) {
	vmid := strconv.FormatInt(in.guest.VMID, 10)
	since := x.CommandSince()
	var now proxmox.Guest
	var upid string
	found, err := x.untilInPlace(ctx, func(ctx context.Context) (bool, error) {
		var err error
		if now, err = x.Proxmox.ResolveGuest(ctx, vmid); err != nil || now.Node == in.TargetNode {
			return err == nil, err
		}
		tasks, err := x.Proxmox.GuestTasks(ctx, now.Node, now.VMID, proxmox.MigrateTaskType(now.Type), time.Time{})
		if err != nil {
			return false, err
		}
		if i := slices.IndexFunc(tasks, func(t proxmox.TaskSummary) bool { return t.Running }); i >= 0 {
			t := tasks[i]
			upid = t.UPID
			x.Step(ctx, "confirm", events.StepRunning, t.UPID, "waiting for the guest's migration task to end")
			if err := x.AwaitTask(ctx, stepMigrateVM, now.Node, t.UPID); err != nil {
				return false, err
			}
			now, err = x.Proxmox.ResolveGuest(ctx, vmid)
			return err == nil && now.Node == in.TargetNode, err
		}
		floor := since.Truncate(time.Second)
		if i := slices.IndexFunc(tasks, func(t proxmox.TaskSummary) bool { return !t.Start.Before(floor) }); i >= 0 && !tasks[i].OK() {
			return false, &proxmox.TaskError{UPID: tasks[i].UPID, Node: now.Node, ExitStatus: tasks[i].Status}
		}
		return false, nil
	})
	switch {
	case err != nil:
		return Outcome{}, err
	case !found:
		return Outcome{}, x.Unconfirmed(upid, fmt.Sprintf("the migrate may have been sent; %s %d is still on node %s, not on %s, and no migration task of it runs; it is not sent twice",
			guestWord(now), now.VMID, now.Node, in.TargetNode))
	}
	output := migrateOutput(now, now.Node, upid)
	if in.guest.Node != now.Node {
		output["source_node"] = in.guest.Node
	}
	return Outcome{Status: 200, Result: ResultOK, UPID: upid, Output: output}, nil
}
