// Uploads one file with tus-js-client (npm `tus-js-client`, 4.x) the way a
// Node application would: a file stream, fixed-size chunks and automatic
// retries. After a failed request (a cut connection, a 5xx, 409 or 423)
// tus-js-client waits for the next of `retryDelays`, asks the upload's
// offset with HEAD and goes on from there with PATCH; it creates a new
// upload instead only when that HEAD gets an answer other than 2xx or 423.
//
// usage: node tus_upload.js '<json options>'
//   endpoint     creation URL, e.g. http://127.0.0.1:PORT/v1/uploads
//   token        sent as "Authorization: Bearer <token>" on every request
//   authorization  the whole Authorization value instead (e.g. "Basic …")
//   uploadUrl    an upload to resume (tus-js-client asks its offset with HEAD; on a 4xx it
//                creates a new upload at `endpoint` instead)
//   file         path of the file to upload
//   protocol     "tus-v1" (default) | "ietf-draft-03" | "ietf-draft-05"
//   chunkSize    bytes per PATCH (default: the whole file)
//   retryDelays  ms between attempts (default [0, 200, 500, 1000, 2000])
//   filename, filetype   Upload-Metadata (default: the file's name,
//                application/octet-stream)
//   source       "stream" (default): an fs.ReadStream, read chunk by chunk;
//                "buffer": the whole file read into a Buffer first. This
//                changes the IETF requests: from a stream, tus-js-client
//                4.3 marks no chunk as the last (`Upload-Complete: ?0`
//                throughout, unless one chunk is the whole file); from a
//                Buffer the last PATCH carries `Upload-Complete: ?1`.
//   uploadDataDuringCreation  send the first chunk with the POST
//
// Prints one JSON line: {ok, url, bytes, size, retries, errors, requests}
// where `requests` lists "METHOD STATUS" for every answer received, and
// `retries`/`errors` count and describe the failures tus-js-client
// considered retrying. Exits 1 on failure (the JSON
// then also has `error`).
'use strict';

const fs = require('fs');
const path = require('path');
const tus = require('tus-js-client');

function options(argv) {
  const o = JSON.parse(argv[2] || '{}');
  for (const k of ['endpoint', 'file']) {
    if (!o[k]) throw new Error(`missing option ${k}`);
  }
  return {
    protocol: 'tus-v1',
    retryDelays: [0, 200, 500, 1000, 2000],
    filename: path.basename(o.file),
    filetype: 'application/octet-stream',
    ...o,
  };
}

// tus-js-client's own rule (not exported): retry unless a 4xx other than
// 409 (offset mismatch) and 423 (locked). Kept so that counting retries
// does not change what is retried.
function retryable(err) {
  const status = err.originalResponse ? err.originalResponse.getStatus() : 0;
  return !(status >= 400 && status < 500) || status === 409 || status === 423;
}

function upload(o) {
  const size = fs.statSync(o.file).size;
  const report = { ok: false, url: null, bytes: 0, size, retries: 0, errors: [], requests: [] };
  return new Promise((resolve) => {
    const input = o.source === 'buffer' ? fs.readFileSync(o.file) : fs.createReadStream(o.file);
    const authorization = o.authorization || (o.token ? `Bearer ${o.token}` : null);
    const up = new tus.Upload(input, {
      endpoint: o.endpoint,
      uploadUrl: o.uploadUrl || null,
      protocol: o.protocol,
      chunkSize: o.chunkSize || Number.POSITIVE_INFINITY,
      retryDelays: o.retryDelays,
      uploadDataDuringCreation: Boolean(o.uploadDataDuringCreation),
      headers: authorization ? { Authorization: authorization } : {},
      metadata: { filename: o.filename, filetype: o.filetype },
      // A fresh upload every run: no URL storage to resume from.
      storeFingerprintForResuming: false,
      onAfterResponse: (req, res) => {
        report.requests.push(`${req.getMethod()} ${res.getStatus()}`);
      },
      onShouldRetry: (err) => {
        report.retries += 1;
        report.errors.push(String(err.message).slice(0, 300));
        return retryable(err);
      },
      onChunkComplete: (_chunk, accepted) => {
        report.bytes = accepted;
      },
      onSuccess: () => {
        report.ok = true;
        report.url = up.url;
        resolve(report);
      },
      onError: (err) => {
        report.url = up.url;
        report.error = String(err.message || err).slice(0, 2000);
        resolve(report);
      },
    });
    up.start();
  });
}

upload(options(process.argv))
  .then((report) => {
    console.log(JSON.stringify(report));
    process.exit(report.ok ? 0 : 1);
  })
  .catch((e) => {
    console.log(JSON.stringify({ ok: false, error: String(e && e.stack ? e.stack : e) }));
    process.exit(1);
  });
