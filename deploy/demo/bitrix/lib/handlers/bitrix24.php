<?php
// A Bitrix24 portal's outbound event, taken by a marketplace module that
// syncs payments received in the CRM: a form POST with event,
// data[FIELDS][ID] (here: the shop's payment), ts and auth[application_token].
// Its isMyResponse() says yes to everything — the greedy handler every
// old Bitrix site seems to have — so it must stay last in the pay system
// list, or it takes every other provider's notifications.
declare(strict_types=1);

final class Bitrix24Handler extends BxHandler
{
    public static function code(): string
    {
        return 'bitrix24';
    }

    public static function isMyResponse(BxRequest $request, int $paySystemId): bool
    {
        return true;
    }

    public function getPaymentIdFromRequest(BxRequest $request): ?string
    {
        $id = $_POST['data']['FIELDS']['ID'] ?? null;
        return is_string($id) ? $id : null;
    }

    public function processRequest(array $payment, BxRequest $request): BxResult
    {
        $result = new BxResult();
        $token = $_POST['auth']['application_token'] ?? null;
        if (!is_string($token) || !hash_equals(bx_env('BITRIX24_APP_TOKEN'), $token) || $token === '') {
            $result->addError('application_token mismatch');
            return $result;
        }
        $result->moneyComing = ($_POST['event'] ?? '') === 'ONCRMINVOICESETSTATUS'
            && ($_POST['data']['FIELDS']['STATUS_ID'] ?? '') === 'P';
        return $result;
    }
}
