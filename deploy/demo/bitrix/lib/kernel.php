<?php
// A stand-in for the parts of 1C-Bitrix's kernel and sale module that a
// payment notification goes through: the request object, the pay system
// list that PaySystem\Manager::searchByRequest walks, and
// PaySystem\Service::processRequest, which loads the payment, lets the
// handler judge the notification, marks the payment paid and has the
// handler answer. It keeps Bitrix's shape and its weakness: the payment is
// loaded without a lock, the slow order save runs later, and nothing stops
// two deliveries of one notification from both finding it unpaid.
//
// Env: BX_DSN            PDO DSN (default sqlite:<site>/bitrix.db)
//      BX_DELAY_MS       the order save's slow part (events, cashbox, the 1C
//                        exchange), between loading the payment and saving it (150)
//      BX_FAIL_SHARE     share of payment saves that fail transiently (0..1, 0):
//                        a lock wait timeout; the page comes out empty, HTTP 200
//      BX_FAIL_HANDLERS  pay systems whose saves may fail: codes, comma-separated, or all (all)
//      BX_REALIP_FROM    peers whose X-Forwarded-For is believed, as nginx's
//                        set_real_ip_from (127.0.0.1,::1)
//      and the providers' secrets, named as hookonce's config and the storm name them:
//      ROBOKASSA_PASSWORD2, TBANK_TERMINAL_KEY, TBANK_PASSWORD,
//      CLOUDPAYMENTS_API_SECRET, RBS_CALLBACK_TOKEN, BITRIX24_APP_TOKEN
declare(strict_types=1);

require_once __DIR__ . '/handlers/roboxchange.php';
require_once __DIR__ . '/handlers/yandexcheckout.php';
require_once __DIR__ . '/handlers/tbank.php';
require_once __DIR__ . '/handlers/cloudpayments.php';
require_once __DIR__ . '/handlers/rbs.php';
require_once __DIR__ . '/handlers/bitrix24.php';

// The pay systems in the order searchByRequest tries them (b_sale_pay_system
// sorted by SORT): ID => handler class. The last one claims every request it
// is asked about, so it has to stay last — on the site and in hookonce's
// config alike.
const BX_PAY_SYSTEMS = [
    1 => RoboxchangeHandler::class,
    2 => YandexCheckoutHandler::class,
    3 => TBankHandler::class,
    4 => CloudPaymentsHandler::class,
    5 => RbsHandler::class,
    6 => Bitrix24Handler::class,
];

function bx_env(string $name, string $default = ''): string
{
    $v = getenv($name);
    return ($v === false || $v === '') ? $default : $v;
}

function bx_db(): PDO
{
    static $db = null;
    if ($db === null) {
        $db = new PDO(bx_env('BX_DSN', 'sqlite:' . dirname(__DIR__) . '/bitrix.db'));
        $db->setAttribute(PDO::ATTR_ERRMODE, PDO::ERRMODE_EXCEPTION);
        $db->setAttribute(PDO::ATTR_DEFAULT_FETCH_MODE, PDO::FETCH_ASSOC);
        $db->setAttribute(PDO::ATTR_TIMEOUT, 30); // SQLite busy timeout, seconds
    }
    return $db;
}

// bx_install creates the tables (the site's "installation"). No unique
// constraint anywhere: this is the schema nobody dares to touch.
function bx_install(): void
{
    $db = bx_db();
    $db->exec('PRAGMA journal_mode=WAL');
    $db->exec('CREATE TABLE IF NOT EXISTS b_sale_order_payment (
        ID INTEGER PRIMARY KEY,
        PAY_SYSTEM_ID INTEGER NOT NULL,
        SUM TEXT NOT NULL,
        CURRENCY TEXT NOT NULL DEFAULT \'RUB\',
        PAID TEXT NOT NULL DEFAULT \'N\',
        DATE_PAID TEXT,
        PS_INVOICE_ID TEXT,
        PS_STATUS_DESCRIPTION TEXT)');
    // One row per time the site applied a payment: money credited to the
    // customer's account, the order moved on, the receipt queued. Two rows
    // for one payment is a double payment.
    $db->exec('CREATE TABLE IF NOT EXISTS b_sale_user_transact (
        ID INTEGER PRIMARY KEY AUTOINCREMENT,
        PAYMENT_ID INTEGER NOT NULL,
        PAY_SYSTEM_ID INTEGER NOT NULL,
        AMOUNT TEXT NOT NULL,
        DESCRIPTION TEXT,
        TRANSACT_DATE TEXT NOT NULL)');
    // The demo's own record of every handler run and how it ended.
    $db->exec('CREATE TABLE IF NOT EXISTS b_demo_handler_run (
        ID INTEGER PRIMARY KEY AUTOINCREMENT,
        PAY_SYSTEM_ID INTEGER,
        PAYMENT_ID TEXT,
        OUTCOME TEXT NOT NULL,
        CREATED TEXT NOT NULL)');
}

// BxRequest is Bitrix\Main\HttpRequest, as far as handlers use it.
final class BxRequest
{
    private ?string $raw = null;
    private ?array $json = null;
    private bool $jsonRead = false;

    // get reads a field the way $request->get() does: the POST value over
    // the query value.
    public function get(string $name): mixed
    {
        return $_POST[$name] ?? $_GET[$name] ?? null;
    }

    public function getQuery(string $name): mixed
    {
        return $_GET[$name] ?? null;
    }

    // toArray is every query and POST field, POST winning.
    public function toArray(): array
    {
        return array_merge($_GET, $_POST);
    }

    public function getInput(): string
    {
        return $this->raw ??= (string)file_get_contents('php://input');
    }

    // json is the body decoded as PHP decodes it, or null.
    public function json(): ?array
    {
        if (!$this->jsonRead) {
            $this->jsonRead = true;
            $v = json_decode($this->getInput(), true);
            $this->json = is_array($v) ? $v : null;
        }
        return $this->json;
    }

    public function header(string $name): ?string
    {
        $v = $_SERVER['HTTP_' . strtoupper(str_replace('-', '_', $name))] ?? null;
        return is_string($v) ? $v : null;
    }

    public function getRemoteAddress(): string
    {
        return (string)($_SERVER['REMOTE_ADDR'] ?? '');
    }
}

// BxResult is PaySystem\ServiceResult: errors, whether money came in, and
// whether the result was applied (the handler's answer depends on it).
final class BxResult
{
    public array $errors = [];
    public bool $moneyComing = false;
    public bool $applied = true;

    public function addError(string $msg): void
    {
        $this->errors[] = $msg;
        $this->applied = false;
    }

    public function isSuccess(): bool
    {
        return !$this->errors;
    }
}

// A lock wait timeout while the order is saved. Nothing catches it on the
// way up, so the handler never answers and the page comes out empty.
final class BxLockTimeout extends RuntimeException
{
}

abstract class BxHandler
{
    public function __construct(public readonly int $paySystemId)
    {
    }

    // The pay system's code in BX_FAIL_HANDLERS, the report and the storm.
    abstract public static function code(): string;

    // isMyResponse: does this notification belong to this pay system?
    abstract public static function isMyResponse(BxRequest $request, int $paySystemId): bool;

    // getPaymentIdFromRequest: the shop's payment ID, or null.
    abstract public function getPaymentIdFromRequest(BxRequest $request): ?string;

    // processRequest verifies the notification (signature, amount, status)
    // against the loaded payment and says whether money came in.
    abstract public function processRequest(array $payment, BxRequest $request): BxResult;

    // sendResponse writes the handler's answer. Bitrix's default writes nothing.
    public function sendResponse(BxResult $result, BxRequest $request): void
    {
    }
}

// PaySystem\Manager::searchByRequest: every pay system's isMyResponse in
// turn, the first that says yes wins.
function bx_search_by_request(BxRequest $request): ?BxHandler
{
    foreach (BX_PAY_SYSTEMS as $id => $class) {
        if ($class::isMyResponse($request, $id)) {
            return new $class($id);
        }
    }
    return null;
}

// PaySystem\Service::processRequest, naive as it is: SELECT the payment,
// judge the notification, then — after the slow part — UPDATE it paid and
// record the money. Nothing holds a lock between the SELECT and the UPDATE.
function bx_process_request(BxHandler $handler, BxRequest $request): void
{
    $result = new BxResult();
    $paymentId = $handler->getPaymentIdFromRequest($request);
    $payment = false;
    if ($paymentId !== null && $paymentId !== '') {
        $q = bx_db()->prepare('SELECT * FROM b_sale_order_payment WHERE ID = ?');
        $q->execute([$paymentId]);
        $payment = $q->fetch();
        $q->closeCursor(); // or SQLite keeps a read snapshot open, and the later UPDATE fails at once
    }
    if ($payment === false || (int)$payment['PAY_SYSTEM_ID'] !== $handler->paySystemId) {
        $result->addError('payment not found');
        bx_run_log($handler, $paymentId, 'rejected');
        $handler->sendResponse($result, $request);
        return;
    }
    $result = $handler->processRequest($payment, $request);
    if (!$result->isSuccess()) {
        bx_run_log($handler, $paymentId, 'rejected');
    } elseif (!$result->moneyComing) {
        bx_run_log($handler, $paymentId, 'accepted');
    } elseif ($payment['PAID'] === 'Y') {
        // setPaid('Y') on a payment loaded as paid changes nothing.
        bx_run_log($handler, $paymentId, 'already');
    } else {
        bx_save_paid($handler, $payment);
        bx_run_log($handler, $paymentId, 'applied');
    }
    $handler->sendResponse($result, $request);
}

// bx_save_paid is $payment->setPaid('Y') and $order->save(): slow, and
// sometimes failing on a lock wait timeout before it writes anything.
function bx_save_paid(BxHandler $handler, array $payment): void
{
    usleep(1000 * (int)bx_env('BX_DELAY_MS', '150'));
    if (bx_fails_now($handler)) {
        bx_run_log($handler, (string)$payment['ID'], 'failed');
        throw new BxLockTimeout('Lock wait timeout exceeded; try restarting transaction');
    }
    $db = bx_db();
    $db->prepare('UPDATE b_sale_order_payment SET PAID = \'Y\', DATE_PAID = ? WHERE ID = ?')
        ->execute([gmdate('c'), $payment['ID']]);
    $db->prepare('INSERT INTO b_sale_user_transact (PAYMENT_ID, PAY_SYSTEM_ID, AMOUNT, DESCRIPTION, TRANSACT_DATE) VALUES (?, ?, ?, ?, ?)')
        ->execute([$payment['ID'], $payment['PAY_SYSTEM_ID'], $payment['SUM'], 'ORDER_PAY', gmdate('c')]);
}

function bx_fails_now(BxHandler $handler): bool
{
    $share = (float)bx_env('BX_FAIL_SHARE', '0');
    if ($share <= 0) {
        return false;
    }
    $only = bx_env('BX_FAIL_HANDLERS', 'all');
    if ($only !== 'all' && !in_array($handler::code(), array_map('trim', explode(',', $only)), true)) {
        return false;
    }
    return mt_rand() / mt_getrandmax() < $share;
}

function bx_run_log(?BxHandler $handler, ?string $paymentId, string $outcome): void
{
    bx_db()->prepare('INSERT INTO b_demo_handler_run (PAY_SYSTEM_ID, PAYMENT_ID, OUTCOME, CREATED) VALUES (?, ?, ?, ?)')
        ->execute([$handler?->paySystemId, $paymentId, $outcome, gmdate('c')]);
}

// bx_same_sum compares two amounts in roubles to the kopeck, as
// PriceMaths::roundPrecision does before Bitrix compares them.
function bx_same_sum(mixed $a, mixed $b): bool
{
    return is_numeric($a) && is_numeric($b) && round((float)$a, 2) === round((float)$b, 2);
}

// bx_ip_in reports whether an address is in one of the CIDR ranges.
function bx_ip_in(string $ip, array $ranges): bool
{
    $addr = @inet_pton($ip);
    if ($addr === false) {
        return false;
    }
    foreach ($ranges as $range) {
        [$net, $bits] = array_pad(explode('/', $range, 2), 2, null);
        $netAddr = @inet_pton($net);
        if ($netAddr === false || strlen($netAddr) !== strlen($addr)) {
            continue;
        }
        $bits = $bits === null ? strlen($addr) * 8 : (int)$bits;
        $bytes = intdiv($bits, 8);
        if (substr($addr, 0, $bytes) !== substr($netAddr, 0, $bytes)) {
            continue;
        }
        $rest = $bits % 8;
        if ($rest === 0 || ((ord($addr[$bytes]) ^ ord($netAddr[$bytes])) & (0xff << (8 - $rest)) & 0xff) === 0) {
            return true;
        }
    }
    return false;
}

// bx_real_ip does what nginx's realip module does in front of a Bitrix
// site (set_real_ip_from <trusted>; real_ip_header X-Forwarded-For;
// real_ip_recursive on): when the peer is trusted, REMOTE_ADDR becomes the
// last address in X-Forwarded-For that is not.
function bx_real_ip(): void
{
    $trusted = array_map('trim', explode(',', bx_env('BX_REALIP_FROM', '127.0.0.1,::1')));
    $peer = (string)($_SERVER['REMOTE_ADDR'] ?? '');
    $xff = $_SERVER['HTTP_X_FORWARDED_FOR'] ?? '';
    if (!bx_ip_in($peer, $trusted) || $xff === '') {
        return;
    }
    $hops = array_map('trim', explode(',', $xff));
    for ($i = count($hops) - 1; $i >= 0; $i--) {
        if (@inet_pton($hops[$i]) === false) {
            return;
        }
        if (!bx_ip_in($hops[$i], $trusted)) {
            $_SERVER['REMOTE_ADDR'] = $hops[$i];
            return;
        }
    }
}
