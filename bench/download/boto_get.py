"""boto3's download_file of one object, the peer of a proxied download in
bench/download/run: its default transfer (8 MiB ranges on 10 threads),
the endpoint and keys from AWS_* (as the server's). Prints MB/s.

    python3 boto_get.py BUCKET KEY
"""

import os
import sys
import tempfile
import time

import boto3

bucket, key = sys.argv[1], sys.argv[2]
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/var/tmp")) as d:
    path = os.path.join(d, "object")
    t = time.perf_counter()
    s3.download_file(bucket, key, path)
    took = time.perf_counter() - t
    size = os.path.getsize(path)
print(f"{size / took / 1e6:.0f}")
