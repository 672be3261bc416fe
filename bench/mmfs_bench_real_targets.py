"""The targets of bench/mmfs_bench_real.py (`mmfs-bench real`) and how each is
read: the mmfs layouts and the baselines (h5py contiguous and chunked, zarr,
numpy.memmap), one timed read per kind of target (open, read, close), the
schema attributes of a --layouts entry, and MmfsDaemon, the daemon with an
unmount that copes with a daemon that died."""
import os
import subprocess
import time

import numpy as np

from bench_daemon_mount import Daemon
from bench_daemon_util import MiB, BenchError, log
from mmfs_bench_real_workloads import plod_inplace

try:
    import h5py
except ImportError:  # reported in check_tools()
    h5py = None
try:
    import zarr
except ImportError:
    zarr = None

READ_CHUNK = 8 * MiB        # os.readv size for mmfs reads
LAYOUTS = ["naive", "zorder", "hilbert", "multimap"]
BASELINES = {
    "h5py-contig": "h5py, contiguous dataset",
    "h5py-chunked": "h5py, chunked dataset, uncompressed",
    "zarr": "zarr v3, local store, no compressors",
    "memmap": "raw file, numpy.memmap",
}


# --------------------------------------------------------------------------
# timed reads: each returns (seconds, ndarray of float64)


def read_mmfs(path, nbytes):
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        buf = np.empty(nbytes, dtype=np.uint8)
        mv = memoryview(buf)
        off = 0
        while off < nbytes:
            n = os.readv(fd, [mv[off:off + READ_CHUNK]])
            if n <= 0:
                break
            off += n
    finally:
        os.close(fd)
    dt = time.perf_counter() - t0
    if off != nbytes:
        raise BenchError(f"{path}: read {off} bytes, expected {nbytes}")
    return dt, buf.view("<f8")


def read_h5(path, idx, plod):
    t0 = time.perf_counter()
    with h5py.File(path, "r") as f:
        a = f["a"][idx]
    a = np.asarray(a)
    if plod:
        plod_inplace(a, plod)
    return time.perf_counter() - t0, a


def read_zarr(path, idx, plod):
    t0 = time.perf_counter()
    z = zarr.open_array(store=path, mode="r")
    a = np.asarray(z[idx])
    if plod:
        plod_inplace(a, plod)
    return time.perf_counter() - t0, a


def read_memmap(path, idx, plod, shape):
    t0 = time.perf_counter()
    mm = np.memmap(path, dtype="<f8", mode="r", shape=shape)
    a = np.array(mm[idx])
    del mm
    if plod:
        plod_inplace(a, plod)
    return time.perf_counter() - t0, a


# --------------------------------------------------------------------------
# the mmfs target: its mount and its arrays' schema


def is_mounted(path):
    """From /proc/self/mountinfo: never blocks on a dead FUSE daemon, unlike a stat."""
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


def layout_attrs(label):
    """The schema attributes of a --layouts entry: 'zorder', 'zorder+cell=16x16x16'
    (a layout with more attributes, '+'-separated, 'x' for the commas of a
    list), or 'default' (no layout attribute: the volume's default layout and cell)."""
    name, *extra = label.split("+")
    attrs = {} if name == "default" else {"layout": name}
    for kv in extra:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            raise SystemExit(f"--layouts: '{kv}' in '{label}' is not ATTR=VALUE")
        attrs[k] = v.replace("x", ",")
    return attrs


class MmfsDaemon(Daemon):
    """bench_daemon.Daemon with an unmount that reads /proc/self/mountinfo (a
    daemon that died leaves a mount os.path.ismount cannot see) and gives up
    retrying as soon as the mount is gone."""

    def mount(self, timeout=60.0):
        try:
            super().mount(timeout)
        except OSError as e:
            if self.logf:
                self.logf.close()
                self.logf = None
            raise BenchError(f"cannot start the daemon {self.binary}: {e.strerror}") from e

    def unmount(self):
        deadline = time.monotonic() + 10.0
        while is_mounted(self.mnt):
            p = subprocess.run(["fusermount3", "-u", self.mnt], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
            if p.returncode == 0 or not is_mounted(self.mnt):
                break
            if time.monotonic() > deadline:
                log(f"WARNING: fusermount3 -u {self.mnt} failed ({p.stderr.strip()}); lazy unmount")
                subprocess.run(["fusermount3", "-uz", self.mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                break
            time.sleep(0.2)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                log(f"WARNING: daemon pid {self.proc.pid} still running 120 s after the unmount; SIGTERM")
                self.proc.terminate()  # our own child, by its pid
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            rc = self.proc.returncode
            self.proc = None
            if rc != 0:
                log(f"WARNING: the daemon exited with status {rc}; output:\n{self.log_tail()}")
        if self.logf:
            self.logf.close()
            self.logf = None
