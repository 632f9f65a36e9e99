package proxmox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// ErrInvalidRequest: a provisioning call was given arguments that cannot address anything
// (an empty node, a vmid below 1, an empty disk or storage, an unsupported configuration
// key). It is returned wrapped, before any request is made.
var ErrInvalidRequest = errors.New("proxmox: invalid request")

// CloneRequest is a clone of a QEMU VM or template (POST /nodes/{node}/qemu/{vmid}/clone).
type CloneRequest struct {
	Node    string // the template's node
	VMID    int64  // the template
	NewVMID int64
	Name    string // "" → not sent (PVE names it "Copy-of-VM-<name>")
	Target  string // target node ("" or Node = same node, not sent)
	Storage string // "" = no storage override (PVE keeps each disk's storage)
	Full    bool   // full copy (true) or linked clone (false, templates only)
}

// form returns the clone's POST parameters: newid and full always, name, target and
// storage only when set (target only when it differs from Node).
func (r CloneRequest) form() url.Values {
	f := url.Values{"newid": {strconv.FormatInt(r.NewVMID, 10)}, "full": {boolParam(r.Full)}}
	if r.Name != "" {
		f.Set("name", r.Name)
	}
	if r.Target != "" && r.Target != r.Node {
		f.Set("target", r.Target)
	}
	if r.Storage != "" {
		f.Set("storage", r.Storage)
	}
	return f
}

// CloneVM clones (POST /nodes/{node}/qemu/{vmid}/clone) and waits for the task (a qmclone
// worker on the template's node); it returns its UPID, also with a *[TaskError] (the clone
// failed in the worker; PVE then removes what it created). Proxmox's refusals before the
// task are *[APIError]s, e.g. 500 "can't clone to non-shared storage 'local-lvm'", "can't
// clone VM to node 'pve2' (VM uses local storage)" (every disk of a cross-node clone's
// source must be on shared storage), "unable to create VM 123: config file already exists"
// (matches [ErrAlreadyExists]). An incomplete request → [ErrInvalidRequest] without a
// request. The request is never repeated; with [ErrAnswerLost] the clone may exist.
func (c *Client) CloneVM(ctx context.Context, req CloneRequest) (string, error) {
	if req.Node == "" || req.VMID <= 0 || req.NewVMID <= 0 {
		return "", fmt.Errorf("%w: clone of vmid %d on %q to vmid %d", ErrInvalidRequest, req.VMID, req.Node, req.NewVMID)
	}
	r := request{method: http.MethodPost, path: qemuPath(req.Node, req.VMID) + "/clone", form: req.form()}
	return c.runTask(ctx, req.Node, r)
}

// MoveDisk moves one disk with delete=0 (POST /nodes/{node}/qemu/{vmid}/move_disk, params
// disk, storage, delete=0) and waits for the qmmove task; the source stays in the
// configuration as an unusedN disk, nothing is deleted. It returns the UPID (also with a
// *[TaskError] when the move failed in the worker). PVE's refusals before the task are
// *[APIError]s ("you can't move a cdrom", "you can't move to the same storage with same
// format", "VM is locked (clone)", …). Empty arguments → [ErrInvalidRequest].
func (c *Client) MoveDisk(ctx context.Context, node string, vmid int64, disk, storage string) (string, error) {
	if node == "" || vmid <= 0 || disk == "" || storage == "" {
		return "", fmt.Errorf("%w: move of disk %q of vmid %d on %q to storage %q", ErrInvalidRequest, disk, vmid, node, storage)
	}
	form := url.Values{"disk": {disk}, "storage": {storage}, "delete": {"0"}}
	r := request{method: http.MethodPost, path: qemuPath(node, vmid) + "/move_disk", form: form}
	return c.runTask(ctx, node, r)
}

// qemuPath is "/nodes/{node}/qemu/{vmid}".
func qemuPath(node string, vmid int64) string {
	return "/nodes/" + url.PathEscape(node) + "/qemu/" + strconv.FormatInt(vmid, 10)
}

// boolParam is PVE's boolean parameter, "1" or "0".
func boolParam(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
