// Package netbox is proxbus's NetBox client. It reads the netbox-proxbox plugin's
// ProxmoxEndpoint objects (for the allow_writes gate, contract §4), writes, updates and finds
// journal entries (contract §6), finds a guest's NetBox VM, and probes NetBox's status.
//
// NetBox's core API is called through go-netbox (github.com/netbox-community/go-netbox/v4):
// journal entry create, partial update and list, and the status probe. A 2xx answer that
// go-netbox's strict model decoding refuses is still NetBox's answer: the few fields proxbus
// needs are read from its raw body. Two GETs are plain net/http with encoding/json, because
// go-netbox cannot express them: the plugin's ProxmoxEndpoint detail ([EndpointPath]; go-netbox
// has no plugin models) and the VM search by the custom field proxmox_vm_id (go-netbox has no
// custom-field filters). Every answer body is read up to a fixed bound, and every request is
// bounded by a context deadline of [Config.Timeout].
//
// Every failure is classified into exactly one of the exported sentinels ([ErrNotFound],
// [ErrUnauthorized], [ErrUnavailable], [ErrRejected], and [ErrNotNetBox] for the status probe)
// so callers can branch with [errors.Is] ([ShouldWait] says which ones a command waits out);
// [*Error] carries the HTTP status and, for rejections, the names of the fields NetBox
// refused. No error text ever contains the API token or a value NetBox echoed back.
package netbox
