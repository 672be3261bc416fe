#!/usr/bin/env python3
"""Volumes of several devices on the real clock.

One 2 GiB float64 array (1024 x 1024 x 256, the default layout) on three
volumes of the atlas10k3 geometry, side by side in one run:
  single  one image file
  images  4 image files, RAID 0 (striped one track per unit)
  nbd     4 nbdkit exports (file plugin on image files, unix sockets), RAID 0
For each: the write, then cold (caches dropped) full read and every view of
bench_daemon.py (the middle slice of each dimension, the middle beam along
each, a 5 % cube), the median of --runs. Every view is checked against numpy
once. All devices share one disk here, so this shows the overhead of the
striping and of NBD, not a speed-up.

Usage: python3 bench/bench_volumes.py [--dir DIR] [--runs 3] [--out docs/benchmarks]
"""
import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_daemon import (CacheDropper, Daemon, fmt_bytes, np_index, read_exact, slabs, time_full_read,  # noqa: E402
                          time_view_read, views_for, write_all)

SHAPE = (1024, 1024, 256)
MiB = 1 << 20


def build_dir():
    return Path(os.environ.get("MMFS_BUILD", Path(__file__).resolve().parents[1] / "build"))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Nbdkit:
    """nbdkit's file plugin on an image, on a unix socket; stopped by stop()."""

    def __init__(self, image, sock):
        self.sock = sock
        self.proc = subprocess.Popen(["nbdkit", "-f", "--exit-with-parent", "-U", sock, "file", image, "cache=none"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not os.path.exists(sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nbdkit on {image} did not start")
            time.sleep(0.05)

    @property
    def uri(self):
        return f"nbd+unix:///?socket={self.sock}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def median(xs):
    return statistics.median(xs)


def run_volume(name, targets, workdir, args, drop, expected):
    mkfs = str(build_dir() / "mkfs" / "mkfs.mmfs")
    mmfs = str(build_dir() / "daemon" / "mmfs")
    p = subprocess.run([mkfs, "-f", "-q", "-g", "atlas10k3", *targets], capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"mkfs {name}: {p.stderr}")
    mnt = tempfile.mkdtemp(prefix=f"mnt-{name}-", dir=workdir)
    d = Daemon(mmfs, ",".join(targets), mnt, "", os.path.join(workdir, f"daemon-{name}.log"))
    d.mount()
    res = {"volume": name, "targets": len(targets)}
    try:
        path = os.path.join(mnt, "A")
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
        os.setxattr(path, "user.mmfs.dtype", b"float64")
        os.setxattr(path, "user.mmfs.shape", ",".join(map(str, SHAPE)).encode())
        nbytes = int(np.prod(SHAPE)) * 8
        fd = os.open(path, os.O_WRONLY)
        t0 = time.perf_counter()
        row_bytes = nbytes // SHAPE[0]
        for r0, slab in slabs(SHAPE):
            write_all(fd, slab.tobytes(), r0 * row_bytes)
        os.fsync(fd)
        os.close(fd)
        res["write_s"] = time.perf_counter() - t0
        log(f"{name}: wrote {fmt_bytes(nbytes)} in {res['write_s']:.1f} s")
        fulls, views = [], {}
        for run in range(args.runs):
            drop()
            fulls.append(time_full_read(path, nbytes))
            for label, sub, sel in views_for(SHAPE):
                drop()
                dt, arr = time_view_read(os.path.join(mnt, "A@", sub))
                views.setdefault(label, []).append(dt)
                if run == 0:
                    want = expected[np_index(sel)].ravel()
                    if not np.array_equal(arr, want):
                        raise RuntimeError(f"{name}: view {sub} differs from numpy")
        res["full_read_s"] = median(fulls)
        res["full_read_mb_s"] = nbytes / 1e6 / res["full_read_s"]
        res["views_ms"] = {k: 1000 * median(v) for k, v in views.items()}
        with open(os.path.join(mnt, ".mmfs", "stats")) as f:
            stats = json.load(f)
        res["devices"] = [{k: dev[k] for k in ("target", "state", "bytes_read", "bytes_written")}
                          for dev in stats.get("devices", [])]
        log(f"{name}: full read {res['full_read_s']:.2f} s; views {res['views_ms']}")
    finally:
        d.unmount()
        os.rmdir(mnt)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/var/tmp/mmfs-volbench")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=None, help="directory for bench-volumes.md and .json")
    args = ap.parse_args()
    workdir = Path(args.dir)
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    drop = CacheDropper()
    log("generating the expected array")
    expected = np.empty(SHAPE)
    for r0, slab in slabs(SHAPE):
        expected[r0:r0 + slab.shape[0]] = slab
    results, servers = [], []
    try:
        single = workdir / "single.img"
        open(single, "wb").truncate(3 << 30)
        results.append(run_volume("single", [str(single)], str(workdir), args, drop, expected))
        os.unlink(single)
        imgs = []
        for i in range(4):
            img = workdir / f"m{i}.img"
            open(img, "wb").truncate(1 << 30)
            imgs.append(str(img))
        results.append(run_volume("images", imgs, str(workdir), args, drop, expected))
        for i, img in enumerate(imgs):
            open(img, "wb").truncate(1 << 30)  # fresh, so mkfs sees no signature
            servers.append(Nbdkit(img, str(workdir / f"nbd{i}.sock")))
        results.append(run_volume("nbd", [s.uri for s in servers], str(workdir), args, drop, expected))
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    base = results[0]
    lines = ["# Volumes of several devices on the real clock", "",
             f"Command: `python3 bench/bench_volumes.py --runs {args.runs}`; {platform.node()}, "
             f"{os.cpu_count()} cores. One 2 GiB float64 array {SHAPE} in the default layout (atlas10k3 geometry) "
             "on one image file, on a RAID 0 volume of 4 image files and on one of 4 nbdkit exports (file plugin, "
             "unix sockets). Cold cache (`drop_caches`) before every read; medians of "
             f"{args.runs} runs; every view checked against numpy. All files share one disk: this shows the "
             "overhead of striping and NBD, not a speed-up."
             + ("" if drop.ok else f" WARNING: {drop.error}"), "",
             "| read | " + " | ".join(r["volume"] for r in results) + " | images / single | nbd / single |",
             "|---|" + "---:|" * (len(results) + 2)]
    row = [f"{r['full_read_s']:.2f} s ({r['full_read_mb_s']:.0f} MB/s)" for r in results]
    lines.append("| full read | " + " | ".join(row) +
                 f" | {results[1]['full_read_s'] / base['full_read_s']:.2f} | "
                 f"{results[2]['full_read_s'] / base['full_read_s']:.2f} |")
    for label in base["views_ms"]:
        vals = [r["views_ms"][label] for r in results]
        lines.append(f"| {label} | " + " | ".join(f"{v:.1f} ms" for v in vals) +
                     f" | {vals[1] / vals[0]:.2f} | {vals[2] / vals[0]:.2f} |")
    lines.append("| write | " + " | ".join(f"{r['write_s']:.1f} s" for r in results) +
                 f" | {results[1]['write_s'] / base['write_s']:.2f} | {results[2]['write_s'] / base['write_s']:.2f} |")
    lines += ["", "Bytes read per device (`/.mmfs/stats` devices, after all runs):", ""]
    for r in results[1:]:
        lines.append(f"- {r['volume']}: " + ", ".join(fmt_bytes(d["bytes_read"]) for d in r["devices"]))
    md = "\n".join(lines) + "\n"
    print(md)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "bench-volumes.md").write_text(md)
        (Path(args.out) / "bench-volumes.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
