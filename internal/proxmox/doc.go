// Package proxmox is proxbus's driver for the Proxmox VE API, built on
// github.com/luthermonson/go-proxmox.
//
// Every API call goes through go-proxmox's Client.Req as shipped: it sends the request with
// the API token (failing over between an endpoint's URLs), turns a refusal into its APIError
// and decodes the "data" of a 2xx answer with encoding/json into a target of this package.
// PVE's loosely typed values (numbers that may come as strings, booleans as 0/1) are read by
// json.Unmarshaler types here. The one exchange outside the API, and so outside go-proxmox,
// is the SSH node shell ([DialNodeShell], [DownloadOverSSH]), the fallback for image
// downloads: it runs commands on a node, which no API call does. A guest's configuration is
// parsed by package guestconfig.
//
// It owns everything proxbus needs to talk to a cluster: the endpoints file (one entry per
// NetBox ProxmoxEndpoint), token secrets that never leave the process, TLS with CA files or
// certificate fingerprint pinning, and typed operations that return a small, stable set of
// errors callers branch on:
//
//   - [ErrUnreachable]: nothing was sent (dial, TLS or connection failure before the request
//     was written); retrying cannot duplicate a write.
//   - [ErrAnswerLost]: the request was written but no usable answer came back (timeout, reset,
//     unreadable body); a write may have happened and must be confirmed by a read.
//   - [*APIError]: Proxmox answered with a refusal (HTTP status, message, per-parameter errors);
//     it also matches [ErrNotFound], [ErrUnauthorized] and [ErrAlreadyExists] where that applies.
//
// Guest operations (power, snapshots; see [Client.ResolveGuest]) wait for the Proxmox task
// they start and add: the guest sentinels ([ErrVMNotFound], [ErrVMAmbiguous],
// [ErrVMNotRunning], [ErrUnsupportedForContainer], [ErrReservedSnapshotName]), returned
// before any write, and [*TaskError] for a task that ended with an error exit status.
//
// Requests are never retried by this package: go-proxmox's retry wrapper is not enabled, and
// failover between the URLs of one endpoint only moves on when the request provably was not
// delivered (or, for reads, when a gateway error came back).
//
// Secrets (token secrets, PBS passwords) are carried as [Secret], which prints, marshals and
// logs as "[redacted]"; they are scrubbed from every error text this package builds.
package proxmox
