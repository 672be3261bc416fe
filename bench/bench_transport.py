#!/usr/bin/env python3
"""Metadata round trips through mmfs under several mount-option sets, side by side.

Each option set gets its own image and mount; the rounds interleave them, so a
noisy machine affects all alike. A round is bench_daemon.py's metadata test
without cache drops: create N empty files in a fresh directory, look up N
names that do not exist, stat the N files twice, list the directory, unlink. Prints the median (min–max) operations per second of every set.

    python3 bench/bench_transport.py --rounds 10 --files 2000 \\
        'libfuse+perm=busy_poll=0,default_permissions' 'default='

Run as root (the mounts); everything is unmounted and removed at the end.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_daemon import metadata_bench  # noqa: E402


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("sets", nargs="+", metavar="NAME=OPTIONS",
                    help="an option set: a name, '=', and the daemon's -o list (may be empty)")
    ap.add_argument("--rounds", type=int, default=10, help="rounds; every set runs once per round")
    ap.add_argument("--files", type=int, default=2000, help="files per round")
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="meson build directory")
    ap.add_argument("--dir", default="/var/tmp", help="where the images and mount points go")
    a = ap.parse_args(argv)
    sets = []
    for s in a.sets:
        name, sep, options = s.partition("=")
        if not sep or not name:
            ap.error(f"{s!r}: expected NAME=OPTIONS")
        sets.append((name, options))
    return a, sets


def main(argv):
    a, sets = parse_args(argv)
    daemon, mkfs = os.path.join(a.build, "daemon", "mmfs"), os.path.join(a.build, "mkfs", "mkfs.mmfs")
    work = tempfile.mkdtemp(dir=a.dir, prefix="mmfs-transport-")
    mounts = {}
    try:
        for name, options in sets:
            image, mnt = os.path.join(work, f"{name}.img"), os.path.join(work, name)
            os.mkdir(mnt)
            subprocess.run([mkfs, "-g", "atlas10k3", "-s", "1G", image], check=True, capture_output=True)
            subprocess.run([daemon, image, mnt] + (["-o", options] if options else []), check=True)
            mounts[name] = mnt
        results = {name: {} for name, _ in sets}
        for r in range(a.rounds):
            for name, mnt in mounts.items():
                # No cache drop between steps: this compares round trips, not the device.
                rates = metadata_bench(os.path.join(mnt, f"round{r}"), a.files, drop=lambda: False)
                for op, rate in rates.items():
                    results[name].setdefault(op, []).append(rate)
        print(f"{a.rounds} rounds of {a.files} files; median (min–max) per second")
        ops = list(next(iter(results.values())).keys())
        width = max(len(op) for op in ops)
        print(" " * width + "  " + "  ".join(f"{name:>26}" for name in results))
        for op in ops:
            cells = [f"{statistics.median(v):,.0f} ({min(v):,.0f}–{max(v):,.0f})" for v in
                     (results[name][op] for name in results)]
            print(f"{op:<{width}}  " + "  ".join(f"{c:>26}" for c in cells))
        for name, options in sets:
            print(f"  {name}: -o {options or '(none)'}")
    finally:
        for mnt in mounts.values():
            subprocess.run(["fusermount3", "-u", mnt])
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
