#!/usr/bin/env python3
"""Ingest with copies: how long the primary takes to be durable, and how
fast the copies catch up after it (docs/reference.md, "Copies").

On one freshly formatted volume (--geometry, default measure) it writes the
same --shape float64 data, in C-order slabs of --slab-mib with pwrite, then
fsync, into, one after another (each alone on the device):

* `plain`: a plain file (the device's write speed through mmfs);
* `array`: an array file in the default layout;
* `copies`: an array file in the default layout with `user.mmfs.copies` =
  --copies, set before the shape (so the copies are built empty and catch up
  on the data), timed to the fsync (the primary durable), then until A@/info
  says every copy is current (the catch-up, in the background).

Reported: each time and rate, the primary's rate / the plain file's, and the
catch-up's rate (the array's bytes per copy / its time) / the plain file's.
Repeated --runs times on fresh files; medians.

  python3 bench/copies_ingest.py [--geometry measure] [--shape 1024,1024,256]
      [--copies naive:cell=1,1024,256] [--out docs/benchmarks/copies-ingest]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_daemon_mount import fresh_volume  # noqa: E402

REPO = HERE.parent
MiB = 1 << 20


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--geometry", default="measure", help="mkfs.mmfs -g (default measure)")
    p.add_argument("--shape", default="1024,1024,256", help="the array's shape (default 1024,1024,256)")
    p.add_argument("--copies", default="naive:cell=1,1024,256", help="user.mmfs.copies of the `copies` array")
    p.add_argument("--slab-mib", type=int, default=64, help="bytes per pwrite, MiB (default 64)")
    p.add_argument("--runs", type=int, default=3, help="repetitions (default 3)")
    p.add_argument("--size", default="12G", help="the image's size (default 12G)")
    p.add_argument("--mount-options", default="", help="daemon -o OPTS (e.g. iodepth=128)")
    p.add_argument("--build", default=os.environ.get("MMFS_BUILD", str(REPO / "build")),
                   help="the build directory (default $MMFS_BUILD or build/)")
    p.add_argument("--out", default=str(REPO / "docs" / "benchmarks" / "copies-ingest"),
                   help="writes OUT.json and OUT.md")
    return p.parse_args(argv)


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def write_file(path, data, slab, attrs=()):
    """Creates `path`, sets `attrs` (name, value) in order, writes `data` and fsyncs: seconds."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        for name, value in attrs:
            os.setxattr(path, name, value.encode())
        view = memoryview(data)
        t0 = time.perf_counter()
        for off in range(0, len(view), slab):
            n = os.pwrite(fd, view[off:off + slab], off)
            assert n == min(slab, len(view) - off)
        os.fsync(fd)
        return time.perf_counter() - t0
    finally:
        os.close(fd)


def wait_current(path):
    while True:
        with open(f"{path}@/info") as f:
            copies = json.load(f).get("copies", [])
        if all(c["state"] == "current" for c in copies):
            return time.perf_counter()
        time.sleep(0.02)


def main(argv=None):
    a = parse_args(argv)
    shape = [int(x) for x in a.shape.split(",")]
    data = np.random.default_rng(1).standard_normal(shape).tobytes()
    nbytes = len(data)
    slab = a.slab_mib * MiB
    times = {"plain": [], "array": [], "primary": [], "catch_up": []}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as scratch:
        image, mnt = Path(scratch) / "v.img", Path(scratch) / "mnt"
        mnt.mkdir()
        # The image written through once first: a sparse image's first writes
        # cost the host's allocation, which would favour whichever target
        # lands on sectors written before.
        subprocess.run(["dd", "if=/dev/zero", f"of={image}", "bs=64M", f"count={parse_size(a.size) >> 26}",
                        "oflag=direct", "status=none"], check=True)
        daemon = fresh_volume(a.build, image, mnt, a.geometry, a.size, options=a.mount_options)
        try:
            shape_attr = ("user.mmfs.shape", a.shape)
            for run in range(a.runs):
                order = ["plain", "array", "copies"]
                for kind in order[run % 3:] + order[:run % 3]:  # the order rotates from run to run
                    path = mnt / f"{kind}{run}"
                    if kind == "plain":
                        times["plain"].append(write_file(path, data, slab))
                    elif kind == "array":
                        times["array"].append(write_file(path, data, slab, [shape_attr]))
                    else:
                        times["primary"].append(
                            write_file(path, data, slab, [("user.mmfs.copies", a.copies), shape_attr]))
                        synced = time.perf_counter()
                        times["catch_up"].append(wait_current(path) - synced)
                    os.unlink(path)  # room for the next
                    os.sync()
        finally:
            daemon.unmount()
    med = {k: statistics.median(v) for k, v in times.items()}
    rate = {k: nbytes / MiB / max(v, 1e-9) for k, v in med.items()}
    res = {"geometry": a.geometry, "shape": shape, "copies": a.copies, "bytes": nbytes, "runs": a.runs,
           "seconds": times, "median_s": med, "mib_per_s": rate,
           "primary_vs_plain": rate["primary"] / rate["plain"], "catch_up_vs_plain": rate["catch_up"] / rate["plain"],
           "command": "python3 bench/copies_ingest.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    Path(a.out + ".json").write_text(json.dumps(res, indent=1) + "\n")

    def span(kind):
        return f"{med[kind]:.2f} ({min(times[kind]):.2f}–{max(times[kind]):.2f})"

    md = [f"# Ingest with copies: {','.join(map(str, shape))} float64 ({nbytes / MiB:.0f} MiB), {a.geometry} volume", "",
          f"Command: `{res['command']}`", "",
          f"Each write is {a.slab_mib} MiB pwrites then fsync, alone on the device; medians of {a.runs} runs "
          "(fresh files each run, the order of the three rotating; the image written through once before mkfs). `copies`: an array in the default layout with "
          f"`user.mmfs.copies={a.copies}` set before the shape; its primary is durable at the fsync, and the "
          "copies catch up in the background after it (timed from the fsync until A@/info says current).", "",
          "| write | median s (min–max) | MiB/s |", "|---|---:|---:|",
          f"| plain file | {span('plain')} | {rate['plain']:.0f} |",
          f"| array, default layout | {span('array')} | {rate['array']:.0f} |",
          f"| array with the copy: primary durable (fsync) | {span('primary')} | {rate['primary']:.0f} |",
          f"| the copy caught up, after the fsync | {span('catch_up')} | {rate['catch_up']:.0f} |", "",
          f"Primary durable at {res['primary_vs_plain']:.2f}× the plain file's rate (target ≥ 0.80); the copy "
          f"caught up at {res['catch_up_vs_plain']:.2f}× it (target ≥ 0.50).", ""]
    Path(a.out + ".md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
