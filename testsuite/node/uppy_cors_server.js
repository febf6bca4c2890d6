// A test-only static web server for the cross-origin Uppy test
// (crates/bulkwire-server/tests/uppy_cors.rs): it serves the page
// (testsuite/node/uppy_cors_page.html) and Uppy's browser bundle, and
// NOTHING else: no proxy. The page's Uppy talks to bulkwire on bulkwire's
// own origin (another port of 127.0.0.1, so another origin), which only
// works when bulkwire answers CORS for this server's origin.
//
//   GET /               testsuite/node/uppy_cors_page.html (its settings
//                       come in the URL's fragment, which is never sent
//                       to any server: see the page)
//   GET /uppy/<file>    a file of node_modules/uppy/dist (uppy.min.mjs, css)
//   anything else       404 (any /v1 request reaching this origin is a bug
//                       of the page, and the log shows it)
//
// usage: NODE_PATH=target/tmp/node/node_modules node uppy_cors_server.js
// Listens on 127.0.0.1:0 and prints {"origin": "http://127.0.0.1:PORT"} as
// its first stdout line, then one "METHOD /path STATUS" line per request.
// Exits when its stdin closes (the test that started it is gone).
'use strict';

const fs = require('fs');
const http = require('http');
const path = require('path');

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json',
};

const dist = path.join(path.dirname(require.resolve('uppy/package.json')), 'dist');
const html = path.join(__dirname, 'uppy_cors_page.html');

function answer(req, res, status, headers, body) {
  res.writeHead(status, { 'cache-control': 'no-store', ...headers });
  res.end(body);
  console.log(`${req.method} ${req.url.split('?')[0]} ${status}`);
}

function sendFile(req, res, file) {
  fs.readFile(file, (err, body) => {
    if (err) return answer(req, res, 404, { 'content-type': 'text/plain' }, 'not found\n');
    const type = TYPES[path.extname(file)] || 'application/octet-stream';
    return answer(req, res, 200, { 'content-type': type }, body);
  });
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  if (req.method !== 'GET') return answer(req, res, 405, {}, '');
  if (url.pathname === '/') return sendFile(req, res, html);
  if (url.pathname === '/favicon.ico') return answer(req, res, 204, {}, '');
  const m = /^\/uppy\/([\w.-]+)$/.exec(url.pathname);
  if (m) return sendFile(req, res, path.join(dist, m[1]));
  return answer(req, res, 404, {}, '');
});

server.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ origin: `http://127.0.0.1:${server.address().port}` }));
});
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
