// Package pveparam checks the parameters of a Proxmox VE API request the way pveproxy does
// before a method runs: it decodes the request as pve-http-server does (UTF-8 values, an
// empty value is an absent one, the query overriding the body) and validates every
// parameter against the PVE 9.2 API schema with pve-common's JSONSchema rules (type,
// format, pattern, length in characters, bounds, enumeration, required and "requires"
// properties, property strings), answering with PVE's per-parameter messages.
//
// The schema of each method proxbus calls (proxmox.UsedAPI) is generated into
// table_gen.go from ../shared/contracts/pve/pve-9.2-apidoc.json by `go generate`; the
// formats the schema names ("pve-vmid", "pve-qm-ipconfig", …) are ported from pve-common,
// pve-storage and qemu-server, each citing the function it mirrors.
package pveparam

//go:generate go run ./gen -schema ../../../../../shared/contracts/pve/pve-9.2-apidoc.json -out table_gen.go
