#!/bin/sh
# postrm of the proxbus package: on purge, the secret files postinst made go with the
# configuration (dpkg removes the configuration files); the system user stays, as Debian
# leaves system users (files may still belong to it).
set -e
if [ "$1" = purge ]; then
	rm -f /etc/proxbus/credentials/netbox-token /etc/proxbus/credentials/pve-token
	rmdir /etc/proxbus/credentials /etc/proxbus 2>/dev/null || true
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
exit 0
