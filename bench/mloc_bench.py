#!/usr/bin/env python3
"""mmfs-bench mloc: the MLOC layout (paper 004) on the real clock, cold, side by side.

On the (1024,1024,256) float64 field of `mmfs-bench query` (make_field, seed
7) and on the S3D-like field of examples/s3d (temperature), in one run:

* ingest: `cat raw > A` + fsync into mloc (V-M-S and V-S-M, zstd) and into
  the default layout, beside h5py writing the same data chunked with zstd
  (hdf5plugin; gzip when it is missing), MB/s;
* storage: data + positions of the mloc image against the raw bytes, per byte group;
* region queries (`coords` of a > t, no box) at 1 % and 10 %, and `values` at
  1 %, beside a numpy scan of the raw file (np.fromfile + flatnonzero);
* value reads of a box of 1 % and 0.1 % of the array (no condition) on mloc,
  the default layout and h5py chunked;
* PLoD: A@/plod/3 against the full read, per priority (the paper's Table VII);
* the paper's Table VI: histogram error of 2-, 3- and 4-byte PLoD on the S3D field.

Cold means: the daemon remounted (its caches gone) and the kernel's caches
dropped before every timed read. Medians of --runs. Results are checked
against numpy on the same data.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_daemon import BenchError, CacheDropper, Daemon, log  # noqa: E402
from query_bench import make_field  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30


def parse_args(argv):
    p = argparse.ArgumentParser(prog="mmfs-bench mloc", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="1024,1024,256", help="the field's shape (default 1024,1024,256)")
    p.add_argument("--s3d-scale", type=float, default=0.5, help="examples/s3d/generate.py --scale (default 0.5: 256^3)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--zstd", type=int, default=3, help="zstd level (default 3)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--geometry", default="ssd")
    p.add_argument("--build", default=os.environ.get("MMFS_BUILD", os.path.join(REPO, "build")))
    p.add_argument("--scratch", default="/var/tmp")
    p.add_argument("--out", default=None, help="directory for mmfs-bench-mloc.json and .md")
    p.add_argument("--keep", action="store_true")
    a = p.parse_args(argv)
    a.shape = tuple(int(x) for x in a.shape.split(","))
    return a


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def write_file(path, raw_path, attrs=None, mloc_setup=None):
    """Creates `path`, sets the xattrs, copies raw_path into it and fsyncs. Seconds."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        for k, v in (attrs or {}).items():
            os.setxattr(path, "user.mmfs." + k, v.encode())
        t0 = time.perf_counter()
        with open(raw_path, "rb", buffering=0) as src:
            buf = bytearray(64 * MiB)
            view = memoryview(buf)
            while True:
                n = src.readinto(buf)
                if not n:
                    break
                off = 0
                while off < n:
                    off += os.write(fd, view[off:n])
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def read_path(path):
    with open(path, "rb", buffering=0) as f:
        return f.read()


def read_discard(path, piece=8 << 20):
    """A whole array or PLoD copy read as `cat A > /dev/null` reads it: in
    pieces into one reused buffer. (f.read() of 2 GiB made the kernel's
    request pattern, and the time, vary from run to run; a 2 GiB buffer
    filled in pieces costs the client more than the read.) Its bytes are
    checked by a separate, untimed read."""
    buf = bytearray(piece)
    n = 0
    with open(path, "rb", buffering=0) as f:
        while k := f.readinto(buf):
            n += k
    return n


class MlocBench:
    def __init__(self, a):
        self.a = a
        self.drop = CacheDropper()
        self.res = {"shape": list(a.shape), "runs": a.runs, "zstd": a.zstd, "geometry": a.geometry}
        self.work = tempfile.mkdtemp(dir=a.scratch, prefix="mmfs-bench-mloc-")
        self.mnt = os.path.join(self.work, "mnt")
        os.makedirs(self.mnt)
        bindir = os.path.join(self.work, "bin")
        os.makedirs(bindir)
        bins = {}
        for name, rel in (("mmfs", ("daemon", "mmfs")), ("mkfs.mmfs", ("mkfs", "mkfs.mmfs"))):
            src = os.path.join(a.build, *rel)
            if not os.access(src, os.X_OK):
                raise BenchError(f"{src} is not built")
            bins[name] = shutil.copy2(src, os.path.join(bindir, name))
        data = int(np.prod(a.shape)) * 8
        size = (8 * data + 4 * GiB) // MiB * MiB
        self.image = os.path.join(self.work, "mmfs.img")
        subprocess.run([bins["mkfs.mmfs"], "-q", "-f", "-s", str(size), "-g", a.geometry, self.image], check=True)
        self.daemon = Daemon(bins["mmfs"], self.image, self.mnt, "", os.path.join(self.work, "daemon.log"))
        self.daemon.mount()

    def cold(self):
        self.daemon.unmount()
        self.daemon.mount()
        self.drop()

    def timed(self, fn, check=None):
        """Median cold time of fn() over --runs; check(result) on the first."""
        times = []
        for i in range(self.a.runs):
            self.cold()
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
            if i == 0 and check is not None:
                check(out)
        return med(times)

    def device_bytes(self):
        st = json.loads(read_path(os.path.join(self.mnt, ".mmfs", "stats")))
        return st["sectors_read"] * st["sector_size"]

    def daemon_cpu(self):
        with open(f"/proc/{self.daemon.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def timed_io(self, fn, check=None):
        """As timed(), and the device bytes the daemon read and its CPU seconds (medians)."""
        times, moved, cpu = [], [], []
        for i in range(self.a.runs):
            self.cold()
            b0, c0 = self.device_bytes(), self.daemon_cpu()
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
            moved.append(self.device_bytes() - b0)
            cpu.append(self.daemon_cpu() - c0)
            if i == 0 and check is not None:
                check(out)
        return {"s": med(times), "device_bytes": med(moved), "daemon_cpu_s": med(cpu)}

    def cleanup(self):
        try:
            self.daemon.unmount()
        except Exception as e:  # noqa: BLE001
            log(f"WARNING: unmount failed: {e}")
        if not self.a.keep:
            shutil.rmtree(self.work, ignore_errors=True)

    # ------------------------------------------------------------------
    def field(self, name, arr, with_vsm):
        a = self.a
        r = {"shape": list(arr.shape), "bytes": arr.nbytes}
        raw = os.path.join(self.work, f"{name}.raw")
        arr.tofile(raw)
        shape = ",".join(map(str, arr.shape))
        files = {"mloc V-M-S": {"layout": "mloc", "priority": "V-M-S", "compress": f"zstd:{a.zstd}"},
                 "default": {}}
        if with_vsm:
            files["mloc V-S-M"] = {"layout": "mloc", "priority": "V-S-M", "compress": f"zstd:{a.zstd}"}
        paths = {}
        ingest = {}
        for label, attrs in files.items():
            path = os.path.join(self.mnt, f"{name}-{label.replace(' ', '_')}")
            self.drop()
            secs = write_file(path, raw, {"shape": shape, "dtype": "float64", **attrs})
            ingest[label] = arr.nbytes / secs / 1e6
            paths[label] = path
            log(f"{name}: ingest {label}: {ingest[label]:.1f} MB/s")
        # h5py chunked, compressed, on the scratch disk.
        import h5py
        try:
            import hdf5plugin
            comp = dict(hdf5plugin.Zstd(clevel=a.zstd))
            comp_name = f"zstd:{a.zstd} (hdf5plugin)"
        except ImportError:
            comp = {"compression": "gzip", "compression_opts": 4}
            comp_name = "gzip:4"
        h5path = os.path.join(self.work, f"{name}.h5")
        chunk = tuple(min(64, s) for s in arr.shape)
        self.drop()
        t0 = time.perf_counter()
        with h5py.File(h5path, "w") as f:
            f.create_dataset("a", data=arr, chunks=chunk, **comp)
        fd = os.open(h5path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        ingest[f"h5py chunked {comp_name}"] = arr.nbytes / (time.perf_counter() - t0) / 1e6
        r["ingest_MBps"] = ingest

        info = json.loads(read_path(paths["mloc V-M-S"] + "@/info"))
        m = info["mloc"]
        groups = [{"first_byte": g["first_byte"], "bytes": g["bytes"], "ratio": g["stored"] / g["raw"]}
                  for g in m["byte_groups"]]
        r["storage"] = {"device_bytes": info["device_bytes"]["data"], "raw": arr.nbytes,
                        "ratio": info["device_bytes"]["data"] / arr.nbytes,
                        "positions_ratio": m["positions"]["stored"] / arr.nbytes, "byte_groups": groups,
                        "bins": m["bins"], "chunk": info["chunk"]}
        log(f"{name}: storage {r['storage']['ratio']:.3f} of raw")

        flat = arr.ravel()
        times = {}
        for sel in (0.01, 0.10):
            t = float(np.quantile(flat[:: max(1, flat.size // 4_000_000)], 1 - sel))
            expect = np.flatnonzero(flat > t)
            cond = f">{t!r}"
            times[f"coords {sel:.0%}"] = {
                "mloc V-M-S": self.timed(lambda: read_path(f"{paths['mloc V-M-S']}@/query/{cond}/coords"),
                                         lambda out: self.check(np.frombuffer(out, "<u8"), expect, "coords")),
                "numpy scan": self.timed(lambda: np.flatnonzero(np.fromfile(raw) > t)),
                "selectivity": expect.size / flat.size}
            if sel == 0.01:
                times["values 1%"] = {
                    "mloc V-M-S": self.timed(lambda: read_path(f"{paths['mloc V-M-S']}@/query/{cond}/values"),
                                             lambda out: self.check(np.frombuffer(out, "<f8"), flat[expect], "values")),
                    "numpy scan": self.timed(lambda: (lambda x: x[x > t])(np.fromfile(raw)))}
            log(f"{name}: {sel:.0%} {times[f'coords {sel:.0%}']}")
        for frac in (0.01, 0.001):
            side = [max(1, int(round(s * frac ** (1 / arr.ndim)))) for s in arr.shape]
            lo = [(s - w) // 2 for s, w in zip(arr.shape, side)]
            sl = tuple(slice(l, l + w) for l, w in zip(lo, side))
            box = ",".join(f"{l}:{l + w}" for l, w in zip(lo, side))
            expect = np.ascontiguousarray(arr[sl])
            row = {}
            for label, path in paths.items():
                row[label] = self.timed(lambda: read_path(f"{path}@/box/{box}"),
                                        lambda out: self.check(np.frombuffer(out, "<f8"), expect.ravel(), "box"))

            def h5box():
                self.drop()
                with h5py.File(h5path, "r") as f:
                    return f["a"][sl]
            row["h5py chunked"] = self.timed(h5box, lambda out: self.check(out.ravel(), expect.ravel(), "h5 box"))
            row["box"] = box
            times[f"box {frac:.1%}"] = row
            log(f"{name}: box {frac:.1%} {row}")
        plod = {}
        for label, path in paths.items():
            # The default layout's full read: what reading the same bytes
            # through FUSE costs with no decoding at all (the floor of any
            # whole-array read, PLoD included, since a PLoD copy is as long).
            if label == "default":
                plod[label] = {"full": self.timed_io(lambda: read_discard(path))}
                continue
            plod[label] = {"plod/3": self.timed_io(lambda: read_discard(f"{path}@/plod/3")),
                           "full": self.timed_io(lambda: read_discard(path))}
            self.check(np.frombuffer(read_path(path), "<f8"), flat, "full")
            p3, full = plod[label]["plod/3"], plod[label]["full"]
            plod[label]["ratio"] = p3["s"] / full["s"]
            plod[label]["io_ratio"] = p3["device_bytes"] / full["device_bytes"]
            log(f"{name}: plod {label} {plod[label]}")
        times["plod"] = plod
        r["times_s"] = times
        # Table VI: histogram error of K-byte PLoD (equal-width 100 bins of the full data).
        edges = np.linspace(flat.min(), flat.max(), 101)
        full_bins = np.clip(np.searchsorted(edges, flat, side="right") - 1, 0, 99)
        hist = {}
        for k in (2, 3, 4):
            got = np.frombuffer(read_path(f"{paths['mloc V-M-S']}@/plod/{k}"), "<f8")
            kb = np.clip(np.searchsorted(edges, got, side="right") - 1, 0, 99)
            hist[f"{k} bytes"] = float(np.mean(kb != full_bins))
        r["histogram_error"] = hist
        log(f"{name}: histogram error {hist}")
        for p in paths.values():
            os.unlink(p)
        os.unlink(raw)
        os.unlink(h5path)
        return r

    def check(self, got, expect, what):
        if got.shape != expect.shape or not np.array_equal(got.view(np.uint8), expect.view(np.uint8)):
            raise BenchError(f"{what}: mmfs returned other bytes than numpy")


def report(res):
    L = ["# mmfs-bench mloc", "", f"Command: `{res['command']}`", "",
         "Cold: daemon remounted and kernel caches dropped before every timed read; medians of "
         f"{res['runs']} runs, seconds. zstd level {res['zstd']}, geometry `{res['geometry']}`. Whole-array "
         "and PLoD reads are 8 MiB reads into one buffer, as `cat A > /dev/null` does (their bytes are checked by "
         "a separate read); the other views are read in one call.", ""]
    for name, r in res["fields"].items():
        L += [f"## {name} {tuple(r['shape'])} float64 ({r['bytes'] / GiB:.2f} GiB)", ""]
        s = r["storage"]
        L += [f"Storage: data + positions = **{s['ratio']:.3f}** of raw (positions {s['positions_ratio']:.3f}); "
              f"{s['bins']} bins, chunk {s['chunk']}.", "", "| byte group | stored / raw |", "|---|---:|"]
        for g in s["byte_groups"]:
            L.append(f"| bytes {g['first_byte']}..{g['first_byte'] + g['bytes'] - 1} (MSB first) | {g['ratio']:.3f} |")
        L += ["", "| ingest | MB/s |", "|---|---:|"] + [f"| {k} | {v:.1f} |" for k, v in r["ingest_MBps"].items()]
        t = r["times_s"]
        L += ["", "| query (no box) | selectivity | mloc V-M-S | numpy scan | speed-up |", "|---|---:|---:|---:|---:|"]
        for k in ("coords 1%", "coords 10%"):
            q = t[k]
            L.append(f"| {k} | {q['selectivity']:.4f} | {q['mloc V-M-S']:.3f} | {q['numpy scan']:.3f} | "
                     f"{q['numpy scan'] / q['mloc V-M-S']:.1f}x |")
        q = t["values 1%"]
        L.append(f"| values 1% | | {q['mloc V-M-S']:.3f} | {q['numpy scan']:.3f} | {q['numpy scan'] / q['mloc V-M-S']:.1f}x |")
        labels = [k for k in t["box 1.0%"] if k != "box"]
        L += ["", "| box read | " + " | ".join(labels) + " | mloc / default |", "|---|" + "---:|" * (len(labels) + 1)]
        for k in ("box 1.0%", "box 0.1%"):
            row = t[k]
            L.append(f"| {k} `{row['box']}` | " + " | ".join(f"{row[x]:.3f}" for x in labels) +
                     f" | {row['mloc V-M-S'] / row['default']:.2f} |")
        L += ["", "| priority | plod/3 s | full s | plod/3 / full (time) | plod/3 MiB read | full MiB read | "
              "plod/3 / full (device bytes) | daemon CPU s plod/3, full |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for lab, p in t["plod"].items():
            if "plod/3" not in p:
                continue
            a, f = p["plod/3"], p["full"]
            L.append(f"| {lab} | {a['s']:.3f} | {f['s']:.3f} | {p['ratio']:.2f} | {a['device_bytes'] / MiB:.0f} | "
                     f"{f['device_bytes'] / MiB:.0f} | {p['io_ratio']:.2f} | {a['daemon_cpu_s']:.2f}, "
                     f"{f['daemon_cpu_s']:.2f} |")
        if "default" in t["plod"]:
            f = t["plod"]["default"]["full"]
            L += ["", f"The same bytes read whole from the default layout (no decoding; the floor of any whole-array "
                  f"read through FUSE, a PLoD copy being as long): {f['s']:.3f} s, daemon CPU {f['daemon_cpu_s']:.2f} s."]
        L += ["", "Histogram error of K-byte PLoD (Table VI; equal-width 100 bins of the full data): " +
              ", ".join(f"{k}: {v:.3e}" for k, v in r["histogram_error"].items()), ""]
    return "\n".join(L) + "\n"


def main(argv):
    a = parse_args(argv)
    b = MlocBench(a)
    res = b.res
    res["command"] = "mmfs-bench mloc " + " ".join(argv)
    res["fields"] = {}
    try:
        log("making the field")
        arr = make_field(a.shape, a.seed)
        res["fields"]["field"] = b.field("field", arr, with_vsm=True)
        del arr
        h5 = os.path.join(b.work, "s3d.h5")
        subprocess.run([sys.executable, os.path.join(REPO, "examples", "s3d", "generate.py"), h5, "--scale",
                        str(a.s3d_scale), "-q"], check=True)
        import h5py
        with h5py.File(h5, "r") as f:
            t = f["temperature"][...]
        os.unlink(h5)
        res["fields"]["s3d temperature"] = b.field("s3d", t, with_vsm=False)
    finally:
        b.cleanup()
    text = report(res)
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "mmfs-bench-mloc.json"), "w") as f:
            json.dump(res, f, indent=1)
        with open(os.path.join(a.out, "mmfs-bench-mloc.md"), "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BenchError as e:
        log(f"mmfs-bench mloc: {e}")
        sys.exit(1)
