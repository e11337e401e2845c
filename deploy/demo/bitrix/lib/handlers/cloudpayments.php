<?php
// CloudPayments, as its Bitrix module takes it: one URL per notification
// kind told apart by ?action= (check before the charge, pay after it, fail,
// confirm when a two-stage payment is captured, refund, cancel when a hold
// is voided), a form body with TransactionId, InvoiceId (the shop's
// payment), Amount, Status…, and Content-HMAC: base64 HMAC-SHA256 of the raw body under the
// API secret. The answer that counts is {"code":0}; anything else is retried.
declare(strict_types=1);

final class CloudPaymentsHandler extends BxHandler
{
    public const ACTIONS = ['check', 'pay', 'fail', 'confirm', 'refund', 'cancel'];

    public static function code(): string
    {
        return 'cloudpayments';
    }

    // The action is read from the query string only: a form field named
    // action must not change which notification this is.
    public static function isMyResponse(BxRequest $request, int $paySystemId): bool
    {
        return in_array($request->getQuery('action'), self::ACTIONS, true)
            && is_string($_POST['TransactionId'] ?? null)
            && is_string($_POST['InvoiceId'] ?? null);
    }

    public function getPaymentIdFromRequest(BxRequest $request): ?string
    {
        $id = $_POST['InvoiceId'] ?? null;
        return is_string($id) ? $id : null;
    }

    public function processRequest(array $payment, BxRequest $request): BxResult
    {
        $result = new BxResult();
        $want = base64_encode(hash_hmac('sha256', $request->getInput(), bx_env('CLOUDPAYMENTS_API_SECRET'), true));
        $got = $request->header('Content-HMAC');
        if ($got === null || !hash_equals($want, trim($got))) {
            $result->addError('Content-HMAC mismatch');
            return $result;
        }
        $action = $request->getQuery('action');
        if ($action === 'refund') {
            // The refund's own TransactionId; the payment's is
            // PaymentTransactionId. The demo accepts it and changes nothing
            // (the module marks the payment unpaid; the storm counts
            // applications, not refunds).
            if (!is_string($_POST['PaymentTransactionId'] ?? null)) {
                $result->addError('no PaymentTransactionId');
            }
            return $result;
        }
        if (!bx_same_sum($_POST['Amount'] ?? null, $payment['SUM'])) {
            $result->addError('sum mismatch');
            return $result;
        }
        // check: may the charge go ahead? fail: it did not. cancel: a hold
        // was voided. pay: charged (Completed) or held (Authorized);
        // confirm: a hold captured (Completed), as the module marks it paid.
        $result->moneyComing = in_array($action, ['pay', 'confirm'], true) && ($_POST['Status'] ?? '') === 'Completed';
        return $result;
    }

    public function sendResponse(BxResult $result, BxRequest $request): void
    {
        header('Content-Type: application/json');
        echo $result->applied ? '{"code":0}' : '{"code":13}';
    }
}
