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
//     is refused like PVE refuses undeclared properties, any other path answers 501;
//   - every request's parameters, its path's included, decoded and checked as pveproxy does
//     before the method runs (package pveparam: the PVE 9.2 schema of each method with
//     pve-common's, pve-storage's and qemu-server's formats; booleans only 1 and 0, an empty
//     value absent, lengths in characters), so a value PVE refuses is refused here with
//     PVE's message and one it accepts reaches the method; in rest_handler's order: an
//     undecodable JSON body (500), parameters contradicting the path (400), permissions
//     (403), the node the method is proxied to (500 for an unknown one, 595 for one that is
//     down), then the parameters (400);
//
// Guests (QEMU VMs and LXC containers) have real state machines: stopped, running and, for
// VMs, paused (qmpstatus); templates cannot start; every power or snapshot operation runs
// as a worker task with a real UPID that lasts [Options.TaskDuration] and ends with "OK" or
// an error exit status, holding the guest's lock meanwhile (a second operation gets PVE's
// "can't lock file … - got timeout"). Checks PVE makes before forking answer 500 with its
// texts ("CT 101 already running", "VM 100 not running"); checks its workers make end the
// task with them ("VM 100 already running", "snapshot 'x' does not exist"). Snapshot trees
// carry parents, RAM state and the "current" entry. POST /nodes/{node}/status
// command=reboot answers null and makes the node unreachable (595 "No route to host", as
// pveproxy answers for a dead node) for [Options.NodeRebootDuration]; it comes back with
// its guests stopped. Tasks and reboots run on simulated time, evaluated when a request or
// an observation looks: the simulator starts no goroutines for them. Tasks write their logs as
// PVE's workers do (GET /nodes/{node}/tasks/{upid}/log with start and limit), with the progress
// lines of vzdump, drive mirrors, qemu-img, live migration and wget; GET /nodes/{node}/tasks
// lists a node's tasks. vzdump backs a guest up into a PBS or directory storage, whose content
// then lists the backup (`backup/vm/<vmid>/<time>` on PBS); migrations answer the
// precondition check (local disks, local resources, not-allowed nodes) and move the guest;
// DELETE of a guest refuses a protected or running one as PVE does and removes its volumes.
// A PBS storage's options are updated (PUT, the password kept apart and never returned) and
// its registration removed (DELETE) as pve-storage does; a container is created from an OS
// template (POST /nodes/{node}/lxc, a vzcreate task) that the demo cluster has on every
// node's "local" storage and that the content listing shows as vztmpl.
//
// Fault injection (latency, failing the next requests, dropping the answer after a change
// was applied, refusing connections, failing the next task of a guest) and observation
// (request counts, a request log with secrets redacted, direct access to the storage
// configuration, guests and tasks) are safe for concurrent use while the server is serving.
//
// Deliberate simplifications: no 3-second delay on authentication failures; PBS storages
// are created without contacting the PBS server; only PBS storages can be created; a
// guest whose lock is held is refused at once (PVE waits up to 10 seconds for the lock).
package simpve
