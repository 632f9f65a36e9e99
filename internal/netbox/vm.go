package netbox

import (
	"context"
	"encoding/json"
	"strconv"
)

// VM is what proxbus needs of a NetBox virtual machine.
type VM struct {
	ID   int64
	Name string
	// ClusterID is the NetBox cluster's id, 0 when the VM has none.
	ClusterID int64
	// ProxmoxVMID is the custom field proxmox_vm_id, 0 when unset.
	ProxmoxVMID int64
}

// VMsByProxmoxID lists the NetBox VMs whose custom field proxmox_vm_id equals vmid (the first
// 100), in NetBox's order. No match is an empty slice and no error. Errors are classified like
// every other request; an unreadable answer is ErrUnavailable.
func (c *Client) VMsByProxmoxID(ctx context.Context, vmid int64) ([]VM, error) {
	op := "find VM " + strconv.FormatInt(vmid, 10)
	body, err := c.get(ctx, op, "/api/virtualization/virtual-machines/?cf_proxmox_vm_id="+strconv.FormatInt(vmid, 10)+"&limit=100")
	if err != nil {
		return nil, err
	}
	var page struct {
		Results *[]struct {
			ID      int64  `json:"id"`
			Name    string `json:"name"`
			Cluster *struct {
				ID int64 `json:"id"`
			} `json:"cluster"`
			CustomFields map[string]json.RawMessage `json:"custom_fields"`
		} `json:"results"`
	}
	if err := json.Unmarshal(body, &page); err != nil || page.Results == nil {
		return nil, newError(op, ErrUnavailable, 200, nil, "answer is not a VM list", nil, c.secrets)
	}
	out := make([]VM, 0, len(*page.Results))
	for _, r := range *page.Results {
		vm := VM{ID: r.ID, Name: r.Name}
		if r.Cluster != nil {
			vm.ClusterID = r.Cluster.ID
		}
		var id int64
		if json.Unmarshal(r.CustomFields["proxmox_vm_id"], &id) == nil {
			vm.ProxmoxVMID = id
		}
		out = append(out, vm)
	}
	return out, nil
}
