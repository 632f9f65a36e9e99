package proxmox

import "slices"

// APIUse is one PVE API method proxbus calls: the HTTP method, the path as the PVE schema
// writes it ("/storage/{storage}") and the non-path parameters it may send.
type APIUse struct {
	Method string
	Path   string
	Params []string
}

// UsedAPI returns every PVE API method this package calls, with the parameters it can send
// (path parameters are implied by the path and not listed). sim/pve serves exactly these and
// rejects anything else; TestUsedAPIMatchesSchema checks them against the PVE schema. The
// result is a fresh slice each call.
func UsedAPI() []APIUse {
	out := []APIUse{
		{Method: "GET", Path: "/version"},
		{Method: "GET", Path: "/nodes"},
		{Method: "GET", Path: "/cluster/resources", Params: []string{"type"}},
		{Method: "GET", Path: "/storage"},
		{Method: "GET", Path: "/storage/{storage}"},
		{Method: "POST", Path: "/storage", Params: slices.Clone(pbsCreateParams)},
		{Method: "PUT", Path: "/storage/{storage}", Params: slices.Clone(pbsUpdateParams)},
		{Method: "DELETE", Path: "/storage/{storage}"},
		{Method: "GET", Path: "/nodes/{node}/network", Params: []string{"type"}},
		{Method: "POST", Path: "/nodes/{node}/status", Params: []string{"command"}},
		{Method: "GET", Path: "/cluster/tasks"},
		{Method: "GET", Path: "/nodes/{node}/tasks", Params: []string{"source", "since", "start", "limit"}},
		{Method: "GET", Path: "/nodes/{node}/tasks/{upid}/status"},
		{Method: "GET", Path: "/nodes/{node}/tasks/{upid}/log", Params: []string{"start", "limit"}},
		{Method: "DELETE", Path: "/nodes/{node}/tasks/{upid}"},
	}
	out = append(out, guestAPI()...)
	out = append(out, provisionAPI()...)
	out = mergeAPI(out, migrateAPI())
	out = append(out, deleteAPI()...)
	out = mergeAPI(mergeAPI(append(out, imageAPI()...), backupAPI()), restoreAPI())
	return mergeAPI(out, containerAPI())
}
