<?php
// T-Bank (Tinkoff) internet acquiring, as its Bitrix module takes it: a
// JSON notification per status change (AUTHORIZED, then CONFIRMED) with
// TerminalKey, OrderId (the shop's payment), PaymentId and Token. The
// answer that stops T-Bank's retries is the body "OK".
declare(strict_types=1);

final class TBankHandler extends BxHandler
{
    public static function code(): string
    {
        return 'tbank';
    }

    // Ours when it is JSON for our terminal and names a payment.
    public static function isMyResponse(BxRequest $request, int $paySystemId): bool
    {
        $data = $request->json();
        return $data !== null
            && ($data['TerminalKey'] ?? null) === bx_env('TBANK_TERMINAL_KEY')
            && isset($data['PaymentId'], $data['OrderId']);
    }

    public function getPaymentIdFromRequest(BxRequest $request): ?string
    {
        $id = $request->json()['OrderId'] ?? null;
        return is_scalar($id) ? (string)$id : null;
    }

    // Token = SHA-256 of the values of the root's scalar fields and
    // Password, ordered by field name; booleans as "true"/"false".
    public static function token(array $data, string $password): string
    {
        $fields = ['Password' => $password];
        foreach ($data as $name => $value) {
            if ($name === 'Token' || is_array($value) || $value === null) {
                continue;
            }
            $fields[$name] = is_bool($value) ? ($value ? 'true' : 'false') : (string)$value;
        }
        ksort($fields, SORT_STRING);
        return hash('sha256', implode('', $fields));
    }

    public function processRequest(array $payment, BxRequest $request): BxResult
    {
        $result = new BxResult();
        $data = $request->json();
        $token = $data['Token'] ?? null;
        if (!is_string($token) || !hash_equals(self::token($data, bx_env('TBANK_PASSWORD')), strtolower($token))) {
            $result->addError('token mismatch');
            return $result;
        }
        if (($data['Success'] ?? false) !== true) {
            $result->addError('not a success');
            return $result;
        }
        if (!isset($data['Amount']) || !bx_same_sum($data['Amount'] / 100, $payment['SUM'])) {
            $result->addError('sum mismatch');
            return $result;
        }
        // AUTHORIZED: money held, nothing to record yet. CONFIRMED: paid.
        // BX_TBANK_PAID_ON=AUTHORIZED,CONFIRMED is a site whose module is
        // set to mark the payment paid once the money is held: both
        // statuses then pay it, and the payment's "paid yet?" check is all
        // that keeps the second from paying it again — when they arrive
        // together, it does not.
        $paidOn = array_map('trim', explode(',', bx_env('BX_TBANK_PAID_ON', 'CONFIRMED')));
        $result->moneyComing = in_array($data['Status'] ?? null, $paidOn, true);
        return $result;
    }

    public function sendResponse(BxResult $result, BxRequest $request): void
    {
        if ($result->applied) {
            echo 'OK';
        }
    }
}
