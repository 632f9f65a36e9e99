package proxmox

// provisionAPI is the PVE API vm.provision's clone, relocation and configuration use.
func provisionAPI() []APIUse { return nil }
