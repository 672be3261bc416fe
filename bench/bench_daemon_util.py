"""Small helpers of bench/bench_daemon.py that the other benchmark scripts
share (mmfs_bench_real.py, query_bench.py, mloc_bench.py, ...; they import
them through bench_daemon): BenchError and log, the page-cache dropper,
summaries of repeated timings and their formatting, running a command, whole
reads and writes at an offset, and reading a JSON file such as A@/info."""
import errno
import json
import os
import shlex
import statistics
import subprocess
import sys

MiB = 1 << 20
GiB = 1 << 30


class BenchError(Exception):
    pass


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# helpers


class CacheDropper:
    """sync; echo 3 > /proc/sys/vm/drop_caches. Remembers whether it worked."""

    def __init__(self) -> None:
        self.ok = True
        self.error = None

    def __call__(self) -> bool:
        os.sync()
        if not self.ok:
            return False
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        except OSError as e:
            self.ok = False
            self.error = f"cannot drop caches ({e.strerror}); measurements are NOT cold-cache"
            log("WARNING: " + self.error)
            return False
        return True


def summary(values):
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals),
            "runs": vals}


def fmt_num(x, digits=1):
    if x is None:
        return "—"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def fmt_sum(s, digits=1):
    """median (min–max)"""
    if not s:
        return "—"
    if len(s["runs"]) == 1:
        return fmt_num(s["median"], digits)
    return f"{fmt_num(s['median'], digits)} ({fmt_num(s['min'], digits)}–{fmt_num(s['max'], digits)})"


def fmt_bytes(n):
    if n is None:
        return "—"
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def run_cmd(cmd, check=True, timeout=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise BenchError(f"`{shlex.join(cmd)}` failed (exit {p.returncode}): "
                         f"{(p.stderr or p.stdout).strip()[-2000:]}")
    return p


def write_all(fd, data, offset):
    view = memoryview(data).cast("B")
    done = 0
    while done < len(view):
        n = os.pwrite(fd, view[done:], offset + done)
        if n <= 0:
            raise BenchError(f"pwrite returned {n} at offset {offset + done}")
        done += n


def read_exact(fd, n, offset):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.pread(fd, n - len(buf), offset + len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def read_json_file(path):
    try:
        with open(path, "rb") as f:
            return json.loads(f.read()), None
    except OSError as e:
        return None, f"{os.strerror(e.errno)} ({errno.errorcode.get(e.errno, e.errno)})"
    except ValueError as e:
        return None, f"invalid JSON: {e}"
