package proxmox

// guestAPI is the guest part of [UsedAPI]: the same methods for QEMU and LXC where both
// exist (reset, suspend and resume are QEMU only), with the parameters this package sends.
func guestAPI() []APIUse {
	var out []APIUse
	for _, typ := range []GuestType{GuestQEMU, GuestLXC} {
		base := "/nodes/{node}/" + string(typ) + "/{vmid}"
		snapParams := []string{"snapname", "description"}
		if typ == GuestQEMU {
			snapParams = append(snapParams, "vmstate")
		}
		out = append(out,
			APIUse{Method: "GET", Path: base + "/status/current"},
			APIUse{Method: "POST", Path: base + "/status/start"},
			APIUse{Method: "POST", Path: base + "/status/stop"},
			APIUse{Method: "POST", Path: base + "/status/shutdown"},
			APIUse{Method: "POST", Path: base + "/status/reboot"},
			APIUse{Method: "GET", Path: base + "/config", Params: []string{"current"}},
			APIUse{Method: "GET", Path: base + "/snapshot"},
			APIUse{Method: "POST", Path: base + "/snapshot", Params: snapParams},
			APIUse{Method: "DELETE", Path: base + "/snapshot/{snapname}"},
			APIUse{Method: "POST", Path: base + "/snapshot/{snapname}/rollback", Params: []string{"start"}},
		)
		if typ == GuestQEMU {
			out = append(out,
				APIUse{Method: "POST", Path: base + "/status/reset"},
				APIUse{Method: "POST", Path: base + "/status/suspend"},
				APIUse{Method: "POST", Path: base + "/status/resume"},
			)
		}
	}
	return out
}
