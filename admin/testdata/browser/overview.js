// Signs in to the /ui page, opens the overview and prints, as JSON, the
// counts it shows per sender and outcome, how many bars each chart drew,
// the console messages (a CSP violation is one) and the page's visible
// text; saves a screenshot. Run by admin/overview_test.go:
// node overview.js BASE TOKEN CHROMIUM SCREENSHOT
const { chromium } = require('playwright-core');

(async () => {
  const [base, token, exe, shot] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: exe,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    const consoleMsgs = [];
    page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') consoleMsgs.push(m.text()); });
    page.on('pageerror', (e) => consoleMsgs.push(String(e)));
    await page.goto(base + '/ui/login?token=' + encodeURIComponent(token) + '&next=' + encodeURIComponent('/ui/overview'));
    const data = await page.evaluate(() => {
      const senders = {};
      const bars = {};
      for (const sec of document.querySelectorAll('section.sender')) {
        const name = sec.dataset.sender;
        const rows = {};
        for (const tr of sec.querySelectorAll('tr[data-outcome]')) {
          rows[tr.dataset.outcome] = {
            window: tr.querySelector('.window').textContent.trim(),
            started: tr.querySelector('.started').textContent.trim(),
          };
        }
        senders[name] = rows;
        bars[name] = sec.querySelectorAll('svg.chart rect').length;
      }
      return { senders, bars, text: document.body.innerText };
    });
    await page.screenshot({ path: shot, fullPage: true });
    console.log(JSON.stringify({ ...data, console: consoleMsgs }));
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
