package simnetbox

import (
	"fmt"
	"net/http"
)

// endpointURL is the API URL of ProxmoxEndpoint id.
func endpointURL(r *http.Request, id int64) string {
	return fmt.Sprintf("%s/api/plugins/proxbox/endpoints/proxmox/%d/", baseURL(r), id)
}

// endpointBrief is the plugin serializer's brief form.
func endpointBrief(r *http.Request, ep *endpoint) map[string]any {
	return map[string]any{
		"id": ep.ID, "url": endpointURL(r, ep.ID), "display": ep.Name + " (" + ep.domain() + ")",
		"name": ep.Name, "domain": ep.domain(), "port": 8006,
	}
}

func (ep *endpoint) domain() string { return ep.Name + ".pve.invalid" }

// endpointJSON renders ep like netbox-proxbox's ProxmoxEndpointSerializer (password and
// token_value are write-only and never rendered), plus allow_writes.
func endpointJSON(r *http.Request, ep *endpoint) map[string]any {
	out := endpointBrief(r, ep)
	out["ip_address"] = nil
	out["mode"] = map[string]string{"value": "cluster", "label": "Cluster"}
	out["version"] = "8.4.1"
	out["repoid"] = nil
	out["username"] = "proxbus@pve"
	out["token_name"] = "proxbus"
	out["verify_ssl"] = true
	out["allow_writes"] = ep.AllowWrites
	out["tags"] = []any{}
	out["custom_fields"] = map[string]any{}
	out["created"] = fmtTime(ep.Created)
	out["last_updated"] = fmtTime(ep.Created)
	return out
}

// getEndpoint answers GET …/endpoints/proxmox/{id}/.
func (s *Server) getEndpoint(w http.ResponseWriter, r *http.Request) {
	getByID(s, w, r, s.endpoints, endpointJSON)
}

// listEndpoints answers GET …/endpoints/proxmox/: every endpoint, by id.
func (s *Server) listEndpoints(w http.ResponseWriter, r *http.Request) {
	listByID(s, w, r, s.endpoints, nil, endpointJSON)
}
