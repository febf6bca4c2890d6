"""Uploads a file to a running `bulkwire serve` with python-requests, both as
multipart/form-data (files=) and as a chunked raw PUT (a generator body),
downloads each back and prints one JSON object with the digests seen.

Each answer's `url` is the item's capability link (absolute, with `sig=`):
it is fetched twice, with the token as before and then by a fresh
requests.Session that carries no credentials at all (`trust_env` off, so no
~/.netrc either): `*_fetched_status` and `*_fetched_sha256` are what that
credential-less GET got.

usage: roundtrip.py BASE_URL TOKEN FILE
"""
import hashlib
import json
import sys
from urllib.parse import urljoin

import requests


def chunks(path, size=64 * 1024):
    with open(path, "rb") as f:
        while True:
            b = f.read(size)
            if not b:
                return
            yield b


def fetch_without_credentials(url):
    """GETs a link with nothing that could authenticate: no header, no netrc."""
    with requests.Session() as s:
        s.trust_env = False
        r = s.get(url, timeout=60)
        if "Authorization" in r.request.headers:
            raise SystemExit("the link fetch sent an Authorization header")
        return r.status_code, hashlib.sha256(r.content).hexdigest()


def main():
    base, token, path = sys.argv[1], sys.argv[2], sys.argv[3]
    auth = {"Authorization": "Bearer " + token}
    with open(path, "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest()
    out = {"want": want, "requests_version": requests.__version__}
    with open(path, "rb") as f:
        r = requests.post(
            base + "/v1/media",
            headers=auth,
            files={"upload": ("photo.jpg", f, "image/jpeg")},
            data={"title": "from python"},
            timeout=60,
        )
    out["form_status"] = r.status_code
    body = r.json()
    out["form_fields"] = body.get("fields")
    out["form_sha256"] = body["media"][0]["sha256"]
    url = urljoin(base + "/", body["media"][0]["url"])
    out["form_url"] = url
    got = requests.get(url, headers=auth, timeout=60)
    out["form_download_sha256"] = hashlib.sha256(got.content).hexdigest()
    out["form_fetched_status"], out["form_fetched_sha256"] = fetch_without_credentials(url)

    r = requests.put(base + "/v1/media/stream%20ed.bin", headers=auth, data=chunks(path), timeout=60)
    out["put_status"] = r.status_code
    m = r.json()["media"][0]
    out["put_filename"] = m["filename"]
    url = urljoin(base + "/", m["url"])
    out["put_url"] = url
    got = requests.get(url, headers=auth, timeout=60)
    out["put_download_sha256"] = hashlib.sha256(got.content).hexdigest()
    out["put_fetched_status"], out["put_fetched_sha256"] = fetch_without_credentials(url)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
