"""Streaming beside a plain file (streaming at device speed): the
same C-order bytes written with the same calls (8 MiB pwrite, then fsync) into
a plain file on the disk under test and into an mmfs array file (the volume's
default layout, or --layout), then read back cold with the same calls, for one
or more daemon binaries, alternating, medians of --runs. Run as root.

Two phases. Writes first: every target written --runs times, alternating.
Then `sync` and --settle seconds, and the reads: every target read --runs
times per call pattern, alternating, each after dropping the caches (and, for
mmfs, on a fresh mount). The reads are kept apart from the writes because on a
VM the host goes on writing the guest's data back for many seconds after
fsync returns, and a read made then pays for that with stolen vCPU time: the
daemon's CPU per GiB read more than doubled right after a write.

Read call patterns (--reads): `preadv` (8 MiB preadv into one buffer),
`cat` (GNU cat FILE > /dev/null: its 128 KiB reads through the page cache),
`direct` (the file opened O_DIRECT, 8 MiB preadv into an aligned buffer).

Besides the times: the CPU seconds per GiB of the daemon (all its threads,
from /proc/PID/stat) and of the writing/reading process (user + system, its
children included, which holds the kernel's copies into and out of FUSE or
the page cache).

    python3 bench/stream_bench.py --daemon build/daemon/mmfs [--daemon OTHER] --dir /var/tmp/ing \
        [--layout L] [--reads preadv,cat,direct] [--out docs/benchmarks/stream.md]
"""
import argparse
import mmap
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from bench_daemon import CacheDropper, Daemon  # noqa: E402

MiB = 1 << 20


def proc_cpu(pid):
    """User + system CPU seconds of process `pid` (every thread), or 0 without one."""
    if pid is None:
        return 0.0
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Cpu:
    """CPU seconds the daemon and this process spend inside a `with` block."""
    def __init__(self, pid):
        self.pid = pid

    def __enter__(self):
        self.d0, self.c0 = proc_cpu(self.pid), own_cpu()
        return self

    def __exit__(self, *exc):
        self.daemon, self.client = proc_cpu(self.pid) - self.d0, own_cpu() - self.c0


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


def read_preadv(path, size, direct=False, step=8 * MiB):
    buf = mmap.mmap(-1, step)  # page-aligned, as O_DIRECT wants
    view = memoryview(buf)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    try:
        off = 0
        while off < size:
            n = os.preadv(fd, [view[:min(step, size - off)]], off)
            if n <= 0:
                raise RuntimeError(f"{path}: short read at {off}")
            off += n
    finally:
        os.close(fd)
        view.release()
        buf.close()
    return time.perf_counter() - t0


def read_cat(path, size):
    t0 = time.perf_counter()
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


READS = {
    "preadv": ("8 MiB preadv", lambda path, size: read_preadv(path, size)),
    "cat": ("cat > /dev/null (128 KiB reads)", read_cat),
    "direct": ("O_DIRECT, 8 MiB preadv", lambda path, size: read_preadv(path, size, direct=True)),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", action="append", required=True, help="mmfs daemon binary (repeatable)")
    ap.add_argument("--mkfs", default=os.path.join(os.path.dirname(__file__), "../build/mkfs/mkfs.mmfs"))
    ap.add_argument("--dir", default="/var/tmp/mmfs-ingest-bench")
    ap.add_argument("--shape", default="1024,1024,256")
    ap.add_argument("--layout", default=None, help="user.mmfs.layout (default: the volume's default)")
    ap.add_argument("--geometry", default="ssd")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reads", default="preadv,cat,direct", help=f"read call patterns, of {','.join(READS)}")
    ap.add_argument("--settle", type=float, default=20.0, help="seconds between the writes and the reads")
    ap.add_argument("--out", default=None, help="also write the summary as markdown to this file")
    a = ap.parse_args()
    reads = a.reads.split(",")
    if unknown := [r for r in reads if r not in READS]:
        ap.error(f"--reads: unknown pattern(s) {','.join(unknown)}; known: {','.join(READS)}")
    shape = tuple(int(x) for x in a.shape.split(","))
    data = np.random.default_rng(6).standard_normal(shape).tobytes()
    os.makedirs(a.dir, exist_ok=True)
    image, mnt, plain = (os.path.join(a.dir, n) for n in ("mmfs.img", "mnt", "plain.raw"))
    os.makedirs(mnt, exist_ok=True)
    subprocess.run([a.mkfs, "-q", "-f", "-s", str(len(data) * 3 + (1 << 30)), "-g", a.geometry, image], check=True)
    drop = CacheDropper()
    targets = ["plain file"] + a.daemon
    times = {(k, what): [] for k in targets for what in ["write"] + reads}
    cpu = {k: [] for k in times}  # (daemon s, client s) per run
    log = os.path.join(a.dir, "daemon.log")

    def measure(target, what, pid, fn):
        with Cpu(pid) as c:
            times[target, what].append(fn())
        cpu[target, what].append((c.daemon, c.client))

    try:
        for run in range(a.runs):
            for target in targets:
                drop()
                if target == "plain file":
                    if os.path.exists(plain):
                        os.unlink(plain)
                    measure(target, "write", None, lambda: write_all(plain, data))
                    continue
                d = Daemon(target, image, mnt, "", log)
                d.mount()
                try:
                    path = os.path.join(mnt, "a")
                    if os.path.exists(path):
                        os.unlink(path)
                    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
                    if a.layout:
                        os.setxattr(path, "user.mmfs.layout", a.layout.encode())
                    os.setxattr(path, "user.mmfs.shape", a.shape.encode())
                    measure(target, "write", d.proc.pid, lambda: write_all(path, data))
                finally:
                    d.unmount()
            print(f"write run {run + 1}: " + ", ".join(f"{k} {times[k, 'write'][-1]:.2f} s" for k in targets),
                  flush=True)
        os.sync()
        time.sleep(a.settle)
        for run in range(a.runs):
            for what in reads:
                for target in targets:
                    if target == "plain file":
                        drop()
                        measure(target, what, None, lambda: READS[what][1](plain, len(data)))
                        continue
                    d = Daemon(target, image, mnt, "", log)
                    d.mount()
                    try:
                        drop()
                        measure(target, what, d.proc.pid, lambda: READS[what][1](os.path.join(mnt, "a"), len(data)))
                    finally:
                        d.unmount()
                print(f"read run {run + 1}, {what}: " + ", ".join(f"{k} {times[k, what][-1]:.2f} s" for k in targets),
                      flush=True)
    finally:
        if os.path.exists(plain):
            os.unlink(plain)
    gib = len(data) / (1 << 30)
    md = [f"# Streaming beside a plain file\n",
          f"`{' '.join(['python3'] + sys.argv)}`\n",
          f"{len(data) / MiB:.0f} MiB (shape {a.shape}, float64), geometry {a.geometry}, layout "
          f"{a.layout or 'the default'}; medians of {a.runs} runs, alternating; the reads after the writes "
          f"and {a.settle:.0f} s of rest. CPU: seconds per GiB, the daemon's threads and the writing/reading "
          f"process (its kernel copies included).\n"]
    patterns = [("write", "write: 8 MiB pwrite + fsync")] + [(r, f"cold read: {READS[r][0]}") for r in reads]
    for key, title in patterns:
        base = statistics.median(times["plain file", key])
        print(f"\n{len(data) / MiB:.0f} MiB, {title}, medians of {a.runs}:")
        md += [f"\n## {title}\n", "| target | s | MiB/s | of the plain file | daemon CPU s/GiB | client CPU s/GiB |",
               "|---|---:|---:|---:|---:|---:|"]
        for k in targets:
            m = statistics.median(times[k, key])
            dcpu = statistics.median(c[0] for c in cpu[k, key]) / gib
            ccpu = statistics.median(c[1] for c in cpu[k, key]) / gib
            print(f"  {k}: {m:.2f} s, {len(data) / m / MiB:.0f} MiB/s, {base / m:.0%} of the plain file, "
                  f"CPU per GiB: daemon {dcpu:.2f} s, client {ccpu:.2f} s")
            md.append(f"| {k} | {m:.2f} | {len(data) / m / MiB:.0f} | {base / m:.0%} | "
                      f"{dcpu:.2f} | {ccpu:.2f} |")
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
