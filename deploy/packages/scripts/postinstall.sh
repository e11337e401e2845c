#!/bin/sh
# hookonce package: after the files are in place (deb postinst: configure
# [old-version]; rpm %post: 1 on install, 2 on upgrade). Fixes the owners
# and modes of the state directory and the config (they matter for the
# service user), enables the unit on a first install when systemd runs,
# and never starts it: the shipped config names no sender yet. On an
# upgrade a running hookonce is restarted (try-restart: a stopped one stays
# stopped, a disabled one stays disabled).
set -e

case "$1" in
configure) if [ -z "$2" ]; then first=yes; else first=no; fi ;;
1) first=yes ;;
2) first=no ;;
*) exit 0 ;; # abort-upgrade, abort-remove, …: nothing to undo
esac

# The user exists (preinstall); repeat in case it was removed since.
getent passwd hookonce >/dev/null 2>&1 || {
	echo "hookonce: the system user hookonce is missing (preinstall creates it)" >&2
	exit 1
}
chown hookonce:hookonce /var/lib/hookonce
chmod 0750 /var/lib/hookonce
if [ "$first" = yes ]; then
	# The operator may have changed these later; only the first install sets them.
	chown root:hookonce /etc/hookonce/hookonce.yaml
	chmod 0640 /etc/hookonce/hookonce.yaml
fi

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	if [ "$first" = yes ]; then
		systemctl enable hookonce.service >/dev/null 2>&1 || true
		state="installed and enabled, not started"
	else
		systemctl try-restart hookonce.service >/dev/null 2>&1 || true
	fi
else
	state="installed; systemd is not running, so not enabled: systemctl enable hookonce"
fi

if [ "$first" = yes ]; then
	cat <<NOTE
hookonce is $state.
  edit /etc/hookonce/hookonce.yaml (your senders; secrets in /etc/hookonce/env, mode 0600),
  check it:  hookonce check --config /etc/hookonce/hookonce.yaml
  then:      systemctl start hookonce
NOTE
fi
exit 0
