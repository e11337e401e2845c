<?php
// A deliberately naive "legacy shop": one order per payment webhook, created
// the way countless shops do it — SELECT to see whether the event was seen,
// do the slow work (here: a pretend call to the warehouse API), then INSERT.
// Two deliveries of one event that overlap both see "not yet" and both
// create an order. There is no unique constraint, on purpose: this is the
// site nobody wants to touch, and hookonce goes in front of it unchanged.
//
//
// Its order webhook is as naive about *different* events: order.created,
// order.paid and order.updated about one order each ask "no shipment for
// this order yet?", work, and create one. Each event is delivered once,
// yet when they arrive together every one of them ships the order.
// hookonce's event key cannot help there (the events are distinct);
// serialize, keyed by the order, runs them one at a time.
//
// Run: PHP_CLI_SERVER_WORKERS=8 php -S 127.0.0.1:8000 shop.php
// Env: SHOP_DSN   PDO DSN (default sqlite:<this dir>/shop.db)
//      SHOP_DELAY_MS  the slow part between SELECT and INSERT (default 300)

function db(): PDO {
    $dsn = getenv('SHOP_DSN') ?: 'sqlite:' . __DIR__ . '/shop.db';
    $db = new PDO($dsn);
    $db->setAttribute(PDO::ATTR_ERRMODE, PDO::ERRMODE_EXCEPTION);
    $db->setAttribute(PDO::ATTR_TIMEOUT, 30); // SQLite busy timeout, seconds
    if (str_starts_with($dsn, 'sqlite:')) {
        $db->exec('PRAGMA journal_mode=WAL');
    }
    $db->exec('CREATE TABLE IF NOT EXISTS orders (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL,
        amount INTEGER NOT NULL,
        created_at TEXT NOT NULL)');
    $db->exec('CREATE TABLE IF NOT EXISTS shipments (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        order_id TEXT NOT NULL,
        event_id TEXT NOT NULL,
        created_at TEXT NOT NULL)');
    return $db;
}

function answer(int $status, array $body): void {
    http_response_code($status);
    header('Content-Type: application/json');
    echo json_encode($body), "\n";
}

$path = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);
$method = $_SERVER['REQUEST_METHOD'];

if ($method === 'POST' && $path === '/webhooks/payment') {
    $event = json_decode(file_get_contents('php://input'), true);
    if (!is_array($event) || !isset($event['id']) || !is_string($event['id'])) {
        answer(400, ['error' => 'no event id']);
        return;
    }
    $db = db();
    $seen = $db->prepare('SELECT id FROM orders WHERE event_id = ?');
    $seen->execute([$event['id']]);
    $order = $seen->fetchColumn();
    if ($order !== false) {
        answer(200, ['order_id' => (int)$order, 'status' => 'already processed']);
        return;
    }
    usleep(1000 * (int)(getenv('SHOP_DELAY_MS') ?: 300)); // the warehouse API is slow
    $ins = $db->prepare('INSERT INTO orders (event_id, amount, created_at) VALUES (?, ?, ?)');
    $ins->execute([$event['id'], (int)($event['amount'] ?? 0), gmdate('c')]);
    answer(200, ['order_id' => (int)$db->lastInsertId(), 'status' => 'created']);
    return;
}

// An event about an order ({"id": event, "type": "order.paid", "order": …}):
// ship the order unless a shipment exists. The same handler answers on a
// second URL so that one hookonce can guard it twice, without and with
// serialize (deploy/demo/hookonce.yaml).
if ($method === 'POST' && ($path === '/webhooks/order' || $path === '/webhooks/order-serialized')) {
    $event = json_decode(file_get_contents('php://input'), true);
    if (!is_array($event) || !is_string($event['id'] ?? null) || !is_string($event['order'] ?? null)) {
        answer(400, ['error' => 'no event id or order']);
        return;
    }
    $db = db();
    $seen = $db->prepare('SELECT id FROM shipments WHERE order_id = ?');
    $seen->execute([$event['order']]);
    $shipment = $seen->fetchColumn();
    $seen->closeCursor();
    if ($shipment !== false) {
        answer(200, ['shipment_id' => (int)$shipment, 'status' => 'already shipped']);
        return;
    }
    usleep(1000 * (int)(getenv('SHOP_DELAY_MS') ?: 300)); // the warehouse API is slow
    $ins = $db->prepare('INSERT INTO shipments (order_id, event_id, created_at) VALUES (?, ?, ?)');
    $ins->execute([$event['order'], $event['id'], gmdate('c')]);
    answer(200, ['shipment_id' => (int)$db->lastInsertId(), 'status' => 'shipped']);
    return;
}

if ($method === 'GET' && $path === '/orders/count') {
    $row = db()->query('SELECT COUNT(*) AS orders, COUNT(DISTINCT event_id) AS events FROM orders')->fetch(PDO::FETCH_ASSOC);
    answer(200, ['orders' => (int)$row['orders'], 'events' => (int)$row['events']]);
    return;
}

if ($method === 'GET' && ($path === '/' || $path === '/healthz')) {
    answer(200, ['shop' => 'open']);
    return;
}

answer(404, ['error' => 'not found']);
