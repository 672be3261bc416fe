"""Where a cold view's time goes: each step a reader takes to read one view of
an array on a fresh mount, timed from the reader's side, beside the device
time the daemon counted (`device_busy_ms` of /.mmfs/stats).

Steps: lookup of the array, of `ARRAY@` (the daemon opens the array), of the
view's kind (`box`, `slice`, ...), of the view itself, open, the reads, close.
Before every run the daemon is mounted afresh and the page cache is dropped
(after the mount, as mmfs_bench_real.py does; --drop-first drops it before
the mount instead, so the mount itself reads the image's metadata back).
Prints the median (min-max) of each step over the runs, in ms. Run as root.

    python3 bench/cold_view_steps.py --image vol.img --array a --view box/627,117,11 --runs 9
    python3 bench/cold_view_steps.py --image vol.img --array a --view box/627,117,11 \\
        --options busy_poll=200 --options busy_poll=0     # daemon options side by side, alternating
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_daemon import CacheDropper, Daemon, read_stats  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed_steps(mnt, array, view):
    """The reader's steps for one cold view: [(name, ms)]."""
    steps = []
    t = time.perf_counter()

    def mark(name):
        nonlocal t
        now = time.perf_counter()
        steps.append((name, (now - t) * 1e3))
        t = now

    a = os.path.join(mnt, array)
    os.stat(a)
    mark("lookup ARRAY")
    os.stat(a + "@")
    mark("lookup ARRAY@")
    os.stat(os.path.join(a + "@", view.split("/")[0]))
    mark("lookup kind")
    path = os.path.join(a + "@", view)
    os.stat(path)
    mark("lookup view")
    fd = os.open(path, os.O_RDONLY)
    mark("open")
    try:
        while os.read(fd, 8 << 20):
            pass
        mark("read")
    finally:
        os.close(fd)
    mark("close")
    return steps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", required=True, help="mmfs volume image")
    ap.add_argument("--array", default="a", help="the array's path below the mount (default a)")
    ap.add_argument("--view", required=True, help="a view below ARRAY@/, e.g. box/627,117,11")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--daemon", default=os.path.join(REPO, "build/daemon/mmfs"))
    ap.add_argument("--options", action="append", default=None,
                    help="daemon -o options (repeatable: each is measured, alternating)")
    ap.add_argument("--drop-first", action="store_true", help="drop the page cache before the mount, not after")
    ap.add_argument("--idle", type=float, default=0.3, help="seconds of idleness before the view (default 0.3)")
    ap.add_argument("--mnt", default="/var/tmp/mmfs-cold-view-steps-mnt")
    a = ap.parse_args()
    options = a.options or [""]
    os.makedirs(a.mnt, exist_ok=True)
    drop = CacheDropper()
    log = os.path.join(os.path.dirname(os.path.abspath(a.image)), "cold-view-steps-daemon.log")
    by_option = {o: {} for o in options}
    for _ in range(a.runs):
        for o in options:
            d = Daemon(a.daemon, a.image, a.mnt, o, log)
            if a.drop_first:
                drop()
            try:
                d.mount()  # inside: a mount that times out still gets its daemon stopped
                if not a.drop_first:
                    drop()
                time.sleep(a.idle)
                before = read_stats(a.mnt) or {}
                steps = timed_steps(a.mnt, a.array, a.view)
                after = read_stats(a.mnt) or {}
            finally:
                d.unmount()
            out = by_option[o]
            for name, ms in steps:
                out.setdefault(name, []).append(ms)
            out.setdefault("total", []).append(sum(ms for _, ms in steps))
            out.setdefault("device_busy", []).append(after.get("device_busy_ms", 0) - before.get("device_busy_ms", 0))
    if not drop.ok:
        print(f"WARNING: {drop.error}")
    for o in options:
        print(f"{a.view} on a fresh mount{' with -o ' + o if o else ''}: medians of {a.runs}, ms (min-max)")
        for name, xs in by_option[o].items():
            print(f"  {name:14s} {statistics.median(xs):8.3f}  ({min(xs):.3f}-{max(xs):.3f})")


if __name__ == "__main__":
    main()
