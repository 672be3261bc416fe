"""QueryBench, one run of bench/query_bench.py (`mmfs-bench query`): its
state and results (res, the JSON document), the volume (private copies of
the binaries, mkfs.mmfs, the daemon), cold passes (remount, drop caches),
writing an array file, and the cleanup; the two parts' methods come from
SetQueryPart (query_bench_setquery.py) and FieldPart (query_bench_field.py)."""
import os
import shutil
import subprocess
import tempfile
import time

import numpy as np

import setquery as sq
from bench_daemon_mount import Daemon
from bench_daemon_util import BenchError, CacheDropper, log
from query_bench_field import FieldPart
from query_bench_setquery import SetQueryPart
from query_bench_util import GiB, MiB, READ_CHUNK, is_mounted

SCHEMA = "mmfs-bench-query/1"


class QueryBench(SetQueryPart, FieldPart):
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
