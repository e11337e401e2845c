#!/bin/sh
# hookonce package: before the files are unpacked (deb preinst: install |
# upgrade; rpm %pre: 1 | 2). Creates the system user and group `hookonce`
# if absent, so the files the package ships as root:hookonce and
# hookonce:hookonce (/etc/hookonce/hookonce.yaml, /var/lib/hookonce) get
# that owner as they are unpacked. Never removes or changes an existing one.
set -e

nologin=/usr/sbin/nologin
[ -x "$nologin" ] || nologin=/sbin/nologin
[ -x "$nologin" ] || nologin=/bin/false

if ! getent group hookonce >/dev/null 2>&1; then
	if command -v groupadd >/dev/null 2>&1; then
		groupadd --system hookonce
	else
		addgroup --system hookonce
	fi
fi
if ! getent passwd hookonce >/dev/null 2>&1; then
	if command -v useradd >/dev/null 2>&1; then
		useradd --system --gid hookonce --home-dir /var/lib/hookonce \
			--no-create-home --shell "$nologin" --comment "hookonce webhook sidecar" hookonce
	else
		adduser --system --ingroup hookonce --home /var/lib/hookonce \
			--no-create-home --shell "$nologin" --gecos "hookonce webhook sidecar" hookonce
	fi
fi
exit 0
