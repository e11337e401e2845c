#!/bin/sh
# hookonce package: before the files are removed (deb prerm: remove |
# upgrade …; rpm %preun: 0 on removal, 1 on upgrade). On a removal, when
# systemd runs: stops the service, and on rpm also disables it. A deb
# removal keeps the unit's enablement, as Debian's own packages do, so a
# reinstall over the kept config comes back as it was; the purge disables
# it (postremove). An upgrade leaves the service alone (postinstall
# restarts it).
set -e

case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac
if [ -d /run/systemd/system ]; then
	systemctl stop hookonce.service >/dev/null 2>&1 || true
	if [ "$1" = 0 ]; then
		systemctl disable hookonce.service >/dev/null 2>&1 || true
	fi
fi
exit 0
