#!/usr/bin/env bash
# The naive shop twice — bare, and behind a locally built hookonce — under
# the same storm of parallel and repeated webhook deliveries; then the order
# counts side by side, read from each shop's own database. Then a second
# storm: for each order, three different events about it (order.created,
# order.paid, order.updated) at once, each with its copies and repeats, on
# the shop's order webhook — bare, behind hookonce, and behind hookonce
# with serialize keyed by the order; the shipments each round made.
#
# Needs: go, php-cli with pdo_sqlite. Everything binds 127.0.0.1 on free
# ports, lives in a throwaway directory, and is stopped by PID on exit.
# Env: EVENTS (20), COPIES (4 at once per event), REPEATS (2 later), SHOP_DELAY_MS (300),
#      ORDERS (10, three events each; 0 skips the order storm),
#      DEMO_STORE (hookonce's --store; default a throwaway SQLite file)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
EVENTS=${EVENTS:-20} COPIES=${COPIES:-4} REPEATS=${REPEATS:-2} ORDERS=${ORDERS:-10}
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
# storm OUT URL [ARGS…]: fire in the background and wait, so TERM stops the demo at once.
storm() {
  "$storm" fire --target "$2" "${storm_args[@]}" "${@:3}" >"$work/$1" &
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

[ "$ORDERS" -gt 0 ] || exit 0

# shipments DB RUN: shipments the round RUN made, and orders shipped at least once.
shipments() {
  php -r '$db = new PDO("sqlite:" . $argv[1]);
          $q = $db->prepare("SELECT COUNT(*), COUNT(DISTINCT order_id) FROM shipments WHERE order_id LIKE ?");
          $q->execute([$argv[2] . "-ord-%"]);
          $r = $q->fetch(PDO::FETCH_NUM);
          echo $r[0], " ", $r[1];' "$1" "$2"
}
echo "storm: $ORDERS orders × 3 events (created, paid, updated) at once × ($COPIES at once + $REPEATS repeats)" >&2
storm bare.orders "http://127.0.0.1:$bare_port/webhooks/order" --mode orders --events "$ORDERS" --run "$run-bare"
storm guarded.orders "http://127.0.0.1:$hookonce_port/webhooks/order" --mode orders --events "$ORDERS" --run "$run-hookonce"
storm serialized.orders "http://127.0.0.1:$hookonce_port/webhooks/order-serialized" --mode orders --events "$ORDERS" --run "$run-serialized"
read -r bare_ship bare_shipped <<<"$(shipments "$work/bare/shop.db" "$run-bare")"
read -r guarded_ship guarded_shipped <<<"$(shipments "$work/guarded/shop.db" "$run-hookonce")"
read -r ser_ship ser_shipped <<<"$(shipments "$work/guarded/shop.db" "$run-serialized")"

printf '\n%-28s %-12s %-18s %-18s\n' "" "bare shop" "behind hookonce" "hookonce+serialize"
printf '%-28s %-12s %-18s %-18s\n' "orders" "$ORDERS" "$ORDERS" "$ORDERS"
printf '%-28s %-12s %-18s %-18s\n' "events sent (3 per order)" "$((3 * ORDERS))" "$((3 * ORDERS))" "$((3 * ORDERS))"
d=$((3 * ORDERS * (COPIES + REPEATS)))
printf '%-28s %-12s %-18s %-18s\n' "deliveries sent" "$d" "$d" "$d"
printf '%-28s %-12s %-18s %-18s\n' "orders shipped" "$bare_shipped" "$guarded_shipped" "$ser_shipped"
printf '%-28s %-12s %-18s %-18s\n' "shipments in the shop's db" "$bare_ship" "$guarded_ship" "$ser_ship"
printf '%-28s %-12s %-18s %-18s\n' "duplicate shipments" "$((bare_ship - bare_shipped))" "$((guarded_ship - guarded_shipped))" "$((ser_ship - ser_shipped))"
echo
echo "bare order storm:       $(cat "$work/bare.orders")"
echo "guarded order storm:    $(cat "$work/guarded.orders")"
echo "serialized order storm: $(cat "$work/serialized.orders")"
echo "RESULT orders=$ORDERS bare_shipments=$bare_ship bare_shipped=$bare_shipped hookonce_shipments=$guarded_ship hookonce_shipped=$guarded_shipped serialized_shipments=$ser_ship serialized_shipped=$ser_shipped"
