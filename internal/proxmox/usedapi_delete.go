package proxmox

// deleteAPI is the PVE API vm.delete uses besides the guest reads of [guestAPI]: the destroy
// of a QEMU VM or an LXC container (qemu-server's and pve-container's destroy_vm). LXC's force
// is not sent: a running guest is stopped first (POST .../status/stop) or refused.
func deleteAPI() []APIUse {
	params := []string{"purge", "destroy-unreferenced-disks"}
	return []APIUse{
		{Method: "DELETE", Path: "/nodes/{node}/qemu/{vmid}", Params: params},
		{Method: "DELETE", Path: "/nodes/{node}/lxc/{vmid}", Params: append([]string(nil), params...)},
	}
}
