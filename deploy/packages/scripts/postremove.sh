#!/bin/sh
# hookonce package: after the files are removed (deb postrm: remove |
# purge | upgrade …; rpm %postun: 0 on removal, 1 on upgrade).
#
# What stays, as Debian does it: a removal keeps /etc/hookonce (the config,
# the operator's env file and the admin token postinstall made), /var/lib/hookonce (the SQLite store: the
# records of events already handled) and the unit's enablement; a purge
# (dpkg -P, apt purge) deletes all three. rpm has no purge: its removal
# keeps an edited config (as .rpmsave) and the database. The system user
# and group hookonce are kept in every case: a file left owned by its uid
# (a copy of the database) must not pass to the next system user created.
set -e

case "$1" in
purge)
	rm -rf /var/lib/hookonce
	rm -f /etc/hookonce/env /etc/hookonce/admin-token
	rmdir /etc/hookonce 2>/dev/null || true
	# systemctl disable needs the unit file, which is gone: remove the link.
	rm -f /etc/systemd/system/multi-user.target.wants/hookonce.service
	;;
esac
case "$1" in
remove | purge | 0)
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload >/dev/null 2>&1 || true
	fi
	;;
esac
exit 0
