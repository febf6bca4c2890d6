"""Puts FILE into s3://BUCKET/KEY with boto3's managed multipart upload
(upload_file, default TransferConfig) at $AWS_ENDPOINT_URL; prints MB/s
(10^6 bytes per second) of the put alone."""
import os
import sys
import time

import boto3

path, bucket, key = sys.argv[1:4]
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
t = time.monotonic()
s3.upload_file(path, bucket, key)
print("%.1f" % (os.path.getsize(path) / (time.monotonic() - t) / 1e6))
