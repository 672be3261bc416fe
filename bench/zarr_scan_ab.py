#!/usr/bin/env python3
"""Zarr view A/B: stock zarr-python reads selections through an array's Zarr
view (A@/zarr/C0,C1,.../) under several mmfs daemons, alternating, each read
cold (drop_caches and a fresh mount); prints the median (min-max) time and
the device's busy time (/.mmfs/stats) per selection and daemon, in ms. For
comparing two builds side by side in one run on a noisy machine; a real zarr
store of the same chunks can be read beside them (--real). Run as root.

    python3 bench/zarr_scan_ab.py --image /var/tmp/pyb/mmfs-python.img \\
        --daemon /tmp/old/mmfs --daemon build/daemon/mmfs \\
        --read '1024,1024,1:[:,512,:]' --read '1,1024,256:[:,:,128]' --runs 4

A read is CHUNKS:KEY: the view's chunk shape and a numpy basic index of
slices and integers. The array must exist on the image (--array, default a).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_daemon import CacheDropper, Daemon  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_key(text):
    """'[:,512,:]' -> (slice(None), 512, slice(None))."""
    items = []
    for part in text.strip().strip("[]").split(","):
        part = part.strip()
        if ":" in part:
            bounds = [int(b) if b.strip() else None for b in part.split(":")]
            items.append(slice(*bounds))
        else:
            items.append(int(part))
    return tuple(items)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", required=True, help="mmfs volume image")
    ap.add_argument("--daemon", action="append", help="mmfs daemon binary (repeatable; default build/daemon/mmfs)")
    ap.add_argument("--array", default="a", help="array file at the volume's root (default: a)")
    ap.add_argument("--read", action="append", required=True, help="CHUNKS:KEY, e.g. '1024,1024,1:[:,512,:]'")
    ap.add_argument("--real", help="a zarr store of the same array to read beside (its own chunks; the KEY only)")
    ap.add_argument("--runs", type=int, default=4)
    args = ap.parse_args()
    import zarr  # noqa: E402 (after --help)

    daemons = args.daemon or [os.path.join(REPO, "build/daemon/mmfs")]
    drop = CacheDropper()
    reads = []
    for r in args.read:
        chunks, _, key = r.partition(":")
        reads.append((r, chunks, parse_key(key)))
    mnt = tempfile.mkdtemp(prefix="zarr-ab-")
    results = {}
    try:
        for run in range(args.runs):
            order = daemons if run % 2 == 0 else daemons[::-1]
            for label, chunks, key in reads:
                for daemon in order:
                    drop()
                    d = Daemon(daemon, args.image, mnt, "", os.path.join(os.path.dirname(mnt), "zarr-ab-daemon.log"))
                    d.mount()
                    try:
                        t0 = time.perf_counter()
                        zarr.open_array(f"{mnt}/{args.array}@/zarr/{chunks}/", mode="r")[key]
                        ms = (time.perf_counter() - t0) * 1e3
                        with open(f"{mnt}/.mmfs/stats") as f:
                            device = json.load(f)["device_busy_ms"]
                    finally:
                        d.unmount()
                    results.setdefault((label, daemon), []).append((ms, device))
                if args.real:
                    drop()
                    t0 = time.perf_counter()
                    zarr.open_array(args.real, mode="r")[key]
                    results.setdefault((label, "real " + args.real), []).append(((time.perf_counter() - t0) * 1e3, 0))
    finally:
        os.rmdir(mnt)
    for (label, target), v in results.items():
        ms = [m for m, _ in v]
        dev = statistics.median(d for _, d in v)
        print(f"{label:28} {target:48} {statistics.median(ms):8.0f} ms ({min(ms):.0f}-{max(ms):.0f})"
              f"  device {dev:6.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
