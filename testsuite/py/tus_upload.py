"""Uploads one file with tuspy (PyPI `tuspy`, the tus project's Python
client) with the checksum extension on: every PATCH carries
`Upload-Checksum: <algo> <base64 digest of the chunk>`.

usage: python tus_upload.py '<json options>'
  endpoint    creation URL, e.g. http://127.0.0.1:PORT/v1/uploads
  token       sent as "Authorization: Bearer <token>"
  authorization  the whole Authorization value instead (e.g. "Basic ...")
  resume      an upload URL to continue instead of creating one (tuspy asks
              its offset with HEAD first; a refusal ends the run with its
              status in the report's `status`)
  file        path of the file to upload
  chunk_size  bytes per PATCH (default 1 MiB)
  algo        "sha1" (tuspy's own choice, default) | "sha256"
  filename, filetype   Upload-Metadata (default: the file's name,
              application/octet-stream)
  mode        "upload" (default): the whole file.
              "corrupt": one chunk, then the second chunk with a wrong
              checksum (sent by tuspy itself, through an uploader whose
              digest is of other bytes), an offset check with HEAD, then
              the rest of the file with right checksums.

Prints one JSON line: {ok, url, bytes, size, ...}; in "corrupt" mode also
corrupt_status (the server's answer to the bad chunk, 460 expected),
offset_before and offset_after_corrupt (equal when the bad chunk was
refused). Exits 1 when the upload did not complete.
"""

import hashlib
import json
import os
import sys

from tusclient import client
from tusclient.exceptions import TusCommunicationError
from tusclient.uploader import Uploader

ALGOS = {"sha1": hashlib.sha1, "sha256": hashlib.sha256}


def uploader_class(algo, corrupt=False):
    """An Uploader using `algo` for Upload-Checksum. tuspy picks the
    algorithm from this class attribute (sha1 by default); the corrupt one
    digests the chunk plus one byte, so its header is well-formed but
    wrong."""
    right = ALGOS[algo]

    def wrong(data):
        return right(data + b"\0")

    class ChecksumUploader(Uploader):
        CHECKSUM_ALGORITHM_PAIR = (algo, wrong if corrupt else right)

    return ChecksumUploader


def options():
    o = json.loads(sys.argv[1])
    o.setdefault("chunk_size", 1 << 20)
    o.setdefault("algo", "sha1")
    o.setdefault("filename", os.path.basename(o["file"]))
    o.setdefault("filetype", "application/octet-stream")
    o.setdefault("mode", "upload")
    return o


def new_uploader(o, tus, url=None, corrupt=False):
    cls = uploader_class(o["algo"], corrupt)
    kwargs = dict(
        file_path=o["file"],
        chunk_size=o["chunk_size"],
        metadata={"filename": o["filename"], "filetype": o["filetype"]},
        upload_checksum=True,
        client=tus,
    )
    if url is not None:
        # With a URL tuspy resumes: it asks the offset with HEAD first.
        kwargs["url"] = url
    return cls(**kwargs)


def corrupt_chunk(o, tus, up):
    """Sends the next chunk with a wrong checksum; returns what the server
    answered and the offsets around it."""
    before = up.get_offset()
    bad = new_uploader(o, tus, url=up.url, corrupt=True)
    status = None
    try:
        bad.upload_chunk()
    except TusCommunicationError as e:
        status = e.status_code
    else:
        status = bad.request.status_code
    return {
        "corrupt_status": status,
        "offset_before": before,
        "offset_after_corrupt": up.get_offset(),
    }


def main():
    o = options()
    size = os.path.getsize(o["file"])
    auth = o.get("authorization") or "Bearer " + o.get("token", "")
    tus = client.TusClient(o["endpoint"], headers={"Authorization": auth})
    report = {"ok": False, "url": None, "bytes": 0, "size": size, "algo": o["algo"]}
    try:
        up = new_uploader(o, tus, url=o.get("resume"))
        if o["mode"] == "corrupt":
            up.upload_chunk()
            report["url"] = up.url
            report.update(corrupt_chunk(o, tus, up))
            # Go on from the server's offset, as a client would after an
            # error: the refused chunk is sent again, now with its right
            # checksum.
            up.offset = up.get_offset()
        up.upload()
        report["url"] = up.url
        # The last PATCH's Upload-Offset: a finished upload has become
        # media, so it is not asked again.
        report["bytes"] = up.offset
        report["ok"] = report["bytes"] == size
    except TusCommunicationError as e:
        report["status"] = e.status_code
        report["error"] = "{}: {} {!r}".format(type(e).__name__, e.status_code, e.response_content)
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
