#!/bin/sh
# hookonce package: after the files are in place (deb postinst: configure
# [old-version]; rpm %post: 1 on install, 2 on upgrade). Fixes the owners
# and modes of the state directory, the config and the env file (they
# matter for the service user), checks the config as the service will
# read it (`hookonce check` reads /etc/hookonce/env with it), and never
# starts the service on a first install. The unit is enabled on a first
# install only when the check passes (else a reboot would start a service
# that cannot); on an upgrade a running hookonce is restarted only when the
# check passes (try-restart: a stopped one stays stopped).
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
	for f in /etc/hookonce/hookonce.yaml /etc/hookonce/env; do
		chown root:hookonce "$f"
		chmod 0640 "$f"
	done
fi

# The check's own message names what is missing (never a secret's value).
if check=$(/usr/bin/hookonce check --config /etc/hookonce/hookonce.yaml 2>&1); then
	ok=yes
else
	ok=no
fi

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	if [ "$first" = yes ] && [ "$ok" = yes ]; then
		systemctl enable hookonce.service >/dev/null 2>&1 || true
		state="installed and enabled, not started"
	elif [ "$first" = yes ]; then
		state="installed, not enabled and not started"
	elif [ "$ok" = yes ]; then
		systemctl try-restart hookonce.service >/dev/null 2>&1 || true
	fi
else
	state="installed; systemd is not running, so not enabled"
fi

if [ "$first" = yes ]; then
	cat <<NOTE
hookonce is $state.
  edit /etc/hookonce/hookonce.yaml (your senders) and /etc/hookonce/env (their secrets),
  check it:  hookonce check
  then:      systemctl enable hookonce; systemctl start hookonce
  the check now says: $check
NOTE
elif [ "$ok" = no ]; then
	cat <<NOTE >&2
hookonce: /etc/hookonce/hookonce.yaml is refused by the new version, so a running
hookonce was not restarted (it keeps running the old version until you do):
$check
NOTE
fi
exit 0
