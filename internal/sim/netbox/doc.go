// Package simnetbox is an in-process simulator of the parts of NetBox that proxbus uses: the
// REST API's journal entries, the netbox-proxbox plugin's ProxmoxEndpoint objects, virtual
// machines (for lookups by the proxmox_vm_id custom field) and /api/status/.
//
// It follows NetBox's wire contract: trailing-slash routes, "Token <v1>" and "Bearer nbt_…"
// authentication answered with 403 {"detail": …} when refused, 201 with the full object on
// create, 400 {"field": ["message"]} on validation errors, 404 {"detail": "Not found."},
// paginated lists {count, next, previous, results}. Faults (latency, failing requests or
// PATCHes, a NetBox that is down) can be injected at any time, concurrently with requests.
package simnetbox
