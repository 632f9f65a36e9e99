package simpve

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/proxbus/proxbus/internal/proxmox"
	"github.com/proxbus/proxbus/internal/sim/pve/pveparam"
)

// call is one authenticated, routed request.
type call struct {
	r       *http.Request
	use     proxmox.APIUse
	path    string     // concrete API path, "/storage/pbs1"
	params  url.Values // query and body parameters
	tokenID string
	token   token
}

// endpoint is the simulator's implementation of one API method.
type endpoint struct {
	// perm returns the ACL path and privilege the method requires; priv "" means any
	// authenticated token may call it.
	perm func(c *call) (acl, priv string)
	// fn answers the call; it runs with Server.mu held and may change the state.
	fn func(c *call) answer
}

// endpoints maps "METHOD /schema/path" to its implementation.
func (s *Server) endpoints() map[string]endpoint {
	anyone := func(*call) (string, string) { return "", "" }
	m := map[string]endpoint{
		"GET /version":           {perm: anyone, fn: s.getVersion},
		"GET /nodes":             {perm: anyone, fn: s.getNodes},
		"GET /cluster/resources": {perm: anyone, fn: s.getClusterResources},
		"GET /cluster/tasks":     {perm: anyone, fn: s.getClusterTasks},
		"GET /storage":           {perm: anyone, fn: s.getStorages},
		"GET /storage/{storage}": {
			perm: func(c *call) (string, string) { return "/storage/" + c.r.PathValue("storage"), privAllocate },
			fn:   s.getStorage,
		},
		"POST /storage": {
			perm: func(*call) (string, string) { return "/storage", privAllocate },
			fn:   s.createStorage,
		},
		"PUT /storage/{storage}": {
			perm: func(*call) (string, string) { return "/storage", privAllocate },
			fn:   s.updateStorage,
		},
		"DELETE /storage/{storage}": {
			perm: func(*call) (string, string) { return "/storage", privAllocate },
			fn:   s.deleteStorage,
		},
	}
	for k, ep := range s.nodeEndpoints() {
		m[k] = ep
	}
	for k, ep := range s.guestEndpoints() {
		m[k] = ep
	}
	for k, ep := range s.provisionEndpoints() {
		m[k] = ep
	}
	for k, ep := range s.imageEndpoints() {
		m[k] = ep
	}
	for k, ep := range s.migrationEndpoints() {
		m[k] = ep
	}
	for k, ep := range s.backupEndpoints(m) { // after imageEndpoints: it extends the content listing
		m[k] = ep
	}
	for k, ep := range s.containerEndpoints(m) { // after backupEndpoints: it extends the content listing
		m[k] = ep
	}
	return m
}

// nodeEndpoints are the node methods: reboot, network, task status.
func (s *Server) nodeEndpoints() map[string]endpoint {
	nodePerm := func(priv string) func(c *call) (string, string) {
		return func(c *call) (string, string) { return "/nodes/" + c.r.PathValue("node"), priv }
	}
	return map[string]endpoint{
		"POST /nodes/{node}/status":             {perm: nodePerm(privSysPowerMgmt), fn: s.nodeCommand},
		"GET /nodes/{node}/network":             {perm: nodePerm(privSysAudit), fn: s.getNetwork},
		"GET /nodes/{node}/tasks/{upid}/status": {perm: func(*call) (string, string) { return "", "" }, fn: s.getTaskStatus},
		"GET /nodes/{node}/tasks/{upid}/log":    {perm: func(*call) (string, string) { return "", "" }, fn: s.getTaskLog},
		"DELETE /nodes/{node}/tasks/{upid}":     {perm: s.stopTaskPerm, fn: s.stopTask},
	}
}

// guestEndpoints are the QEMU and LXC methods.
func (s *Server) guestEndpoints() map[string]endpoint {
	m := map[string]endpoint{}
	for _, typ := range []proxmox.GuestType{proxmox.GuestQEMU, proxmox.GuestLXC} {
		base := "/nodes/{node}/" + string(typ) + "/{vmid}"
		add := func(key, priv string, fn func(c *call, g *guest) answer) {
			m[key] = endpoint{perm: vmPerm(priv), fn: s.guestHandler(typ, fn)}
		}
		add("GET "+base+"/status/current", privVMAudit, s.getGuestStatus)
		add("GET "+base+"/config", privVMAudit, s.getGuestConfig)
		add("POST "+base+"/status/start", privPowerMgmt, s.powerStart)
		add("POST "+base+"/status/stop", privPowerMgmt, s.powerStop)
		add("POST "+base+"/status/shutdown", privPowerMgmt, s.powerShutdown)
		add("POST "+base+"/status/reboot", privPowerMgmt, s.powerReboot)
		add("GET "+base+"/snapshot", privVMAudit, s.getSnapshots)
		add("POST "+base+"/snapshot", privSnapshot, s.createSnapshot)
		add("DELETE "+base+"/snapshot/{snapname}", privSnapshot, s.deleteSnapshot)
		add("POST "+base+"/snapshot/{snapname}/rollback", privSnapshot, s.rollbackSnapshot)
		add("DELETE "+base, privVMAllocate, s.deleteGuest)
		if typ == proxmox.GuestQEMU {
			add("POST "+base+"/status/reset", privPowerMgmt, s.qemuRunning("qmreset", restart))
			add("POST "+base+"/status/suspend", privPowerMgmt, s.qemuRunning("qmsuspend", pause))
			add("POST "+base+"/status/resume", privPowerMgmt, s.qemuRunning("qmresume", unpause))
		}
	}
	return m
}

// buildHandler routes exactly the methods of proxmox.UsedAPI; anything else answers 501.
func (s *Server) buildHandler() http.Handler {
	mux := http.NewServeMux()
	impls := s.endpoints()
	for _, use := range proxmox.UsedAPI() {
		ep, ok := impls[use.Method+" "+use.Path]
		if !ok {
			ep = endpoint{perm: func(*call) (string, string) { return "", "" }, fn: notImplemented}
		}
		mux.HandleFunc(use.Method+" "+APIPrefix+use.Path, func(w http.ResponseWriter, r *http.Request) {
			s.serve(w, r, &use, ep)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, nil, endpoint{})
	})
	return mux
}

func notImplemented(c *call) answer {
	return fail(http.StatusNotImplemented, fmt.Sprintf("Method '%s %s' not implemented", c.r.Method, c.path))
}

// serve runs one request through faults, authentication, routing, permission and
// parameter checks and the endpoint, records it, and writes (or drops) the answer.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, use *proxmox.APIUse, ep endpoint) {
	s.mu.Lock()
	down := s.unreachable
	s.mu.Unlock()
	if down {
		s.drop(w) // closed without reading: nothing is applied
		return
	}
	s.wait(r.Context())

	path := strings.TrimPrefix(r.URL.Path, APIPrefix)
	if !strings.HasPrefix(r.URL.Path, APIPrefix+"/") {
		path = r.URL.Path
	}
	decoded, perr := readParams(r)
	discard(r)
	params := decoded.Form()

	s.mu.Lock()
	a := s.handle(r, use, ep, path, decoded, perr)
	dropped := s.takeDrop(r.Method, use, path)
	rec := RequestRecord{Method: r.Method, Path: path, Params: redactParams(params), Status: a.status, Dropped: dropped, At: time.Now()}
	if use != nil {
		rec.Route = use.Path
	}
	s.record(rec)
	s.mu.Unlock()

	s.log.Debug("sim/pve request", "method", r.Method, "path", path, "status", a.status, "dropped", dropped)
	if dropped {
		s.drop(w)
		return
	}
	a.write(w)
}

// handle produces the answer for one request; Server.mu is held.
func (s *Server) handle(r *http.Request, use *proxmox.APIUse, ep endpoint, path string, decoded pveparam.Values, perr error) answer {
	s.advance(time.Now())
	if a, ok := s.takeFail(r.Method, use, path); ok {
		return a
	}
	tokenID, tok, a, ok := s.authenticate(r)
	if !ok {
		return a
	}
	if perr != nil {
		// pve-http-server's handle_api2_request: extract_params dies inside its eval, which
		// answers 500 with the error, before rest_handler finds the method.
		return fail(http.StatusInternalServerError, perr.Error())
	}
	c := &call{r: r, path: path, params: decoded.Form(), tokenID: tokenID, token: tok}
	if use == nil {
		return notImplemented(c)
	}
	c.use = *use
	// pve-manager PVE/HTTPServer.pm, rest_handler: parameters that contradict the path,
	// then the permissions, then the proxy to the method's node (every /nodes/{node} method
	// proxbus uses has proxyto 'node'), and only then the method's parameter checks.
	if errs := pathConflicts(r, *use, decoded); len(errs) > 0 {
		return paramFail(errs)
	}
	if acl, priv := ep.perm(c); priv != "" && !tok.has(priv) {
		return fail(http.StatusForbidden, fmt.Sprintf("Permission check failed (%s, %s)", acl, priv))
	}
	if n := r.PathValue("node"); n != "" {
		if _, found := s.state.node(n); !found {
			return unknownNode(n) // remote_node_ip cannot resolve it
		}
		if a, down := s.nodeDown(n); down {
			return a // pveproxy cannot reach the node
		}
	}
	params, errs := checkParams(r, *use, decoded)
	if len(errs) > 0 {
		return paramFail(errs)
	}
	c.params = params
	return ep.fn(c)
}

// pathConflicts reports the body or query parameters that name a path parameter with
// another value, as rest_handler refuses them ("duplicate parameter (already defined in
// URI) with conflicting values!"); the same value is allowed.
func pathConflicts(r *http.Request, use proxmox.APIUse, decoded pveparam.Values) map[string]string {
	var errs map[string]string
	for _, n := range pathParam.FindAllStringSubmatch(use.Path, -1) {
		v, sent := decoded[n[1]]
		if !sent || (v.Kind == pveparam.Scalar && v.Text == r.PathValue(n[1])) {
			continue
		}
		if errs == nil {
			errs = map[string]string{}
		}
		errs[n[1]] = "duplicate parameter (already defined in URI) with conflicting values!"
	}
	return errs
}

// checkParams validates a request's parameters, the path's included, against the PVE
// schema of its method before the method runs, as PVE::RESTHandler::handle does, and
// returns the body and query parameters the method sees (path parameters are read with
// PathValue) or PVE's errors by parameter.
func checkParams(r *http.Request, use proxmox.APIUse, decoded pveparam.Values) (url.Values, map[string]string) {
	m, ok := pveparam.Lookup(use.Method, use.Path)
	if !ok { // UsedAPI and the generated table disagree: pveparam's tests fail too
		return nil, map[string]string{"_root": "no schema for " + use.Method + " " + use.Path + ": run go generate ./internal/sim/pve/pveparam"}
	}
	all := make(pveparam.Values, len(decoded))
	maps.Copy(all, decoded)
	names := pathParam.FindAllStringSubmatch(use.Path, -1)
	for _, n := range names {
		all.Set(n[1], r.PathValue(n[1])) // the path's values replace the body's (rest_handler's $uri_param)
	}
	if errs := m.Check(all); len(errs) > 0 {
		return nil, errs
	}
	params := all.Form()
	for _, n := range names {
		params.Del(n[1])
	}
	return params, nil
}

// authenticate checks the PVEAPIToken header against the scenario's tokens.
func (s *Server) authenticate(r *http.Request) (string, token, answer, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", token{}, unauthorized("No ticket"), false
	}
	rest, found := strings.CutPrefix(h, "PVEAPIToken=")
	if !found {
		rest, found = strings.CutPrefix(h, "PVEAPIToken ")
	}
	if !found {
		return "", token{}, unauthorized("No ticket"), false
	}
	id, secret, found := strings.Cut(strings.TrimSpace(rest), "=")
	if !found || !strings.Contains(id, "!") {
		return "", token{}, unauthorized("invalid API token format"), false
	}
	tok, known := s.state.tokens[id]
	if !known {
		user, name, _ := strings.Cut(id, "!")
		return "", token{}, unauthorized(fmt.Sprintf("no such token '%s' for user '%s'", name, user)), false
	}
	if secret != tok.secret {
		return "", token{}, unauthorized("invalid token value!"), false
	}
	return id, tok, answer{}, true
}

// maxBody is the largest request body the simulator reads.
const maxBody = 1 << 20

// readParams decodes a request's parameters as pveproxy does (pveparam.Decode): the body of
// a POST or PUT, JSON or URL-encoded, then the query.
func readParams(r *http.Request) (pveparam.Values, error) {
	var body []byte
	if (r.Method == http.MethodPost || r.Method == http.MethodPut) && r.Body != nil {
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
		if err != nil {
			return pveparam.Values{}, fmt.Errorf("unable to read request body: %w", err)
		}
	}
	params, err := pveparam.Decode(r.Method, r.Header.Get("Content-Type"), r.URL.RawQuery, body)
	if err != nil {
		return pveparam.Values{}, err
	}
	return params, nil
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// redacted replaces sensitive parameter values in the request log.
const redacted = "[redacted]"

// isSecretParam reports whether a parameter holds a secret: PVE's sensitive storage
// properties and anything named like password, secret or token.
func isSecretParam(name string) bool {
	n := strings.ToLower(name)
	return sensitive[n] || strings.Contains(n, "password") || strings.Contains(n, "secret") || strings.Contains(n, "token")
}

// redactParams copies params with sensitive values replaced.
func redactParams(params url.Values) url.Values {
	out := make(url.Values, len(params))
	for k, vs := range params {
		if isSecretParam(k) {
			red := make([]string, len(vs))
			for i := range red {
				red[i] = redacted
			}
			out[k] = red
			continue
		}
		out[k] = slices.Clone(vs)
	}
	return out
}
