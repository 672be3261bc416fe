"""Helpers of bench/query_bench.py (`mmfs-bench query`) that both parts and
the report use: the encodings and engines it knows, whether a path is
mounted, summaries of repeated timings and their formatting (seconds, MB,
bytes, ratios, errors), whole-file reads, the --shape parser, deltas of
/.mmfs/stats and the bytes they count, and the estimated size of a range or
interval index (an encoding too large to build is skipped)."""
import argparse
import errno
import json
import os
import statistics
import time

import numpy as np

MiB = 1 << 20
GiB = 1 << 30
ENCODINGS = ["e1", "bn", "range", "interval", "re", "ie", "none"]
ENGINES = ["mmfs", "duckdb", "pyroaring", "numpy"]
READ_CHUNK = 8 * MiB


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
