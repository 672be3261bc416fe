"""Cold views A/B: the same views of an array read through several mmfs
daemons, or from several images, alternating, with a fresh mount and
`drop_caches` before every read; prints the median (min-max) per view and
target, in ms. For comparing two builds, or two volumes that differ in one
thing (a geometry), side by side in one run on a noisy machine. Run as root.

    python3 bench/cold_views_ab.py --image vol.img --daemon old/mmfs --daemon build/daemon/mmfs \\
        --array a --views "slice/0/512;box/512,300,:" --runs 9
    python3 bench/cold_views_ab.py --image q32.img --image q8.img --views "slice/0/512" --runs 7

A view is spelled as below `ARRAY@/` (docs/reference.md §5); `.` is the array
file itself (a full read). The array must exist on every image. With several
`--array`, the arrays of one image are compared (say one with copies and one
without):

    python3 bench/cold_views_ab.py --image vol.img --array plain --array copied --views "." --runs 7

Every read goes into one 8 MiB buffer, reused, so the reader's own page
faults (a fresh buffer per read) add nothing to the times.

With `--reads-per-mount N`, each mount serves N reads of a view, each after
`drop_caches`, and the first read of a mount is reported apart from the later
ones: a long-running mount's reads, which a fresh mount per read never shows.
A `{k}` in a view is replaced by a number that differs for every read of a
run, so that a later read is not served from the daemon's chunk cache:

    python3 bench/cold_views_ab.py --image vol.img --daemon old/mmfs --daemon build/daemon/mmfs \
        --views "slice/0/3{k}" --reads-per-mount 5 --runs 5
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_daemon import CacheDropper, Daemon  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--image", action="append", required=True, help="mmfs volume image (repeatable)")
    ap.add_argument("--daemon", action="append", help="mmfs daemon binary (repeatable; default build/daemon/mmfs)")
    ap.add_argument("--array", action="append", help="the array's path below the mount (repeatable; default a)")
    ap.add_argument("--views", required=True, help="views below ARRAY@/, separated by ';'")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--mnt", default="/var/tmp/mmfs-cold-views-mnt")
    ap.add_argument("--reads-per-mount", type=int, default=1,
                    help="reads of each view per mount ({k} in a view: a number unique to the read)")
    ap.add_argument("--pause", type=float, default=0.0,
                    help="seconds to wait before each later read of a mount (a person reading views one by one)")
    a = ap.parse_args()
    daemons = a.daemon or [os.path.join(REPO, "build/daemon/mmfs")]
    arrays = a.array or ["a"]
    targets = [(d, img, arr) for img in a.image for d in daemons for arr in arrays]
    buf = bytearray(8 << 20)
    views = [v for v in a.views.split(";") if v]
    os.makedirs(a.mnt, exist_ok=True)
    drop = CacheDropper()
    per_mount = max(1, a.reads_per_mount)
    ms = {(t, v): [] for t in targets for v in views}  # the first read of each mount
    later = {(t, v): [] for t in targets for v in views}  # its other reads
    for run in range(a.runs):
        for v in views:
            for t in targets:
                d = Daemon(t[0], t[1], a.mnt, "", os.path.join(os.path.dirname(os.path.abspath(t[1])), "daemon.log"))
                d.mount()
                try:
                    for k in range(per_mount):
                        if k > 0:
                            time.sleep(a.pause)
                        drop()
                        if v == ".":
                            path = os.path.join(a.mnt, t[2])
                        else:
                            path = os.path.join(a.mnt, t[2] + "@", v.replace("{k}", str(run * per_mount + k)))
                        t0 = time.perf_counter()
                        fd = os.open(path, os.O_RDONLY)
                        try:
                            while os.readv(fd, [buf]):
                                pass
                        finally:
                            os.close(fd)
                        (ms if k == 0 else later)[t, v].append(1e3 * (time.perf_counter() - t0))
                finally:
                    d.unmount()

    def name(t):
        parts = ([t[0]] if len(daemons) > 1 else []) + \
                ([os.path.basename(t[1])] if len(a.image) > 1 else []) + ([t[2]] if len(arrays) > 1 else [])
        return " ".join(parts) or os.path.basename(t[1])

    def summary(xs):
        return f"{statistics.median(xs):.2f} ({min(xs):.1f}-{max(xs):.1f})"

    print(f"medians of {a.runs} cold reads, ms (min-max)" +
          (f"; the first read of a fresh mount, then its {per_mount - 1} later read(s)" if per_mount > 1 else ""))
    for v in views:
        print(f"{v}: " + "  ".join(f"{name(t)} {summary(ms[t, v])}" +
                                    (f" later {summary(later[t, v])}" if per_mount > 1 else "") for t in targets))


if __name__ == "__main__":
    main()
