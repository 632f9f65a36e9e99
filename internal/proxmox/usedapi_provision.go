package proxmox

import "slices"

// provisionAPI is the PVE API vm.provision's clone, relocation and configuration use (the
// configuration read, GET .../config with current=1, is declared with the guest methods;
// the storage inventory is GET /cluster/resources?type=storage). Indexed keys are written
// as the schema names them ("net[n]" declares net0, net1, …).
func provisionAPI() []APIUse {
	base := "/nodes/{node}/qemu/{vmid}"
	config := append(slices.Clone(configKeys), "ipconfig[n]", "ide[n]", "net[n]")
	return []APIUse{
		{Method: "POST", Path: base + "/clone", Params: []string{"newid", "name", "target", "storage", "full"}},
		{Method: "POST", Path: base + "/move_disk", Params: []string{"disk", "storage", "delete"}},
		{Method: "POST", Path: base + "/config", Params: config},
		{Method: "PUT", Path: base + "/resize", Params: []string{"disk", "size"}},
	}
}
