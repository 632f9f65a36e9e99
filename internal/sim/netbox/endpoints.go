package simnetbox

import (
	"fmt"
	"net/http"
	"net/netip"
)

// The ProxmoxEndpoint rendering follows netbox-proxbox's ProxmoxEndpointSerializer
// (netbox_proxbox/api/serializers/endpoints.py): brief fields id, url, display, name, domain
// and port; ip_address nested as NetBox's NestedIPAddressSerializer renders it; password and
// token_value write-only, never rendered. allow_writes is rendered as the plugin does since
// 0.0.22.

// endpointURL is the API URL of ProxmoxEndpoint id.
func endpointURL(r *http.Request, id int64) string {
	return fmt.Sprintf("%s/api/plugins/proxbox/endpoints/proxmox/%d/", baseURL(r), id)
}

// endpointBrief is the plugin serializer's brief form.
func endpointBrief(r *http.Request, ep *endpoint) map[string]any {
	return map[string]any{
		"id": ep.ID, "url": endpointURL(r, ep.ID), "display": ep.display(),
		"name": ep.Name, "domain": nullable(ep.Domain), "port": ep.Port,
	}
}

// display is the plugin's "Name (IP)", else "Name (domain)", else the name.
func (ep *endpoint) display() string {
	switch {
	case ep.IPAddress != "":
		return ep.Name + " (" + addressOf(ep.IPAddress) + ")"
	case ep.Domain != "":
		return ep.Name + " (" + ep.Domain + ")"
	}
	return ep.Name
}

// addressOf is the address of "address/prefix".
func addressOf(cidr string) string {
	if p, err := netip.ParsePrefix(cidr); err == nil {
		return p.Addr().String()
	}
	return cidr
}

// nullable renders "" as JSON null.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ipAddressJSON is NetBox's nested IP address, or nil.
func ipAddressJSON(r *http.Request, ep *endpoint) any {
	if ep.IPAddress == "" {
		return nil
	}
	family := map[string]any{"value": 4, "label": "IPv4"}
	if p, err := netip.ParsePrefix(ep.IPAddress); err == nil && p.Addr().Is6() {
		family = map[string]any{"value": 6, "label": "IPv6"}
	}
	// The simulator keeps no IP address objects: the endpoint's id stands in for the object's.
	return map[string]any{
		"id": ep.ID, "url": fmt.Sprintf("%s/api/ipam/ip-addresses/%d/", baseURL(r), ep.ID),
		"display": ep.IPAddress, "family": family, "address": ep.IPAddress,
	}
}

// endpointJSON renders ep like netbox-proxbox's ProxmoxEndpointSerializer, plus allow_writes.
func endpointJSON(r *http.Request, ep *endpoint) map[string]any {
	out := endpointBrief(r, ep)
	out["ip_address"] = ipAddressJSON(r, ep)
	out["mode"] = map[string]string{"value": "cluster", "label": "Cluster"}
	out["version"] = "8.4.1"
	out["repoid"] = nil
	out["username"] = ep.Username
	out["token_name"] = ep.TokenName
	out["verify_ssl"] = ep.VerifySSL
	out["allow_writes"] = ep.AllowWrites
	out["tags"] = []any{}
	out["custom_fields"] = map[string]any{}
	out["created"] = fmtTime(ep.Created)
	out["last_updated"] = fmtTime(ep.LastUpdated)
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
