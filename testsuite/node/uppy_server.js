// A test-only web server for driving Uppy (npm `uppy`, 6.x) in a browser
// against bulkwire: one origin serves the page, Uppy's browser bundle and,
// by proxy, bulkwire's /v1 API. Same origin, so the browser needs no CORS
// (uppy_cors_server.js serves a page on another origin, through CORS).
// Nothing is fetched from a CDN.
//
//   GET /               testsuite/node/uppy_page.html
//   GET /config.json    the page's settings (`page` below)
//   GET /uppy/<file>    a file of node_modules/uppy/dist (uppy.min.mjs, css)
//   /v1/...             proxied to `upstream`, any method, bodies streamed
//                       both ways, headers as they are: the Host header too,
//                       so the Location of a new upload is on this origin
//
// As a module: start({upstream, page}) resolves to {origin, log, close()};
// `log` gets one "METHOD /path STATUS" line per proxied answer.
// Standalone, for trying the page by hand:
//   NODE_PATH=target/tmp/node/node_modules node uppy_server.js \
//     '{"upstream":"127.0.0.1:8080","page":{"token":"..."}}'
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

function uppyDist() {
  return path.join(path.dirname(require.resolve('uppy/package.json')), 'dist');
}

function sendFile(res, file) {
  fs.readFile(file, (err, body) => {
    if (err) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end(`not found: ${path.basename(file)}\n`);
      return;
    }
    res.writeHead(200, {
      'content-type': TYPES[path.extname(file)] || 'application/octet-stream',
      'cache-control': 'no-store',
    });
    res.end(body);
  });
}

function proxy(req, res, upstream, log) {
  const [host, port] = upstream.split(':');
  const up = http.request(
    { host, port: Number(port), method: req.method, path: req.url, headers: req.headers },
    (ures) => {
      log.push(`${req.method} ${req.url} ${ures.statusCode}`);
      res.writeHead(ures.statusCode, ures.headers);
      ures.pipe(res);
    },
  );
  up.on('error', (e) => {
    log.push(`${req.method} ${req.url} proxy-error ${e.code || e.message}`);
    if (!res.headersSent) {
      res.writeHead(502, { 'content-type': 'text/plain' });
    }
    res.destroy();
  });
  // The browser gave up on the request (a paused Uppy upload aborts its
  // XHR): pass that on to bulkwire instead of finishing the body.
  req.on('aborted', () => up.destroy());
  res.on('close', () => {
    if (!res.writableFinished) up.destroy();
  });
  req.pipe(up);
}

function start({ upstream, page = {}, port = 0 }) {
  if (!upstream) throw new Error('missing option upstream (host:port of bulkwire)');
  const dist = uppyDist();
  const html = path.join(__dirname, 'uppy_page.html');
  const log = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    if (url.pathname.startsWith('/v1/')) return proxy(req, res, upstream, log);
    if (req.method !== 'GET') {
      res.writeHead(405).end();
      return undefined;
    }
    if (url.pathname === '/') return sendFile(res, html);
    if (url.pathname === '/favicon.ico') {
      res.writeHead(204).end();
      return undefined;
    }
    if (url.pathname === '/config.json') {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(JSON.stringify(page));
      return undefined;
    }
    const m = /^\/uppy\/([\w.-]+)$/.exec(url.pathname);
    if (m) return sendFile(res, path.join(dist, m[1]));
    res.writeHead(404).end();
    return undefined;
  });
  return new Promise((resolve, reject) => {
    server.on('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const origin = `http://127.0.0.1:${server.address().port}`;
      resolve({
        origin,
        log,
        close: () =>
          new Promise((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}

module.exports = { start };

if (require.main === module) {
  start(JSON.parse(process.argv[2] || '{}')).then((s) => {
    console.log(JSON.stringify({ origin: s.origin }));
  });
}
