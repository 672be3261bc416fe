"""The machine a benchmark ran on, for the head of its report: date, host,
kernel, CPUs, memory, fio, Python, numpy, h5py and HDF5, the filesystem of
--dir, and the git revision (marked when the code has uncommitted changes).
bench/bench_daemon.py and mmfs_bench_real.py use it."""
import datetime
import os
import platform
import subprocess

import numpy as np

from bench_daemon_fio import fio_version

try:
    import h5py
except ImportError:  # reported in main()
    h5py = None

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def machine_info(args):
    info = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(),
        "kernel": platform.release(),
        "nproc": os.cpu_count(),
        "fio": fio_version(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "h5py": getattr(h5py, "__version__", None),
        "hdf5": getattr(getattr(h5py, "version", None), "hdf5_version", None),
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            info["mem_total"] = f.readline().split(":", 1)[1].strip()
    except OSError:
        pass
    p = subprocess.run(["findmnt", "-n", "-T", args.dir, "-o", "SOURCE,FSTYPE"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    info["dir_filesystem"] = p.stdout.strip() or None
    p = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    info["git"] = p.stdout.strip() or None
    # The benchmark's own earlier output under docs/benchmarks does not make the code dirty.
    p = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no", "--", ".",
                        ":(exclude)docs/benchmarks"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if info["git"] and p.stdout.strip():
        info["git"] += " (with uncommitted changes)"
    return info
