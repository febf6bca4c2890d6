"""Drives `POST /xmlrpc` of a running bulkwire server with real XML-RPC
clients and prints one JSON object of what they saw; the Rust test
(crates/bulkwire-server/tests/xmlrpc_clients.rs) checks it and downloads
each upload back by its URL.

usage: xmlrpc_clients.py stdlib|wordpress URL USER PASSWORD FILE
       xmlrpc_clients.py authors URL USER PASSWORD FILE OTHER_USER OTHER_PASSWORD

- stdlib: Python's own xmlrpc.client (ServerProxy, Binary, MultiCall).
- wordpress: python-wordpress-xmlrpc (PyPI), as its users call it.
- authors: python-wordpress-xmlrpc as two authors: each uploads, lists
  their library, asks for the other's item and tries to delete it (both
  faults are reported as [code, string]), deletes one of their own, and
  lists again. Reported by user name.

Every upload's `url` is the item's capability link: the script GETs it
itself with urllib.request and no credentials, and reports under
"fetched" (by the upload's key) the url, `fetched_status` and
`fetched_sha256` (hex SHA-256 of the body it got).
"""
import json
import sys
import xmlrpc.client

from link_fetch import fetch_without_credentials


def fault_of(f):
    try:
        f()
    except xmlrpc.client.Fault as e:
        return [e.faultCode, e.faultString]
    return None


def fetched(url):
    """What a GET of the link without credentials got."""
    status, sha = fetch_without_credentials(url)
    return {"url": url, "fetched_status": status, "fetched_sha256": sha}


def stdlib(url, user, pw, data):
    proxy = xmlrpc.client.ServerProxy(url)
    out = {}
    struct = {
        "name": "stdlib.bin",
        "type": "application/octet-stream",
        "bits": xmlrpc.client.Binary(data),
        "overwrite": True,
    }
    out["upload"] = proxy.wp.uploadFile(1, user, pw, struct)
    struct["name"] = "mw.jpg"
    struct["type"] = "image/jpeg"
    out["mw"] = proxy.metaWeblog.newMediaObject(1, user, pw, struct)
    out["methods"] = proxy.system.listMethods()
    out["bad_login"] = fault_of(lambda: proxy.wp.uploadFile(1, user, "wrong", struct))
    out["unknown"] = fault_of(lambda: proxy.wp.getPosts(1, user, pw))
    mc = xmlrpc.client.MultiCall(proxy)
    mc.system.methodHelp("wp.getMediaItem")
    mc.wp.getMediaItem(1, user, pw, out["upload"]["id"])
    out["multicall"] = list(mc())
    out["fetched"] = {k: fetched(out[k]["url"]) for k in ("upload", "mw")}
    return out


def wordpress(url, user, pw, data):
    # python-wordpress-xmlrpc 2.3 uses collections.Iterable, which moved to
    # collections.abc in Python 3.10; its list results need it back.
    import collections
    import collections.abc

    collections.Iterable = collections.abc.Iterable
    from wordpress_xmlrpc import Client
    from wordpress_xmlrpc.exceptions import InvalidCredentialsError
    from wordpress_xmlrpc.methods import media

    out = {}
    client = Client(url, user, pw)
    up = {
        "name": "wordpress.jpg",
        "type": "image/jpeg",
        "bits": xmlrpc.client.Binary(data),
        "overwrite": True,
    }
    out["upload"] = client.call(media.UploadFile(up))
    item = client.call(media.GetMediaItem(out["upload"]["id"]))
    out["item"] = {
        "id": item.id,
        "link": item.link,
        "title": item.title,
        "parent": item.parent,
        "metadata": item.metadata,
        "date_created": item.date_created.isoformat(),
    }
    lib = client.call(media.GetMediaLibrary({"mime_type": "image/jpeg"}))
    out["library"] = [m.id for m in lib]
    try:
        Client(url, user, "wrong").call(media.UploadFile(up))
        out["bad_login"] = None
    except InvalidCredentialsError as e:
        out["bad_login"] = str(e)
    out["fetched"] = {"upload": fetched(out["upload"]["url"])}
    return out


def wordpress_client(url, user, pw):
    # See wordpress(): python-wordpress-xmlrpc 2.3 on Python 3.10+.
    import collections
    import collections.abc

    collections.Iterable = collections.abc.Iterable
    from wordpress_xmlrpc import Client

    return Client(url, user, pw)


def authors(url, users, data):
    from wordpress_xmlrpc.methods import media, posts

    clients = {u: wordpress_client(url, u, pw) for u, pw in users}
    out = {u: {} for u in clients}

    def library(u):
        return sorted(m.id for m in clients[u].call(media.GetMediaLibrary({})))

    for i, (u, c) in enumerate(clients.items()):
        up = {"name": u + ".jpg", "type": "image/jpeg", "bits": xmlrpc.client.Binary(data + bytes([i]))}
        out[u]["uploads"] = [c.call(media.UploadFile(up))["id"] for _ in range(2)]
    for u in clients:
        out[u]["library"] = library(u)
    (a, b) = list(clients)
    for me, other in ((a, b), (b, a)):
        theirs = out[other]["uploads"][0]
        out[me]["other_item"] = fault_of(lambda: clients[me].call(media.GetMediaItem(theirs)))
        out[me]["delete_other"] = fault_of(lambda: clients[me].call(posts.DeletePost(theirs)))
    for u in clients:
        out[u]["delete_own"] = clients[u].call(posts.DeletePost(out[u]["uploads"][1]))
        out[u]["library_after"] = library(u)
    return out


def main():
    mode, url, user, pw, path = sys.argv[1:6]
    with open(path, "rb") as f:
        data = f.read()
    if mode == "authors":
        result = authors(url, [(user, pw), tuple(sys.argv[6:8])], data)
    else:
        run = {"stdlib": stdlib, "wordpress": wordpress}[mode]
        result = run(url, user, pw, data)
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
