#!/usr/bin/env python3
"""Clients that send their whole request before reading the answer.

Python's http.client (and so urllib and xmlrpc.client) writes the entire
body with sendall() before it reads a byte of the response. A server that
answers early (401, 413, 503, an XML-RPC fault) and then closes at once
makes such a client fail with BrokenPipeError or ConnectionResetError
instead of seeing the answer. This script counts, over many fresh
connections, what the client actually got. Stdlib only; prints one JSON
object on stdout.

  send_first.py put URL_BASE (--token T | --no-token) --name N \
      --sizes 2,8,32 --tries 20
  send_first.py xmlrpc URL --user U --password P --size-mib N \
      --name-bytes K --tries T
"""

import argparse
import http.client
import json
import socket
import sys
import urllib.parse
import xmlrpc.client

MIB = 1024 * 1024
# A stalled exchange fails the try (as TimeoutError) instead of hanging.
TIMEOUT_S = 120


def put_once(host, port, path, body, token):
    """One PUT on a new connection: (outcome, limit name or None, detail)."""
    headers = {"Content-Type": "application/octet-stream"}
    if token is not None:
        headers["Authorization"] = "Bearer " + token
    conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    try:
        conn.request("PUT", path, body=body, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        limit = None
        try:
            j = json.loads(raw)
            if isinstance(j, dict) and isinstance(j.get("limit"), dict):
                limit = j["limit"].get("name")
        except ValueError:
            pass
        return str(resp.status), limit, None
    except Exception as e:  # noqa: BLE001 - every failure is an outcome
        return type(e).__name__, None, repr(e)[:300]
    finally:
        conn.close()


def mode_put(a):
    u = urllib.parse.urlsplit(a.url_base)
    path = u.path.rstrip("/") + "/v1/media/" + urllib.parse.quote(a.name)
    token = None if a.no_token else a.token
    results = {}
    limit_names = []
    errors = []
    for size in [int(s) for s in a.sizes.split(",") if s]:
        body = b"\x00" * (size * MIB)
        counts = results.setdefault(str(size), {})
        for _ in range(a.tries):
            outcome, limit, err = put_once(u.hostname, u.port, path, body, token)
            counts[outcome] = counts.get(outcome, 0) + 1
            limit_names.append(limit)
            if err is not None:
                errors.append({"size": size, "error": err})
    return {"results": results, "limit_names": limit_names, "errors": errors}


def mode_xmlrpc(a):
    socket.setdefaulttimeout(TIMEOUT_S)
    name = "x" * a.name_bytes if a.name_bytes > 0 else "a.bin"
    bits = xmlrpc.client.Binary(b"\x00" * (a.size_mib * MIB))
    outcomes = []
    errors = []
    for _ in range(a.tries):
        proxy = xmlrpc.client.ServerProxy(a.url)
        # `name` before `bits`: a name over a limit faults while the client
        # is still sending the bits.
        data = {"name": name, "type": "application/octet-stream", "bits": bits}
        try:
            proxy.wp.uploadFile(1, a.user, a.password, data)
            outcomes.append("ok")
        except xmlrpc.client.Fault as f:
            outcomes.append("fault:%s:%s" % (f.faultCode, str(f.faultString)[:200]))
        except xmlrpc.client.ProtocolError as e:
            outcomes.append(type(e).__name__)
            errors.append("ProtocolError %s %s" % (e.errcode, e.errmsg))
        except Exception as e:  # noqa: BLE001 - every failure is an outcome
            outcomes.append(type(e).__name__)
            errors.append(repr(e)[:300])
        finally:
            proxy("close")()
    return {"outcomes": outcomes, "errors": errors}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="mode", required=True)

    put = sub.add_parser("put")
    put.add_argument("url_base")
    tok = put.add_mutually_exclusive_group(required=True)
    tok.add_argument("--token")
    tok.add_argument("--no-token", action="store_true")
    put.add_argument("--name", required=True)
    put.add_argument("--sizes", default="2,8,32", help="MiB, comma-separated")
    put.add_argument("--tries", type=int, default=20)

    x = sub.add_parser("xmlrpc")
    x.add_argument("url")
    x.add_argument("--user", required=True)
    x.add_argument("--password", required=True)
    x.add_argument("--size-mib", type=int, required=True)
    x.add_argument("--name-bytes", type=int, default=0)
    x.add_argument("--tries", type=int, default=5)

    a = p.parse_args()
    out = mode_put(a) if a.mode == "put" else mode_xmlrpc(a)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
