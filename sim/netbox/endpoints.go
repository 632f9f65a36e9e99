package simnetbox

import (
	"fmt"
	"net/http"
	"sort"
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

func (s *Server) getEndpoint(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(r)
	if !ok {
		notFound(w)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ep := s.endpoints[id]
	if ep == nil {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, endpointJSON(r, ep))
}

func (s *Server) listEndpoints(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	eps := make([]*endpoint, 0, len(s.endpoints))
	for _, ep := range s.endpoints {
		eps = append(eps, ep)
	}
	sort.Slice(eps, func(i, j int) bool { return eps[i].ID < eps[j].ID })
	items := make([]any, 0, len(eps))
	for _, ep := range eps {
		items = append(items, endpointJSON(r, ep))
	}
	s.mu.Unlock()
	page(w, r, items)
}
