// Loads one URL as an <img> in headless Chromium (Debian's `chromium`, run
// by npm `playwright-core`) the way a page shows a picture: no credentials,
// redirects followed by the browser itself. Reports every answer on the way
// (status, the headers a test asks about) and the decoded size.
//
// usage: node img_chromium.js '<json options>'
//   url        the picture's URL (a bulkwire link)
//   chromium   the browser (default /usr/bin/chromium)
//   timeoutMs  the whole run's bound (default 60000)
//
// Prints one JSON line: {ok, browser, answers: [{url, status, location,
// contentType, disposition}], width, height} and `error` on failure (exit 1).
'use strict';

const { chromium } = require('playwright-core');
const { ARGS, main } = require('./driver.js');

async function run(o, report) {
  const browser = await chromium.launch({ executablePath: o.chromium, args: ARGS });
  try {
    report.browser = browser.version();
    const page = await browser.newPage();
    page.on('response', (r) => {
      const h = r.headers();
      report.answers.push({
        url: r.url(),
        status: r.status(),
        location: h['location'] || null,
        contentType: h['content-type'] || null,
        disposition: h['content-disposition'] || null,
      });
    });
    // A page of its own origin-less document: the <img> is all it loads.
    await page.setContent('<!doctype html><img id="i" alt="">');
    const size = await page.evaluate(
      (src) =>
        new Promise((resolve) => {
          const img = document.getElementById('i');
          img.onload = () => resolve({ width: img.naturalWidth, height: img.naturalHeight });
          img.onerror = () => resolve({ width: 0, height: 0, failed: true });
          img.src = src;
        }),
      o.url,
    );
    Object.assign(report, size);
    report.ok = !size.failed;
    if (size.failed) report.error = 'the image did not load';
  } finally {
    await browser.close();
  }
}

const o = { chromium: '/usr/bin/chromium', timeoutMs: 60000, ...JSON.parse(process.argv[2] || '{}') };
main(run, o, { ok: false, answers: [] });
