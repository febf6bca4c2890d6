#!/usr/bin/env python3
"""A webhook receiver for crates/bulkwire-cli/tests/events.rs, checking
every delivery with the Standard Webhooks library (never with bulkwire's
own code), as an application would.

    webhook_receiver.py SECRET OUT_FILE [PORT [DELAY]]

listens on 127.0.0.1:PORT (0 or absent: a free port) and prints
"listening on PORT" once it accepts connections. Each POST is appended to
OUT_FILE as one JSON line, flushed before the answer is sent (DELAY
seconds later, 0 by default: a sender killed in between has had its
delivery recorded but not answered, and another sends it again):

    {"webhook_id": "...", "verified": true|false, "error": "...", "event": {...}}

`event` is the body as JSON (null when it is not JSON). A verified
delivery is answered 200, one that fails verification 401 (as a real
receiver would; bulkwire then retries it and the test sees the line).
A receiver that is "down" is this process not running: connections are
refused. Appending across restarts keeps arrival order in the file.
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

secret, out_path = sys.argv[1], sys.argv[2]
port = int(sys.argv[3]) if len(sys.argv) > 3 else 0
delay = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
hook = Webhook(secret)
out = open(out_path, "a", encoding="utf-8")
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        headers = {k: v for k, v in self.headers.items()}
        verified, error = True, None
        try:
            hook.verify(body, headers)
        except (WebhookVerificationError, ValueError) as e:
            verified, error = False, str(e)
        try:
            event = json.loads(body)
        except ValueError:
            event = None
        line = {
            "webhook_id": self.headers.get("webhook-id"),
            "verified": verified,
            "error": error,
            "event": event,
        }
        with lock:
            out.write(json.dumps(line) + "\n")
            out.flush()
        time.sleep(delay)
        status = 200 if verified else 401
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    # Restarted on the same port at once: the old socket may be in TIME_WAIT.
    allow_reuse_address = True
    daemon_threads = True


server = Server(("127.0.0.1", port), Handler)
print(f"listening on {server.server_address[1]}", flush=True)
server.serve_forever()
