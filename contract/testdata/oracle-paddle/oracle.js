// Judges generated Paddle deliveries with Paddle's official Node SDK, for
// contract/oracle_paddle_test.go. Reads a JSON array of cases {body,
// secret, signature} on stdin and prints a JSON array of verdicts (true:
// accepted) from paddle.webhooks.isSignatureValid, the check the SDK's
// unmarshal makes before it parses (a malformed header throws: false).
// The SDK judges ts by the machine's clock (at most 5 s old).
'use strict';

const { Paddle, LogLevel } = require('@paddle/paddle-node-sdk');

// No request is made: the API key only satisfies the constructor.
const paddle = new Paddle('pdl_sdbx_apikey_hookonce_oracle', { logLevel: LogLevel.none });

async function main() {
  let input = '';
  for await (const chunk of process.stdin) input += chunk;
  const cases = JSON.parse(input);
  const out = [];
  for (const c of cases) {
    try {
      out.push(await paddle.webhooks.isSignatureValid(c.body, c.secret, c.signature));
    } catch (e) {
      out.push(false);
    }
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
