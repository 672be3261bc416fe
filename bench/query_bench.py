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
import errno
import json
import mmap
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import setquery as sq  # noqa: E402
from bench_daemon import BenchError, CacheDropper, Daemon, log, read_stats  # noqa: E402

duckdb = None
pyroaring = None

MiB = 1 << 20
GiB = 1 << 30
SCHEMA = "mmfs-bench-query/1"
ENCODINGS = ["e1", "bn", "range", "interval", "re", "ie", "none"]
ENGINES = ["mmfs", "duckdb", "pyroaring", "numpy"]
READ_CHUNK = 8 * MiB
VIEWS3D = ["count", "coords", "values"]

# Targets (reported; enforced only with --strict).
T_SUITE_WARM_S = 0.05
T_SUITE_COLD_S = 0.2
T_E1_RATIO = 1.0
T_BN_RATIO = 0.35
T_BUILD_S = 10.0
T_COUNT_ALIGNED_S = 0.05
T_COORDS_1PCT_S = 0.3
# Reference figures measured on this machine.
ISSUE_REFERENCE = {"duckdb warm": 0.59, "duckdb cold": 0.81, "pyroaring warm": 0.12, "numpy scan 3-D": 2.9}

# ----------------------------------------------------------------------------
# The paper's figures (Wu, Madduri, Canon, "Multi-Level Bitmap Indexes for
# Flash Memory Storage", LBNL 2010; papers/001_4ac93fc4a16db374.txt), copied
# verbatim. 100M rows; sizes in millions of bytes.

# Figure 8: column, cardinality, # bitmaps, Proj, BN, E1, IE, RE
PAPER_FIG8 = [
    ("K2", 2, 2, 400, 12.9, 25.8, 25.8, 25.8),
    ("K4", 4, 4, 400, 25.8, 51.6, 51.6, 51.6),
    ("K5", 5, 5, 400, 38.7, 64.5, 64.5, 64.5),
    ("K10", 10, 10, 400, 51.6, 128.8, 129.0, 129.0),
    ("K25", 25, 25, 400, 64.5, 296.9, 322.6, 322.6),
    ("K100", 100, 100, 400, 90.3, 598.3, 701.6, 765.8),
    ("K1K", 1000, 1000, 400, 129.0, 776.1, 1060.0, 1146.7),
    ("K10K", 10000, 10000, 400, 180.8, 797.7, 1081.7, 1181.1),
    ("K40K", 40000, 40000, 400, 206.8, 800.0, 1084.2, 1183.6),
    ("K100K", 100000, 100000, 400, 220.6, 801.4, 1098.9, 1185.4),
    ("K250K", 250000, 250000, 400, 235.3, 803.9, 1102.7, 1189.2),
    ("K500K", 500000, 500000, 400, 251.1, 808.0, 1108.7, 1207.8),
    ("KSEQ", 100000000, 1720, 400, 0.066, 0.089, 0.089, 0.089),
]
PAPER_FIG8_COLS = ["Proj", "BN", "E1", "IE", "RE"]
PAPER_ROWS = 100_000_000
# Figure 10: machine -> {"elapsed": [...], "read_time": [...], "read_mb": [...]} in the order Proj BN E1 IE RE;
# sums over the 75 queries.
PAPER_FIG10 = {
    "data3": {"elapsed": [581.4, 109.9, 24.4, 33.4, 34.3], "read_time": [581.9, 65.5, 12.9, 26.4, 24.2],
              "read_mb": [37103, 6226, 947, 1939, 1651]},
    "data1": {"elapsed": [481.8, 92.0, 23.7, 29.3, 29.6], "read_time": [487.4, 97.9, 16.0, 30.9, 26.7],
              "read_mb": [38859, 8953, 953, 2037, 1706]},
    "davinci": {"elapsed": [454.4, 118.8, 42.9, 52.6, 59.8], "read_time": [1588.5, 130.9, 85.9, 129.7, 120.6],
                "read_mb": [44482, 4351, 2237, 3485, 3331]},
    "turing": {"elapsed": [259.0, 44.3, 17.1, 16.1, 19.0], "read_time": [126.2, 3.8, 2.6, 4.8, 4.2],
               "read_mb": [61718, 1819, 1255, 2335, 2006]},
}
# our encoding (or the scan) that stands for each of the paper's columns
PAPER_TO_OURS = {"Proj": "none", "BN": "bn", "E1": "e1", "IE": "ie", "RE": "re"}


# ----------------------------------------------------------------------------
# helpers


def ensure_packages():
    """Imports duckdb and pyroaring, installing them with pip when absent."""
    global duckdb, pyroaring
    missing = []
    for mod in ("duckdb", "pyroaring"):
        try:
            __import__(mod)
        except ImportError:
            missing.append(mod)
    if missing:
        log(f"mmfs-bench query: Python package(s) {', '.join(missing)} missing: installing them with "
            f"`python3 -m pip install {' '.join(missing)}` (scripts/install-deps.sh installs them too)")
        env = dict(os.environ, PIP_BREAK_SYSTEM_PACKAGES="1", PIP_ROOT_USER_ACTION="ignore",
                   PIP_DISABLE_PIP_VERSION_CHECK="1")
        p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            raise BenchError(f"pip install {' '.join(missing)} failed (exit {p.returncode}):\n{p.stdout[-2000:]}")
    import duckdb as _duckdb
    import pyroaring as _pyroaring
    duckdb, pyroaring = _duckdb, _pyroaring


def is_mounted(path):
    target = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                point = line.split()[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
                if point == target:
                    return True
    except OSError:
        pass
    return False


def summ(values):
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "runs": vals}


def med(s):
    return None if not s else s["median"]


def fs(x, digits=3):
    """seconds"""
    if x is None:
        return "—"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.{digits}f}"


def fsum(s, digits=3):
    if not s:
        return "—"
    if len(s["runs"]) == 1:
        return fs(s["median"], digits)
    return f"{fs(s['median'], digits)} ({fs(s['min'], digits)}–{fs(s['max'], digits)})"


def fmb(n, digits=1):
    if n is None:
        return "—"
    v = n / 1e6
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 0.1:
        return f"{v:.{digits}f}"
    return f"{v:.3f}"


def fbytes(n):
    if n is None:
        return "—"
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def fratio(x, digits=2):
    return "—" if x is None else f"{x:.{digits}f}"


def errtext(e):
    if isinstance(e, OSError) and e.errno is not None:
        return f"{errno.errorcode.get(e.errno, e.errno)} ({os.strerror(e.errno)})"
    return f"{type(e).__name__}: {e}"


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode()


def read_json(path):
    return json.loads(read_text(path))


def read_all(path, buf=None):
    """(seconds, bytes) reading a whole file with one open: into `buf` (a
    bytearray grown as needed) in READ_CHUNK pieces."""
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if buf is None or len(buf) < max(size, 1):
            buf = bytearray(max(size, 1))
        mv = memoryview(buf)
        got = 0
        while got < size:
            n = os.readv(fd, [mv[got:min(size, got + READ_CHUNK)]])
            if n <= 0:
                break
            got += n
    finally:
        os.close(fd)
    dt = time.perf_counter() - t0
    if got != size:
        raise OSError(errno.EIO, f"{path}: read {got} of {size} bytes")
    return dt, bytes(memoryview(buf)[:size]) if size <= 4096 else memoryview(buf)[:size]


def parse_shape(s):
    try:
        shape = tuple(int(x) for x in s.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad shape {s!r}")
    if not shape or any(x <= 0 for x in shape):
        raise argparse.ArgumentTypeError(f"bad shape {s!r}")
    return shape


# ----------------------------------------------------------------------------
# the pyroaring equality index


class RoaringIndex:
    """One BitMap per value of every K column (an equality index in memory);
    sorted columns (KSEQ) answer by row ranges."""

    def __init__(self, cols):
        BitMap = pyroaring.BitMap
        self.rows = len(next(iter(cols.values())))
        self.bitmaps = {}
        self.sorted = {}
        self.bytes = {}
        for name, col in cols.items():
            if name == "KSEQ" or (len(col) > 1 and bool(np.all(col[1:] >= col[:-1]))):
                self.sorted[name] = col
                self.bytes[name] = 0
                continue
            card = int(col.max())
            order = np.argsort(col, kind="stable").astype(np.uint32)
            counts = np.bincount(col, minlength=card + 1)
            ends = np.cumsum(counts)
            starts = ends - counts
            bms = [BitMap(order[s:e]) if e > s else BitMap() for s, e in zip(starts.tolist(), ends.tolist())]
            for b in bms:
                b.shrink_to_fit()
            self.bitmaps[name] = bms
            self.bytes[name] = sum(len(b.serialize()) for b in bms)
        self.universe = BitMap(range(self.rows))

    def atom(self, t):
        BitMap = pyroaring.BitMap
        name = t[1]
        if t[0] == "ne":
            return self.universe - self.atom(("eq", name, t[2]))
        lo, hi = sq.value_range(t)
        if name in self.sorted:
            col = self.sorted[name]
            # the key in the column's dtype: a Python int would make numpy convert the whole column per call
            a = 0 if lo is None else int(np.searchsorted(col, np.asarray(lo, dtype=col.dtype), side="left"))
            b = len(col) if hi is None else int(np.searchsorted(col, np.asarray(hi, dtype=col.dtype), side="right"))
            return BitMap(range(a, b)) if b > a else BitMap()
        bms = self.bitmaps[name]
        lo = 1 if lo is None else max(lo, 0)
        hi = len(bms) - 1 if hi is None else min(hi, len(bms) - 1)
        if hi < lo:
            return BitMap()
        if hi == lo:
            return bms[lo]
        return BitMap.union(*bms[lo:hi + 1])

    def eval(self, t):
        k = t[0]
        if k == "not":
            return self.universe - self.eval(t[1])
        if k == "and":
            return pyroaring.BitMap.intersection(*[self.eval(x) for x in t[1]])
        if k == "or":
            return pyroaring.BitMap.union(*[self.eval(x) for x in t[1]])
        return self.atom(t)

    def count(self, t):
        if t[0] == "and" and len(t[1]) == 2:
            a, b = (self.eval(x) for x in t[1])
            return a.intersection_cardinality(b)
        return len(self.eval(t))


# ----------------------------------------------------------------------------


class QueryBench:
    def __init__(self, a):
        self.a = a
        self.drop = CacheDropper()
        self.failures = []
        self.work = None
        self.mnt = None
        self.image = None
        self.daemon = None
        self.bindir = None
        self.cold_ok = True
        self.res = {"schema": SCHEMA}
        self.mmfs = "mmfs" in a.engines

    # -- setup -------------------------------------------------------------
    def fail(self, msg):
        log("FAILED: " + msg)
        self.failures.append(msg)

    def setup(self):
        a = self.a
        os.makedirs(a.scratch, exist_ok=True)
        self.work = tempfile.mkdtemp(dir=a.scratch, prefix="mmfs-bench-query-")
        log(f"working in {self.work}")
        if not self.mmfs:
            return
        self.bindir = os.path.join(self.work, "bin")
        os.makedirs(self.bindir)
        bins = {}
        for name, rel in (("mmfs", ("daemon", "mmfs")), ("mkfs.mmfs", ("mkfs", "mkfs.mmfs"))):
            src = os.path.join(a.build, *rel)
            if not os.access(src, os.X_OK):
                raise BenchError(f"{src} is not built (meson compile -C {a.build}); pass --build DIR or set "
                                 f"$MMFS_BUILD")
            dst = os.path.join(self.bindir, name)
            for attempt in range(20):  # a private copy: a relink during the run must not break remounts
                try:
                    shutil.copy2(src, dst)
                    ok = subprocess.run([dst, "--help"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        timeout=30).returncode == 0
                except OSError:
                    ok = False
                if ok:
                    break
                time.sleep(3)
            else:
                raise BenchError(f"{src} does not run (being rebuilt?)")
            bins[name] = dst
        self.image = os.path.join(self.work, "mmfs.img")
        self.mnt = os.path.join(self.work, "mnt")
        os.makedirs(self.mnt)
        data = a.rows * 4 * len(sq.COLUMNS) + (0 if a.skip_3d else int(np.prod(a.shape)) * 8)
        size = a.image_size or (4 * data + 4 * GiB)
        size = (size + MiB - 1) // MiB * MiB
        p = subprocess.run([bins["mkfs.mmfs"], "-q", "-f", "-s", str(size), "-g", a.geometry, self.image],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            raise BenchError(f"mkfs.mmfs failed (exit {p.returncode}): {p.stdout.strip()[-2000:]}")
        self.res["volume"] = {"image_bytes": size, "geometry": a.geometry, "mount_options": a.mount_options}
        self.daemon = Daemon(bins["mmfs"], self.image, self.mnt, a.mount_options,
                             os.path.join(self.work, "daemon.log"))
        self.daemon.mount()

    def cold(self, remount=True):
        """Remount (empties the daemon's caches), then drop the kernel's caches."""
        if remount and self.daemon is not None:
            self.daemon.unmount()
            self.daemon.mount()
        ok = self.drop()
        if not ok:
            self.cold_ok = False
        return ok

    def cleanup(self):
        if self.daemon is not None:
            try:
                self.daemon.unmount()
            except Exception as e:
                log(f"WARNING: unmount failed: {e}")
        if self.mnt and is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", self.mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if is_mounted(self.mnt):
                subprocess.run(["fusermount3", "-uz", self.mnt], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        if self.work and not self.a.keep:
            if self.failures and os.path.exists(os.path.join(self.work, "daemon.log")) and self.a.out:
                try:
                    os.makedirs(self.a.out, exist_ok=True)
                    shutil.copy(os.path.join(self.work, "daemon.log"),
                                os.path.join(self.a.out, "mmfs-bench-query-daemon.log"))
                except OSError:
                    pass
            if self.mnt and is_mounted(self.mnt):
                log(f"WARNING: {self.mnt} is still mounted; leaving {self.work}")
            else:
                shutil.rmtree(self.work, ignore_errors=True)
        elif self.work:
            log(f"kept {self.work}")

    # -- part 1: the Set Query Benchmark ----------------------------------
    def setquery(self):
        a = self.a
        rows = a.rows
        out = {"rows": rows, "columns": sq.COLUMNS, "generation_order": sq.GEN_ORDER,
               "kseq_scale": sq.kseq_scale(rows)}
        self.res["setquery"] = out
        log(f"Set Query: generating {rows:,} rows")
        t0 = time.perf_counter()
        cols = sq.generate(rows)
        out["generate_s"] = time.perf_counter() - t0
        qs = sq.queries(rows)
        assert len(qs) == 75
        t0 = time.perf_counter()
        ref = [sq.numpy_count(q["tree"], cols) for q in qs]
        out["reference_s"] = time.perf_counter() - t0
        out["queries"] = [{"id": q["id"], "group": q["group"], "paper": sq.paper_cond(q["tree"]),
                           "mmfs": sq.mmfs_cond(q["tree"]), "sql": sq.sql_cond(q["tree"]),
                           "columns": sq.columns_of(q["tree"]), "count": c} for q, c in zip(qs, ref)]
        out["fig1"] = [{"no": i + 1, "condition": sq.paper_cond(t), "mmfs": sq.mmfs_cond(t),
                        "paper_bitmaps": nb, "bitmaps": sq.e1_bitmaps(t, sq.CARD[sq.columns_of(t)[0]])}
                       for i, (t, nb) in enumerate(sq.FIG1)]
        engines = []
        out["engines"] = engines
        raw_dir = os.path.join(self.work, "raw")
        os.makedirs(raw_dir)
        for c in sq.COLUMNS:
            cols[c].tofile(os.path.join(raw_dir, c + ".i4"))

        # numpy ---------------------------------------------------------
        if "numpy" in a.engines:
            eng = {"engine": "numpy", "label": "numpy scan (np.memmap of raw int32 files)", "kind": "scan"}
            engines.append(eng)
            self.run_engine(eng, qs, ref, lambda kind: self.numpy_pass(qs, raw_dir, rows), cold_drop=True)
        # pyroaring -----------------------------------------------------
        if "pyroaring" in a.engines:
            eng = {"engine": "pyroaring", "label": "pyroaring equality index (in process)", "kind": "index"}
            engines.append(eng)
            log("pyroaring: building the equality index")
            t0 = time.perf_counter()
            ridx = RoaringIndex(cols)
            eng["build_s"] = time.perf_counter() - t0
            eng["index_bytes"] = sum(ridx.bytes.values())
            eng["index_bytes_per_column"] = ridx.bytes
            self.run_engine(eng, qs, ref, lambda kind: self.roaring_pass(qs, ridx), cold_drop=None)
            del ridx
        # duckdb --------------------------------------------------------
        if "duckdb" in a.engines:
            eng = {"engine": "duckdb", "label": f"DuckDB {duckdb.__version__} (database file)", "kind": "sql"}
            engines.append(eng)
            dbpath = os.path.join(self.work, "bench.duckdb")
            t0 = time.perf_counter()
            con = duckdb.connect(dbpath)
            con.register("src", cols)
            con.execute("CREATE TABLE bench AS SELECT " + ", ".join(sq.COLUMNS) + " FROM src")
            con.unregister("src")
            con.execute("CHECKPOINT")
            con.close()
            eng["build_s"] = time.perf_counter() - t0
            eng["database_bytes"] = os.path.getsize(dbpath)
            self.run_engine(eng, qs, ref, lambda kind: self.duckdb_pass(qs, dbpath, kind), cold_drop=True)
        # mmfs ----------------------------------------------------------
        if self.mmfs:
            table = os.path.join(self.mnt, "bench")
            self.table = table
            log(f"mmfs: writing the table {table}")
            t0 = time.perf_counter()
            os.mkdir(table)
            for c in sq.COLUMNS:
                self.write_array(os.path.join(table, c), cols[c], "int32",
                                 "precision:2" if c == "KSEQ" else "exact")
            out["mmfs_write_s"] = time.perf_counter() - t0
            for enc in a.encodings:
                eng = {"engine": f"mmfs-{enc}", "label": f"mmfs, index {enc}" if enc != "none"
                       else "mmfs, no index (scan)", "kind": "mmfs", "encoding": enc}
                engines.append(eng)
                if enc in ("range", "interval") and a.max_index_bytes:
                    est = sum(estimate_index_bytes(enc, np.bincount(cols[c]) if c != "KSEQ" else [rows], rows)
                              for c in sq.COLUMNS)
                    eng["estimated_index_bytes"] = est
                    if est > a.max_index_bytes:
                        eng["skipped"] = (f"not built: the {enc} index of the 13 columns would take about "
                                          f"{est / 1e9:,.0f} GB (one dense bitmap per value of K500K, K250K, "
                                          f"...), above --max-index-bytes {a.max_index_bytes / 1e9:.1f} GB; "
                                          "the paper does not test it either")
                        log(f"mmfs-{enc}: {eng['skipped']}")
                        continue
                if not self.build_table_index(eng, table, enc, rows):
                    continue
                self.run_engine(eng, qs, ref, lambda kind: self.mmfs_pass(qs, table), cold_drop="remount")
            for c in sq.COLUMNS:  # the 3-D part gets the space
                os.unlink(os.path.join(table, c))
            os.rmdir(table)
        del cols
        self.setquery_summary()

    def write_array(self, path, arr, dtype, bins):
        """An array file from bytes written first (docs/reference.md §4): write, dtype, bins, shape."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            mv = memoryview(np.ascontiguousarray(arr)).cast("B")
            off = 0
            while off < len(mv):
                n = os.pwrite(fd, mv[off:off + READ_CHUNK], off)
                if n <= 0:
                    raise BenchError(f"pwrite {path} returned {n}")
                off += n
        finally:
            os.close(fd)
        os.setxattr(path, "user.mmfs.dtype", dtype.encode())
        os.setxattr(path, "user.mmfs.bins", bins.encode())
        os.setxattr(path, "user.mmfs.shape", ",".join(map(str, arr.shape)).encode())

    def build_table_index(self, eng, table, enc, rows):
        build = {}
        log(f"mmfs: index {enc} on {len(sq.COLUMNS)} columns")
        for c in sq.COLUMNS:
            path = os.path.join(table, c)
            t0 = time.perf_counter()
            try:
                os.setxattr(path, "user.mmfs.index", enc.encode())
            except OSError as e:
                eng["error"] = f"setxattr user.mmfs.index={enc} on {c}: {errtext(e)}"
                self.fail(f"{eng['engine']}: {eng['error']}")
                return False
            build[c] = time.perf_counter() - t0
        eng["build_s_per_column"] = build
        eng["build_s"] = sum(build.values())
        eng["build_s_k12"] = sum(v for c, v in build.items() if c != "KSEQ")
        sizes = {}
        for c in sq.COLUMNS:
            try:
                info = read_json(os.path.join(table, c) + "@/info")
                sizes[c] = int(info["device_bytes"]["index"])
            except (OSError, ValueError, KeyError, TypeError) as e:
                sizes[c] = None
                log(f"WARNING: {c}@/info: no device_bytes.index ({errtext(e)})")
        eng["index_bytes_per_column"] = sizes
        eng["index_bytes"] = None if None in sizes.values() else sum(sizes.values())
        eng["raw_bytes"] = rows * 4 * len(sq.COLUMNS)
        if eng["index_bytes"] is not None:
            eng["index_ratio"] = eng["index_bytes"] / eng["raw_bytes"]
        return True

    def run_engine(self, eng, qs, ref, one_pass, cold_drop):
        """--runs x (cold pass, warm pass). cold_drop: True (drop caches),
        'remount' (remount the daemon, then drop), None (no cold state)."""
        passes = {"cold": [], "warm": []}
        log(f"{eng['engine']}: {self.a.runs} run(s)")
        for r in range(self.a.runs):
            kinds = ["warm"] if cold_drop is None else ["cold", "warm"]
            if cold_drop is None and r == 0:
                one_pass("warm")  # a first pass touches the bitmaps once; not timed
            for kind in kinds:
                if kind == "cold":
                    self.cold(remount=(cold_drop == "remount"))
                before = read_stats(self.mnt) if cold_drop == "remount" else None
                counts, times, errs = one_pass(kind)
                after = read_stats(self.mnt) if cold_drop == "remount" else None
                p = {"total_s": sum(t for t in times if t is not None), "times": times, "counts": counts}
                if errs:
                    p["errors"] = errs
                if before is not None and after is not None:
                    p["stats"] = stats_delta(before, after)
                passes[kind].append(p)
                msg = None
                for q, want, got, err in zip(qs, ref, counts, errs or [None] * len(qs)):
                    if got != want:
                        msg = (f"{eng['engine']} ({kind} pass {r + 1}): {q['id']} `{sq.mmfs_cond(q['tree'])}` "
                               f"returned {err or got}, the reference (numpy) count is {want}")
                        break
                if msg:
                    eng.setdefault("mismatch", msg)
                    self.fail(msg)
                    break
            if "mismatch" in eng:
                break
        eng["agreed"] = "mismatch" not in eng
        for kind, ps in passes.items():
            if not ps:
                continue
            eng[kind] = {"total_s": summ([p["total_s"] for p in ps]),
                         "per_query_ms": [statistics.median(p["times"][i] * 1e3 for p in ps
                                                            if p["times"][i] is not None)
                                          if any(p["times"][i] is not None for p in ps) else None
                                          for i in range(len(qs))],
                         "passes": len(ps)}
            groups = {}
            for g in sq.GROUPS:
                idx = [i for i, q in enumerate(qs) if q["group"] == g]
                groups[g] = summ([sum(p["times"][i] for i in idx if p["times"][i] is not None) for p in ps])
            eng[kind]["groups_s"] = groups
            st = [p.get("stats") for p in ps if p.get("stats")]
            if st:
                eng[kind]["stats"] = st[len(st) // 2]
                eng[kind]["read_bytes"] = summ([bytes_read(s) for s in st])
        msg = f"{eng['engine']}: " + ", ".join(f"{k} {fsum(eng[k]['total_s'])} s" for k in passes if k in eng)
        log(msg + ("" if eng["agreed"] else "  MISMATCH"))

    # passes: (counts, times, errors)
    def numpy_pass(self, qs, raw_dir, rows):
        counts, times = [], []
        for q in qs:
            t0 = time.perf_counter()
            cols = {c: np.memmap(os.path.join(raw_dir, c + ".i4"), dtype=np.int32, mode="r", shape=(rows,))
                    for c in sq.columns_of(q["tree"])}
            n = sq.numpy_count(q["tree"], cols)
            del cols
            times.append(time.perf_counter() - t0)
            counts.append(n)
        return counts, times, None

    def roaring_pass(self, qs, ridx):
        counts, times = [], []
        for q in qs:
            t0 = time.perf_counter()
            n = ridx.count(q["tree"])
            times.append(time.perf_counter() - t0)
            counts.append(int(n))
        return counts, times, None

    def duckdb_pass(self, qs, dbpath, kind):
        """A cold pass opens a new connection (after the drop); the warm pass
        after it uses the same one and closes it."""
        if kind == "cold" or self._duck_con is None:
            if self._duck_con is not None:
                self._duck_con.close()
            self._duck_con = duckdb.connect(dbpath, read_only=True)
        con = self._duck_con
        counts, times = [], []
        try:
            for q in qs:
                sql = "SELECT count(*) FROM bench WHERE " + sq.sql_cond(q["tree"])
                t0 = time.perf_counter()
                n = con.execute(sql).fetchone()[0]
                times.append(time.perf_counter() - t0)
                counts.append(int(n))
        finally:
            if kind == "warm":
                con.close()
                self._duck_con = None
        return counts, times, None

    _duck_con = None

    def mmfs_pass(self, qs, table):
        counts, times, errs = [], [], []
        bad = False
        for q in qs:
            path = f"{table}@/query/{sq.mmfs_cond(q['tree'])}/count"
            t0 = time.perf_counter()
            try:
                fd = os.open(path, os.O_RDONLY)
                try:
                    data = os.read(fd, 4096)
                finally:
                    os.close(fd)
                dt = time.perf_counter() - t0
                n = int(data.decode().strip())
                err = None
            except (OSError, ValueError, UnicodeDecodeError) as e:
                dt, n, err = None, None, f"error {errtext(e)}"
                bad = True
            times.append(dt)
            counts.append(n)
            errs.append(err)
        return counts, times, errs if bad else None

    def setquery_summary(self):
        out = self.res["setquery"]
        engines = out["engines"]
        # encodings that answered every query right (a wrong one is a failure, never the best)
        mm = [e for e in engines if e["kind"] == "mmfs" and e.get("encoding") != "none" and e.get("warm")
              and e.get("agreed")]
        # a skipped encoding (not built, see estimate_index_bytes) answered nothing: not a disagreement
        ran = [e for e in engines if not e.get("skipped")]
        out["all_agreed"] = all(e.get("agreed") for e in ran) and bool(ran)
        targets = []
        out["targets"] = targets

        def best(kind):
            c = [e for e in mm if e.get(kind)]
            return min(c, key=lambda e: e[kind]["total_s"]["median"]) if c else None

        bw, bc = best("warm"), best("cold")
        if bw:
            targets.append({"target": f"best mmfs encoding, whole suite warm <= {T_SUITE_WARM_S} s",
                            "value": bw["warm"]["total_s"]["median"], "who": bw["engine"],
                            "met": bw["warm"]["total_s"]["median"] <= T_SUITE_WARM_S})
        if bc:
            targets.append({"target": f"best mmfs encoding, whole suite cold <= {T_SUITE_COLD_S} s",
                            "value": bc["cold"]["total_s"]["median"], "who": bc["engine"],
                            "met": bc["cold"]["total_s"]["median"] <= T_SUITE_COLD_S and self.cold_ok})
        for enc, lim in (("e1", T_E1_RATIO), ("bn", T_BN_RATIO)):
            e = next((x for x in mm if x.get("encoding") == enc), None)
            if e and e.get("index_ratio") is not None:
                targets.append({"target": f"{enc.upper()} index size <= {lim}x the raw column bytes",
                                "value": e["index_ratio"], "who": e["engine"], "met": e["index_ratio"] <= lim})
        for e in mm:
            if e.get("build_s") is not None:
                targets.append({"target": f"building the indexes of all 13 columns ({e['encoding']}) <= "
                                          f"{T_BUILD_S} s", "value": e["build_s"], "who": e["engine"],
                                "met": e["build_s"] <= T_BUILD_S})

    # -- part 2: the 3-D array --------------------------------------------
    def field(self):
        a = self.a
        shape = a.shape
        n = int(np.prod(shape))
        out = {"shape": list(shape), "dtype": "float64", "bins": "100", "bytes": n * 8}
        self.res["field3d"] = out
        log(f"3-D: generating {shape} float64 ({fbytes(n * 8)})")
        t0 = time.perf_counter()
        arr = make_field(shape, a.seed)
        out["generate_s"] = time.perf_counter() - t0
        raw = os.path.join(self.work, "field.f8")
        arr.tofile(raw)
        flat = arr.reshape(-1)
        t0 = time.perf_counter()
        quant = np.quantile(flat, [0.90, 0.90 + 0.25 / 100, 0.99, 0.99 + 0.25 / 100])
        out["quantile_s"] = time.perf_counter() - t0
        encs = list(a.encodings_3d)
        t0 = time.perf_counter()
        replica = replica_edges(flat, 100)
        out["replica_edges_s"] = time.perf_counter() - t0
        path = None
        if self.mmfs:
            path = os.path.join(self.mnt, "field")
            t0 = time.perf_counter()
            self.write_array(path, arr, "float64", "100")
            out["mmfs_write_s"] = time.perf_counter() - t0
        cache = {}

        def reference(op, t):
            key = (op, float(t))
            if key not in cache:
                m = flat > t if op == ">" else flat >= t
                idx = np.flatnonzero(m).astype(np.uint64)
                cache.clear()
                cache[key] = (len(idx), idx)
            return cache[key]

        rows = []
        out["results"] = rows
        # numpy scan of the raw file ----------------------------------------
        if "numpy" in a.engines:
            for label, p, t in self.thresholds(None, quant):
                if not label.endswith("edge"):
                    continue  # a scan's time does not depend on where t falls
                for view in VIEWS3D:
                    times = []
                    for _ in range(a.runs_3d):
                        self.cold(remount=False)
                        t0 = time.perf_counter()
                        x = np.fromfile(raw, dtype=np.float64)
                        m = x > t
                        if view == "count":
                            res = int(np.count_nonzero(m))
                        elif view == "coords":
                            res = np.flatnonzero(m)
                        else:
                            res = x[m]
                        times.append(time.perf_counter() - t0)
                        del x, m
                    rows.append({"engine": "numpy", "threshold": label, "p": p, "t": float(t), "op": ">",
                                 "view": view, "s": summ(times), "bytes_read": n * 8,
                                 "selectivity": reference(">", t)[0] / n})
                    del res
            log("numpy 3-D scan: " + ", ".join(f"{r['threshold']}/{r['view']} {fsum(r['s'])}" for r in rows))
        if not self.mmfs:
            return
        out["encodings"] = []
        for enc in encs:
            e = {"encoding": enc}
            out["encodings"].append(e)
            if enc in ("range", "interval") and a.max_index_bytes:
                est = estimate_index_bytes(enc, [n / 100] * 100, n)
                e["estimated_index_bytes"] = est
                if est > a.max_index_bytes:
                    e["skipped"] = (f"not built: about {est / 1e9:,.1f} GB estimated, above --max-index-bytes "
                                    f"{a.max_index_bytes / 1e9:.1f} GB")
                    log(f"3-D mmfs-{enc}: {e['skipped']}")
                    continue
            t0 = time.perf_counter()
            try:
                os.setxattr(path, "user.mmfs.index", enc.encode())
            except OSError as ex:
                e["error"] = f"setxattr user.mmfs.index={enc}: {errtext(ex)}"
                self.fail(f"3-D mmfs-{enc}: {e['error']}")
                continue
            e["build_s"] = time.perf_counter() - t0
            try:
                info = read_json(path + "@/info")
                e["index_bytes"] = int(info["device_bytes"]["index"])
                e["info"] = info
            except (OSError, ValueError, KeyError, TypeError) as ex:
                e["index_bytes"] = None
                log(f"WARNING: field@/info: {errtext(ex)}")
            edges = find_edges(e.get("info"))
            e["edges_from"] = "A@/info"
            if edges is None:
                edges = replica
                e["edges_from"] = "replica of the daemon's sample (indexes/binning.cc)"
            if edges:
                # where the edges fall in the data: equal-frequency bins put the top edge near the 99th percentile
                e["edges_count"] = len(edges)
                e["top_edge"] = float(edges[-1])
                e["top_edge_quantile"] = float(np.count_nonzero(flat < edges[-1]) / n)
                e["bottom_edge_quantile"] = float(np.count_nonzero(flat < edges[0]) / n)
            log(f"3-D mmfs-{enc}: built in {e['build_s']:.2f} s, index {fbytes(e['index_bytes'])}")
            for label, p, t in self.thresholds(edges, quant):
                # on an edge: `>t`, or `>=t` when only that one is answered from the index alone
                op = ">"
                if label.endswith("edge") and enc != "none":
                    plan = self.plan(path, f">{t!r}", "count")
                    if plan is not None and plan.get("data_bytes", 1) != 0:
                        alt = self.plan(path, f">={t!r}", "count")
                        if alt is not None and alt.get("data_bytes", 1) == 0:
                            op = ">="
                cond = f"{op}{t!r}"
                want_n, want_idx = reference(op, t)
                for view in VIEWS3D:
                    plan = self.plan(path, cond, view)
                    row = {"engine": f"mmfs-{enc}", "encoding": enc, "threshold": label, "p": p, "t": float(t),
                           "op": op, "cond": cond, "view": view, "plan": plan, "selectivity": want_n / n,
                           "aligned_plan": None if not plan or view == "values" else plan.get("data_bytes") == 0}
                    times, reads, err = [], [], None
                    for _ in range(a.runs_3d):
                        self.cold(remount=True)
                        before = read_stats(self.mnt)
                        vp = f"{path}@/query/{cond}/{view}"
                        try:
                            dt, data = read_all(vp)
                        except OSError as ex:
                            err = f"{vp}: {errtext(ex)}"
                            break
                        after = read_stats(self.mnt)
                        times.append(dt)
                        reads.append(stats_delta(before, after))
                        err = self.check3d(view, data, want_n, want_idx, flat)
                        del data
                        if err:
                            break
                    row["s"] = summ(times)
                    row["stats"] = reads[len(reads) // 2] if reads else None
                    row["bytes_read"] = bytes_read(row["stats"])
                    row["data_bytes_read"] = sectors_bytes(row["stats"], "data_sectors_read")
                    row["index_bytes_read"] = sectors_bytes(row["stats"], "index_sectors_read")
                    if err:
                        row["error"] = err
                        self.fail(f"3-D mmfs-{enc} {label} {view}: {err}")
                    rows.append(row)
                log(f"3-D mmfs-{enc} {label} ({cond}): " + ", ".join(
                    f"{r['view']} {fsum(r['s'])} s/{fbytes(r['bytes_read'])}" for r in rows[-3:]))
        self.field_targets()

    def thresholds(self, edges, quant):
        """(label, percentile, t): on an edge near the 99th / 90th percentile,
        and a quarter bin above it (inside a bin)."""
        out = []
        for p, q_edge, q_in in ((99, quant[2], quant[3]), (90, quant[0], quant[1])):
            t_edge = q_edge
            if edges is not None and len(edges):
                e = np.asarray(edges, dtype=np.float64)
                t_edge = float(e[np.argmin(np.abs(e - q_edge))])
                t_in = q_in
                # strictly inside a bin: not on any edge
                if np.any(e == t_in):
                    t_in = float(np.nextafter(t_in, np.inf))
            else:
                t_in = q_in
            out.append((f"p{p} edge", p, float(t_edge)))
            out.append((f"p{p} inside a bin", p, float(t_in)))
        return out

    def plan(self, path, cond, view):
        try:
            return read_json(f"{path}@/plan/query/{cond}/{view}")
        except (OSError, ValueError) as e:
            log(f"WARNING: plan of {cond}: {errtext(e)}")
            return None

    def check3d(self, view, data, want_n, want_idx, flat):
        if view == "count":
            try:
                got = int(bytes(data).decode().strip())
            except ValueError:
                return f"count returned {bytes(data)[:40]!r}"
            return None if got == want_n else f"count {got}, numpy counts {want_n}"
        if view == "coords":
            got = np.frombuffer(data, dtype="<u8")
            if len(got) != want_n:
                return f"coords: {len(got)} indices, numpy finds {want_n}"
            if not np.array_equal(got, want_idx):
                i = int(np.flatnonzero(got != want_idx)[0])
                return f"coords differ at position {i}: {int(got[i])} != {int(want_idx[i])}"
            return None
        got = np.frombuffer(data, dtype="<f8")
        if len(got) != want_n:
            return f"values: {len(got)} elements, numpy finds {want_n}"
        want = flat[want_idx.astype(np.int64)]
        if not np.array_equal(got, want):
            i = int(np.flatnonzero(got != want)[0])
            return f"values differ at position {i}: {got[i]!r} != {want[i]!r}"
        return None

    def field_targets(self):
        out = self.res["field3d"]
        targets = []
        out["targets"] = targets
        rows = [r for r in out["results"] if r["engine"].startswith("mmfs-") and r.get("encoding") != "none"
                and r.get("s")]
        aligned = [r for r in rows if r["view"] == "count" and r["threshold"].endswith("edge")]
        if aligned:
            ok = [r for r in aligned if r["data_bytes_read"] == 0]
            b = min(ok or aligned, key=lambda r: r["s"]["median"])
            targets.append({"target": f"cold aligned count <= {T_COUNT_ALIGNED_S} s reading no data sectors",
                            "value": b["s"]["median"], "who": f"{b['engine']} {b['threshold']}",
                            "data_bytes_read": b["data_bytes_read"],
                            "met": b["s"]["median"] <= T_COUNT_ALIGNED_S and b["data_bytes_read"] == 0
                            and self.cold_ok})
        c1 = [r for r in rows if r["view"] == "coords" and r["p"] == 99]
        if c1:
            b = max(c1, key=lambda r: r["s"]["median"])  # every 1 % coords read of the best encoding
            by_enc = {}
            for r in c1:
                by_enc.setdefault(r["encoding"], []).append(r["s"]["median"])
            enc = min(by_enc, key=lambda k: max(by_enc[k]))
            worst = max(by_enc[enc])
            targets.append({"target": f"cold coords at 1 % selectivity <= {T_COORDS_1PCT_S} s (slower of edge / "
                                      f"inside a bin)", "value": worst, "who": f"mmfs-{enc}",
                            "met": worst <= T_COORDS_1PCT_S and self.cold_ok})
            del b


# ----------------------------------------------------------------------------


def stats_delta(before, after):
    """Counter deltas of /.mmfs/stats (sector_size kept as is)."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return None
    out = {}
    for k, v in after.items():
        b = before.get(k)
        if k == "sector_size":
            out[k] = v
        elif isinstance(v, (int, float)) and isinstance(b, (int, float)) and not isinstance(v, bool):
            out[k] = v - b
    return out


def roaring_bytes(counts, rows):
    """Upper estimate of the serialized size of roaring bitmaps holding
    `counts` random rows out of `rows` each: per 65,536-row chunk an array
    (2 bytes a row) or a 8 KiB bitmap container, whichever is smaller."""
    chunks = max(1, -(-rows // 65536))
    per = np.minimum(2.0 * np.asarray(counts, dtype=np.float64) / chunks, 8192.0)
    return float(np.sum(per * chunks + 8 * chunks))


def estimate_index_bytes(enc, bin_counts, rows):
    """Rough size of the range / interval index of a column whose bins hold
    `bin_counts` rows (the encodings whose bitmaps are dense: a range index
    of K500K would be ~500,000 bitmaps of rows/8 bytes); None for the others."""
    c = np.asarray(bin_counts, dtype=np.float64)
    b = len(c)
    if enc == "range":
        return roaring_bytes(np.cumsum(c)[:-1], rows) if b > 1 else 0.0
    if enc == "interval":
        m = -(-b // 2)
        p = np.concatenate([[0.0], np.cumsum(c)])
        return roaring_bytes(p[m:b + 1] - p[0:b - m + 1], rows)
    return None


def bytes_read(stats):
    if not stats:
        return None
    ss = stats.get("sector_size")
    if "index_sectors_read" in stats or "data_sectors_read" in stats:
        s = stats.get("index_sectors_read", 0) + stats.get("data_sectors_read", 0)
    elif "sectors_read" in stats:
        s = stats["sectors_read"]
    else:
        return None
    return s * ss if ss else None


def sectors_bytes(stats, key):
    if not stats or key not in stats or not stats.get("sector_size"):
        return None
    return stats[key] * stats["sector_size"]


def replica_edges(flat, n, max_sample=1 << 20):
    """The edges `bins=N` chooses, computed as indexes/binning.cc does today
    (every stride-th element in C order, stride = ceil(size / 2^20); edge i
    = the sorted sample's element i*s//N, i = 1..N-1): used only when A@/info
    does not show the edges; whether a threshold is really on an edge is
    checked with the plan (data_bytes == 0) and reported."""
    stride = max(1, -(-flat.size // max_sample))
    sample = np.sort(flat[::stride])
    s = sample.size
    edges = []
    for i in range(1, n):
        q = float(sample[i * s // n])
        if not edges or q != edges[-1]:
            edges.append(q)
    return edges


def find_edges(info):
    """A list of bin edges in A@/info, if it shows one (any key naming
    'edges' holding numbers)."""
    if info is None:
        return None
    stack = [info]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            for k, v in x.items():
                if "edge" in k and isinstance(v, list) and v and all(isinstance(y, (int, float)) for y in v):
                    return v
                stack.append(v)
        elif isinstance(x, list):
            stack.extend(y for y in x if isinstance(y, (dict, list)))
    return None


def make_field(shape, seed):
    """A smooth field plus noise: sines along every dimension and a product
    of two, plus 0.1 x N(0,1) noise from numpy default_rng(seed)."""
    rng = np.random.default_rng(seed)
    nd = len(shape)
    g = [np.arange(s, dtype=np.float64) / s for s in shape]

    def along(d, v, ndim):
        sh = [1] * ndim
        sh[d] = len(v)
        return v.reshape(sh)

    rest = tuple(shape[1:])
    base = np.zeros(rest, dtype=np.float64)   # everything but dim 0's term
    for d in range(1, nd):
        base = base + along(d - 1, 0.5 * np.sin(2 * np.pi * (d + 1) * g[d]), nd - 1)
    if nd >= 3:
        base = base + along(0, np.cos(3 * np.pi * g[1]), nd - 1) * along(1, np.sin(2 * np.pi * g[2]), nd - 1)
    g0 = np.sin(2 * np.pi * 1.5 * g[0])
    arr = np.empty(shape, dtype=np.float64)
    slab = max(1, (64 * MiB) // max(1, int(np.prod(rest)) * 8))
    for r0 in range(0, shape[0], slab):
        r1 = min(shape[0], r0 + slab)
        block = arr[r0:r1]
        block[...] = base
        block += g0[r0:r1].reshape((-1,) + (1,) * (nd - 1))
        block += 0.1 * rng.standard_normal(block.shape)
    return arr


def machine_info(a):
    info = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "host": platform.node(), "kernel": platform.release(), "nproc": os.cpu_count(),
            "python": platform.python_version(), "numpy": np.__version__,
            "duckdb": getattr(duckdb, "__version__", None), "pyroaring": getattr(pyroaring, "__version__", None)}
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
# the report


def report(b):
    res = b.res
    a = b.a
    L = []
    m = res["machine"]
    L.append("# mmfs-bench query — bitmap-index queries on the real clock")
    L.append("")
    L.append(f"`{res['command']}`")
    L.append("")
    L.append(f"{m.get('date')} · {m.get('host')} · {m.get('cpu', '?')} × {m.get('nproc')} · {m.get('mem_total')} · "
             f"kernel {m.get('kernel')} · git {m.get('git')} · scratch {m.get('scratch_filesystem')} · "
             f"load {m.get('loadavg')} → {m.get('loadavg_end')} · Python {m.get('python')}, numpy {m.get('numpy')}, "
             f"DuckDB {m.get('duckdb')}, pyroaring {m.get('pyroaring')}")
    L.append("")
    if not b.cold_ok:
        L.append(f"**WARNING: {b.drop.error}** — the cold figures are not cold-cache.")
        L.append("")
    L.append("Cold: before each cold pass the mmfs daemon is unmounted and mounted again (its in-memory index "
             "and chunk caches go), then `sync; echo 3 > /proc/sys/vm/drop_caches`; DuckDB gets a new "
             "connection after the drop; numpy's column files are dropped from the page cache. Warm: a second "
             "pass right after the cold one, in the same mount (index pages in the daemon's memory) or "
             "connection. Results are never reused: every mmfs query is a fresh open(2) of its "
             "`.../query/COND/count` path, whose answer the daemon computes anew for each open (docs/reference.md §5: "
             "views are not cached across opens; the daemon opens views with FOPEN_KEEP_CACHE off or direct I/O, so "
             "the kernel keeps no page of an earlier open either). What the daemon does keep, in each index's "
             "512 MiB cache, is decoded bitmaps and the rows of atoms that combined several bitmaps (a union of a "
             "range of bins, keyed by the plan's bins; docs/indexes.md): Q4's ten atoms recur across its 20 queries, "
             "so within a pass, and on the warm pass throughout, such an atom costs a copy, not the union. "
             "DuckDB has no result cache; numpy and pyroaring recompute everything. "
             f"A pass is the 75 queries in a row; its time is the sum of their wall-clock times. "
             f"Medians of {a.runs} run(s) (3-D reads: {a.runs_3d}), (min–max) beside.")
    L.append("")
    if res.get("failures"):
        L.append("## Failures")
        L.append("")
        for f in res["failures"]:
            L.append(f"* {f}")
        L.append("")
    if res.get("notes"):
        L.append("## Notes")
        L.append("")
        for n in res["notes"]:
            L.append(f"* {n}")
        L.append("")
    sqr = res.get("setquery")
    if sqr:
        setquery_report(L, sqr, a)
    f3 = res.get("field3d")
    if f3:
        field_report(L, f3, a)
    return "\n".join(L)


def setquery_report(L, s, a):
    rows = s["rows"]
    engines = s.get("engines", [])
    L.append(f"## 1. The Set Query Benchmark — {rows:,} rows, 75 count queries")
    L.append("")
    L.append("Data: O'Neil's generator (seed 1, ×16807 mod 2³¹−1 before each use, one number per column per row "
             "in the order K500K … K2; KN = number mod N + 1; KSEQ = row number from 1), as int32 arrays in "
             "the table directory `bench/` of the volume; KSEQ binned `precision:2`, the other columns `exact` "
             f"(the paper's choice). Generated in {fs(s.get('generate_s'))} s." +
             (f" KSEQ constants of Q3 scaled by {s['kseq_scale']:g} (fewer than 500,000 rows)."
              if s.get("kseq_scale", 1) != 1 else ""))
    L.append("")
    agreed = s.get("all_agreed")
    L.append(f"**Every engine returned the reference count for all 75 queries: {'yes' if agreed else 'NO'}"
             f"{' (every engine that ran)' if any(e.get('skipped') for e in engines) else ''}.**")
    L.append("")
    for e in engines:
        if e.get("mismatch"):
            L.append(f"* {e['mismatch']}")
        elif e.get("error") or e.get("skipped"):
            L.append(f"* {e['engine']}: {e.get('error') or e.get('skipped')}")
    L.append("")
    L.append("| engine | build s | index MB | × raw | warm suite s | cold suite s | cold read MB | agreed |")
    L.append("|---|---:|---:|---:|---:|---:|---:|:---:|")
    raw = rows * 4 * len(sq.COLUMNS)
    for e in engines:
        ib = e.get("index_bytes")
        if ib is None and e["engine"] == "duckdb":
            ib = e.get("database_bytes")
        rb = med(e.get("cold", {}).get("read_bytes")) if e.get("cold") else None
        L.append(f"| {e['label']} | {fs(e.get('build_s'), 2)} | {fmb(ib)} | "
                 f"{fratio(ib / raw) if ib is not None else '—'} | "
                 f"{fsum(e.get('warm', {}).get('total_s'))} | {fsum(e.get('cold', {}).get('total_s'))} | "
                 f"{fmb(rb)} | {'skipped' if e.get('skipped') else 'yes' if e.get('agreed') else 'NO'} |")
    L.append("")
    L.append(f"Raw column bytes: {fmb(raw)} MB ({len(sq.COLUMNS)} × {rows:,} × 4). DuckDB's row: the size of "
             "its database file; its build: loading the table. pyroaring: the serialized bitmaps. mmfs build: "
             "the 13 `setxattr user.mmfs.index` calls (each returns when the index is durable); "
             "read MB: index + data sectors read during the cold pass (/.mmfs/stats). "
             f"Reference from the issue, this machine: DuckDB {ISSUE_REFERENCE['duckdb warm']} s warm, "
             f"{ISSUE_REFERENCE['duckdb cold']} s cold; pyroaring {ISSUE_REFERENCE['pyroaring warm']} s warm.")
    L.append("")
    if s.get("targets"):
        L.append("Targets:")
        L.append("")
        for t in s["targets"]:
            L.append(f"* {t['target']}: {fratio(t['value'], 3)} ({t['who']}) — {'met' if t['met'] else 'MISSED'}")
        L.append("")
    # per group
    L.append("Time per query group (warm, s; cold in parentheses):")
    L.append("")
    L.append("| engine | " + " | ".join(sq.GROUPS) + " |")
    L.append("|---|" + "---:|" * len(sq.GROUPS))
    for e in engines:
        if not e.get("warm"):
            continue
        cells = []
        for g in sq.GROUPS:
            w = med(e["warm"]["groups_s"].get(g))
            c = med(e["cold"]["groups_s"].get(g)) if e.get("cold") else None
            cells.append(fs(w, 4) + (f" ({fs(c, 4)})" if c is not None else ""))
        L.append(f"| {e['engine']} | " + " | ".join(cells) + " |")
    L.append("")
    # Figure 1
    L.append("### Figure 1 — the range conditions of Q4 (paper beside ours)")
    L.append("")
    L.append("| No. | condition | mmfs spelling | # bitmaps (paper) | # bitmaps (E1, ours) |")
    L.append("|---:|---|---|---:|---:|")
    for f in s["fig1"]:
        L.append(f"| {f['no']} | {f['condition']} | `{f['mmfs']}` | {f['paper_bitmaps']} | {f['bitmaps']} |")
    L.append("")
    # Figure 8
    mm = {e["encoding"]: e for e in engines if e["kind"] == "mmfs"}
    encs = [x for x in ENCODINGS if x in mm and x != "none"]
    L.append(f"### Figure 8 — index sizes per column (MB; the paper at {PAPER_ROWS:,} rows, ours at {rows:,})")
    L.append("")
    head = ["column", "card.", "paper: Proj", "BN", "E1", "IE", "RE", "ours: raw"] + [x.upper() for x in encs] + \
        ["pyroaring"]
    L.append("| " + " | ".join(head) + " |")
    L.append("|---|" + "---:|" * (len(head) - 1))
    ro = next((e for e in engines if e["engine"] == "pyroaring"), None)
    for row in PAPER_FIG8:
        c = row[0]
        ours = [fmb((mm[x].get("index_bytes_per_column") or {}).get(c), 2) for x in encs]
        rb = (ro or {}).get("index_bytes_per_column", {}).get(c)
        cells = [c, f"{row[1]:,}"] + [f"{v:g}" for v in row[3:]] + [fmb(rows * 4, 2)] + ours + [fmb(rb, 2)]
        L.append("| " + " | ".join(cells) + " |")
    tot_paper = [sum(r[3 + i] for r in PAPER_FIG8) for i in range(5)]
    tot_ours = [mm[x].get("index_bytes") for x in encs]
    rob = (ro or {}).get("index_bytes")
    cells = ["**total**", ""] + [f"{v:,.0f}" for v in tot_paper] + [fmb(raw)] + [fmb(v) for v in tot_ours] + \
        [fmb(rob)]
    L.append("| " + " | ".join(cells) + " |")
    cells = ["**× raw**", ""] + [f"{v / tot_paper[0]:.2f}" for v in tot_paper] + ["1.00"] + \
        [fratio(None if v is None else v / raw) for v in tot_ours] + [fratio(None if rob is None else rob / raw)]
    L.append("| " + " | ".join(cells) + " |")
    L.append("")
    L.append("The paper's numbers: its Figure 8 (FastBit, 100M rows, WAH-compressed; the text gives the totals "
             "Proj 5.2 GB, BN 1.5 GB, E1 6.0 GB, IE 7.8 GB, RE 8.5 GB). Ours: `device_bytes.index` of "
             "`A@/info`, the space the index takes on the device.")
    L.append("")
    # Figure 10
    L.append("### Figure 10 — totals over the 75 queries, relative to the scan (Proj)")
    L.append("")
    cols = PAPER_FIG8_COLS
    L.append("| system | clock | " + " | ".join(cols) + " | " + " | ".join(c + " rel." for c in cols) + " |")
    L.append("|---|---|" + "---:|" * (2 * len(cols)))
    for mach, d in PAPER_FIG10.items():
        el = d["elapsed"]
        L.append(f"| paper: {mach} | elapsed s | " + " | ".join(f"{v:g}" for v in el) + " | " +
                 " | ".join(f"{v / el[0]:.3f}" for v in el) + " |")
    for mach, d in PAPER_FIG10.items():
        rm = d["read_mb"]
        L.append(f"| paper: {mach} | read MB | " + " | ".join(f"{v:,}" for v in rm) + " | " +
                 " | ".join(f"{v / rm[0]:.3f}" for v in rm) + " |")
    for kind in ("warm", "cold"):
        vals = [med(mm.get(PAPER_TO_OURS[c], {}).get(kind, {}).get("total_s")) if mm.get(PAPER_TO_OURS[c]) else None
                for c in cols]
        base = vals[0]
        L.append(f"| mmfs, this machine | {kind} s | " + " | ".join(fs(v, 4) for v in vals) + " | " +
                 " | ".join(fratio(None if v is None or not base else v / base, 3) for v in vals) + " |")
    vals = [med(mm.get(PAPER_TO_OURS[c], {}).get("cold", {}).get("read_bytes")) if mm.get(PAPER_TO_OURS[c])
            else None for c in cols]
    base = vals[0]
    L.append("| mmfs, this machine | cold read MB | " + " | ".join(fmb(v) for v in vals) + " | " +
             " | ".join(fratio(None if v is None or not base else v / base, 3) for v in vals) + " |")
    L.append("")
    L.append("Proj is the paper's projection index (the raw column, scanned); ours is the index-less scan "
             "(`user.mmfs.index=none`). The paper's times are for 100M rows on 2010 machines (data3, data1: "
             "disks; davinci: GPFS; turing: Fusion-io flash), ours for the rows above.")
    L.append("")
    # per query
    L.append("### Every query (warm ms per engine; the count every engine returned)")
    L.append("")
    names = [e["engine"] for e in engines if e.get("warm")]
    L.append("| query | mmfs condition | count | " + " | ".join(names) + " |")
    L.append("|---|---|---:|" + "---:|" * len(names))
    for i, q in enumerate(s["queries"]):
        cells = []
        for e in engines:
            if not e.get("warm"):
                continue
            v = e["warm"]["per_query_ms"][i]
            cells.append("—" if v is None else f"{v:.3g}")
        L.append(f"| {q['id']} | `{q['mmfs']}` | {q['count']:,} | " + " | ".join(cells) + " |")
    L.append("")


def field_report(L, f, a):
    shape = "×".join(map(str, f["shape"]))
    L.append(f"## 2. A 3-D float64 array {shape} ({fbytes(f['bytes'])}), bins=100 (equal frequency)")
    L.append("")
    L.append("A smooth field (sums and products of sines along each dimension) plus 0.1 × N(0,1) noise. "
             "Thresholds: the bin edge nearest the 99th / 90th percentile (`A@/info`'s edges when it shows them, "
             "else those the daemon's stride sample gives, computed the same way) and the data's quantile a "
             "quarter bin above that percentile (inside a bin). On an edge the condition "
             "is `>t`, or `>=t` when only that one is answered from the index alone (the plan's data_bytes). "
             "Every read cold (remount + drop caches before each); bytes read are deltas of /.mmfs/stats "
             "(index + data sectors); every result checked against numpy.")
    L.append("")
    for e in f.get("encodings", []):
        if e.get("error") or e.get("skipped"):
            L.append(f"* mmfs-{e['encoding']}: {e.get('error') or e.get('skipped')}")
    L.append("")
    L.append("| encoding | build s | index MB | × data | bin edges | first / last edge at the data's quantile |")
    L.append("|---|---:|---:|---:|---|---|")
    for e in f.get("encodings", []):
        ib = e.get("index_bytes")
        q0, q1 = e.get("bottom_edge_quantile"), e.get("top_edge_quantile")
        L.append(f"| {e['encoding']} | {fs(e.get('build_s'), 2)} | {fmb(ib)} | "
                 f"{fratio(None if ib is None else ib / f['bytes'], 3)} | {e.get('edges_from', '—')} | "
                 + ("—" if q0 is None else f"{q0 * 100:.2f} % / {q1 * 100:.2f} %") + " |")
    L.append("")
    L.append("Equal-frequency bins put the first and last of the 99 edges at the 1st and 99th percentiles; "
             "a threshold labelled `p99 edge` is the edge nearest the 99th percentile, so its selectivity "
             "column shows where that edge really is.")
    L.append("")
    L.append("| engine | threshold | cond | selectivity | view | cold s | bytes read | of which data | plan: index/data "
             "bytes, modeled ms |")
    L.append("|---|---|---|---:|---|---:|---:|---:|---|")
    for r in f.get("results", []):
        pl = r.get("plan")
        pls = "—" if not pl else (f"{fbytes(pl.get('index_bytes'))} / {fbytes(pl.get('data_bytes'))}, "
                                  f"{fratio(pl.get('modeled_ms'), 2)}")
        sel = r.get("selectivity")
        L.append(f"| {r['engine']} | {r['threshold']} | `{r.get('cond', '>' + repr(r['t']))}` | "
                 f"{'—' if sel is None else f'{sel * 100:.2f} %'} | {r['view']} | {fsum(r.get('s'))} | "
                 f"{fbytes(r.get('bytes_read'))} | {fbytes(r.get('data_bytes_read'))} | {pls} |"
                 + (f" ERROR {r['error']}" if r.get("error") else ""))
    L.append("")
    if f.get("targets"):
        L.append("Targets (cold):")
        L.append("")
        for t in f["targets"]:
            L.append(f"* {t['target']}: {fratio(t['value'], 3)} s ({t['who']}) — {'met' if t['met'] else 'MISSED'}")
        L.append(f"* reference: a numpy scan of the same file takes about {ISSUE_REFERENCE['numpy scan 3-D']} s "
                 "here; measured above (engine numpy).")
        L.append("")


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
