package proxmox

import "slices"

// restoreAPI is the PVE API vm.restore, vm.backup.list and vm.backup.delete use: a VM's
// restore (POST /nodes/{node}/qemu with archive: the method of the image import's create,
// which gains the restore's parameters), a container's (POST /nodes/{node}/lxc with
// ostemplate and restore=1), and a backup's deletion. The backup listing, the storage checks,
// the guest lookup and the task list are declared already.
func restoreAPI() []APIUse {
	return []APIUse{
		{Method: "POST", Path: "/nodes/{node}/qemu", Params: slices.Clone(restoreQEMUParams)},
		{Method: "POST", Path: "/nodes/{node}/lxc", Params: slices.Clone(restoreLXCParams)},
		{Method: "DELETE", Path: "/nodes/{node}/storage/{storage}/content/{volume}"},
	}
}
