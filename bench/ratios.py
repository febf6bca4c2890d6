#!/usr/bin/env python3
"""Prints the multipart bench table from criterion's estimates: medians of
memcpy, memmem, parse (whole slice) and parse (64 KiB chunks) per body, and
each parse time as a ratio to the memmem scan measured in the same run."""
import json, os, sys

root = sys.argv[1] if len(sys.argv) > 1 else "target/criterion"
TARGET = {"A": 1.10, "B": 1.15, "C": 4.0, "D": 1.25}


def median_ns(group, *bench):
    path = os.path.join(root, group, *bench, "new", "estimates.json")
    with open(path) as fh:
        return json.load(fh)["median"]["point_estimate"]


sizes = {}
meta = os.path.join("target", "bench-bodies", "meta.json")
if os.path.exists(meta):
    sizes = {k: v["size"] for k, v in json.load(open(meta))["bodies"].items()}

print("| body | size | memcpy | memmem | parse (one slice) | ratio | parse (64 KiB chunks) | ratio | target |")
print("|---|---|---|---|---|---|---|---|---|")
for body in "ABCD":
    group = "multipart_" + body
    if not os.path.isdir(os.path.join(root, group)):
        continue
    cp, mm = median_ns(group, "memcpy"), median_ns(group, "memmem")
    whole, chunked = median_ns(group, "parse", "whole"), median_ns(group, "parse", "64KiB")
    size = sizes.get(body, 0)
    gbs = lambda ns: "%.2f ms (%.1f GB/s)" % (ns / 1e6, size / ns) if size else "%.2f ms" % (ns / 1e6)
    print("| %s | %.1f MiB | %s | %s | %s | **%.2f** | %s | %.2f | ≤ %.2f |" % (
        body, size / 2**20, gbs(cp), gbs(mm), gbs(whole), whole / mm, gbs(chunked), chunked / mm, TARGET[body]))
