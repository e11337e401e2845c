// Judges generated deliveries with independent implementations from the
// npm registry, for contract/oracle_npm_test.go. Reads a JSON array of
// cases on stdin and prints a JSON array of verdicts (true: accepted).
// Each case is judged by the package's own public verification path:
//   robokassa      Robokassa#checkPayment          (@dev-aces/robokassa)
//   cloudpayments  NotificationHandlers#handlePayRequest, fed a request
//                  stream as Node's http server would (cloudpayments)
//   tbank          generateSignature, compared as WebhookHandler does
//                  (@jfkz/tinkoff-payment-sdk)
'use strict';

const { Readable } = require('stream');
const { Robokassa } = require('@dev-aces/robokassa');
const { ClientService } = require('cloudpayments');
const { generateSignature } = require('@jfkz/tinkoff-payment-sdk/dist/common/signature');

function robokassa(c) {
  const rk = new Robokassa({
    merchantLogin: 'hookonce', password1: 'unused', password2: c.secret, hashAlgorithm: c.alg,
  });
  return rk.checkPayment(c.fields);
}

async function cloudpayments(c) {
  const handlers = new ClientService({ publicId: 'pk_hookonce', privateKey: c.secret }).getNotificationHandlers();
  const req = Readable.from([Buffer.from(c.body, 'utf8')]);
  req.method = 'POST';
  req.url = c.url;
  req.headers = c.headers; // lower-case names, as Node's http server gives them
  try {
    await handlers.handlePayRequest(req);
    return true;
  } catch (e) {
    return false;
  }
}

function tbank(c) {
  // WebhookHandler#handleWebhookRequest's token check, without its
  // terminal-key check and payload re-typing, which are not signature rules.
  return c.payload.Token === generateSignature({ payload: c.payload, password: c.secret });
}

async function main() {
  let input = '';
  for await (const chunk of process.stdin) input += chunk;
  const out = [];
  for (const c of JSON.parse(input)) {
    switch (c.kind) {
      case 'robokassa': out.push(robokassa(c)); break;
      case 'cloudpayments': out.push(await cloudpayments(c)); break;
      case 'tbank': out.push(tbank(c)); break;
      default: throw new Error('unknown case kind ' + c.kind);
    }
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
