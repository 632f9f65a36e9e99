#!/bin/sh
# prerm of the proxbus package: stop and disable the service before its binary goes (stopping
# drains: in-flight commands finish first).
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	systemctl disable --now proxbus.service || true
fi
exit 0
