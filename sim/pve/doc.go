// Package simpve is an in-process simulator of the parts of the Proxmox VE API that proxbus
// uses, written to PVE's wire contract so that tests and `proxbus dev` exercise the real
// client code:
//
//   - the /api2/json envelope ({"data": …}), application/json;charset=UTF-8, 0/1 booleans;
//   - errors as PVE sends them: the message in the HTTP status line and in the JSON
//     "message", 400 "Parameter verification failed." with per-parameter "errors",
//     500 for "storage 'x' does not exist" and "storage ID 'x' already defined",
//     501 "Method 'GET /xyz' not implemented";
//   - API-token authentication (Authorization: PVEAPIToken=USER@REALM!TOKENID=SECRET) with
//     401 on a missing or wrong token and 403 "Permission check failed (path, privilege)";
//   - only the methods, paths and parameters listed by proxmox.UsedAPI: any other parameter
//     is refused like PVE refuses undeclared properties, any other path answers 501.
//
// Fault injection (latency, failing the next requests, dropping the answer after a change
// was applied, refusing connections) and observation (request counts, a request log with
// secrets redacted, direct access to the storage configuration) are safe for concurrent
// use while the server is serving.
//
// Deliberate simplifications: no 3-second delay on authentication failures; PBS storages
// are created without contacting the PBS server; only PBS storages can be created.
package simpve
