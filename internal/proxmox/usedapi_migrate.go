package proxmox

// migrateAPI is the PVE API vm.migrate uses: the QEMU migration preconditions, the migrate
// POST of VMs and containers with the parameters [MigrateRequest.Form] sends, and a node's task
// list (a lost migrate answer is confirmed by the guest's migration tasks; vm.backup lists
// the same method, so UsedAPI merges the two). Where the guest is comes from
// /cluster/resources, a container's volumes from its config and the storages' sharing from
// /cluster/resources?type=storage, all declared already.
func migrateAPI() []APIUse {
	return []APIUse{
		{Method: "GET", Path: "/nodes/{node}/qemu/{vmid}/migrate", Params: []string{"target"}},
		{Method: "POST", Path: "/nodes/{node}/qemu/{vmid}/migrate", Params: []string{"target", "online", "with-local-disks", "targetstorage"}},
		{Method: "POST", Path: "/nodes/{node}/lxc/{vmid}/migrate", Params: []string{"target", "restart", "target-storage"}},
		{Method: "GET", Path: "/nodes/{node}/tasks", Params: []string{"vmid", "typefilter", "source"}},
	}
}
