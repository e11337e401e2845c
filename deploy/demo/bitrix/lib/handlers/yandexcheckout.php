<?php
// YooKassa (Bitrix's yandexcheckout handler): a JSON notification whose
// object.metadata carries what Bitrix put there when it created the
// payment (BX_HANDLER=YANDEX_CHECKOUT, BX_PAYSYSTEM_CODE, BX_PAYMENT_NUMBER).
// YooKassa signs nothing: Bitrix checks that the sender's address is in
// YooKassa's ranges. Any HTTP 200 stops YooKassa's retries — and Bitrix
// answers 200 with an empty body whether or not it applied the payment.
declare(strict_types=1);

final class YandexCheckoutHandler extends BxHandler
{
    // YooKassa's notification addresses, as YooKassa publishes them.
    public const CALLBACK_IP_LIST = [
        '185.71.76.0/27', '185.71.77.0/27', '77.75.153.0/25', '77.75.156.11',
        '77.75.156.35', '77.75.154.128/25', '2a02:5180::/32',
    ];

    public static function code(): string
    {
        return 'yookassa';
    }

    public static function isMyResponse(BxRequest $request, int $paySystemId): bool
    {
        $meta = $request->json()['object']['metadata'] ?? null;
        return is_array($meta)
            && ($meta['BX_HANDLER'] ?? null) === 'YANDEX_CHECKOUT'
            && isset($meta['BX_PAYSYSTEM_CODE'])
            && (int)$meta['BX_PAYSYSTEM_CODE'] === $paySystemId;
    }

    public function getPaymentIdFromRequest(BxRequest $request): ?string
    {
        $n = $request->json()['object']['metadata']['BX_PAYMENT_NUMBER'] ?? null;
        return is_scalar($n) ? (string)$n : null;
    }

    public function processRequest(array $payment, BxRequest $request): BxResult
    {
        $result = new BxResult();
        if (!bx_ip_in($request->getRemoteAddress(), self::CALLBACK_IP_LIST)) {
            $result->addError('address ' . $request->getRemoteAddress() . ' is not YooKassa\'s');
            return $result;
        }
        $object = $request->json()['object'] ?? [];
        if (($object['status'] ?? null) !== 'succeeded') {
            $result->addError('status ' . json_encode($object['status'] ?? null));
            return $result;
        }
        if (!bx_same_sum($object['amount']['value'] ?? null, $payment['SUM'])) {
            $result->addError('sum mismatch');
            return $result;
        }
        $result->moneyComing = true;
        return $result;
    }
}
