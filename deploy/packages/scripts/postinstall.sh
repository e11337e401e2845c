#!/bin/sh
# hookonce package: after the files are in place (deb postinst: configure
# [old-version]; rpm %post: 1 on install, 2 on upgrade). Fixes the owners
# and modes of the state directory, the config and the env file (they
# matter for the service user), makes the admin token when there is none,
# checks the config as the service will read it (`hookonce check` reads
# /etc/hookonce/env with it), and never starts the service on a first
# install. The unit is enabled on a first
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

# The admin token: the unit gives serve HOOKONCE_ADMIN_TOKEN_FILE=$token,
# and the hookonce commands run as root find it there. Made once, on the
# first install or on the upgrade from a version without it, and never
# overwritten: the operator may have put their own in, and Prometheus may
# use it. 0640 root:hookonce: root writes it, the service's group reads it.
# 32 random bytes as hex; written under another name first, so the file
# never exists half-written or with a wider mode.
token=/etc/hookonce/admin-token
if [ ! -e "$token" ]; then
	new="$token.new.$$"
	(umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$new" && echo >>"$new")
	if [ "$(tr -d '\n' <"$new" | wc -c)" -ne 64 ]; then
		rm -f "$new"
		echo "hookonce: could not make the admin token $token from /dev/urandom" >&2
		exit 1
	fi
	chown root:hookonce "$new"
	chmod 0640 "$new"
	mv "$new" "$token"
	made_token=yes
fi

# The check's own message names what is missing (never a secret's value).
if check=$(/usr/bin/hookonce check --config /etc/hookonce/hookonce.yaml 2>&1); then
	ok=yes
else
	ok=no
fi

# An env file that sets HOOKONCE_ADMIN_TOKEN (possible before the package
# made a token file) and not HOOKONCE_ADMIN_TOKEN_FILE: serve would get
# both and refuse to start. Say so and leave a running hookonce running.
if grep -Eq '^[[:space:]]*(export[[:space:]]+)?HOOKONCE_ADMIN_TOKEN[[:space:]]*=' /etc/hookonce/env 2>/dev/null &&
	! grep -Eq '^[[:space:]]*(export[[:space:]]+)?HOOKONCE_ADMIN_TOKEN_FILE[[:space:]]*=' /etc/hookonce/env 2>/dev/null; then
	both="/etc/hookonce/env sets HOOKONCE_ADMIN_TOKEN, and the service now reads its token from $token:
  put your token into $token and delete the line from /etc/hookonce/env
  (or add the line HOOKONCE_ADMIN_TOKEN_FILE= to it, to keep the token in the env file)"
	if [ "$ok" = yes ]; then check=$both; else check="$check
$both"; fi
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
  every sender starts in shadow mode (mode: shadow): nothing is refused, all is counted;
  go live:   after a few days, hookonce readiness; delete the mode: shadow line of
             each sender it calls ready; systemctl reload hookonce
  the admin API (127.0.0.1:8081) needs the token in $token;
  hookonce's commands run as root send it themselves
  the check now says: $check
NOTE
elif [ "$ok" = no ]; then
	cat <<NOTE >&2
hookonce: the new version would not start with this host's configuration, so a
running hookonce was not restarted (it keeps running the old version until you do):
$check
NOTE
fi
if [ "$first" = no ] && [ "${made_token:-}" = yes ]; then
	cat <<NOTE
hookonce: the admin listener now requires a token, made in $token
  (hookonce's commands run as root send it; Prometheus's scrape job needs it too:
  docs/deployment.md, "The admin token")
NOTE
fi
exit 0
