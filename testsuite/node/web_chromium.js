// Drives bulkwire's own upload page and media library (GET /) in headless Chromium (Debian's
// `chromium`, run by npm `playwright-core`; no browser is downloaded), the way a person would:
// sign in with a token, give files to the file input, wait for every progress bar to reach
// 100 %, look at the library (the image's thumbnail decoded), press "Copy link" on one item
// and read the clipboard, delete another (accepting the confirmation), reload and look again.
// Screenshots of the library at 1440 and 375 px wide.
//
// With `"scenario": "controls"` it tries the per-file controls instead (see controls()):
// pause and resume, cancel, and an upload the server refuses (its message and limit shown).
// With `"scenario": "find"` it finds things in a library the test filled (see find()): pages,
// a new upload, the search box, the type filter, and a media type's line breaks at 375 px.
// With `"scenario": "owners"` it looks at whose items the page shows (see owners()): signed in
// as `user` (an author), then, after signing out, with `token` (the administrator).
//
// usage: node web_chromium.js '<json options>'
//   scenario     "library" (default), "controls", "find" or "owners"
//   origin       the server, e.g. http://127.0.0.1:8080
//   token        bearer token to sign in with
//   user         {name, password}: sign in with these instead (the wrong try uses the token)
//   files        paths of the files to upload
//   thumbnail    name of the image whose thumbnail must decode
//   copy         name of the item whose link to copy
//   remove       name of the item to delete
//   search       (find) what to type in the search box
//   narrow       (find) a search that shows the item whose type is measured at 375 px
//   ownerFilter  (owners) the owner the administrator narrows the library to
//   screenshots  {wide, narrow}: where to save PNGs of the library
//   chromium     the browser (default /usr/bin/chromium)
//   timeoutMs    the whole run's bound (default 120000)
//
// Prints one JSON line: {ok, browser, headers, signIn, bars, library, thumbnail, copied,
// dialog, afterDelete, afterReload, signInAgain, foreign, console, csp, screenshots, steps}
// and `error` on failure (exit 1). Steps record what was done, so a failure says where.
'use strict';

const fs = require('fs');
const path = require('path');
const { chromium } = require('playwright-core');
const { ARGS, main } = require('./driver.js');

function options(argv) {
  const o = JSON.parse(argv[2] || '{}');
  const needs = {
    controls: ['origin', 'token', 'files', 'pause', 'cancel', 'refused', 'throughput'],
    find: ['origin', 'token', 'files', 'search', 'narrow'],
    owners: ['origin', 'token', 'user', 'files', 'ownerFilter'],
  }[o.scenario] || ['origin', 'token', 'files', 'thumbnail', 'copy', 'remove'];
  for (const k of needs) {
    if (!o[k]) throw new Error(`missing option ${k}`);
  }
  return { chromium: '/usr/bin/chromium', timeoutMs: 120000, screenshots: {}, ...o };
}

/// What the library shows: one entry per card.
function cards(page) {
  return page.$$eval('#grid > li.card', (lis) =>
    lis.map((li) => ({ id: li.dataset.id, name: li.dataset.name })),
  );
}

async function signIn(page, o, report) {
  await page.locator('#signin').waitFor({ state: 'visible', timeout: 30000 });
  if (o.user) {
    await page.getByLabel('a user name and password').check();
    await page.getByLabel('User name', { exact: true }).fill(o.user.name);
    await page.getByLabel('Password', { exact: true }).fill(o.user.password);
  } else {
    await page.getByLabel('Token', { exact: true }).fill(o.token);
  }
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#app').waitFor({ state: 'visible', timeout: 30000 });
  report.who = await page.locator('#who-name').innerText();
  report.steps.push('signed in');
}

/// One upload row as the page shows it.
function row(page, name) {
  return page.$eval(`#queue > li.item[data-name="${name}"]`, (r) => ({
    name: r.dataset.name,
    id: r.dataset.id,
    state: r.dataset.state,
    value: r.querySelector('progress').value,
    max: r.querySelector('progress').max,
    percent: r.dataset.percent,
    text: r.querySelector('.numbers').textContent,
    message: r.querySelector('.message').textContent,
    buttons: [...r.querySelectorAll('button')].filter((b) => !b.hidden).map((b) => b.textContent),
  }));
}

/// Waits until `name`'s row has a bar past `above` bytes and a state among `states` (either
/// may be left out). Plain data, no code: the page's CSP allows no eval.
function waitRow(page, name, { above = -1, states = null }, timeout) {
  return page.waitForFunction(
    ([n, min, want]) => {
      const r = document.querySelector(`#queue > li.item[data-name="${n}"]`);
      if (!r) return false;
      const value = r.querySelector('progress').value;
      return value > min && (!want || want.includes(r.dataset.state));
    },
    [name, above, states],
    { timeout, polling: 50 },
  );
}

/// The per-file controls, with uploads slowed down (Chromium's network emulation) so that
/// there is time to press them: `pause` is paused once its first chunk is stored, left
/// paused for a while (nothing may move), resumed by keyboard and must finish; `cancel` is
/// cancelled while it runs; `refused` is over the server's file_bytes and must fail with the
/// server's message and limit next to it.
async function controls(page, o, report, left) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', {
    offline: false,
    latency: 0,
    downloadThroughput: -1,
    uploadThroughput: o.throughput,
  });
  await page.locator('#files').setInputFiles(o.files);
  report.steps.push('files given to the input');

  // Pause once the first 8 MiB chunk is stored (the bar went past it).
  await waitRow(page, o.pause, { above: o.chunk, states: ['running'] }, left());
  await page.getByRole('button', { name: `Pause ${o.pause}` }).click();
  const paused = await row(page, o.pause);
  report.steps.push('paused');
  // Cancel the other one while it runs.
  await waitRow(page, o.cancel, { above: 0, states: ['running'] }, left());
  await page.getByRole('button', { name: `Cancel ${o.cancel}` }).click();
  report.steps.push('cancelled');
  // Left paused a while: the bar does not move.
  await page.waitForTimeout(o.pauseMs || 1000);
  const stillPaused = await row(page, o.pause);
  const resume = page.getByRole('button', { name: `Resume ${o.pause}` });
  await resume.focus();
  await page.keyboard.press('Enter');
  report.steps.push('resumed');
  await waitRow(page, o.pause, { states: ['done', 'failed'] }, left());
  await waitRow(page, o.refused, { states: ['failed'] }, left());
  report.controls = {
    paused,
    stillPaused,
    done: await row(page, o.pause),
    cancelled: await row(page, o.cancel),
    refused: await row(page, o.refused),
  };
  // The server's view of the cancelled upload comes from the test (HEAD with credentials).
  await cdp.send('Network.emulateNetworkConditions', {
    offline: false,
    latency: 0,
    downloadThroughput: -1,
    uploadThroughput: -1,
  });
  await page.waitForFunction(() => document.querySelectorAll('#grid > li.card').length >= 1, null, {
    timeout: 30000,
  });
  report.library = await cards(page);
  if (o.screenshots.wide) {
    fs.mkdirSync(path.dirname(o.screenshots.wide), { recursive: true });
    await page.screenshot({ path: o.screenshots.wide, fullPage: true });
    report.screenshots.push(o.screenshots.wide);
  }
}

/// Waits for the library's next `GET /v1/media` whose query has every `want` parameter (a
/// value of null: absent; true: present), started by `act`, and for the page to show its answer (the grid is
/// no longer `aria-busy`); returns the cards then shown.
async function listed(page, act, want, timeout = 30000) {
  const answer = page.waitForResponse(
    (r) => {
      const u = new URL(r.url());
      if (u.pathname !== '/v1/media' || r.request().method() !== 'GET') return false;
      return Object.entries(want).every(([k, v]) =>
        v === true ? u.searchParams.has(k) : u.searchParams.get(k) === v,
      );
    },
    { timeout },
  );
  await act();
  await answer;
  await page.waitForFunction(() => document.getElementById('grid').getAttribute('aria-busy') === 'false', null, {
    timeout,
  });
  return cards(page);
}

/// How the browser lays out the `Type` value of the card named `name`: its text, the text of
/// each line box (from the rectangles of each character), and whether any part of it is cut
/// (wider than its box, so shown with an ellipsis).
function typeLines(page, name) {
  return page.$eval(`#grid > li.card[data-name="${name}"]`, (card) => {
    const dt = [...card.querySelectorAll('dt')].find((d) => d.textContent === 'Type');
    const dd = dt && dt.nextElementSibling;
    if (!dd) return null;
    const lines = [];
    let top = null;
    const walk = document.createTreeWalker(dd, NodeFilter.SHOW_TEXT);
    for (let t = walk.nextNode(); t; t = walk.nextNode()) {
      for (let i = 0; i < t.length; i += 1) {
        const r = document.createRange();
        r.setStart(t, i);
        r.setEnd(t, i + 1);
        const rect = r.getBoundingClientRect();
        if (rect.width === 0 && rect.height === 0) continue;
        if (top === null || rect.top > top + rect.height / 2) {
          lines.push('');
          top = rect.top;
        }
        lines[lines.length - 1] += t.data[i];
      }
    }
    const cut = [dd, ...dd.querySelectorAll('*')].some((e) => e.scrollWidth > e.clientWidth + 1);
    return { text: dd.textContent, lines, cut, width: dd.getBoundingClientRect().width };
  });
}

/// Finding things in a library the test filled (newest first, more than one page): the first
/// page and the next, back; a file uploaded here shows first; typing in the search box narrows
/// to matching names; the type filter to images; at 375 px, how a media type breaks.
async function find(page, o, report, left) {
  report.find = {};
  const f = report.find;
  await page.waitForFunction(() => document.getElementById('grid').getAttribute('aria-busy') === 'false', null, {
    timeout: 30000,
  });
  f.first = await cards(page);
  f.firstLabel = await page.locator('#page-label').innerText();
  f.nextPage = await listed(page, () => page.getByRole('button', { name: 'Next →' }).click(), {
    order: 'desc',
    after: true,
  });
  f.nextLabel = await page.locator('#page-label').innerText();
  f.back = await listed(page, () => page.getByRole('button', { name: '← Previous' }).click(), {
    after: null,
  });
  report.steps.push('paged');

  // One more file, uploaded here: the library reloads and shows it first.
  const done = listed(page, () => page.locator('#files').setInputFiles(o.files), { after: null }, left());
  await page.waitForFunction(
    () => [...document.querySelectorAll('#queue > li.item')].every((r) => r.dataset.state === 'done'),
    null,
    { timeout: left(), polling: 100 },
  );
  f.afterUpload = await done;
  report.steps.push('uploaded one');

  // Typing in the search box: the server's answer for the whole word.
  f.searched = await listed(page, () => page.getByLabel('Search by name').fill(o.search), { q: o.search });
  f.searchStatus = await page.locator('#library-status').innerText();
  report.steps.push('searched');
  f.images = await listed(page, () => page.getByLabel('Type', { exact: true }).selectOption({ label: 'Images' }), {
    q: o.search,
    type: 'image/*',
  });
  f.allImages = await listed(page, () => page.getByLabel('Search by name').fill(''), {
    q: null,
    type: 'image/*',
  });
  f.imageTypes = await page.$$eval('#grid > li.card', (cs) =>
    cs.map((c) => {
      const dt = [...c.querySelectorAll('dt')].find((d) => d.textContent === 'Type');
      return dt && dt.nextElementSibling ? dt.nextElementSibling.textContent : null;
    }),
  );
  report.steps.push('filtered');

  // At 375 px: the one item the narrow search finds, its type measured.
  await listed(page, () => page.getByLabel('Type', { exact: true }).selectOption({ label: 'All' }), { type: null });
  f.narrow = await listed(page, () => page.getByLabel('Search by name').fill(o.narrow), { q: o.narrow });
  await page.setViewportSize({ width: 375, height: 812 });
  f.narrowOverflow = await page.evaluate(
    () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
  );
  f.type = f.narrow.length ? await typeLines(page, f.narrow[0].name) : null;
  if (o.screenshots.narrow) {
    fs.mkdirSync(path.dirname(o.screenshots.narrow), { recursive: true });
    await page.screenshot({ path: o.screenshots.narrow, fullPage: true });
    report.screenshots.push(o.screenshots.narrow);
  }
  report.steps.push('measured at 375 px');
}

/// The cards, each with the owner the page shows on it (null where it shows none).
function ownedCards(page) {
  return page.$$eval('#grid > li.card', (lis) =>
    lis.map((li) => {
      const dt = [...li.querySelectorAll('dt')].find((d) => d.textContent === 'Owner');
      const dd = dt && dt.nextElementSibling;
      return { id: li.dataset.id, name: li.dataset.name, owner: dd ? dd.textContent : null };
    }),
  );
}

/// What the header and the library show the one signed in.
async function signedIn(page) {
  return {
    who: await page.locator('#who-name').innerText(),
    usage: await page.locator('#who-usage').innerText(),
    ownerFieldHidden: await page.locator('#owner-field').isHidden(),
    cards: await ownedCards(page),
  };
}

/// Whose items the page shows. Signed in as an author (`user`): their own items, no owner on
/// the cards nor an owner filter, their usage against their quota in the header, which moves
/// when they upload `files` here. Then signed out, and in with `token` (the administrator):
/// everyone's items with each card's owner, narrowed to `ownerFilter` by the owner filter.
async function owners(page, o, report, left) {
  const r = {};
  report.owners = r;
  await page.waitForFunction(() => document.getElementById('grid').getAttribute('aria-busy') === 'false', null, {
    timeout: 30000,
  });
  r.author = await signedIn(page);
  const before = r.author.usage;
  const done = listed(page, () => page.locator('#files').setInputFiles(o.files), { after: null }, left());
  await page.waitForFunction(
    () => [...document.querySelectorAll('#queue > li.item')].every((x) => x.dataset.state === 'done'),
    null,
    { timeout: left(), polling: 100 },
  );
  await done;
  await page.waitForFunction((b) => document.getElementById('who-usage').textContent !== b, before, {
    timeout: 30000,
  });
  r.authorAfterUpload = await signedIn(page);
  report.steps.push('author');

  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.locator('#signin').waitFor({ state: 'visible', timeout: 30000 });
  await page.getByLabel('a token').check();
  await page.getByLabel('Token', { exact: true }).fill(o.token);
  await listed(page, () => page.getByRole('button', { name: 'Sign in' }).click(), {});
  r.admin = await signedIn(page);
  await listed(page, () => page.getByLabel('Owner', { exact: true }).fill(o.ownerFilter), {
    owner: o.ownerFilter,
  });
  r.filtered = await ownedCards(page);
  report.steps.push('administrator');
}

async function run(o, report, deadline) {
  const left = () => Math.max(1000, deadline - Date.now() - 5000);
  const browser = await chromium.launch({
    executablePath: o.chromium,
    headless: true,
    args: ARGS,
    timeout: 60000,
  });
  try {
    report.browser = browser.version();
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: o.origin });
    // Every request the page makes, by origin (data: and blob: are not requests to anyone).
    context.on('request', (r) => {
      const u = new URL(r.url());
      if (u.protocol === 'data:' || u.protocol === 'blob:') return;
      if (u.origin !== o.origin) report.foreign.push(r.url());
    });
    const page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') {
        report.console.push(`${m.type()}: ${m.text().slice(0, 500)}`);
      }
    });
    page.on('pageerror', (e) => report.console.push(`pageerror: ${String(e).slice(0, 500)}`));
    // CSP violations as the page sees them (init scripts are the test's, not the page's: they
    // run whatever the page's CSP says).
    await page.addInitScript(() => {
      window.__csp = [];
      document.addEventListener('securitypolicyviolation', (e) => {
        window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`);
      });
    });

    const res = await page.goto(`${o.origin}/`);
    report.headers = await res.allHeaders();
    report.status = res.status();
    report.steps.push('opened /');

    // Signing in with a wrong token shows the server's message.
    await page.locator('#signin').waitFor({ state: 'visible', timeout: 30000 });
    await page.getByLabel('Token', { exact: true }).fill(`${o.token}-wrong`);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForFunction(() => document.getElementById('signin-error').textContent, null, {
      timeout: 30000,
    });
    report.signInError = await page.locator('#signin-error').innerText();
    await signIn(page, o, report);
    const scenarios = { controls, find, owners };
    if (scenarios[o.scenario]) {
      await scenarios[o.scenario](page, o, report, left);
      report.csp = await page.evaluate(() => window.__csp);
      report.ok = true;
      await context.close();
      return;
    }

    await page.locator('#files').setInputFiles(o.files);
    report.steps.push('files given to the input');
    const names = o.files.map((f) => path.basename(f));
    // Every bar at its end and every upload done, or one failed (then it says why).
    await page.waitForFunction(
      (n) => {
        const rows = [...document.querySelectorAll('#queue > li.item')];
        if (rows.length !== n) return false;
        if (rows.some((r) => r.dataset.state === 'failed')) return true;
        return rows.every((r) => r.dataset.state === 'done');
      },
      names.length,
      { timeout: left(), polling: 100 },
    );
    report.bars = await page.$$eval('#queue > li.item', (rows) =>
      rows.map((r) => {
        const bar = r.querySelector('progress');
        return {
          name: r.dataset.name,
          id: r.dataset.id,
          state: r.dataset.state,
          value: bar.value,
          max: bar.max,
          percent: r.dataset.percent,
          text: r.querySelector('.numbers').textContent,
          message: r.querySelector('.message').textContent,
        };
      }),
    );
    report.steps.push('uploads ended');

    await page.waitForFunction(
      (n) => document.querySelectorAll('#grid > li.card').length >= n,
      names.length,
      { timeout: 30000 },
    );
    report.library = await cards(page);
    report.steps.push('library shows the uploads');

    // The image's thumbnail, loaded through its link: wait until it loaded or failed.
    const img = page.locator(`#grid > li.card[data-name="${o.thumbnail}"] .thumb img`);
    const thumbnail = { present: (await img.count()) === 1 };
    if (thumbnail.present) {
      await img.scrollIntoViewIfNeeded();
      await page
        .waitForFunction((e) => e.complete, await img.elementHandle(), { timeout: 30000 })
        .catch(() => {});
      Object.assign(
        thumbnail,
        await img.evaluate((e) => ({
          src: e.currentSrc,
          complete: e.complete,
          naturalWidth: e.naturalWidth,
          naturalHeight: e.naturalHeight,
        })),
      );
    } else {
      // Its <img> failed and was replaced by the type label.
      const card = page.locator(`#grid > li.card[data-name="${o.thumbnail}"]`);
      thumbnail.fallback = (await card.count()) === 1 ? await card.locator('.thumb').innerText() : null;
    }
    report.thumbnail = thumbnail;

    if (o.screenshots.wide) {
      fs.mkdirSync(path.dirname(o.screenshots.wide), { recursive: true });
      await page.screenshot({ path: o.screenshots.wide, fullPage: true });
      report.screenshots.push(o.screenshots.wide);
    }
    if (o.screenshots.narrow) {
      await page.setViewportSize({ width: 375, height: 812 });
      // Readable at 375 px: nothing wider than the viewport.
      report.narrowOverflow = await page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
      );
      fs.mkdirSync(path.dirname(o.screenshots.narrow), { recursive: true });
      await page.screenshot({ path: o.screenshots.narrow, fullPage: true });
      report.screenshots.push(o.screenshots.narrow);
      await page.setViewportSize({ width: 1440, height: 900 });
    }

    // Copy a link: by keyboard (focus the button, press Enter), then read the clipboard.
    const copyCard = page.locator(`#grid > li.card[data-name="${o.copy}"]`);
    const copyButton = copyCard.getByRole('button', { name: `Copy link to ${o.copy}` });
    await copyButton.focus();
    await page.keyboard.press('Enter');
    await page.waitForFunction(
      (n) => {
        const c = document.querySelector(`#grid > li.card[data-name="${n}"] .note`);
        return c && c.textContent;
      },
      o.copy,
      { timeout: 30000 },
    );
    const noteText = await copyCard.locator('.note').innerText();
    report.copied = {
      note: noteText,
      clipboard: await page.evaluate(() => navigator.clipboard.readText()).catch((e) => `!${e}`),
      shown: await copyCard.locator('input.link').inputValue(),
      id: await copyCard.getAttribute('data-id'),
    };
    report.steps.push('link copied');

    // Delete one: the confirmation dialog, accepted.
    const gone = page.locator(`#grid > li.card[data-name="${o.remove}"]`);
    report.removedId = await gone.getAttribute('data-id');
    page.once('dialog', async (d) => {
      report.dialog = { type: d.type(), message: d.message() };
      await d.accept();
    });
    await gone.getByRole('button', { name: `Delete ${o.remove}` }).click();
    await gone.waitFor({ state: 'detached', timeout: 30000 });
    report.afterDelete = await cards(page);
    report.steps.push('deleted one');

    report.csp = await page.evaluate(() => window.__csp);
    await page.reload();
    report.steps.push('reloaded');
    // The tab's session keeps the credentials; sign in again only if the page asks.
    await page.waitForFunction(
      () =>
        !document.getElementById('signin').hidden ||
        document.querySelectorAll('#grid > li.card').length > 0 ||
        document.getElementById('library-status').textContent,
      null,
      { timeout: 30000 },
    );
    report.signInAgain = !(await page.locator('#signin').isHidden());
    if (report.signInAgain) await signIn(page, o, report);
    await page.waitForFunction(
      () => document.getElementById('library-status').textContent,
      null,
      { timeout: 30000 },
    );
    report.afterReload = await cards(page);
    report.steps.push('library after reload');

    report.csp.push(...(await page.evaluate(() => window.__csp)));
    report.ok = true;
    await context.close();
  } finally {
    await browser.close();
  }
}

main(run, options(process.argv), { ok: false, console: [], foreign: [], screenshots: [], steps: [] });
