#!/usr/bin/env python3
"""mmfs-bench query: bitmap-index queries on a mounted mmfs, on the real clock,
beside DuckDB, an in-process pyroaring equality index and a numpy
scan.

Part 1 -- the Set Query Benchmark as the bitmap-index paper runs it (Wu,
Madduri, Canon 2010, §3; papers/001_*.txt; bench/setquery.py): --rows
rows (default 10,000,000) of the 13 columns K2..K500K and KSEQ, generated
with O'Neil's Park-Miller sequence, stored as a table directory of int32
arrays on the volume (`bench/K2`, ...; KSEQ binned with `precision:2` as in
the paper, every other column `exact`); the 75 count queries Q1, Q2a, Q2b,
Q3a, Q3b, Q4a, Q4b read as `bench@/query/COND/count`, for each index
encoding (--encodings; `none` is the index-less scan) in turn: the index
xattr is set on all 13 columns (each setxattr returns when the index is
built and durable; the sum is the encoding's build time), their sizes come
from `A@/info` device_bytes.index. Side by side, on the same data:

* duckdb     -- a DuckDB database file in --scratch (table bench, loaded
                from the generated columns), `SELECT count(*) FROM bench
                WHERE ...`, one connection per pass;
* pyroaring  -- an in-memory equality index: one pyroaring BitMap per value
                of every K column; KSEQ is sorted (the row number), so its
                conditions are row ranges found by np.searchsorted (an
                equality index of KSEQ would be 10M one-row bitmaps);
* numpy      -- a scan: the raw int32 column files in --scratch opened with
                np.memmap for every query, boolean masks, count_nonzero.

Every engine's 75 counts must equal the reference (numpy on the generated
arrays in memory): the first mismatch is named and the run exits 1.

Part 2 (unless --skip-3d) -- a float64 array of --shape (default
1024,1024,256: 2 GiB, a smooth field plus noise), bins=100 (equal
frequency), each encoding: `count`, `coords` and `values` of `a > t` (or
`a >= t`, whichever the plan answers without data when t is an edge) for t
at the 99th and the 90th percentile, once on a bin edge and once inside a
bin (a quarter bin above the edge). Every read is cold; its time, the
index and data bytes it read (deltas of /.mmfs/stats) and the plan of its
`values` (A@/plan/query/COND/values) are reported; every result is checked
against numpy. The baseline is a numpy scan of the same bytes in a raw file
(np.fromfile after dropping the caches).

Cold and warm:

* cold -- before the pass: the daemon is unmounted and mounted again (its
  in-memory index and chunk caches go with it), then `sync; echo 3 >
  /proc/sys/vm/drop_caches`. DuckDB: caches dropped, a new connection.
  numpy: caches dropped. pyroaring has no cold state (in memory; its build
  time is reported instead).
* warm -- a second pass in the same mount / connection right after the cold
  one: index pages are in the daemon's memory, but every query opens its
  `.../count` path afresh and the daemon computes the answer again (mmfs
  never keeps a query's result across opens; each view is read with a new
  open(2), and the daemon opens views without FOPEN_KEEP_CACHE (count is
  direct I/O), so the kernel keeps no page of an earlier open either).

A pass is the 75 queries one after the other; its time is the sum of the
per-query wall-clock times (open + read + close, or execute + fetch). --runs
passes of each kind; medians are reported (min-max beside).

Output: DIR/mmfs-bench-query.md and DIR/mmfs-bench-query.json (--out DIR,
default docs/benchmarks), with the paper's Figure 1, 8 and 10 beside ours.
Exit status: 0 when every engine agreed on every query and every mmfs step
worked; 1 otherwise (error, mismatch); 3 with --strict when a target is
missed.

Always unmounts and removes what it created in --scratch (also on errors and
SIGTERM/SIGINT) unless --keep.

Usage (as root, from the repository root, after the build):

  mmfs-bench query                                  # full run: 10M rows, 2 GiB array, 3 runs
  mmfs-bench query --quick --out /tmp/q             # smoke run (100,000 rows, 64x64x32), seconds
  python3 bench/query_bench.py --rows 1000000 --encodings e1,bn,none --skip-3d
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
# This benchmark's modules, beside this file (this one parses the command line,
# describes the machine and runs main): query_bench_util.py (constants,
# formatting, reads, stats), query_bench_packages.py (DuckDB, pyroaring),
# query_bench_setquery.py (part 1), query_bench_field.py (part 2),
# query_bench_run.py (QueryBench: volume, cold passes, cleanup) and
# query_bench_report.py (the markdown). Every name this script had is still
# importable from it (mloc_bench.py takes make_field); DuckDB and pyroaring are
# query_bench_packages.duckdb and .pyroaring.
import query_bench_packages as packages  # noqa: E402
import setquery as sq  # noqa: E402
from bench_daemon import BenchError, CacheDropper, Daemon, log, read_stats  # noqa: E402,F401
from query_bench_field import (T_COORDS_1PCT_S, T_COUNT_ALIGNED_S, VIEWS3D, FieldPart, find_edges,  # noqa: E402,F401
                               make_field, replica_edges)
from query_bench_packages import ensure_packages  # noqa: E402
from query_bench_report import (ISSUE_REFERENCE, PAPER_FIG8, PAPER_FIG8_COLS, PAPER_FIG10,  # noqa: E402,F401
                                PAPER_ROWS, PAPER_TO_OURS, field_report, report, setquery_report)
from query_bench_run import SCHEMA, QueryBench  # noqa: E402,F401
from query_bench_setquery import (T_BN_RATIO, T_BUILD_S, T_E1_RATIO, T_SUITE_COLD_S,  # noqa: E402,F401
                                  T_SUITE_WARM_S, RoaringIndex, SetQueryPart)
from query_bench_util import (ENCODINGS, ENGINES, READ_CHUNK, GiB, MiB, bytes_read, errtext,  # noqa: E402,F401
                              estimate_index_bytes, fbytes, fmb, fratio, fs, fsum, is_mounted, med, parse_shape,
                              read_all, read_json, read_text, roaring_bytes, sectors_bytes, stats_delta, summ)


def machine_info(a):
    info = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "host": platform.node(), "kernel": platform.release(), "nproc": os.cpu_count(),
            "python": platform.python_version(), "numpy": np.__version__,
            "duckdb": getattr(packages.duckdb, "__version__", None),
            "pyroaring": getattr(packages.pyroaring, "__version__", None)}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_total"] = f.readline().split(":", 1)[1].strip()
        info["loadavg"] = " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        pass
    p = subprocess.run(["findmnt", "-n", "-T", a.scratch, "-o", "SOURCE,FSTYPE"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    info["scratch_filesystem"] = p.stdout.strip() or None
    p = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    info["git"] = p.stdout.strip() or None
    p = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no", "--", ".",
                        ":(exclude)docs/benchmarks"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if info["git"] and p.stdout.strip():
        info["git"] += " (with uncommitted changes)"
    return info


# ----------------------------------------------------------------------------


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="mmfs-bench query", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--rows", type=int, default=None, help="Set Query rows (default 10,000,000; --quick 100,000)")
    ap.add_argument("--shape", type=parse_shape, default=None,
                    help="3-D array shape (default 1024,1024,256; --quick 64,64,32)")
    ap.add_argument("--encodings", default=",".join(ENCODINGS),
                    help="index encodings, comma-separated; `none` = the index-less scan (default all)")
    ap.add_argument("--engines", default=",".join(ENGINES), help="engines to run (default all: mmfs,duckdb,"
                                                                 "pyroaring,numpy)")
    ap.add_argument("--runs", type=int, default=None, help="runs (cold + warm pass each; default 3, --quick 1)")
    ap.add_argument("--runs-3d", type=int, default=None, help="cold reads of each 3-D query (default: --runs)")
    ap.add_argument("--encodings-3d", default=None, help="encodings of the 3-D part (default: --encodings)")
    ap.add_argument("--skip-3d", action="store_true", help="Set Query only")
    ap.add_argument("--skip-setquery", action="store_true", help="3-D array only")
    ap.add_argument("--quick", action="store_true", help="smoke run: 100,000 rows, 64x64x32, 1 run")
    ap.add_argument("--out", default=None, help="directory for mmfs-bench-query.md/.json (default docs/benchmarks)")
    ap.add_argument("--scratch", default="/var/tmp", help="directory for the image and the baselines' files")
    ap.add_argument("--build", default=os.environ.get("MMFS_BUILD") or os.path.join(REPO, "build"),
                    help="meson build directory with daemon/mmfs and mkfs/mkfs.mmfs ($MMFS_BUILD)")
    ap.add_argument("--geometry", default="ssd", help="mkfs.mmfs -g PROFILE (default ssd)")
    ap.add_argument("--mount-options", default="", help="daemon -o OPTS")
    ap.add_argument("--image-size", type=int, default=None, help="image bytes (default 4x the data + 4 GiB, sparse)")
    ap.add_argument("--max-index-bytes", type=float, default=None,
                    help="skip a range/interval index whose estimated size exceeds this (default: 4x the data, at "
                         "least 1 GiB; 0: never skip)")
    ap.add_argument("--seed", type=int, default=14, help="seed of the 3-D array's noise")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--strict", action="store_true", help="exit 3 when a target is missed")
    a = ap.parse_args(argv)
    a.rows = a.rows if a.rows is not None else (100_000 if a.quick else 10_000_000)
    a.shape = a.shape or ((64, 64, 32) if a.quick else (1024, 1024, 256))
    a.runs = a.runs if a.runs is not None else (1 if a.quick else 3)
    a.runs_3d = a.runs_3d if a.runs_3d is not None else a.runs
    a.encodings = [x.strip() for x in a.encodings.split(",") if x.strip()]
    bad = [x for x in a.encodings if x not in ENCODINGS]
    if bad:
        ap.error(f"unknown encoding(s) {bad}; known: {ENCODINGS}")
    a.encodings_3d = a.encodings if a.encodings_3d is None else \
        [x.strip() for x in a.encodings_3d.split(",") if x.strip()]
    bad = [x for x in a.encodings_3d if x not in ENCODINGS]
    if bad:
        ap.error(f"unknown encoding(s) {bad}; known: {ENCODINGS}")
    a.engines = [x.strip() for x in a.engines.split(",") if x.strip()]
    bad = [x for x in a.engines if x not in ENGINES]
    if bad:
        ap.error(f"unknown engine(s) {bad}; known: {ENGINES}")
    if a.rows < 10 or a.runs < 1:
        ap.error("--rows >= 10 and --runs >= 1")
    if a.rows >= 2**31 - 1:
        ap.error("--rows must fit int32 (KSEQ)")
    if a.max_index_bytes is None:
        a.max_index_bytes = max(4 * max(a.rows * 4 * len(sq.COLUMNS), 0 if a.skip_3d else int(np.prod(a.shape)) * 8),
                                GiB)
    a.out = os.path.abspath(a.out or os.path.join(REPO, "docs", "benchmarks"))
    a.scratch = os.path.abspath(a.scratch)
    a.build = os.path.abspath(a.build)
    return a


def rerender(path):
    """Writes PATH's .md again from its .json (after a change of the report's
    wording; the measurements are not touched)."""
    class Shell:
        pass
    b = Shell()
    b.res = json.load(open(path))
    cfg = b.res["config"]
    b.a = argparse.Namespace(runs=cfg["runs"], runs_3d=cfg.get("runs_3d", cfg["runs"]))
    b.cold_ok = b.res.get("cold_cache", True)
    b.drop = CacheDropper()
    s = b.res.get("setquery")
    if s:
        ran = [e for e in s["engines"] if not e.get("skipped")]
        s["all_agreed"] = all(e.get("agreed") for e in ran) and bool(ran)
        b.res["all_agreed"] = s["all_agreed"] and not any(r.get("error") for r in
                                                          b.res.get("field3d", {}).get("results", []))
        for e in s["engines"]:
            if e.get("skipped"):
                e["skipped"] = e["skipped"].replace("8.58993 GB", "8.6 GB")
    with open(path, "w") as f:
        f.write(json.dumps(b.res, indent=1, default=str) + "\n")
    with open(path[:-len(".json")] + ".md", "w") as f:
        f.write(report(b) + "\n")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "--rerender":
        rerender(argv[1])
        return 0
    a = parse_args(argv)

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    b = QueryBench(a)
    status = 0
    t_start = time.perf_counter()
    done = False
    try:
        ensure_packages()
        if os.geteuid() != 0:
            log("WARNING: not root: dropping caches will fail and the mount may need fuse permissions")
        b.res["command"] = "mmfs-bench query " + shlex.join(argv)
        b.res["machine"] = machine_info(a)
        b.res["config"] = {"rows": a.rows, "shape": list(a.shape), "encodings": a.encodings, "engines": a.engines,
                           "encodings_3d": a.encodings_3d, "runs": a.runs, "runs_3d": a.runs_3d, "quick": a.quick, "geometry": a.geometry,
                           "mount_options": a.mount_options, "skip_3d": a.skip_3d, "seed": a.seed}
        b.setup()
        if not a.skip_setquery:
            b.setquery()
        if not a.skip_3d:
            b.field()
        done = True
    except BenchError as e:
        b.fail(str(e))
        status = 1
    except OSError as e:
        import traceback
        where = traceback.extract_tb(e.__traceback__)[-1]
        b.fail(f"{e} (in {where.name}, line {where.lineno})")
        status = 1
    except (KeyboardInterrupt, SystemExit) as e:  # SIGINT / SIGTERM / SIGHUP: report what was measured
        status = e.code if isinstance(e, SystemExit) and isinstance(e.code, int) else 130
        b.fail(f"interrupted (exit {status}): the report holds what was measured until then")
    finally:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        b.cleanup()
    if "machine" in b.res:
        try:
            b.res["machine"]["loadavg_end"] = " ".join(open("/proc/loadavg").read().split()[:3])
        except OSError:
            pass
        b.res["completed"] = done
        b.res["failures"] = b.failures
        b.res["cold_cache"] = b.cold_ok
        b.res["total_s"] = time.perf_counter() - t_start
        sqr = b.res.get("setquery", {})
        b.res["all_agreed"] = bool(sqr.get("all_agreed", a.skip_setquery)) and not any(
            r.get("error") for r in b.res.get("field3d", {}).get("results", []))
        os.makedirs(a.out, exist_ok=True)
        md = report(b)
        for ext, text in ((".md", md + "\n"), (".json", json.dumps(b.res, indent=1, default=str) + "\n")):
            with open(os.path.join(a.out, "mmfs-bench-query" + ext), "w") as f:
                f.write(text)
        print(md)
        log(f"wrote {a.out}/mmfs-bench-query.md and .json in {time.perf_counter() - t_start:.0f} s")
    if b.failures and status == 0:
        status = 1
    if status == 0 and a.strict:
        tg = b.res.get("setquery", {}).get("targets", []) + b.res.get("field3d", {}).get("targets", [])
        if any(not t["met"] for t in tg):
            status = 3
    return status


if __name__ == "__main__":
    sys.exit(main())
