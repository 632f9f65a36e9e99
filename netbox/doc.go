// Package netbox is proxbus's NetBox client. It does two things: it reads the netbox-proxbox
// plugin's ProxmoxEndpoint objects (for the allow_writes gate, contract §4) and it writes and
// updates journal entries (contract §6) through go-netbox.
//
// Every failure is classified into exactly one of the exported sentinels ([ErrNotFound],
// [ErrUnauthorized], [ErrUnavailable], [ErrRejected]) so callers can branch with [errors.Is];
// [*Error] carries the HTTP status and, for rejections, the names of the fields NetBox
// refused. No error text ever contains the API token or a value NetBox echoed back.
package netbox
