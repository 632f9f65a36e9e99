package netbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
)

// EndpointPath is the netbox-proxbox plugin's ProxmoxEndpoint detail route; %d is the id.
const EndpointPath = "/api/plugins/proxbox/endpoints/proxmox/%d/"

// Endpoint is what proxbus needs of a netbox-proxbox ProxmoxEndpoint.
type Endpoint struct {
	ID   int64
	Name string
	// AllowWrites is the endpoint's allow_writes field. The upstream plugin has no such field,
	// so it may also come from a custom field of that name; missing, null or not a boolean
	// reads as false (fail closed).
	AllowWrites bool
}

// endpointBody is the part of the ProxmoxEndpoint serializer proxbus reads.
type endpointBody struct {
	ID           *int64                     `json:"id"`
	Name         *string                    `json:"name"`
	AllowWrites  json.RawMessage            `json:"allow_writes"`
	CustomFields map[string]json.RawMessage `json:"custom_fields"`
}

// Endpoint reads ProxmoxEndpoint id. It returns ErrNotFound for a 404, ErrUnauthorized for a
// refused token, ErrUnavailable when NetBox cannot answer or answers something unreadable.
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
	ep := Endpoint{ID: id, AllowWrites: allowWrites(b)}
	if b.Name != nil {
		ep.Name = *b.Name
	}
	return ep, nil
}

// allowWrites reads allow_writes from the serializer field, else from a custom field; only a
// JSON true enables writes.
func allowWrites(b endpointBody) bool {
	if v, ok := boolOf(b.AllowWrites); ok {
		return v
	}
	if v, ok := boolOf(b.CustomFields["allow_writes"]); ok {
		return v
	}
	return false
}

// boolOf decodes a JSON boolean; ok is false for anything else (absent, null, strings…).
func boolOf(raw json.RawMessage) (v, ok bool) {
	if len(raw) == 0 {
		return false, false
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, false
	}
	return v, string(raw) == "true" || string(raw) == "false"
}
