#!/bin/sh
# postinst of the proxbus package: the system user, empty secret files for the operator to
# fill (root only, never replaced), and systemd told of the unit. The service is not started:
# /etc/proxbus needs filling first (docs/operations.md "Debian package").
set -e
case "$1" in
configure | "")
	if ! getent passwd proxbus >/dev/null; then
		adduser --system --group --home /nonexistent --no-create-home --quiet proxbus
	fi
	for f in netbox-token pve-token; do
		[ -e "/etc/proxbus/credentials/$f" ] || install -m 0600 /dev/null "/etc/proxbus/credentials/$f"
	done
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload || true
	fi
	;;
esac
exit 0
