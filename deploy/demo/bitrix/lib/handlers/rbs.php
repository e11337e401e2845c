<?php
// RBS (the Sberbank/Alfa-Bank gateway, Bitrix's sberbankonline handler):
// a callback with mdOrder (the gateway's order), orderNumber
// ("<payment>_<pay system>_<attempt>"), operation, status and checksum:
// upper-case hex HMAC-SHA256 under the callback token of every other
// parameter, sorted by name, as "name;value;". Any HTTP 200 ends it — and
// Bitrix answers 200 with an empty body either way.
declare(strict_types=1);

final class RbsHandler extends BxHandler
{
    public static function code(): string
    {
        return 'rbs';
    }

    // getIndicativeFields() = [mdOrder, orderNumber, checksum, operation,
    // status], then the pay system named in orderNumber.
    public static function isMyResponse(BxRequest $request, int $paySystemId): bool
    {
        foreach (['mdOrder', 'orderNumber', 'checksum', 'operation', 'status'] as $f) {
            if ($request->get($f) === null) {
                return false;
            }
        }
        $parts = explode('_', (string)$request->get('orderNumber'));
        return (int)($parts[1] ?? 0) === $paySystemId;
    }

    public function getPaymentIdFromRequest(BxRequest $request): ?string
    {
        return explode('_', (string)$request->get('orderNumber'))[0];
    }

    public function processRequest(array $payment, BxRequest $request): BxResult
    {
        $result = new BxResult();
        $params = $request->toArray();
        $checksum = $params['checksum'] ?? '';
        unset($params['checksum']);
        ksort($params, SORT_STRING);
        $signed = '';
        foreach ($params as $name => $value) {
            $signed .= $name . ';' . (is_string($value) ? $value : '') . ';';
        }
        $want = strtoupper(hash_hmac('sha256', $signed, bx_env('RBS_CALLBACK_TOKEN')));
        if (!is_string($checksum) || !hash_equals($want, strtoupper($checksum))) {
            $result->addError('checksum mismatch');
            return $result;
        }
        $result->moneyComing = $request->get('operation') === 'deposited' && (int)$request->get('status') === 1;
        return $result;
    }
}
