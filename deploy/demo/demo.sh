#!/usr/bin/env bash
# The naive shop twice — bare, and behind a locally built hookonce — under
# the same storm of parallel and repeated webhook deliveries; then the order
# counts side by side, read from each shop's own database.
#
# Needs: go, php-cli with pdo_sqlite. Everything binds 127.0.0.1 on free
# ports, lives in a throwaway directory, and is stopped by PID on exit.
# Env: EVENTS (20), COPIES (4 at once per event), REPEATS (2 later), SHOP_DELAY_MS (300),
#      DEMO_STORE (hookonce's --store; default a throwaway SQLite file)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
EVENTS=${EVENTS:-20} COPIES=${COPIES:-4} REPEATS=${REPEATS:-2}
export SHOP_DELAY_MS=${SHOP_DELAY_MS:-300}

command -v php >/dev/null || { echo "demo: php is not installed (apt-get install php-cli php-sqlite3)" >&2; exit 3; }
php -r 'exit(in_array("sqlite", PDO::getAvailableDrivers()) ? 0 : 1);' ||
  { echo "demo: php has no pdo_sqlite (apt-get install php-sqlite3)" >&2; exit 3; }

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
(cd "$root" && CGO_ENABLED=0 go build -o "$work/hookonce" . && go build -o "$work/storm" ./deploy/demo/storm)
storm="$work/storm"

# start_shop NAME VAR: a PHP built-in server with 8 workers on its own SQLite
# file; its port goes into VAR (not $(…): a subshell would lose its PID).
start_shop() {
  local name=$1 port
  port=$("$storm" freeport)
  mkdir -p "$work/$name"
  cp "$here/shop.php" "$work/$name/shop.php"
  # setsid: the server and its forked workers form one group, stopped together.
  (cd "$work/$name" && PHP_CLI_SERVER_WORKERS=8 SHOP_DSN="sqlite:$work/$name/shop.db" \
    exec setsid php -S "127.0.0.1:$port" shop.php >"$work/$name/php.log" 2>&1) &
  groups+=($!)
  "$storm" wait "http://127.0.0.1:$port/healthz" >&2
  printf -v "$2" '%s' "$port"
}

orders() { # orders in the shop's own database: total and distinct events
  php -r '$db = new PDO("sqlite:" . $argv[1]);
          $r = $db->query("SELECT COUNT(*), COUNT(DISTINCT event_id) FROM orders")->fetch(PDO::FETCH_NUM);
          echo $r[0], " ", $r[1];' "$1"
}

start_shop bare bare_port
start_shop guarded guarded_port

hookonce_port=$("$storm" freeport)
admin_port=$("$storm" freeport)
HOOKONCE_ADMIN_LISTEN="127.0.0.1:$admin_port" "$work/hookonce" serve \
  --listen "127.0.0.1:$hookonce_port" --upstream "http://127.0.0.1:$guarded_port" \
  --config "$here/hookonce.yaml" --store "${DEMO_STORE:-sqlite:$work/hookonce.db}" --drain-timeout 5s \
  >"$work/hookonce.log" 2>&1 &
pids+=($!)
"$storm" wait "http://127.0.0.1:$hookonce_port/healthz" >&2

run="demo-$(date +%s)"
storm_args=(--events "$EVENTS" --copies "$COPIES" --repeats "$REPEATS" --concurrency 2 --deadline 90s --run "$run")
echo "storm: $EVENTS events × ($COPIES at once + $REPEATS repeats)" >&2
# storm OUT URL: fire in the background and wait, so TERM stops the demo at once.
storm() {
  "$storm" fire --target "$2" "${storm_args[@]}" >"$work/$1" &
  pids+=($!)
  wait $!
}
storm bare.storm "http://127.0.0.1:$bare_port/webhooks/payment"
storm guarded.storm "http://127.0.0.1:$hookonce_port/webhooks/payment"
bare_storm=$(cat "$work/bare.storm")
guarded_storm=$(cat "$work/guarded.storm")

read -r bare_orders bare_events <<<"$(orders "$work/bare/shop.db")"
read -r guarded_orders guarded_events <<<"$(orders "$work/guarded/shop.db")"

printf '\n%-28s %-16s %-16s\n' "" "bare shop" "behind hookonce"
printf '%-28s %-16s %-16s\n' "events sent" "$EVENTS" "$EVENTS"
printf '%-28s %-16s %-16s\n' "deliveries sent" "$((EVENTS * (COPIES + REPEATS)))" "$((EVENTS * (COPIES + REPEATS)))"
printf '%-28s %-16s %-16s\n' "events with an order" "$bare_events" "$guarded_events"
printf '%-28s %-16s %-16s\n' "orders in the shop's db" "$bare_orders" "$guarded_orders"
printf '%-28s %-16s %-16s\n' "duplicate orders" "$((bare_orders - bare_events))" "$((guarded_orders - guarded_events))"
echo
echo "bare storm:    $bare_storm"
echo "guarded storm: $guarded_storm"
echo "RESULT events=$EVENTS bare_orders=$bare_orders bare_events=$bare_events hookonce_orders=$guarded_orders hookonce_events=$guarded_events"
