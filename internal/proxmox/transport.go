package proxmox

import (
	"net/http"
	"strings"
	"sync"
)

// TransportWrapper wraps the HTTP transport of the client of one endpoint, e.g. to measure or
// trace every request it sends (each failover attempt passes through it separately). next is
// never nil.
type TransportWrapper func(endpoint EndpointConfig, next http.RoundTripper) http.RoundTripper

// WithTransportWrapper makes every client built with this option send its requests through
// wrap(endpoint, transport), also when [WithHTTPClient] supplies the client (whose transport
// is then wrapped in the copy, never in the caller's client).
func WithTransportWrapper(wrap TransportWrapper) ClientOption {
	return func(o *clientOptions) { o.wrap = wrap }
}

// apiRoot is the path prefix of every PVE API request.
const apiRoot = "/api2/json"

// APIOperation names the PVE API call r makes with a bounded vocabulary, for metric labels
// and span names: its method and the path template of [UsedAPI] it matches, e.g.
// "POST /nodes/{node}/qemu/{vmid}/status/start". A request matching none (or not under
// /api2/json) is "<METHOD> other". Ids, node names and query strings never appear.
func APIOperation(r *http.Request) string {
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	if r.URL == nil {
		return method + " other"
	}
	path := r.URL.Path
	i := strings.Index(path, apiRoot)
	if i < 0 {
		return method + " other"
	}
	segs := splitPath(path[i+len(apiRoot):])
	for _, u := range operationTemplates() {
		if u.Method == method && matchTemplate(u.segs, segs) {
			return method + " " + u.Path
		}
	}
	return method + " other"
}

type templateUse struct {
	APIUse
	segs []string
}

// operationTemplates returns the templates of UsedAPI, split into segments. The table is
// built once: it is derived from constants and never changes, and naming every request's
// operation must not rebuild it.
var operationTemplates = sync.OnceValue(func() []templateUse {
	used := UsedAPI()
	out := make([]templateUse, 0, len(used))
	for _, u := range used {
		out = append(out, templateUse{APIUse: u, segs: splitPath(u.Path)})
	}
	return out
})

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// matchTemplate reports whether segs fits tmpl, where a "{name}" segment matches any
// non-empty segment.
func matchTemplate(tmpl, segs []string) bool {
	if len(tmpl) != len(segs) {
		return false
	}
	for i, t := range tmpl {
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
			if segs[i] == "" {
				return false
			}
			continue
		}
		if t != segs[i] {
			return false
		}
	}
	return true
}
