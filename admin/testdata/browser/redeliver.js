// Signs in to the /ui page, opens an event, presses "Redeliver to the site"
// and prints what the page says afterwards as JSON. Run by
// admin/redeliver_test.go: node redeliver.js BASE TOKEN SENDER KEY CHROMIUM
// (TOKEN "": a listener without one)
const { chromium } = require('playwright-core');

(async () => {
  const [base, token, sender, key, exe] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: exe,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  try {
    const page = await browser.newPage();
    const eventPath = '/ui/events/' + encodeURIComponent(sender) + '/' + encodeURIComponent(key);
    // An empty TOKEN: the listener has none, and the page needs no sign-in.
    await page.goto(token ? base + '/ui/login?token=' + encodeURIComponent(token) + '&next=' + encodeURIComponent(eventPath) : base + eventPath);
    const before = await page.locator('#attempts tr.attempt').count();
    const hasButton = await page.locator('#redeliver button').count();
    if (!hasButton) {
      console.log(JSON.stringify({ before, button: false }));
      return;
    }
    await Promise.all([page.waitForNavigation(), page.click('#redeliver button')]);
    const note = (await page.locator('#note').textContent()) || '';
    const after = await page.locator('#attempts tr.attempt').count();
    const state = (await page.locator('h1 .state').textContent()) || '';
    await page.screenshot({ path: process.env.SCREENSHOT || '/tmp/hookonce-redeliver.png' });
    console.log(JSON.stringify({ before, button: true, note, after, state }));
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
