#!/usr/bin/env python3
"""A WordPress-like XML-RPC media endpoint on Python's standard library
(xmlrpc.server.SimpleXMLRPCServer), the peer of `bulkwire serve`'s /xmlrpc
in `bulkwire bench sweep`.

    python3 wp_xmlrpc_server.py --port 8081 --data /tmp/wp-data [--user bench:bench-secret]

Serves POST /xmlrpc (and /xmlrpc.php) with `wp.uploadFile` and
`metaWeblog.newMediaObject(blog_id, username, password, {name, type, bits,
overwrite})`: checks the credentials (fault 403 "Incorrect username or
password.", as WordPress), writes `bits` to DATA/<random id> and returns a
WordPress-like media struct (`id`, `file`, `url`, `type`, ...).

This is the standard library's way, as a typical Python service would do
it: the handler reads the whole body into memory (in 10 MiB chunks, then
joined), expat parses it into Python objects, and `bits` is decoded whole
into a bytes object. Its memory therefore grows with the upload, like
WordPress's IXR parser; `bulkwire bench sweep` measures how much.
"""

import argparse
import datetime
import os
import secrets
import xmlrpc.client
from xmlrpc.server import SimpleXMLRPCRequestHandler, SimpleXMLRPCServer


class Handler(SimpleXMLRPCRequestHandler):
    rpc_paths = ("/xmlrpc", "/xmlrpc.php", "/RPC2")
    # Answer on the same connection when the client keeps it alive.
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass


def make_upload(data_dir, user, password, base_url):
    def upload(blog_id, username, pw, struct):
        if username != user or pw != password:
            raise xmlrpc.client.Fault(403, "Incorrect username or password.")
        try:
            name = struct["name"]
            bits = struct["bits"]
        except (KeyError, TypeError):
            raise xmlrpc.client.Fault(-32602, "Invalid params: need name and bits")
        data = bits.data if isinstance(bits, xmlrpc.client.Binary) else bytes(bits)
        media_id = secrets.token_hex(8)
        path = os.path.join(data_dir, media_id)
        with open(path, "wb") as f:
            f.write(data)
        link = f"{base_url}/media/{media_id}"
        mime = struct.get("type", "application/octet-stream")
        now = xmlrpc.client.DateTime(datetime.datetime.now(datetime.timezone.utc))
        return {
            "attachment_id": media_id,
            "id": media_id,
            "date_created_gmt": now,
            "parent": 0,
            "link": link,
            "url": link,
            "title": name,
            "file": name,
            "caption": "",
            "description": "",
            "metadata": {"filesize": len(data)},
            "type": mime,
            "thumbnail": link if mime.startswith("image/") else "",
        }

    return upload


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8081")))
    ap.add_argument("--data", default=os.environ.get("DATA", "wp-data"))
    ap.add_argument("--user", default=os.environ.get("BENCH_USER", "bench:bench-secret"))
    a = ap.parse_args()
    os.makedirs(a.data, exist_ok=True)
    user, _, password = a.user.partition(":")
    server = SimpleXMLRPCServer(
        ("127.0.0.1", a.port), requestHandler=Handler, allow_none=True, logRequests=False
    )
    upload = make_upload(a.data, user, password, f"http://127.0.0.1:{a.port}")
    server.register_function(upload, "wp.uploadFile")
    server.register_function(upload, "metaWeblog.newMediaObject")
    server.register_introspection_functions()
    server.serve_forever()


if __name__ == "__main__":
    main()
