package ingress_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/proxbus/proxbus/internal/ingress"
)

// TestEndpointsWebhook: a signed NetBox webhook on the ProxmoxEndpoint model asks for the
// endpoints to be read again, naming the endpoint; an unsigned or badly signed one, a
// webhook on another model or a body that is no webhook asks nothing; no command is published.
func TestEndpointsWebhook(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var changed []int64
	h := newHarness(t, ingress.Config{WebhookSecret: secret, EndpointsChanged: func(id int64) {
		mu.Lock()
		changed = append(changed, id)
		mu.Unlock()
	}})
	endpointBody := func(event, objectType, model string) []byte {
		return []byte(`{"event":"` + event + `","timestamp":"` + netboxTime("T") + `","object_type":"` + objectType + `","model":"` + model +
			`","username":"alice","request_id":"9d2b6a4e-1c1e-4c55-9d7e-4c2f1b7e0a31","data":{"id":7,"name":"lab7","domain":"pve7.example.net","port":8006},"snapshots":{}}`)
	}
	signed := func(body []byte) map[string]string {
		return map[string]string{ingress.SignatureHeader: ingress.Sign(secret, body)}
	}
	cases := []struct {
		name    string
		body    []byte
		headers func([]byte) map[string]string
		status  int
		reload  bool
	}{
		{"created (NetBox 4.4+)", endpointBody("created", "netbox_proxbox.proxmoxendpoint", "proxmoxendpoint"), signed, http.StatusAccepted, true},
		{"deleted (model only)", endpointBody("deleted", "", "proxmoxendpoint"), signed, http.StatusAccepted, true},
		{"unsigned", endpointBody("updated", "netbox_proxbox.proxmoxendpoint", "proxmoxendpoint"), func([]byte) map[string]string { return nil }, http.StatusUnauthorized, false},
		{"signed with another secret", endpointBody("updated", "netbox_proxbox.proxmoxendpoint", "proxmoxendpoint"),
			func(b []byte) map[string]string {
				return map[string]string{ingress.SignatureHeader: ingress.Sign("other-secret", b)}
			}, http.StatusUnauthorized, false},
		{"another model", endpointBody("updated", "virtualization.virtualmachine", "virtualmachine"), signed, http.StatusUnprocessableEntity, false},
		{"no webhook", []byte(`{"hello":"world"}`), signed, http.StatusBadRequest, false},
	}
	for _, tc := range cases { // in order: each case sees the reloads of the ones before
		mu.Lock()
		before := len(changed)
		mu.Unlock()
		status, out, _ := h.post(ingress.EndpointsWebhookPath, tc.body, tc.headers(tc.body))
		if status != tc.status {
			t.Errorf("%s: status %d (%s), want %d", tc.name, status, out, tc.status)
		}
		mu.Lock()
		reloaded := len(changed) > before
		got := slices.Clone(changed)
		mu.Unlock()
		if reloaded != tc.reload {
			t.Errorf("%s: reload asked %v, want %v", tc.name, reloaded, tc.reload)
		}
		if tc.reload {
			var ans ingress.EndpointsReload
			if err := json.Unmarshal(out, &ans); err != nil || ans.EndpointID != 7 || ans.Reload != "requested" || got[len(got)-1] != 7 {
				t.Errorf("%s: answer %s (%v), changed %v", tc.name, out, err, got)
			}
		}
	}
	if n := len(h.commands()); n != 0 {
		t.Errorf("%d commands published", n)
	}
}

// TestEndpointsWebhookNeedsItsCallback: without EndpointsChanged the route is not served.
func TestEndpointsWebhookNeedsItsCallback(t *testing.T) {
	t.Parallel()
	h := newHarness(t, ingress.Config{WebhookSecret: secret})
	body := []byte(`{"event":"created","model":"proxmoxendpoint","data":{"id":1}}`)
	if status, _, _ := h.post(ingress.EndpointsWebhookPath, body, map[string]string{ingress.SignatureHeader: ingress.Sign(secret, body)}); status == http.StatusAccepted {
		t.Errorf("status %d without EndpointsChanged", status)
	}
}
