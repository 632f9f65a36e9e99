package netbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// EndpointPath is the netbox-proxbox plugin's ProxmoxEndpoint detail route; %d is the id.
const EndpointPath = "/api/plugins/proxbox/endpoints/proxmox/%d/"

// Why the write gate of an endpoint is closed ([Endpoint.WritesClosedReason]). The texts name
// NetBox fields and plugin versions, never a value of the endpoint beyond these flags, so a
// caller may show them to whoever sent the command.
const (
	// ReasonAllowWritesAbsent: the answer has no allow_writes. The ProxmoxEndpoint model has
	// the field since netbox-proxbox 0.0.15, but its REST serializer returns it only since
	// 0.0.22; upgrade the plugin.
	ReasonAllowWritesAbsent = "allow_writes absent: netbox-proxbox older than 0.0.22"
	// ReasonAllowWritesFalse: NetBox says allow_writes false (the plugin's default).
	ReasonAllowWritesFalse = "allow_writes false in NetBox"
	// ReasonAllowWritesInvalid: allow_writes is null or not a JSON boolean.
	ReasonAllowWritesInvalid = "allow_writes in NetBox is not a boolean"
	// ReasonEndpointDisabled: the plugin's enabled flag is false.
	ReasonEndpointDisabled = "the plugin endpoint is disabled (enabled: false)"
	// ReasonEnabledInvalid: enabled is present but null or not a JSON boolean.
	ReasonEnabledInvalid = "enabled in NetBox is not a boolean"
)

// Endpoint is what proxbus needs of a netbox-proxbox ProxmoxEndpoint.
type Endpoint struct {
	ID   int64
	Name string
	// AllowWrites opens the write gate (contract §4, step 1). It is true only when the
	// plugin's allow_writes field is JSON true and its enabled field is not false (absent
	// enabled, as before netbox-proxbox 0.0.17, does not close it). Anything else fails
	// closed: allow_writes absent (netbox-proxbox older than 0.0.22, whose serializer does
	// not return the field), null, or not a boolean. A custom field named allow_writes is
	// not read: it would contradict the plugin's own toggle.
	AllowWrites bool
	// WritesClosedReason says why AllowWrites is false: one or more of the Reason* texts,
	// joined by "; ". It is "" when AllowWrites is true.
	WritesClosedReason string
}

// endpointBody is the part of the ProxmoxEndpoint serializer proxbus reads.
type endpointBody struct {
	ID          *int64          `json:"id"`
	Name        *string         `json:"name"`
	AllowWrites json.RawMessage `json:"allow_writes"`
	Enabled     json.RawMessage `json:"enabled"`
}

// Endpoint reads ProxmoxEndpoint id. It returns ErrNotFound for a 404, ErrUnauthorized for a
// refused token, ErrUnavailable when NetBox cannot answer or answers something unreadable. A
// readable answer is never an error: a closed gate is AllowWrites false with its reason.
func (c *Client) Endpoint(ctx context.Context, id int64) (Endpoint, error) {
	op := "endpoint " + strconv.FormatInt(id, 10)
	if id <= 0 {
		return Endpoint{}, newError(op, ErrNotFound, 0, nil, "endpoint ids are positive", nil, c.secrets)
	}
	body, err := c.get(ctx, op, fmt.Sprintf(EndpointPath, id))
	if err != nil {
		return Endpoint{}, err
	}
	var b endpointBody
	if err := json.Unmarshal(body, &b); err != nil || b.ID == nil {
		return Endpoint{}, newError(op, ErrUnavailable, 200, nil, "answer is not a ProxmoxEndpoint", nil, c.secrets)
	}
	if *b.ID != id {
		return Endpoint{}, newError(op, ErrUnavailable, 200, nil, "answer is for another endpoint", nil, c.secrets)
	}
	ep := Endpoint{ID: id}
	ep.AllowWrites, ep.WritesClosedReason = writeGate(b)
	if b.Name != nil {
		ep.Name = *b.Name
	}
	return ep, nil
}

// writeGate decides the write gate from the serializer's allow_writes and enabled fields: open
// only for allow_writes true and enabled true or absent; otherwise closed, with every reason.
func writeGate(b endpointBody) (open bool, reason string) {
	var reasons []string
	if b.Enabled != nil { // absent: a plugin older than the enabled field
		switch v, ok := boolOf(b.Enabled); {
		case !ok:
			reasons = append(reasons, ReasonEnabledInvalid)
		case !v:
			reasons = append(reasons, ReasonEndpointDisabled)
		}
	}
	switch v, ok := boolOf(b.AllowWrites); {
	case b.AllowWrites == nil:
		reasons = append(reasons, ReasonAllowWritesAbsent)
	case !ok:
		reasons = append(reasons, ReasonAllowWritesInvalid)
	case !v:
		reasons = append(reasons, ReasonAllowWritesFalse)
	}
	if len(reasons) > 0 {
		return false, strings.Join(reasons, "; ")
	}
	return true, ""
}

// boolOf decodes a JSON boolean; ok is false for anything else (absent, null, strings…).
func boolOf(raw json.RawMessage) (v, ok bool) {
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}
