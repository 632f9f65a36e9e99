package simnetbox

import (
	"fmt"
	"net/http"
)

func vmURL(r *http.Request, id int64) string {
	return fmt.Sprintf("%s/api/virtualization/virtual-machines/%d/", baseURL(r), id)
}

// vmBrief is NetBox's nested VirtualMachine form.
func vmBrief(r *http.Request, v *vm) map[string]any {
	return map[string]any{"id": v.ID, "url": vmURL(r, v.ID), "display": v.Name, "name": v.Name, "description": ""}
}

// vmJSON renders the VirtualMachine fields proxbus reads, in NetBox's shape.
func vmJSON(r *http.Request, v *vm) map[string]any {
	out := vmBrief(r, v)
	out["display_url"] = fmt.Sprintf("%s/virtualization/virtual-machines/%d/", baseURL(r), v.ID)
	out["status"] = map[string]string{"value": "active", "label": "Active"}
	if v.ClusterID > 0 {
		name := fmt.Sprintf("cluster-%d", v.ClusterID)
		out["cluster"] = map[string]any{
			"id": v.ClusterID, "url": fmt.Sprintf("%s/api/virtualization/clusters/%d/", baseURL(r), v.ClusterID),
			"display": name, "name": name, "description": "",
		}
	} else {
		out["cluster"] = nil
	}
	out["custom_fields"] = map[string]any{"proxmox_vm_id": v.ProxmoxVMID}
	out["tags"] = []any{}
	out["created"] = fmtTime(v.Created)
	out["last_updated"] = fmtTime(v.Created)
	return out
}

// listVMs supports the filters cf_proxmox_vm_id, cluster_id, id and name (each repeatable).
func (s *Server) listVMs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	errs := fieldErrors{}
	sets := map[string]map[int64]bool{}
	for _, name := range []string{"cf_proxmox_vm_id", "cluster_id", "id"} {
		set, e := intFilter(q[name], name)
		for k, v := range e {
			errs[k] = v
		}
		sets[name] = set
	}
	if len(errs) > 0 {
		writeJSON(w, http.StatusBadRequest, errs)
		return
	}
	listByID(s, w, r, s.vms, func(v *vm) bool {
		return inSet(sets["cf_proxmox_vm_id"], v.ProxmoxVMID) && inSet(sets["cluster_id"], v.ClusterID) &&
			inSet(sets["id"], v.ID) && matches(q["name"], v.Name, func(s string) string { return s })
	}, vmJSON)
}

// getVM answers GET …/virtual-machines/{id}/.
func (s *Server) getVM(w http.ResponseWriter, r *http.Request) {
	getByID(s, w, r, s.vms, vmJSON)
}
