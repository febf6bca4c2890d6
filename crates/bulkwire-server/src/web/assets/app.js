// bulkwire's upload page and media library: plain JavaScript, no framework, no build step,
// nothing from another origin. Uploads go through the server's tus 1.0 endpoint
// (/v1/uploads: creation, then PATCH in chunks, HEAD to resume, DELETE to cancel); the
// library is GET /v1/media (newest first, searched by name and filtered by type on the
// server, paged by its cursors); the signed-in name is GET /v1/me. DOM is built from elements and textContent (no HTML is parsed),
// and no inline style is set (the page's Content-Security-Policy forbids it).

const CHUNK = 8 * 1024 * 1024;
const PAGE_SIZE = 24;
const PARALLEL = 3;
/// Quiet time after the last keystroke in the search box before the library asks the server.
const SEARCH_MS = 300;
/// Waits before each new attempt after a network error or a 5xx; then the upload fails and
/// offers "Retry".
const RETRY_MS = [500, 1500, 4000, 8000];
const AUTH_KEY = 'bulkwire.auth';
const WHO_KEY = 'bulkwire.who';

const $ = (id) => document.getElementById(id);

function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k === 'role' || k.startsWith('data-') || k.startsWith('aria-')) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) if (c) e.append(c);
  return e;
}

// ---------------------------------------------------------------------------
// Formatting

function bytes(n) {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = -1;
  do {
    v /= 1024;
    u += 1;
  } while (v >= 1024 && u < units.length - 1);
  return `${v.toFixed(v < 10 ? 2 : 1)} ${units[u]}`;
}

function date(unixSeconds) {
  return new Date(unixSeconds * 1000).toLocaleString(undefined, {
    dateStyle: 'medium',
    timeStyle: 'short',
  });
}

/// UTF-8 text in base64 (btoa alone takes Latin-1 only).
function b64(text) {
  let bin = '';
  for (const b of new TextEncoder().encode(text)) bin += String.fromCharCode(b);
  return btoa(bin);
}

function announce(text) {
  $('announce').textContent = text;
}

// ---------------------------------------------------------------------------
// Credentials: one Authorization value, kept in sessionStorage (this tab only).

const auth = {
  get header() {
    return sessionStorage.getItem(AUTH_KEY);
  },
  get who() {
    return sessionStorage.getItem(WHO_KEY) || '';
  },
  save(header, who) {
    sessionStorage.setItem(AUTH_KEY, header);
    sessionStorage.setItem(WHO_KEY, who);
  },
  clear() {
    sessionStorage.removeItem(AUTH_KEY);
    sessionStorage.removeItem(WHO_KEY);
  },
};

/// The server's JSON error as one line: its `message`, and for a limit its name and value.
async function serverMessage(res) {
  let j = null;
  try {
    j = await res.json();
  } catch {
    // Not JSON (a proxy's page): the status is all there is.
  }
  return describe(res.status, j);
}

function describe(status, j) {
  const base = (j && j.message) || `HTTP ${status}`;
  const limit = j && j.limit;
  if (!limit || limit.name === undefined) return base;
  // The server's message names the limit with its value in its unit
  // (`[limits] body_bytes = 8 GiB`): then it says it all.
  if (base.includes(limit.name)) return base;
  const human = /_bytes$/.test(limit.name) ? ` (${bytes(limit.value)})` : '';
  return `${base} — limit ${limit.name} = ${limit.value}${human}`;
}

/// fetch() on /v1 with the saved credentials; a 401 on a call made while signed in means
/// they stopped working: back to the sign-in form with the server's message.
async function api(path, init = {}) {
  const headers = new Headers(init.headers || {});
  headers.set('Authorization', auth.header || '');
  const res = await fetch(path, { ...init, headers, cache: 'no-store' });
  if (res.status === 401) {
    const msg = await serverMessage(res);
    signOut(`Signed out: ${msg}`);
    throw new Error(msg);
  }
  return res;
}

function showSignIn(message = '') {
  $('app').hidden = true;
  $('who').hidden = true;
  $('signin').hidden = false;
  $('signin-error').textContent = message;
  const mode = document.querySelector('input[name=mode]:checked').value;
  (mode === 'token' ? $('token') : $('user')).focus();
}

/// What `GET /v1/me` said of the signed-in principal (name, scopes, role,
/// whether it reaches every owner's items, usage and quota).
let me = null;

function can(scope) {
  return !!me && Array.isArray(me.scopes) && (me.scopes.includes(scope) || me.scopes.includes('admin'));
}

/// `1.2 MiB of 10 GiB, 3 items` (the quota's parts where there are any).
function usageText(m) {
  if (!m || !m.usage) return '';
  const q = m.quota || {};
  const b = q.bytes == null ? bytes(m.usage.bytes) : `${bytes(m.usage.bytes)} of ${bytes(q.bytes)}`;
  const n = m.usage.items;
  const items = q.items == null ? `${n} ${n === 1 ? 'item' : 'items'}` : `${n} of ${q.items} items`;
  return `${b}, ${items}`;
}

function showApp() {
  $('signin').hidden = true;
  $('signin-error').textContent = '';
  $('app').hidden = false;
  $('who').hidden = false;
  const role = me && me.role ? ` (${me.role})` : '';
  $('who-name').textContent = `${auth.who}${role}`;
  $('who-usage').textContent = usageText(me);
  $('upload-panel').hidden = !can('upload');
  // Who reaches every owner's items sees whose each is, and can ask for one.
  $('owner-field').hidden = !(me && me.everyone);
}

/// Reads `/v1/me` again (after an upload or a delete: the usage moved).
async function refreshMe() {
  try {
    const res = await api('/v1/me');
    if (res.ok) {
      me = await res.json();
      $('who-usage').textContent = usageText(me);
    }
  } catch {
    // The next refresh tells.
  }
}

function signOut(message = '') {
  auth.clear();
  for (const u of uploads) u.stop();
  showSignIn(message);
}

/// Checks `header` with `GET /v1/me`: `{ name }` (who the server says it names) when it
/// works, else `{ problem }` (why not).
async function check(header) {
  let res;
  try {
    res = await fetch('/v1/me', {
      headers: { Authorization: header },
      cache: 'no-store',
    });
  } catch (e) {
    return { problem: `The server cannot be reached (${e.message}).` };
  }
  if (!res.ok) return { problem: await serverMessage(res) };
  let j = null;
  try {
    j = await res.json();
  } catch {
    // Not JSON: signed in all the same, under no name.
  }
  me = j;
  return { name: j && typeof j.name === 'string' ? j.name : '' };
}

function setUpSignIn() {
  for (const r of document.querySelectorAll('input[name=mode]')) {
    r.addEventListener('change', () => {
      const token = r.value === 'token' && r.checked;
      $('mode-token').hidden = !token;
      $('mode-basic').hidden = token;
    });
  }
  $('signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const mode = document.querySelector('input[name=mode]:checked').value;
    let header;
    if (mode === 'token') {
      const t = $('token').value.trim();
      if (!t) return showSignIn('Enter a token.');
      header = `Bearer ${t}`;
    } else {
      const u = $('user').value;
      if (!u) return showSignIn('Enter a user name.');
      header = `Basic ${b64(`${u}:${$('password').value}`)}`;
    }
    const button = $('signin-button');
    button.disabled = true;
    $('signin-error').textContent = '';
    const { problem, name } = await check(header);
    button.disabled = false;
    if (problem) return showSignIn(problem);
    auth.save(header, name);
    $('token').value = '';
    $('password').value = '';
    showApp();
    announce('Signed in.');
    library.load(null, true);
  });
  $('signout').addEventListener('click', () => {
    library.clear();
    signOut();
  });
}

// ---------------------------------------------------------------------------
// Uploads: a small tus 1.0 client (core, creation, termination) on XMLHttpRequest, whose
// upload progress events drive the bars.

class HttpError extends Error {
  constructor(status, message, offset) {
    super(message);
    this.status = status;
    this.offset = offset;
  }
}

/// One request; resolves to the XHR once it is answered (any status), rejects on a network
/// error or abort. `onProgress(loaded)` follows the request body.
function xhr(method, url, headers, body = null, onProgress = null, track = null) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open(method, url);
    x.setRequestHeader('Authorization', auth.header || '');
    x.setRequestHeader('Tus-Resumable', '1.0.0');
    for (const [k, v] of Object.entries(headers)) x.setRequestHeader(k, v);
    if (onProgress) x.upload.onprogress = (e) => onProgress(e.loaded);
    x.onload = () => resolve(x);
    x.onerror = () => reject(new Error('network error'));
    x.onabort = () => reject(new DOMException('aborted', 'AbortError'));
    if (track) track(x);
    x.send(body);
  });
}

function jsonOf(x) {
  try {
    return JSON.parse(x.responseText);
  } catch {
    return null;
  }
}

function failure(x) {
  return new HttpError(x.status, describe(x.status, jsonOf(x)), x.getResponseHeader('Upload-Offset'));
}

/// A URL the server gave (absolute, maybe for its public name) as a path on this page's
/// origin: the page may talk to its own origin only.
function local(url) {
  const u = new URL(url, location.href);
  return u.pathname + u.search;
}

const uploads = new Set();
const waiting = [];
let running = 0;

class Upload {
  constructor(file) {
    this.file = file;
    this.url = null; // the upload's resource, once created
    this.id = null;
    this.offset = 0;
    this.sent = 0; // offset plus what the current PATCH has sent
    this.state = 'queued';
    this.req = null;
    this.samples = [];
    this.row = this.render();
    uploads.add(this);
  }

  render() {
    const f = this.file;
    this.bar = el('progress', { max: f.size || 1, value: 0, 'aria-label': `Upload of ${f.name}` });
    this.numbers = el('span', { class: 'numbers', text: `0 B of ${bytes(f.size)}` });
    this.stateEl = el('span', { class: 'state', text: 'Waiting', 'aria-live': 'polite' });
    this.message = el('p', { class: 'error message', role: 'alert' });
    this.pauseBtn = el('button', { type: 'button', text: 'Pause' });
    this.cancelBtn = el('button', { type: 'button', class: 'danger', text: 'Cancel' });
    this.pauseBtn.setAttribute('aria-label', `Pause ${f.name}`);
    this.cancelBtn.setAttribute('aria-label', `Cancel ${f.name}`);
    this.pauseBtn.addEventListener('click', () => this.togglePause());
    this.cancelBtn.addEventListener('click', () => this.cancel());
    const row = el(
      'li',
      { class: 'item', 'data-name': f.name },
      el('span', { class: 'name', text: f.name }),
      el('span', { class: 'actions' }, this.pauseBtn, this.cancelBtn),
      this.bar,
      el('span', { class: 'numbers-line' }, this.numbers, ' · ', this.stateEl),
      this.message,
    );
    $('queue').append(row);
    return row;
  }

  setState(state, label) {
    this.state = state;
    this.row.classList.remove('queued', 'running', 'paused', 'done', 'failed', 'cancelled');
    this.row.classList.add(state);
    this.row.dataset.state = state;
    this.stateEl.textContent = label;
    const active = state === 'running' || state === 'queued' || state === 'paused';
    const retry = state === 'failed' && this.retriable;
    this.pauseBtn.hidden = !(state === 'running' || state === 'paused' || retry);
    this.pauseBtn.textContent = state === 'running' ? 'Pause' : retry ? 'Retry' : 'Resume';
    this.pauseBtn.setAttribute('aria-label', `${this.pauseBtn.textContent} ${this.file.name}`);
    // A failed upload's button takes it off the list (and the server's partial upload).
    this.cancelBtn.hidden = !(active || state === 'failed');
    this.cancelBtn.textContent = state === 'failed' ? 'Remove' : 'Cancel';
    this.cancelBtn.setAttribute('aria-label', `${this.cancelBtn.textContent} ${this.file.name}`);
  }

  progress(sent) {
    this.sent = sent;
    const now = performance.now();
    this.samples.push([now, sent]);
    while (this.samples.length > 2 && now - this.samples[0][0] > 3000) this.samples.shift();
    const [t0, b0] = this.samples[0];
    const rate = now > t0 ? ((sent - b0) * 1000) / (now - t0) : 0;
    const size = this.file.size;
    this.bar.max = size || 1;
    this.bar.value = size ? sent : 1;
    const pct = size ? Math.floor((sent * 100) / size) : 100;
    const speed = this.state === 'running' && rate > 0 ? ` · ${bytes(Math.round(rate))}/s` : '';
    this.numbers.textContent = `${bytes(sent)} of ${bytes(size)} · ${pct} %${speed}`;
    this.row.dataset.percent = String(pct);
  }

  start() {
    this.setState('queued', 'Waiting');
    waiting.push(this);
    pump();
  }

  /// The upload's lifetime in one slot: create, then send chunks until the end, resuming
  /// from the server's offset after a failure.
  async run() {
    this.setState('running', 'Uploading');
    this.message.textContent = '';
    this.samples = [];
    let attempt = 0;
    while (this.state === 'running') {
      try {
        if (!this.url) await this.create();
        else if (attempt > 0 || this.resumed) await this.head();
        this.resumed = false;
        while (this.state === 'running' && this.offset < this.file.size) await this.patch();
        if (this.state === 'running') this.finish();
        return;
      } catch (e) {
        if (this.state !== 'running') return; // paused or cancelled: the abort is ours
        const retriable = !(e instanceof HttpError) || e.status >= 500 || e.status === 409;
        if (e instanceof HttpError && e.status === 401) {
          signOut(`Signed out: ${e.message}`);
          return;
        }
        if (!retriable || attempt >= RETRY_MS.length) {
          // Retrying by hand helps when the network or server was at fault, not when the
          // server refused the upload (a limit, a bad request).
          this.fail(e.message, retriable);
          return;
        }
        this.stateEl.textContent = `Retrying (${e.message})`;
        await new Promise((r) => setTimeout(r, RETRY_MS[attempt]));
        attempt += 1;
      }
    }
  }

  async create() {
    const f = this.file;
    let meta = `filename ${b64(f.name)}`;
    if (f.type) meta += `,filetype ${b64(f.type)}`;
    const x = await this.send('POST', '/v1/uploads', {
      'Upload-Length': String(f.size),
      'Upload-Metadata': meta,
    });
    if (x.status !== 201) throw failure(x);
    const loc = x.getResponseHeader('Location');
    if (!loc) throw new HttpError(x.status, 'the server gave no Location for the upload');
    this.url = local(loc);
    this.id = this.url.split('/').filter(Boolean).pop();
    this.row.dataset.id = this.id;
    this.offset = 0;
  }

  async head() {
    const x = await this.send('HEAD', this.url, {});
    if (x.status === 404 || x.status === 410) {
      // The upload expired or was removed: start again.
      this.url = null;
      this.offset = 0;
      throw new HttpError(500, 'the upload was gone on the server; starting again');
    }
    if (x.status !== 200 && x.status !== 204) throw failure(x);
    this.offset = Number(x.getResponseHeader('Upload-Offset') || 0);
    this.progress(this.offset);
  }

  async patch() {
    const end = Math.min(this.offset + CHUNK, this.file.size);
    const x = await this.send(
      'PATCH',
      this.url,
      {
        'Upload-Offset': String(this.offset),
        'Content-Type': 'application/offset+octet-stream',
      },
      this.file.slice(this.offset, end),
      (loaded) => this.progress(this.offset + loaded),
    );
    if (x.status !== 204 && x.status !== 200) throw failure(x);
    this.offset = Number(x.getResponseHeader('Upload-Offset'));
    this.progress(this.offset);
  }

  send(method, url, headers, body = null, onProgress = null) {
    return xhr(method, url, headers, body, onProgress, (x) => {
      this.req = x;
    }).finally(() => {
      this.req = null;
    });
  }

  finish() {
    this.progress(this.file.size);
    this.setState('done', 'Done');
    uploads.delete(this);
    announce(`${this.file.name} uploaded.`);
    library.uploaded(this.id);
    refreshMe();
  }

  fail(message, retriable) {
    this.retriable = retriable;
    this.setState('failed', 'Failed');
    this.message.textContent = message;
    announce(`${this.file.name} failed: ${message}`);
  }

  /// Stops what is in flight (pause, cancel, sign-out).
  stop() {
    const i = waiting.indexOf(this);
    if (i >= 0) waiting.splice(i, 1);
    if (this.req) this.req.abort();
  }

  togglePause() {
    if (this.state === 'running') {
      this.setState('paused', 'Paused');
      this.stop();
      announce(`${this.file.name} paused.`);
    } else if (this.state === 'paused' || this.state === 'failed') {
      this.resumed = true;
      this.start();
      this.pauseBtn.focus();
    }
  }

  async cancel() {
    const was = this.state;
    this.stop();
    uploads.delete(this);
    if (was === 'failed') {
      this.row.remove();
      announce(`${this.file.name} removed.`);
      $('choose').focus();
    } else {
      this.setState('cancelled', 'Cancelled');
      announce(`${this.file.name} cancelled.`);
    }
    if (this.url && was !== 'done') {
      // Termination: the server frees what it holds for the upload.
      await xhr('DELETE', this.url, {}).catch(() => {});
    }
  }
}

/// Starts waiting uploads while fewer than PARALLEL run.
function pump() {
  while (running < PARALLEL && waiting.length) {
    const u = waiting.shift();
    running += 1;
    u.run().finally(() => {
      running -= 1;
      pump();
    });
  }
}

function add(files) {
  const list = [...files];
  for (const f of list) new Upload(f).start();
  if (list.length) announce(`${list.length} file${list.length > 1 ? 's' : ''} added.`);
}

function setUpUploads() {
  const input = $('files');
  $('choose').addEventListener('click', () => input.click());
  input.addEventListener('change', () => {
    add(input.files);
    input.value = '';
  });
  const drop = $('drop');
  // Anywhere on the page: a file dropped outside the zone must not navigate away.
  for (const t of ['dragover', 'drop']) document.addEventListener(t, (e) => e.preventDefault());
  drop.addEventListener('dragenter', () => drop.classList.add('over'));
  drop.addEventListener('dragover', (e) => {
    e.dataTransfer.dropEffect = 'copy';
    drop.classList.add('over');
  });
  drop.addEventListener('dragleave', (e) => {
    if (!drop.contains(e.relatedTarget)) drop.classList.remove('over');
  });
  drop.addEventListener('drop', (e) => {
    drop.classList.remove('over');
    if (!$('app').hidden) add(e.dataTransfer.files);
  });
}

// ---------------------------------------------------------------------------
// The library: GET /v1/media pages, newest first unless asked otherwise, searched and filtered
// by the server (`q`, `type`). `next` is an opaque cursor: page i is asked with cursors[i], so
// "previous" walks back over the cursors seen, and uploads or deletes meanwhile shift no page.

const library = {
  cursors: [null], // cursors[i]: the `after` of page i
  page: 0,
  next: null,
  items: [],
  timer: null,
  searchTimer: null,
  asked: 0, // the latest request: answers to earlier ones are dropped

  /// What the controls ask for.
  filters() {
    return {
      q: $('search').value.trim(),
      type: $('type-filter').value,
      order: $('order').value,
      owner: $('owner-field').hidden ? '' : $('owner-filter').value.trim(),
    };
  },

  url(after) {
    const f = this.filters();
    const p = new URLSearchParams({ limit: String(PAGE_SIZE), order: f.order });
    if (f.q) p.set('q', f.q);
    if (f.type) p.set('type', f.type);
    if (f.owner) p.set('owner', f.owner);
    if (after !== null && after !== undefined) p.set('after', after);
    return `/v1/media?${p}`;
  },

  clear() {
    this.asked += 1;
    this.cursors = [null];
    this.page = 0;
    this.items = [];
    $('grid').replaceChildren();
    $('library-status').textContent = '';
  },

  /// From the first page again (the search, the type or the order changed).
  restart() {
    clearTimeout(this.searchTimer);
    this.clear();
    return this.load();
  },

  async load(after = this.cursors[this.page], first = false) {
    if (first) this.clear();
    this.asked += 1;
    const asked = this.asked;
    $('grid').setAttribute('aria-busy', 'true');
    let res;
    let j;
    try {
      res = await api(this.url(after));
      j = res.ok ? await res.json() : null;
    } catch (e) {
      if (asked === this.asked) {
        $('library-status').textContent = `The library could not be loaded: ${e.message}`;
        $('grid').setAttribute('aria-busy', 'false');
      }
      return;
    }
    if (asked !== this.asked) return; // a newer request is on its way
    if (!res.ok) {
      $('library-status').textContent = await serverMessage(res);
      $('grid').setAttribute('aria-busy', 'false');
      return;
    }
    this.items = j.media || [];
    this.next = j.next === undefined ? null : j.next;
    if (!this.items.length && this.page > 0) {
      // The last items of this page were deleted: show the one before.
      this.page -= 1;
      this.cursors.length = this.page + 1;
      return this.load();
    }
    this.render();
  },

  render() {
    const grid = $('grid');
    grid.replaceChildren(...this.items.map(card));
    const n = this.items.length;
    const start = this.page * PAGE_SIZE;
    const f = this.filters();
    const empty = f.q || f.type ? 'Nothing matches.' : 'Nothing uploaded yet.';
    $('library-status').textContent = n
      ? `Items ${start + 1}–${start + n}${this.next === null ? '' : ' (more on the next page)'}`
      : empty;
    $('page-label').textContent = `Page ${this.page + 1}`;
    $('prev').disabled = this.page === 0;
    $('next').disabled = this.next === null;
    $('first').hidden = this.page < 2;
    $('first').textContent = f.order === 'asc' ? '⇤ Oldest' : '⇤ Newest';
    grid.setAttribute('aria-busy', 'false');
  },

  forward() {
    if (this.next === null) return;
    this.cursors[this.page + 1] = this.next;
    this.page += 1;
    this.load().then(() => $('library-h').focus());
  },

  back(to = this.page - 1) {
    if (this.page === 0) return;
    this.page = Math.max(0, to);
    this.cursors.length = this.page + 1;
    this.load().then(() => $('library-h').focus());
  },

  /// Typing in the search box: ask once the typing pauses.
  searched() {
    clearTimeout(this.searchTimer);
    this.searchTimer = setTimeout(() => this.restart(), SEARCH_MS);
  },

  /// A finished upload: reload the page shown (newest first, a new item shows on the first
  /// page). Several finishing together reload once.
  uploaded() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.load(), 150);
  },

  async remove(m, button) {
    if (!confirm(`Delete “${m.filename}”? Its link stops working. This cannot be undone.`)) return;
    button.disabled = true;
    let res;
    try {
      res = await api(`/v1/media/${encodeURIComponent(m.id)}`, { method: 'DELETE' });
    } catch (e) {
      button.disabled = false;
      return note(m.id, `Not deleted: ${e.message}`);
    }
    if (!res.ok && res.status !== 404) {
      button.disabled = false;
      return note(m.id, `Not deleted: ${await serverMessage(res)}`);
    }
    announce(`${m.filename} deleted.`);
    refreshMe();
    await this.load();
    $('library-h').focus();
  },
};

function kindLabel(m) {
  const ext = /\.([A-Za-z0-9]{1,5})$/.exec(m.filename || '');
  if (ext) return ext[1];
  return (m.content_type || 'file').split('/').pop().split(';')[0];
}

/// A media type that a narrow card breaks only after its `/` or at a space, never inside a
/// word: each piece stays whole (`.mtype .seg`, no wrapping inside), a `<wbr>` after the
/// slash; a piece wider than the card ends in an ellipsis, and the whole type is the title.
function mediaType(ct) {
  const span = el('span', { class: 'mtype', title: ct });
  for (const piece of ct.match(/[^\s/]*\/|[^\s/]+|\s+/g) || []) {
    if (/^\s/.test(piece)) {
      span.append(' ');
      continue;
    }
    span.append(el('span', { class: 'seg', text: piece }));
    if (piece.endsWith('/')) span.append(el('wbr'));
  }
  return span;
}

function card(m) {
  const name = m.filename || m.id;
  const thumb = el('div', { class: 'thumb' });
  // An image shows as its 300 px WebP variant (the next size up on 2x
  // screens), never as the original, which may be 20 MiB: the original
  // opens when the picture is clicked. SVG stays itself (small, and never
  // rasterised by the server); other images without variants get a label.
  const src = m.thumbnail || (/^image\/svg\+xml/i.test(m.content_type || '') ? m.url : null);
  if (src) {
    const props = { src, loading: 'lazy', alt: '', decoding: 'async', width: 300, height: 300 };
    if (m.thumbnail && m.thumbnail_2x) props.srcset = `${m.thumbnail} 1x, ${m.thumbnail_2x} 2x`;
    const img = el('img', props);
    img.addEventListener('error', () => {
      thumb.replaceChildren(el('span', { class: 'kind', text: kindLabel(m) }));
      thumb.title = 'No preview';
    });
    const open = el('a', { href: m.url, target: '_blank', rel: 'noopener', class: 'open' }, img);
    open.setAttribute('aria-label', `Open ${name}`);
    thumb.append(m.url ? open : img);
  } else {
    thumb.append(el('span', { class: 'kind', text: kindLabel(m), 'aria-hidden': 'true' }));
  }
  const dl = el('dl');
  const rows = [
    ['Size', bytes(m.size)],
    ['Type', mediaType(m.content_type || 'unknown')],
    ['Added', date(m.created)],
  ];
  if (me && me.everyone && m.owner) rows.push(['Owner', m.owner]);
  for (const [k, v] of rows) {
    const dd = typeof v === 'string' ? el('dd', { text: v }) : el('dd', { class: 'type' }, v);
    dl.append(el('dt', { text: k }), dd);
  }
  const copy = el('button', { type: 'button', text: 'Copy link' });
  copy.setAttribute('aria-label', `Copy link to ${name}`);
  const del = el('button', { type: 'button', class: 'danger', text: 'Delete' });
  del.setAttribute('aria-label', `Delete ${name}`);
  del.hidden = !can('delete');
  const linkId = `link-${m.id}`;
  const link = el('input', { class: 'link', readOnly: true, value: m.url, id: linkId, hidden: true });
  const linkLabel = el('label', { class: 'visually-hidden', htmlFor: linkId, text: `Link to ${name}` });
  const noteEl = el('p', { class: 'note', 'aria-live': 'polite', 'data-note': m.id });
  copy.addEventListener('click', () => copyLink(m, link, noteEl));
  del.addEventListener('click', () => library.remove(m, del));
  return el(
    'li',
    { class: 'card', 'data-id': m.id, 'data-name': name },
    thumb,
    el(
      'div',
      { class: 'body' },
      el('h3', { text: name, title: name }),
      dl,
      el('div', { class: 'actions' }, copy, del),
      linkLabel,
      link,
      noteEl,
    ),
  );
}

function note(id, text) {
  const n = document.querySelector(`[data-note="${CSS.escape(id)}"]`);
  if (n) n.textContent = text;
}

/// The link to the clipboard; where the browser refuses (no permission, not a secure
/// context), the link in a read-only input, selected, to copy by hand.
async function copyLink(m, input, noteEl) {
  try {
    if (!navigator.clipboard) throw new Error('no clipboard');
    await navigator.clipboard.writeText(m.url);
    input.hidden = true;
    noteEl.textContent = 'Link copied.';
  } catch {
    input.hidden = false;
    input.focus();
    input.select();
    noteEl.textContent = 'Press Ctrl+C (⌘C) to copy the selected link.';
  }
}

// ---------------------------------------------------------------------------

function setUpLibrary() {
  $('refresh').addEventListener('click', () => library.load());
  $('next').addEventListener('click', () => library.forward());
  $('prev').addEventListener('click', () => library.back());
  $('first').addEventListener('click', () => library.back(0));
  $('search').addEventListener('input', () => library.searched());
  // Enter in the search box asks at once.
  $('search').addEventListener('keydown', (e) => {
    if (e.key === 'Enter') library.restart();
  });
  $('type-filter').addEventListener('change', () => library.restart());
  $('owner-filter').addEventListener('input', () => library.searched());
  $('order').addEventListener('change', () => library.restart());
}

async function main() {
  setUpSignIn();
  setUpUploads();
  setUpLibrary();
  window.addEventListener('beforeunload', (e) => {
    if ([...uploads].some((u) => u.state === 'running' || u.state === 'queued')) {
      e.preventDefault();
    }
  });
  const saved = auth.header;
  if (!saved) return showSignIn();
  // A reload: the tab's credentials still work?
  const { problem, name } = await check(saved);
  if (problem) {
    auth.clear();
    return showSignIn(problem);
  }
  auth.save(saved, name);
  showApp();
  library.load(null, true);
}

main();
