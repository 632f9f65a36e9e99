package simnetbox

import "net/http"

// Version is the NetBox version the simulator reports.
const Version = "4.5.0"

// status answers GET /api/status/ like NetBox.
func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"django-version":      "5.2.8",
		"installed-apps":      map[string]string{"rest_framework": "3.16.1"},
		"netbox-version":      Version,
		"netbox-full-version": Version,
		"plugins":             map[string]string{"netbox_proxbox": "0.0.7"},
		"python-version":      "3.12.3",
		"rq-workers-running":  1,
	})
}
