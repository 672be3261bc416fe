"""Streaming beside a plain file (issue 18, "streaming at device speed"): the
same C-order bytes written with the same calls (8 MiB pwrite, then fsync) into
a plain file on the disk under test and into an mmfs array file (the volume's
default layout, or --layout), then read back cold with the same calls (8 MiB
preadv into one buffer; caches dropped and the daemon remounted first), for
one or more daemon binaries, alternating, medians of --runs. Run as root.

    python3 tools/bench/stream_bench.py --daemon build/daemon/mmfs [--daemon OTHER] --dir /var/tmp/ing
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from bench_daemon import CacheDropper, Daemon  # noqa: E402

MiB = 1 << 20


def write_all(path, data, step=8 * MiB):
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for off in range(0, len(data), step):
            os.pwrite(fd, data[off:off + step], off)
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def read_all(path, size, step=8 * MiB):
    buf = bytearray(step)
    view = memoryview(buf)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        off = 0
        while off < size:
            n = os.preadv(fd, [view[:min(step, size - off)]], off)
            if n <= 0:
                raise RuntimeError(f"{path}: short read at {off}")
            off += n
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", action="append", required=True, help="mmfs daemon binary (repeatable)")
    ap.add_argument("--mkfs", default=os.path.join(os.path.dirname(__file__), "../../build/mkfs/mkfs.mmfs"))
    ap.add_argument("--dir", default="/var/tmp/mmfs-ingest-bench")
    ap.add_argument("--shape", default="1024,1024,256")
    ap.add_argument("--layout", default=None, help="user.mmfs.layout (default: the volume's default)")
    ap.add_argument("--geometry", default="ssd")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    shape = tuple(int(x) for x in a.shape.split(","))
    data = np.random.default_rng(6).standard_normal(shape).tobytes()
    os.makedirs(a.dir, exist_ok=True)
    image, mnt, plain = (os.path.join(a.dir, n) for n in ("mmfs.img", "mnt", "plain.raw"))
    os.makedirs(mnt, exist_ok=True)
    subprocess.run([a.mkfs, "-q", "-f", "-s", str(len(data) * 3 + (1 << 30)), "-g", a.geometry, image], check=True)
    drop = CacheDropper()
    times = {"plain file": []} | {d: [] for d in a.daemon}
    reads = {k: [] for k in times}
    try:
        for run in range(a.runs):
            for target in times:
                drop()
                if target == "plain file":
                    if os.path.exists(plain):
                        os.unlink(plain)
                    times[target].append(write_all(plain, data))
                    drop()
                    reads[target].append(read_all(plain, len(data)))
                    continue
                d = Daemon(target, image, mnt, "", os.path.join(a.dir, "daemon.log"))
                d.mount()
                try:
                    path = os.path.join(mnt, "a")
                    if os.path.exists(path):
                        os.unlink(path)
                    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
                    if a.layout:
                        os.setxattr(path, "user.mmfs.layout", a.layout.encode())
                    os.setxattr(path, "user.mmfs.shape", a.shape.encode())
                    times[target].append(write_all(path, data))
                finally:
                    d.unmount()
                d.mount()
                drop()
                try:
                    reads[target].append(read_all(os.path.join(mnt, "a"), len(data)))
                finally:
                    d.unmount()
            print(f"run {run + 1}: " + ", ".join(f"{k} write {v[-1]:.2f} s, read {reads[k][-1]:.2f} s"
                                               for k, v in times.items()), flush=True)
    finally:
        if os.path.exists(plain):
            os.unlink(plain)
    for what, table in (("write: 8 MiB pwrite + fsync", times), ("cold read: 8 MiB preadv", reads)):
        base = statistics.median(table["plain file"])
        print(f"\n{len(data) / MiB:.0f} MiB, {what}, medians of {a.runs}:")
        for k, v in table.items():
            m = statistics.median(v)
            print(f"  {k}: {m:.2f} s, {len(data) / m / MiB:.0f} MiB/s, {base / m:.0%} of the plain file")


if __name__ == "__main__":
    main()
