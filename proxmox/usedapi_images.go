package proxmox

// imageAPI is the PVE API vm.provision's cloud-image import uses.
func imageAPI() []APIUse { return nil }
