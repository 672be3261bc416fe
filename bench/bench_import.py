#!/usr/bin/env python3
"""Import benchmark: mmfs-import of a large chunked, gzip-compressed
HDF5 dataset into a mounted mmfs, against h5py reading the same dataset into
memory. Reports wall time, throughput (dataset bytes / s) and the peak
resident memory of each, and checks that the imported array equals the
dataset byte for byte.

Method, in one run on the disk holding --dir:
1. (once, kept with --keep) h5py writes a float64 dataset of --shape, chunked
   --chunk^3, gzip level --gzip, from a smooth field plus noise (it compresses
   like simulation output, not like zeros);
2. mkfs.mmfs an image (atlas10k3) big enough, mount it;
3. sync + drop caches; `mmfs-import FILE:/data MOUNT/data` (defaults: multimap,
   64 MiB buffers), timed, peak RSS of the tool (and of the daemon, from
   /proc/PID/status VmHWM) recorded;
4. sync + drop caches; a fresh python process runs `h5py.File(...)["data"][...]`,
   timed, its peak RSS recorded; it also hashes the array;
5. the imported array is hashed through the mount (streamed) and compared.

Peak RSS of a command is measured by running it under a small wrapper process
that waits for it and reads getrusage(RUSAGE_CHILDREN).ru_maxrss, so the
benchmark's own memory never counts.

Usage (root, after meson compile -C build):
  python3 bench/bench_import.py                        # 4 GiB: shape 2048,1024,256
  python3 bench/bench_import.py --shape 512,512,256 --keep         # 512 MiB, quick
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_daemon import CacheDropper, Daemon  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30

# Runs argv, waits, prints {"rc", "seconds", "max_rss_kib"} as JSON.
WRAPPER = r"""
import json, resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
dt = time.perf_counter() - t
print(json.dumps({"rc": p.returncode, "seconds": dt, "stdout": p.stdout[-2000:], "stderr": p.stderr[-2000:],
                  "max_rss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""

H5PY_READ = r"""
import hashlib, sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    a = f["data"][...]
print(hashlib.sha256(memoryview(a).cast("B")).hexdigest())
"""


def measured(argv):
    out = subprocess.run([sys.executable, "-I", "-S", "-c", WRAPPER] + argv, stdout=subprocess.PIPE, text=True,
                         check=True).stdout
    return json.loads(out)


def generate(path, shape, chunk, level):
    import h5py
    rows = max(1, chunk)
    rng = np.random.default_rng(6)
    y = np.linspace(0, 6 * np.pi, shape[1])[:, None]
    z = np.linspace(0, 4 * np.pi, shape[2])[None, :]
    base = np.sin(y) * np.cos(z)
    tmp = path + ".part"
    with h5py.File(tmp, "w") as f:
        ds = f.create_dataset("data", shape=shape, dtype="<f8",
                              chunks=tuple(min(chunk, s) for s in shape), compression="gzip",
                              compression_opts=level)
        ds.attrs["units"] = "K"
        for r0 in range(0, shape[0], rows):
            r1 = min(shape[0], r0 + rows)
            t = np.arange(r0, r1, dtype="f8")[:, None, None]
            slab = 300.0 + 50.0 * base[None] * np.cos(t / 97.0) + rng.normal(0, 0.5, (r1 - r0,) + tuple(shape[1:]))
            # Quantize to 1e-3 K, as instruments and many simulations do: it is
            # what makes float output compressible at all.
            ds[r0:r1] = np.round(slab, 3)
            print(f"\rgenerating {path}: {r1}/{shape[0]}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    os.replace(tmp, path)


def hash_file(path, chunk=64 * MiB):
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            b = os.read(fd, chunk)
            if not b:
                break
            h.update(b)
    finally:
        os.close(fd)
    return h.hexdigest()


def vm_hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--dir", default="/var/tmp/mmfs-bench-import", help="work directory (local disk)")
    ap.add_argument("--build", default=os.environ.get("MMFS_BUILD", os.path.join(REPO, "build")))
    ap.add_argument("--shape", default="2048,1024,256", help="float64 dataset shape (default: 4 GiB)")
    ap.add_argument("--chunk", type=int, default=64, help="HDF5 chunk edge")
    ap.add_argument("--gzip", type=int, default=1, help="gzip level of the dataset")
    ap.add_argument("--layout", default="multimap")
    ap.add_argument("--buffer", type=int, default=64, help="mmfs-import --buffer MiB")
    ap.add_argument("--keep", action="store_true", help="keep the HDF5 file (it is slow to make)")
    ap.add_argument("--out", default=None, help="write the result as JSON here")
    args = ap.parse_args()

    shape = tuple(int(x) for x in args.shape.split(","))
    nbytes = int(np.prod(shape)) * 8
    os.makedirs(args.dir, exist_ok=True)
    h5 = os.path.join(args.dir, f"data-{'x'.join(map(str, shape))}-c{args.chunk}-gz{args.gzip}.h5")
    if not os.path.exists(h5):
        generate(h5, shape, args.chunk, args.gzip)
    drop = CacheDropper()
    work = tempfile.mkdtemp(prefix="run-", dir=args.dir)
    image, mnt = os.path.join(work, "vol.img"), os.path.join(work, "mnt")
    os.mkdir(mnt)
    size_gib = int(nbytes * 1.3 / GiB) + 2
    subprocess.run([os.path.join(args.build, "mkfs", "mkfs.mmfs"), "-s", f"{size_gib}G", "-g", "atlas10k3", image],
                   check=True, stdout=subprocess.DEVNULL)
    daemon = Daemon(os.path.join(args.build, "daemon", "mmfs"), image, mnt, "", os.path.join(work, "daemon.log"))
    result = {"shape": shape, "bytes": nbytes, "h5_file_bytes": os.path.getsize(h5), "chunk": args.chunk,
              "gzip": args.gzip, "layout": args.layout, "buffer_mib": args.buffer}
    try:
        daemon.mount()
        drop()
        imp = measured([os.path.join(args.build, "tools", "mmfs-import"), "--layout", args.layout,
                        "--buffer", str(args.buffer), "--no-progress", f"{h5}:/data", os.path.join(mnt, "data")])
        if imp["rc"] != 0:
            raise SystemExit(f"mmfs-import failed: {imp['stderr']}")
        result["import"] = {"seconds": imp["seconds"], "mb_per_s": nbytes / imp["seconds"] / 1e6,
                            "max_rss_mib": imp["max_rss_kib"] / 1024, "output": imp["stdout"].strip()}
        hwm = vm_hwm_kib(daemon.proc.pid)
        result["daemon_max_rss_mib"] = hwm / 1024 if hwm else None
        drop()
        rd = measured([sys.executable, "-c", H5PY_READ, h5])
        if rd["rc"] != 0:
            raise SystemExit(f"h5py read failed: {rd['stderr']}")
        result["h5py_read"] = {"seconds": rd["seconds"], "mb_per_s": nbytes / rd["seconds"] / 1e6,
                               "max_rss_mib": rd["max_rss_kib"] / 1024}
        want = rd["stdout"].strip()
        got = hash_file(os.path.join(mnt, "data"))
        result["equal"] = got == want
        result["cold_cache"] = drop.ok
    finally:
        daemon.unmount()
        subprocess.run(["rm", "-rf", work])
        if not args.keep:
            os.remove(h5)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0 if result.get("equal") else 1


if __name__ == "__main__":
    sys.exit(main())
