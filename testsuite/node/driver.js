// What the Chromium drivers (uppy_chromium.js, uppy_cors_chromium.js,
// web_chromium.js) share: the browser's flags, and the process around a
// run: a deadline, then one JSON report line on stdout and the exit code.
'use strict';

// Flags for Debian's headless Chromium in a test.
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  // Debian's launcher adds this only when it can read /dev/shm's size;
  // containers often have a tiny /dev/shm.
  '--disable-dev-shm-usage',
];

// Runs `run(o, report, deadline)` within `o.timeoutMs`, then prints
// `report` (with `error` on a failure or a timeout) as the last stdout
// line and exits 0 when `report.ok`.
function main(run, o, report) {
  const deadline = Date.now() + o.timeoutMs;
  const timer = setTimeout(() => {
    // run() is stuck: its `finally` closes nothing, so say so and exit
    // (playwright closes the browser it launched when this process exits).
    console.log(JSON.stringify({ ...report, ok: false, error: `timed out after ${o.timeoutMs} ms` }));
    process.exit(1);
  }, o.timeoutMs);
  run(o, report, deadline)
    .catch((e) => {
      report.ok = false;
      report.error = String((e && e.stack) || e).slice(0, 4000);
    })
    .then(() => {
      clearTimeout(timer);
      console.log(JSON.stringify(report));
      process.exit(report.ok ? 0 : 1);
    });
}

module.exports = { ARGS, main };
