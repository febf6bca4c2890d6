// Uploads files to bulkwire with Uppy (npm `uppy`: its Dashboard and Tus
// plugin, i.e. tus-js-client in a browser) in headless Chromium (Debian's
// `chromium`, driven by npm `playwright-core`; no browser is downloaded).
// Starts uppy_server.js (the test page, Uppy's bundle and a same-origin
// proxy to bulkwire), opens the page in a fresh browser context, gives
// the files to the Dashboard's <input type=file>, clicks its upload
// button and waits for Uppy's `complete` event.
//
// usage: node uppy_chromium.js '<json options>'
//   upstream     host:port of bulkwire
//   token        bearer token for /v1
//   files        paths of the files to upload
//   chunkSize    bytes per PATCH (default 5 MiB)
//   retryDelays  ms between attempts (default [0, 200, 500, 1000])
//   pauseFile    name of a file to pause after its first chunk (optional)
//   pauseMs      how long it stays paused (default 500)
//   screenshot   where to save a PNG of the page at the end (optional)
//   chromium     the browser (default /usr/bin/chromium)
//   timeoutMs    the whole run's bound (default 120000): past it the
//                browser is closed and the run fails
//
// Prints one JSON line: {ok, origin, browser, uppy, files, requests,
// proxied, pause, complete, errors}, `files` as in the page's
// window.bulkwire.files (uploadURL, error, size, type, meta per file),
// `requests` the tus answers the page saw, `proxied` the requests that
// went through the proxy ("METHOD /path STATUS"). Exits 1 on failure
// (the JSON then also has `error`).
'use strict';

const fs = require('fs');
const path = require('path');
const { chromium } = require('playwright-core');
const { ARGS, main } = require('./driver.js');
const server = require('./uppy_server.js');

function options(argv) {
  const o = JSON.parse(argv[2] || '{}');
  for (const k of ['upstream', 'files']) {
    if (!o[k]) throw new Error(`missing option ${k}`);
  }
  return {
    chunkSize: 5 * 1024 * 1024,
    retryDelays: [0, 200, 500, 1000],
    pauseMs: 500,
    chromium: '/usr/bin/chromium',
    timeoutMs: 120000,
    ...o,
  };
}

async function run(o, report, deadline) {
  const web = await server.start({
    upstream: o.upstream,
    page: {
      token: o.token,
      chunkSize: o.chunkSize,
      retryDelays: o.retryDelays,
      pauseFile: o.pauseFile,
      pauseMs: o.pauseMs,
    },
  });
  report.origin = web.origin;
  report.proxied = web.log;
  report.uppy = require('uppy/package.json').version;
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
    const context = await browser.newContext({ viewport: { width: 1000, height: 640 } });
    const page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') report.console.push(m.text().slice(0, 500));
    });
    page.on('pageerror', (e) => report.console.push(String(e).slice(0, 500)));

    await page.goto(`${web.origin}/`);
    await page.waitForFunction(
      () => window.bulkwire && (window.bulkwire.ready || window.bulkwire.errors.length > 0),
      null,
      { timeout: 30000 },
    );
    const setup = await page.evaluate(() => window.bulkwire.errors);
    if (setup.length) throw new Error(`the page failed to set up: ${setup.join('; ')}`);

    await page.locator('input.uppy-Dashboard-input').first().setInputFiles(o.files);
    await page.waitForFunction(
      (n) => Object.keys(window.bulkwire.files).length === n,
      o.files.length,
      { timeout: 30000 },
    );
    await page.locator('button.uppy-StatusBar-actionBtn--upload').click({ timeout: 30000 });
    const left = Math.max(1000, deadline - Date.now() - 5000);
    await page.waitForFunction(() => window.bulkwire.complete !== null, null, {
      timeout: left,
      polling: 100,
    });
    const w = await page.evaluate(() => window.bulkwire);
    Object.assign(report, {
      files: w.files,
      requests: w.requests,
      pause: w.pause,
      complete: w.complete,
      errors: w.errors,
    });
    report.status = await page.locator('.uppy-StatusBar').first().innerText();
    if (o.screenshot) {
      fs.mkdirSync(path.dirname(o.screenshot), { recursive: true });
      await page.screenshot({ path: o.screenshot, fullPage: true });
      report.screenshot = o.screenshot;
    }
    const failed = Object.values(w.files).filter((f) => f.error || !f.uploadURL);
    report.ok = w.complete.failed.length === 0 && failed.length === 0 && w.errors.length === 0;
    if (!report.ok) report.error = 'Uppy did not upload every file without error';
    await context.close();
  } finally {
    if (browser) await browser.close();
    await web.close();
  }
}

main(run, options(process.argv), { ok: false, console: [] });
