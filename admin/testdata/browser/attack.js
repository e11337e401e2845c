// Attacks an admin listener without a token from another site, in the
// machine's Chromium, and prints what each attempt came to as JSON. Run by
// admin/crosssite_test.go: node attack.js ADMIN EVIL_PAGES CHROMIUM
//   ADMIN       the admin listener, http://127.0.0.1:PORT
//   EVIL_PAGES  the attacker's server, http://evil.example:PORT (evil.example
//               is mapped to 127.0.0.1 in the browser's resolver)
// Each attack is a page of the attacker's that submits a form to the
// admin API; "rebind" reads the API under the attacker's name (what a
// DNS-rebinding page does); "sameorigin" is a script on the listener's
// own origin posting JSON, which must work.
const { chromium } = require('playwright-core');

(async () => {
  const [admin, evil, exe] = process.argv.slice(2);
  const adminPort = new URL(admin).port;
  const browser = await chromium.launch({
    executablePath: exe,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage',
      '--host-resolver-rules=MAP evil.example 127.0.0.1'],
  });
  const out = {};
  try {
    const page = await browser.newPage();
    // A form the attacker's page submits on load; the answer is the page
    // the browser lands on.
    for (const name of ['redeliver', 'release']) {
      const [resp] = await Promise.all([
        page.waitForResponse((r) => r.url().startsWith(admin + '/v1/'), { timeout: 20000 }),
        page.goto(evil + '/attack/' + name),
      ]);
      out[name] = { status: resp.status(), body: await resp.text() };
    }
    const rebound = await page.goto('http://evil.example:' + adminPort + '/v1/events/shop/lost-7');
    out.rebind = { status: rebound.status(), body: await rebound.text() };
    // The listener's own origin: /healthz has no CSP, so a script there
    // may fetch.
    await page.goto(admin + '/healthz');
    out.sameorigin = await page.evaluate(async () => {
      const r = await fetch('/v1/redeliver/shop/lost-7?force=true', { method: 'POST', headers: { 'Content-Type': 'application/json' } });
      return { status: r.status, body: await r.text() };
    });
    console.log(JSON.stringify(out));
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
