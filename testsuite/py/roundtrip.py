"""Uploads a file to a running `bulkwire serve` with python-requests, both as
multipart/form-data (files=) and as a chunked raw PUT (a generator body),
downloads each back and prints one JSON object with the digests seen.

usage: roundtrip.py BASE_URL TOKEN FILE
"""
import hashlib
import json
import sys

import requests


def chunks(path, size=64 * 1024):
    with open(path, "rb") as f:
        while True:
            b = f.read(size)
            if not b:
                return
            yield b


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
    got = requests.get(base + body["media"][0]["url"], headers=auth, timeout=60)
    out["form_download_sha256"] = hashlib.sha256(got.content).hexdigest()

    r = requests.put(base + "/v1/media/stream%20ed.bin", headers=auth, data=chunks(path), timeout=60)
    out["put_status"] = r.status_code
    m = r.json()["media"][0]
    out["put_filename"] = m["filename"]
    got = requests.get(base + m["url"], headers=auth, timeout=60)
    out["put_download_sha256"] = hashlib.sha256(got.content).hexdigest()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
