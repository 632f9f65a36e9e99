package proxmox

import "slices"

// backupAPI is the PVE API vm.backup uses: vzdump, the backup listing of a storage's content
// (content and vmid; the same method as the image import's listing, so it adds vmid to that
// entry), and a node's task list (a lost vzdump answer is confirmed by the guest's vzdump
// tasks). The storage checks read GET /cluster/resources?type=storage and GET /storage,
// declared already.
func backupAPI() []APIUse {
	return []APIUse{
		{Method: "POST", Path: "/nodes/{node}/vzdump", Params: slices.Clone(backupParams)},
		{Method: "GET", Path: "/nodes/{node}/storage/{storage}/content", Params: []string{"content", "vmid"}},
		{Method: "GET", Path: "/nodes/{node}/tasks", Params: []string{"vmid", "typefilter", "since", "source"}},
	}
}

// mergeAPI adds uses to out: a method and path out already has gains the parameters it lacks
// (so two verbs may share a method, and sim/pve routes each method once); a new one is
// appended. It returns the extended slice.
func mergeAPI(out []APIUse, uses []APIUse) []APIUse {
	for _, u := range uses {
		i := slices.IndexFunc(out, func(o APIUse) bool { return o.Method == u.Method && o.Path == u.Path })
		if i < 0 {
			out = append(out, APIUse{Method: u.Method, Path: u.Path, Params: slices.Clone(u.Params)})
			continue
		}
		params := slices.Clone(out[i].Params)
		for _, p := range u.Params {
			if !slices.Contains(params, p) {
				params = append(params, p)
			}
		}
		out[i].Params = params
	}
	return out
}
