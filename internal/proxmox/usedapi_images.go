package proxmox

import (
	"strings"
)

// imageAPI is the PVE API vm.provision's cloud-image import uses: the storage content
// listing, download-url, VM creation with import-from and the cluster status (node IPs for
// the SSH fallback).
func imageAPI() []APIUse {
	return []APIUse{
		{Method: "GET", Path: "/nodes/{node}/storage/{storage}/content", Params: []string{"content"}},
		{Method: "POST", Path: "/nodes/{node}/storage/{storage}/download-url", Params: []string{
			"content", "filename", "url", "checksum", "checksum-algorithm", "verify-certificates",
		}},
		{Method: "POST", Path: "/nodes/{node}/qemu", Params: append([]string{"vmid"}, createVMParams...)},
		{Method: "GET", Path: "/cluster/status"},
	}
}

// Declares reports whether name is one of u's parameters. The PVE schema names indexed
// parameters "net[n]", "scsi[n]", …: such an entry declares "net0", "net1", … (a prefix
// followed by decimal digits only).
func (u APIUse) Declares(name string) bool {
	for _, p := range u.Params {
		if p == name {
			return true
		}
		prefix, indexed := strings.CutSuffix(p, "[n]")
		if !indexed {
			continue
		}
		if digits, found := strings.CutPrefix(name, prefix); found && digits != "" && strings.Trim(digits, "0123456789") == "" {
			return true
		}
	}
	return false
}
