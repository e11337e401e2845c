<?php
// Robokassa, as Bitrix's roboxchange handler takes it: a form POST to
// ResultURL with OutSum, InvId, SignatureValue and the shop's own Shp_
// fields; Bitrix adds SHP_HANDLER=ROBOXCHANGE and SHP_BX_PAYSYSTEM_CODE and
// recognises its notifications by them. The answer that stops Robokassa's
// retries is "OK<InvId>"; anything else, an empty page included, is retried.
declare(strict_types=1);

final class RoboxchangeHandler extends BxHandler
{
    public static function code(): string
    {
        return 'robokassa';
    }

    // getIndicativeFields() = [SHP_HANDLER => ROBOXCHANGE], then
    // isMyResponseExtended: SHP_BX_PAYSYSTEM_CODE is this pay system.
    public static function isMyResponse(BxRequest $request, int $paySystemId): bool
    {
        return $request->get('SHP_HANDLER') === 'ROBOXCHANGE'
            && (int)$request->get('SHP_BX_PAYSYSTEM_CODE') === $paySystemId;
    }

    public function getPaymentIdFromRequest(BxRequest $request): ?string
    {
        $id = $request->get('InvId');
        return is_string($id) ? $id : null;
    }

    // SignatureValue = MD5(OutSum:InvId:Password2[:Shp_name=value, sorted by
    // name]), compared case-insensitively.
    public function processRequest(array $payment, BxRequest $request): BxResult
    {
        $result = new BxResult();
        $parts = [(string)$request->get('OutSum'), (string)$request->get('InvId'), bx_env('ROBOKASSA_PASSWORD2')];
        $shp = [];
        foreach ($_POST as $name => $value) {
            if (is_string($value) && stripos((string)$name, 'shp_') === 0) {
                $shp[$name] = $value;
            }
        }
        ksort($shp, SORT_STRING);
        foreach ($shp as $name => $value) {
            $parts[] = $name . '=' . $value;
        }
        $sig = $request->get('SignatureValue');
        if (!is_string($sig) || !hash_equals(strtoupper(md5(implode(':', $parts))), strtoupper($sig))) {
            $result->addError('incorrect hash');
            return $result;
        }
        if (!bx_same_sum($request->get('OutSum'), $payment['SUM'])) {
            $result->addError('sum mismatch');
            return $result;
        }
        $result->moneyComing = true;
        return $result;
    }

    public function sendResponse(BxResult $result, BxRequest $request): void
    {
        if ($result->applied) {
            echo 'OK' . $request->get('InvId');
        }
    }
}
