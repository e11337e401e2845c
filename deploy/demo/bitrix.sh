#!/usr/bin/env bash
# The demo 1C-Bitrix site twice — bare, and behind a locally built hookonce
# — under the same storm of signed payment notifications from six providers
# on its one dispatcher URL (/bitrix/tools/sale_ps_result.php); then, per
# provider, the payments applied once, more than once and never, read from
# each site's own database.
#
# Needs: go, php-cli with pdo_sqlite. Everything binds 127.0.0.1 on free
# ports, lives in a throwaway directory, and is stopped by PID on exit.
# Env: PAYMENTS (6 per provider), PROVIDERS (all six), COPIES (3 at once),
#      ATTEMPTS (10 per notification), CONCURRENCY (4 payments at once),
#      DELAY_MS (150: the site's slow order save), WORKERS (8 PHP workers),
#      FAIL_SHARE (0.3 of order saves fail: an empty 200, nothing applied),
#      FAIL_HANDLERS (robokassa,tbank,cloudpayments: the pay systems whose
#        saves may fail; "all" includes those whose success answer is any 200,
#        where neither the provider nor hookonce can see the failure),
#      TOGETHER (0; 1: a payment's notifications — T-Bank's AUTHORIZED and
#        CONFIRMED — are sent at once, each with its copies and retries),
#      TBANK_PAID_ON (CONFIRMED; AUTHORIZED,CONFIRMED: the site's T-Bank
#        handler pays the payment on either status),
#      SERIALIZE (1; 0: hookonce runs without the config's serialize lines),
#      DEMO_STORE (hookonce's --store; default a throwaway SQLite file),
#      HOOKONCE_BIN (a hookonce binary to run instead of building one),
#      HOOKONCE_CONFIG (bitrix-hookonce.yaml beside this script),
#      and the providers' secrets (demo values by default, see below).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
PAYMENTS=${PAYMENTS:-6} COPIES=${COPIES:-3} ATTEMPTS=${ATTEMPTS:-10} CONCURRENCY=${CONCURRENCY:-4}
PROVIDERS=${PROVIDERS:-robokassa,yookassa,tbank,cloudpayments,rbs,bitrix24}
WORKERS=${WORKERS:-8}
export BX_DELAY_MS=${DELAY_MS:-150}
export BX_FAIL_SHARE=${FAIL_SHARE:-0.3}
export BX_FAIL_HANDLERS=${FAIL_HANDLERS:-robokassa,tbank,cloudpayments}
export BX_TBANK_PAID_ON=${TBANK_PAID_ON:-CONFIRMED}
TOGETHER=${TOGETHER:-0} SERIALIZE=${SERIALIZE:-1}
# The shop's credentials at each provider: the site checks them, the storm
# signs with them, hookonce's config reads them (secret_env).
export ROBOKASSA_PASSWORD2=${ROBOKASSA_PASSWORD2:-demo-robokassa-password2}
export TBANK_TERMINAL_KEY=1700000000000DEMO # not a secret; bitrix-hookonce.yaml names it too
export TBANK_PASSWORD=${TBANK_PASSWORD:-demo-tbank-password}
export CLOUDPAYMENTS_API_SECRET=${CLOUDPAYMENTS_API_SECRET:-demo-cloudpayments-api-secret}
export RBS_CALLBACK_TOKEN=${RBS_CALLBACK_TOKEN:-demo-rbs-callback-token}
export BITRIX24_APP_TOKEN=${BITRIX24_APP_TOKEN:-demo-bitrix24-application-token}

command -v php >/dev/null || { echo "bitrix demo: php is not installed (apt-get install php-cli php-sqlite3)" >&2; exit 3; }
php -r 'exit(in_array("sqlite", PDO::getAvailableDrivers()) ? 0 : 1);' ||
  { echo "bitrix demo: php has no pdo_sqlite (apt-get install php-sqlite3)" >&2; exit 3; }

work=$(mktemp -d)
pids=()   # processes to stop
groups=() # process groups to stop (a PHP server and its workers)
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pgid in "${groups[@]}"; do kill -- "-$pgid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

echo "building hookonce and the storm tool…" >&2
if [ -n "${HOOKONCE_BIN:-}" ]; then
  cp "$HOOKONCE_BIN" "$work/hookonce"
else
  (cd "$root" && CGO_ENABLED=0 go build -o "$work/hookonce" .)
fi
(cd "$root" && go build -o "$work/storm" ./deploy/demo/storm)
storm="$work/storm"

# start_site NAME VAR: the demo site under PHP's built-in server on its own
# SQLite file; its port goes into VAR (not $(…): a subshell would lose its PID).
start_site() {
  local name=$1 port
  port=$("$storm" freeport)
  mkdir -p "$work/$name"
  cp -r "$here/bitrix/." "$work/$name/"
  # setsid: the server and its forked workers form one group, stopped together.
  (cd "$work/$name" && PHP_CLI_SERVER_WORKERS=$WORKERS BX_DSN="sqlite:$work/$name/bitrix.db" \
    exec setsid php -S "127.0.0.1:$port" router.php >"$work/$name/php.log" 2>&1) &
  groups+=($!)
  "$storm" wait "http://127.0.0.1:$port/healthz" >&2
  printf -v "$2" '%s' "$port"
}

start_site bare bare_port
start_site guarded guarded_port

config=${HOOKONCE_CONFIG:-$here/bitrix-hookonce.yaml}
if [ "$SERIALIZE" = 0 ]; then # the same config, its serialize lines left out
  grep -v '^ *serialize:' "$config" >"$work/hookonce-noserialize.yaml"
  config=$work/hookonce-noserialize.yaml
fi
hookonce_port=$("$storm" freeport)
admin_port=$("$storm" freeport)
HOOKONCE_ADMIN_LISTEN="127.0.0.1:$admin_port" "$work/hookonce" serve \
  --listen "127.0.0.1:$hookonce_port" --upstream "http://127.0.0.1:$guarded_port" \
  --config "$config" --store "${DEMO_STORE:-sqlite:$work/hookonce.db}" --drain-timeout 5s \
  >"$work/hookonce.log" 2>&1 &
pids+=($!)
"$storm" wait "http://127.0.0.1:$hookonce_port/healthz" >&2

run="bitrix-$(date +%s)"
storm_args=(--providers "$PROVIDERS" --payments "$PAYMENTS" --copies "$COPIES" --attempts "$ATTEMPTS"
  --concurrency "$CONCURRENCY" --deadline 120s --run "$run")
[ "$TOGETHER" = 1 ] && storm_args+=(--together)
echo "storm: $PAYMENTS payments × {$PROVIDERS}, $COPIES copies at once, up to $ATTEMPTS attempts;" \
  "site: ${BX_DELAY_MS}ms order save, $BX_FAIL_SHARE of saves fail ($BX_FAIL_HANDLERS);" \
  "notifications of a payment $([ "$TOGETHER" = 1 ] && echo "at once" || echo "one after another")," \
  "T-Bank pays on $BX_TBANK_PAID_ON, hookonce $([ "$SERIALIZE" = 0 ] && echo "without" || echo "with") serialize" >&2
# storm OUT LABEL TARGET SITE: fire in the background and wait, so TERM stops the demo at once.
storm() {
  "$storm" bitrix --label "$2" --target "$3" --site "$4" "${storm_args[@]}" >"$work/$1" &
  pids+=($!)
  if ! wait $!; then
    echo "bitrix demo: the $2 storm failed; the logs' last lines:" >&2
    tail -n 20 "$work/hookonce.log" "$work/bare/php.log" "$work/guarded/php.log" >&2
    exit 1
  fi
}
storm bare.out bare "http://127.0.0.1:$bare_port" "http://127.0.0.1:$bare_port"
storm guarded.out hookonce "http://127.0.0.1:$hookonce_port" "http://127.0.0.1:$guarded_port"

echo
echo "== bare site"
grep -v '^RESULT' "$work/bare.out"
echo "== behind hookonce"
grep -v '^RESULT' "$work/guarded.out"
if grep -q 'outcome=rejected_signature' "$work/hookonce.log"; then
  echo "hookonce refused signatures:" >&2
  grep 'outcome=rejected_signature' "$work/hookonce.log" | head -5 >&2
fi
# total NAME FIELD: one figure of a run's total line.
total() { grep '^RESULT .*provider=total ' "$work/$1.out" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
echo
printf '%-26s %-12s %-16s\n' "" "bare site" "behind hookonce"
for row in "payments:payments" "applied once:once" "applied twice or more:doubles" "never applied:lost" \
  "handler runs:runs" "  of which failed saves:failed_runs" "deliveries:deliveries" "  answered by replay:replayed" \
  "notifications given up:gave_up"; do
  printf '%-26s %-12s %-16s\n' "${row%%:*}" "$(total bare "${row#*:}")" "$(total guarded "${row#*:}")"
done
echo
grep -h '^RESULT' "$work/bare.out" "$work/guarded.out"
