<?php
// /bitrix/tools/sale_ps_result.php, as 1C-Bitrix ships it: the one URL
// every payment provider notifies. It asks each pay system in turn whether
// the request is its own (PaySystem\Manager::searchByRequest) and hands it
// to the first that says yes. Every answer is HTTP 200; whether the
// payment was applied is in the body, in the provider's own words — or,
// when the order save failed, nowhere: the page is empty.
declare(strict_types=1);

require_once dirname(__DIR__, 2) . '/lib/kernel.php';

$request = new BxRequest();
$handler = bx_search_by_request($request);
if ($handler === null) {
    // PaySystem\Logger::addDebugInfo('Pay system not found. Request: …')
    bx_run_log(null, null, 'not_found');
    return;
}
try {
    bx_process_request($handler, $request);
} catch (BxLockTimeout $e) {
    // Bitrix's exception handler, debug off: logged, nothing shown, 200.
    error_log('sale_ps_result: ' . $handler::code() . ': ' . $e->getMessage());
}
