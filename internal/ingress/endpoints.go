package ingress

import (
	"net/http"
	"strconv"
	"strings"
)

// EndpointModel is the netbox-proxbox model whose changes POST /webhooks/netbox/endpoints
// accepts.
const EndpointModel = "proxmoxendpoint"

// EndpointsReload is the 202 answer of POST /webhooks/netbox/endpoints.
type EndpointsReload struct {
	// EndpointID is the changed endpoint's id, 0 when the webhook named none.
	EndpointID int64 `json:"endpoint_id"`
	// Event is the webhook's event (created, updated, deleted).
	Event string `json:"event"`
	// Reload is "requested": the endpoints are read from NetBox again.
	Reload string `json:"reload"`
}

// handleEndpointsWebhook answers a NetBox webhook on the ProxmoxEndpoint model: 202 once the
// endpoints are asked to be read again, 422 for a webhook of another model (the event rule
// selects the wrong object type), 400 for a body that is no NetBox webhook.
func (s *Server) handleEndpointsWebhook(w http.ResponseWriter, r *http.Request) {
	body, ok := s.signedBody(w, r)
	if !ok {
		return
	}
	wh, err := ParseWebhook(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Reason: "invalid_webhook", Detail: "the body is not a NetBox webhook body (event, data)"})
		return
	}
	if !strings.EqualFold(wh.Model, EndpointModel) {
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Reason: "not_proxmox_endpoint", Fields: []string{"model"},
			Detail: "this route takes webhooks on netbox_proxbox.proxmoxendpoint only; select that object type in the NetBox event rule"})
		return
	}
	id, _ := strconv.ParseInt(wh.ObjectID, 10, 64)
	s.cfg.EndpointsChanged(max(id, 0))
	s.log.Info("ProxmoxEndpoint webhook: the endpoints are read again", "event", wh.Event, "endpoint_id", id)
	writeJSON(w, http.StatusAccepted, EndpointsReload{EndpointID: max(id, 0), Event: wh.Event, Reload: "requested"})
}
