// Package nodeshell is an in-process SSH server standing for a Proxmox VE node's shell, for
// tests and `proxbus dev` of the SSH image-download fallback (proxmox.DownloadOverSSH).
//
// The node's filesystem is a directory on the host (its "root"): an absolute node path
// /var/lib/vz/x is root/var/lib/vz/x, and no path can leave root. The server understands
// exactly the commands the fallback sends, with POSIX single/double quoting:
//
//	mkdir -p -- DIR…
//	md5sum|sha1sum|sha224sum|sha256sum|sha384sum|sha512sum [--] FILE…
//	rm -f -- FILE…
//	wget -q -O FILE -- URL     (fetched with Go's HTTP client)
//	mv -f -- SRC DST
//
// and answers anything else with exit status 127 ("command not found"), as bash would.
// Exit statuses and stderr texts follow coreutils and wget. The host key is an ed25519 key
// generated per server; clients authenticate with public keys registered through
// [Server.Authorize] or [Server.ClientFiles] (which also writes a known_hosts file).
// Every goroutine the server starts is owned by it: [Server.Close] stops and waits for them.
package nodeshell
