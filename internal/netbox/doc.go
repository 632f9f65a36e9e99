// Package netbox is proxbus's NetBox client. It reads the netbox-proxbox plugin's
// ProxmoxEndpoint objects (for the allow_writes gate, contract §4), writes, updates and finds
// journal entries (contract §6), and finds a guest's NetBox VM. Request bodies are go-netbox's
// types; the two writes every command makes are sent directly and only the fields proxbus needs
// are read from their answers (go-netbox's strict decoding of them was a large share of a
// command's CPU), the searches go through go-netbox.
//
// Every failure is classified into exactly one of the exported sentinels ([ErrNotFound],
// [ErrUnauthorized], [ErrUnavailable], [ErrRejected]) so callers can branch with [errors.Is];
// [*Error] carries the HTTP status and, for rejections, the names of the fields NetBox
// refused. No error text ever contains the API token or a value NetBox echoed back.
package netbox
