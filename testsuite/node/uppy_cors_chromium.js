// Uploads files to bulkwire from a page on ANOTHER origin, with Uppy (npm
// `uppy`: @uppy/xhr-upload and @uppy/tus, each with its Dashboard) in
// headless Chromium (Debian's `chromium`, driven by npm `playwright-core`;
// no browser is downloaded). The page comes from uppy_cors_server.js
// (started by the test, not here: bulkwire must know the page's origin
// before it starts); the page's Uppy calls bulkwire's own origin directly,
// so everything goes through the browser's CORS checks.
//
// usage: node uppy_cors_chromium.js '<json options>'
//   page         the page server's origin (http://127.0.0.1:PORT)
//   api          bulkwire's origin (another port: another origin)
//   token        bearer token for /v1
//   xhrFiles     paths given to the XHRUpload Dashboard
//   tusFiles     paths given to the Tus Dashboard
//   chunkSize    bytes per tus PATCH (default 5 MiB)
//   retryDelays  tus's retry delays in ms (default [0, 200, 500, 1000])
//   link         a media link for the page to fetch (default: the `url` of
//                the first file XHRUpload uploaded, when there is one)
//   screenshot   where to save a PNG of the page at the end (optional)
//   chromium     the browser (default /usr/bin/chromium)
//   timeoutMs    the whole run's bound (default 120000): past it the
//                browser is closed and the run fails
//
// For each Dashboard in turn: gives it its files, clicks its upload button
// and waits for that Uppy's `complete` event, whether the uploads worked or
// failed (the test judges). Then the page fetches the link.
//
// Prints one JSON line: {ok, browser, uppy, page, api, files, xhr,
// requests, attempts, complete, errors, link, responses, failed, console},
// the page's window.bulkwire (see uppy_cors_page.html) plus what Chromium
// saw: `responses` every answer from `api` (method, path, status and its
// Access-Control-Allow-Origin), `failed` every request to `api` that
// failed in the browser (method, path, Chromium's error), `console` the
// page's console errors. `ok` means the run finished (every Uppy reported
// `complete`), not that anything uploaded. Exits 1 on failure (the JSON
// then also has `error`).
'use strict';

const fs = require('fs');
const path = require('path');
const { chromium } = require('playwright-core');
const { ARGS, main } = require('./driver.js');

function options(argv) {
  const o = JSON.parse(argv[2] || '{}');
  for (const k of ['page', 'api', 'xhrFiles', 'tusFiles']) {
    if (!o[k]) throw new Error(`missing option ${k}`);
  }
  return {
    chunkSize: 5 * 1024 * 1024,
    retryDelays: [0, 200, 500, 1000],
    chromium: '/usr/bin/chromium',
    timeoutMs: 120000,
    ...o,
  };
}

async function run(o, report, deadline) {
  report.uppy = require('uppy/package.json').version;
  report.page = o.page;
  report.api = o.api;
  const left = () => Math.max(1000, deadline - Date.now() - 5000);
  const onApi = (u) => u.startsWith(`${o.api}/`);
  const where = (u) => {
    const url = new URL(u);
    return url.pathname + (url.search ? '?…' : '');
  };
  let browser;
  try {
    browser = await chromium.launch({
      executablePath: o.chromium,
      headless: true,
      args: ARGS,
      timeout: 60000,
    });
    report.browser = browser.version();
    // A new context: a fresh profile (no storage, no cache).
    const context = await browser.newContext({ viewport: { width: 1200, height: 700 } });
    const page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') report.console.push(m.text().slice(0, 500));
    });
    page.on('pageerror', (e) => report.console.push(String(e).slice(0, 500)));
    page.on('response', (r) => {
      const req = r.request();
      if (!onApi(req.url())) return;
      const h = r.headers();
      report.responses.push({
        method: req.method(),
        path: where(req.url()),
        status: r.status(),
        allowOrigin: h['access-control-allow-origin'] ?? null,
      });
    });
    page.on('requestfailed', (req) => {
      if (!onApi(req.url())) return;
      report.failed.push({
        method: req.method(),
        path: where(req.url()),
        error: (req.failure() && req.failure().errorText) || null,
      });
    });

    const cfg = {
      api: o.api,
      token: o.token,
      chunkSize: o.chunkSize,
      retryDelays: o.retryDelays,
    };
    await page.goto(`${o.page}/#${encodeURIComponent(JSON.stringify(cfg))}`);
    await page.waitForFunction(
      () => window.bulkwire && (window.bulkwire.ready || window.bulkwire.errors.length > 0),
      null,
      { timeout: 30000 },
    );
    const setup = await page.evaluate(() => window.bulkwire.errors);
    if (setup.length) throw new Error(`the page failed to set up: ${setup.join('; ')}`);

    for (const [kind, files] of [
      ['xhr', o.xhrFiles],
      ['tus', o.tusFiles],
    ]) {
      await page.locator(`#${kind} input.uppy-Dashboard-input`).first().setInputFiles(files);
      await page.waitForFunction(
        ([k, n]) => Object.keys(window.bulkwire.files[k]).length === n,
        [kind, files.length],
        { timeout: 30000 },
      );
      await page
        .locator(`#${kind} button.uppy-StatusBar-actionBtn--upload`)
        .click({ timeout: 30000 });
      await page.waitForFunction((k) => window.bulkwire.complete[k] !== null, kind, {
        timeout: left(),
        polling: 100,
      });
    }

    let link = o.link;
    if (!link) {
      const first = await page.evaluate(() => {
        const f = Object.values(window.bulkwire.files.xhr).find((x) => x.body);
        return f ? f.body.media[0].url : null;
      });
      link = first;
    }
    if (link) {
      report.link = { url: link, ...(await page.evaluate((u) => window.fetchLink(u), link)) };
    }

    const w = await page.evaluate(() => window.bulkwire);
    Object.assign(report, {
      files: w.files,
      xhr: w.xhr,
      requests: w.requests,
      attempts: w.attempts,
      complete: w.complete,
      errors: w.errors,
    });
    report.status = await page.locator('#xhr, #tus').allInnerTexts();
    if (o.screenshot) {
      fs.mkdirSync(path.dirname(o.screenshot), { recursive: true });
      await page.screenshot({ path: o.screenshot, fullPage: true });
      report.screenshot = o.screenshot;
    }
    report.ok = true;
    await context.close();
  } finally {
    if (browser) await browser.close();
  }
}

main(run, options(process.argv), { ok: false, console: [], responses: [], failed: [] });
