"""GETs a media link the way a stranger holding it would: a bare urllib
opener, with no Authorization, no cookies and no proxy. Shared by the
client scripts (soap_zeep.py, xmlrpc_clients.py) that check the `url`
they got back."""

import hashlib
import urllib.error
import urllib.request


def fetch_without_credentials(url):
    """(HTTP status, hex SHA-256 of the body) of a GET of `url`."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url)
    try:
        with opener.open(req, timeout=60) as r:
            status, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read()
    if req.has_header("Authorization"):
        raise SystemExit("the link fetch sent an Authorization header")
    return status, hashlib.sha256(body).hexdigest()
