#!/usr/bin/env python3
"""End-to-end benchmark of the mmfs FUSE daemon against the raw device (fio)
and against h5py reading a chunked HDF5 file.

What it measures, in one run, on the disk holding --dir:

* the full sequential read of a float64 array (default 1024x1024x256, 2 GiB)
  through the mmfs mount (8 MiB reads into one reused buffer), right after fio
  reads the array's own sectors of the image in the same I/O mode (fio on a
  file of its own in --dir is kept as a reference): with O_DIRECT (fio --direct=1, the device's bandwidth;
  the mmfs file opened O_DIRECT, which skips the kernel's page cache as fio
  does) and through the page cache (fio --direct=0; a plain read of the mmfs
  file, as cat does). The ratio of a mode is the median of the per-run
  ratios mmfs/fio: the disk of a VM is served from its host's cache at speeds
  that change from one minute to the next, so only reads made side by side
  compare;
* the three middle slices, the three middle beams and a cube with 5 % edges,
  read through the mmfs views (A@/slice/..., A@/box/...) and with h5py from
  the same data stored as a 64x64x64-chunked HDF5 file in --dir; every mmfs
  result is compared with h5py's (a wrong byte fails the run), and the view's
  plan (A@/plan/VIEW: bytes read / bytes useful, requests, modeled ms) is
  reported;
* metadata: create, stat, readdir and unlink of --meta-files empty files in
  one directory of the mount, from one process (and the same on --dir's own
  filesystem for reference).

Every timed read is preceded by `sync; echo 3 > /proc/sys/vm/drop_caches`
(cold page cache, dentries and inodes; the daemon's own caches are not
dropped unless --remount is given). Run as root. Results go to OUT.md and
OUT.json. `--quick` is a smoke run that takes seconds; `--baseline-only`
skips mmfs (fio + h5py only).

Usage (as root, from the repository root, after `meson compile -C build`):

  python3 bench/bench_daemon.py                             # default layout -> docs/benchmarks/daemon.{md,json}
  python3 bench/bench_daemon.py --layouts multimap,naive,hilbert,zorder
  python3 bench/bench_daemon.py --quick --out /tmp/bench-quick              # smoke run, seconds
  python3 bench/bench_daemon.py --baseline-only --quick                     # fio + h5py only, no daemon

Exit status: 0 when everything ran and every result was correct (targets are
reported, not enforced, unless --strict: then 3 when a target is missed);
1 on an error or a wrong result.

The code, beside this file (this one parses the command line and runs main):
bench_daemon_util.py (errors, cache drop, formatting, I/O helpers),
bench_daemon_mount.py (the daemon), bench_daemon_workloads.py (data,
selections, timed reads, metadata test), bench_daemon_fio.py,
bench_daemon_machine.py and bench_daemon_run.py (Bench: setup, measurements,
report, cleanup).
"""
import argparse
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The modules of this benchmark (bench_daemon_*.py, beside this file). Every name
# bench_daemon had is still importable from it: the other benchmark scripts
# (mmfs_bench_real.py, query_bench.py, mloc_bench.py, bench_volumes.py, ...) take
# their helpers from here.
from bench_daemon_fio import Fio, fio_version, make_fio_file  # noqa: E402,F401
from bench_daemon_machine import REPO, machine_info  # noqa: E402,F401
from bench_daemon_mount import Daemon, read_stats, stats_delta  # noqa: E402,F401
from bench_daemon_run import (FULL_MODES, H5_CHUNK_EDGE, META_TARGET_KEYS, TARGET_FULL, TARGET_META,  # noqa: E402,F401
                              Bench)
from bench_daemon_util import (GiB, MiB, BenchError, CacheDropper, fmt_bytes, fmt_num, fmt_sum, log,  # noqa: E402,F401
                               read_exact, read_json_file, run_cmd, summary, write_all)
from bench_daemon_workloads import (READ_CHUNK, SLAB_ROWS, metadata_bench, np_index, sel_str, slabs,  # noqa: E402,F401
                                    time_full_read, time_h5_full, time_h5_read, time_view_read, views_for)


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Benchmark the mmfs daemon against fio and h5py. Run as root.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--dir", default="/var/tmp/mmfs-bench",
                    help="working directory on the disk under test (image, HDF5 file, fio file, mountpoint)")
    ap.add_argument("--build", default=os.path.join(REPO, "build"),
                    help="meson build directory holding daemon/mmfs and mkfs/mkfs.mmfs")
    ap.add_argument("--shape", default=None, help="array shape, 3 dims (default 1024,1024,256; --quick: 128,128,64)")
    ap.add_argument("--layout", "--layouts", dest="layouts", default="",
                    help="comma-separated layouts, one array file each (e.g. multimap,naive,hilbert,zorder); "
                         "empty: one array with the volume's default layout (user.mmfs.layout not set)")
    ap.add_argument("--geometry", default="atlas10k3", help="mkfs.mmfs -g PROFILE|FILE.json")
    ap.add_argument("--mount-options", default="", help="passed to the daemon as -o OPTS (e.g. simulate)")
    ap.add_argument("--runs", type=int, default=None, help="repetitions; median and min–max reported (default 3; --quick: 1)")
    ap.add_argument("--out", default=None,
                    help="output prefix: writes OUT.md and OUT.json (default docs/benchmarks/daemon; "
                         "--quick: /tmp/mmfs-bench-quick)")
    ap.add_argument("--meta-files", type=int, default=None, help="files of the metadata test (default 20000; --quick: 2000)")
    ap.add_argument("--fio-size", default=None, help="fio file size (default 2G; --quick: 256M)")
    ap.add_argument("--keep", action="store_true", help="keep the image, the HDF5 file and the fio file")
    ap.add_argument("--remount", action="store_true",
                    help="unmount and remount before every timed mmfs read, so the daemon's own caches are cold too")
    ap.add_argument("--no-verify", action="store_true",
                    help="skip the untimed full-content check of the written arrays (views are always checked)")
    ap.add_argument("--baseline-only", action="store_true", help="skip mmfs: fio and h5py only")
    ap.add_argument("--strict", action="store_true", help="exit 3 when a target is missed")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: shape 128,128,64, 1 run, 2000 metadata files, 256M fio file")
    a = ap.parse_args(argv)
    q = a.quick
    a.shape = a.shape or ("128,128,64" if q else "1024,1024,256")
    a.runs = a.runs if a.runs is not None else (1 if q else 3)
    a.meta_files = a.meta_files if a.meta_files is not None else (2000 if q else 20000)
    a.fio_size = a.fio_size or ("256M" if q else "2G")
    if a.out is None:
        a.out = "/tmp/mmfs-bench-quick" if q else os.path.join(REPO, "docs", "benchmarks", "daemon")
    try:
        a.shape = tuple(int(x) for x in a.shape.split(","))
    except ValueError:
        ap.error(f"--shape: expected S0,S1,S2, got {a.shape!r}")
    if len(a.shape) != 3 or min(a.shape) < 1:
        ap.error("--shape: exactly three positive dims")
    if a.runs < 1 or a.meta_files < 1:
        ap.error("--runs and --meta-files must be positive")
    a.layouts = [x.strip() for x in a.layouts.split(",") if x.strip()]
    if len(set(a.layouts)) != len(a.layouts):
        ap.error("--layouts: duplicate layout")
    a.fio_bytes = parse_size(a.fio_size, ap)
    return a


def parse_size(s, ap):
    mult = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    s = s.strip().upper().rstrip("B")
    unit = s[-1] if s and s[-1] in mult else ""
    try:
        return int(s[:len(s) - len(unit)]) * mult[unit]
    except ValueError:
        ap.error(f"bad size {s!r}")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(129))
    b = Bench(args)
    status = 0
    try:
        b.check_tools()
        os.makedirs(args.dir, exist_ok=True)
        b.check_space()
        machine = machine_info(args)
        b.res["machine"] = machine
        make_fio_file(b.fiofile, args.fio_bytes)
        if not args.baseline_only:
            b.setup_volume()
            b.create_arrays()
        b.write_data()
        if not args.no_verify:
            b.verify_arrays()
        if not args.baseline_only:
            b.read_infos_and_plans()
        b.measure()
        if not args.baseline_only:
            b.res["daemon_errors_tail"] = b.mmfs_errors()
            b.res["stats_end"] = read_stats(b.mnt)
    except BenchError as e:
        log(f"bench_daemon: {e}")
        b.failures.append(str(e))
        status = 1
    except OSError as e:
        import traceback
        where = traceback.extract_tb(e.__traceback__)[-1]
        log(f"bench_daemon: {e} (in {where.name}, line {where.lineno})")
        b.failures.append(str(e))
        status = 1
    except KeyboardInterrupt:
        log("bench_daemon: interrupted")
        status = 130
    finally:
        b.cleanup()
    if status == 0:
        b.res["cache_drop"] = {"ok": b.drop.ok, "error": b.drop.error}
        b.res["failures"] = b.failures
        md = b.report(b.res["machine"])
        out_dir = os.path.dirname(os.path.abspath(args.out))
        os.makedirs(out_dir, exist_ok=True)
        with open(args.out + ".md", "w") as f:
            f.write(md + "\n")
        with open(args.out + ".json", "w") as f:
            json.dump(b.res, f, indent=1, default=str)
            f.write("\n")
        print(md)
        log(f"wrote {args.out}.md and {args.out}.json")
        if b.failures:
            status = 1
        elif args.strict:
            tg = b.targets()
            if tg and tg[0] < tg[1]:
                status = 3
    return status


if __name__ == "__main__":
    sys.exit(main())
