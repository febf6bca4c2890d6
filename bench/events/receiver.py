"""A local webhook receiver for bench/events/run: answers every POST 204 at
once and appends, per event, its id and the milliseconds from the event's
`time` (set when the server made the event, just before its transaction
commits) to its receipt. Not a verifier (tests/events.rs and the cluster
tests check signatures with `standardwebhooks`): here only speed counts.

    python3 receiver.py OUT_FILE   # prints its port on stdout's first line
"""

import datetime
import http.server
import json
import sys
import threading

OUT = open(sys.argv[1], "a", buffering=1)
LOCK = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        now = datetime.datetime.now(datetime.timezone.utc)
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(204)
        self.send_header("content-length", "0")
        self.end_headers()
        e = json.loads(body)
        t = datetime.datetime.fromisoformat(e["time"].replace("Z", "+00:00"))
        ms = (now - t).total_seconds() * 1000
        with LOCK:
            OUT.write(f"{e['id']} {e['type']} {ms:.3f} {now.timestamp():.6f}\n")

    def log_message(self, *args):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
srv.daemon_threads = True
print(srv.server_address[1], flush=True)
srv.serve_forever()
