<?php
// The demo Bitrix site under PHP's built-in server:
//
//   PHP_CLI_SERVER_WORKERS=8 BX_DSN=sqlite:/tmp/site/bitrix.db php -S 127.0.0.1:8000 router.php
//
// It plays the site's nginx (the realip module: the sender's address from
// X-Forwarded-For when the peer is trusted) and routes:
//
//   POST /bitrix/tools/sale_ps_result.php  payment notifications (the dispatcher)
//   POST /demo/install   create the tables and the payments awaiting payment:
//                        {"payments": [{"id": 1001, "pay_system": "robokassa", "sum": "101.00"}, …]}
//   GET  /demo/report    per pay system: payments, applied once, applied more
//                        than once, never applied; handler runs by outcome
//   GET  /healthz
//
// Env: see lib/kernel.php.
declare(strict_types=1);

require_once __DIR__ . '/lib/kernel.php';

function demo_json(int $status, array $body): void
{
    http_response_code($status);
    header('Content-Type: application/json');
    echo json_encode($body, JSON_UNESCAPED_SLASHES), "\n";
}

bx_real_ip();
$path = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);
$method = $_SERVER['REQUEST_METHOD'];

if ($path === '/bitrix/tools/sale_ps_result.php') {
    require __DIR__ . '/bitrix/tools/sale_ps_result.php';
    return true;
}

if ($method === 'POST' && $path === '/demo/install') {
    $in = json_decode((string)file_get_contents('php://input'), true);
    $codes = [];
    foreach (BX_PAY_SYSTEMS as $id => $class) {
        $codes[$class::code()] = $id;
    }
    if (!is_array($in['payments'] ?? null)) {
        demo_json(400, ['error' => 'want {"payments": [...]}']);
        return true;
    }
    bx_install();
    $db = bx_db();
    $db->beginTransaction();
    $ins = $db->prepare('INSERT INTO b_sale_order_payment (ID, PAY_SYSTEM_ID, SUM) VALUES (?, ?, ?)');
    foreach ($in['payments'] as $p) {
        if (!isset($codes[$p['pay_system'] ?? '']) || !is_int($p['id'] ?? null) || !is_string($p['sum'] ?? null)) {
            $db->rollBack();
            demo_json(400, ['error' => 'bad payment ' . json_encode($p)]);
            return true;
        }
        $ins->execute([$p['id'], $codes[$p['pay_system']], $p['sum']]);
    }
    $db->commit();
    demo_json(200, ['payments' => count($in['payments'])]);
    return true;
}

if ($method === 'GET' && $path === '/demo/report') {
    $db = bx_db();
    $report = [];
    foreach (BX_PAY_SYSTEMS as $id => $class) {
        $report[$class::code()] = ['payments' => 0, 'applied_once' => 0, 'applied_more' => 0, 'never_applied' => 0,
            'applications' => 0, 'runs' => new stdClass()];
    }
    $rows = $db->query('SELECT p.PAY_SYSTEM_ID AS ps, COUNT(t.ID) AS n
        FROM b_sale_order_payment p LEFT JOIN b_sale_user_transact t ON t.PAYMENT_ID = p.ID
        GROUP BY p.ID')->fetchAll();
    foreach ($rows as $r) {
        $code = BX_PAY_SYSTEMS[(int)$r['ps']]::code();
        $n = (int)$r['n'];
        $report[$code]['payments']++;
        $report[$code]['applications'] += $n;
        $report[$code][$n === 0 ? 'never_applied' : ($n === 1 ? 'applied_once' : 'applied_more')]++;
    }
    foreach ($db->query('SELECT PAY_SYSTEM_ID AS ps, OUTCOME AS o, COUNT(*) AS n FROM b_demo_handler_run GROUP BY 1, 2') as $r) {
        $code = $r['ps'] === null ? 'none' : BX_PAY_SYSTEMS[(int)$r['ps']]::code();
        $report[$code]['runs'] ??= new stdClass();
        $report[$code]['runs']->{$r['o']} = (int)$r['n'];
    }
    demo_json(200, $report);
    return true;
}

if ($method === 'GET' && ($path === '/' || $path === '/healthz')) {
    demo_json(200, ['site' => 'open']);
    return true;
}

demo_json(404, ['error' => 'not found']);
return true;
