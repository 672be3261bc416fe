"""One run of bench/mmfs_bench_real.py (`mmfs-bench real`): Bench checks the
tools, copies the binaries, builds (or with --reuse takes up) the image and
the baselines, builds the reference data, reads every mmfs plan, measures
every workload on every target with cold caches and verifies each result,
turns the timings into result rows and the JSON document, and removes what
it made."""
import datetime
import errno
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench_daemon_util import (GiB, MiB, BenchError, CacheDropper, fmt_bytes, log, read_json_file, run_cmd,
                               summary, write_all)
from mmfs_bench_real_targets import (BASELINES, MmfsDaemon, is_mounted, layout_attrs, read_h5, read_memmap,
                                     read_mmfs, read_zarr)
from mmfs_bench_real_workloads import data_slabs, grid_cells, make_workloads, np_index, plod_inplace, result_shape

try:
    import h5py
except ImportError:  # reported in check_tools()
    h5py = None
try:
    import zarr
except ImportError:
    zarr = None

VERIFY_BLOCK = 64 * MiB     # full-array results are compared in blocks of about this size
SCHEMA = "mmfs-bench-real/1"
MANIFEST_VERSION = 1


def json_head(schema, machine):
    """The first keys of a result document (here and in `mmfs-bench python`): its
    schema, the clock, the command line and the machine."""
    return {"schema": schema, "clock": "real", "command": shlex.join([sys.executable] + sys.argv),
            "machine": machine}


def mem_available():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


class Bench:
    def __init__(self, a):
        self.init_state(a)
        self.ref_in_ram = False
        self.cell = None
        d = a.dir
        self.image = os.path.join(d, "mmfs-real.img")
        self.files = {
            "h5py-contig": os.path.join(d, "contig.h5"),
            "h5py-chunked": os.path.join(d, "chunked.h5"),
            "zarr": os.path.join(d, "array.zarr"),
            "memmap": os.path.join(d, "array.raw"),
        }
        self.targets = [dict(name=f"mmfs-{lb}", kind="mmfs", layout=lb, label=lb,
                             description=f"mmfs, layout {lb}") for lb in a.layouts]
        self.targets += [dict(name=b, kind="baseline", layout=None, label=b, description=BASELINES[b])
                         for b in a.baselines]
        self.workloads = make_workloads(self.shape, a.beams, a.cubes, a.plod, a.workloads, a.seed)
        self.times = {}              # (workload id, target) -> [seconds per run]
        self.stats = {}              # (workload id, target) -> [daemon stats per run]
        self.errors = {}             # (workload id, target) -> message
        self.verified = {}           # (workload id, target) -> bool
        self.plans = {}              # (workload id, layout) -> modeled summary
        self.infos = {}

    def init_state(self, a):
        """What every run holds, this benchmark's and `mmfs-bench python`'s
        (python_bench_setup.PyBench, which calls only this of __init__)."""
        self.a = a
        self.shape = a.shape
        self.n = len(a.shape)
        self.nbytes = int(np.prod(self.shape)) * 8
        self.chunks = tuple(min(a.chunk, s) for s in self.shape)
        self.drop = CacheDropper()
        self.failures = []
        self.daemon = None
        self.mnt = None
        self.reused = False
        self.made_dir = not os.path.exists(a.dir)
        self.bindir = None
        self.ref = None
        self.setup = {}
        self.manifest = os.path.join(a.dir, "manifest.json")
        self.daemon_log = os.path.join(a.dir, "daemon.log")

    # paths ------------------------------------------------------------
    def arr(self, layout):
        return os.path.join(self.mnt, f"a-{layout}")

    def mmfs_path(self, layout, view):
        return self.arr(layout) if not view else f"{self.arr(layout)}@/{view}"

    # checks -----------------------------------------------------------
    def check_tools(self):
        a = self.a
        missing = []
        if h5py is None and any(b.startswith("h5py") for b in a.baselines):
            missing.append("h5py (pip install h5py)")
        if zarr is None and "zarr" in a.baselines:
            missing.append("zarr (pip install zarr)")
        if missing:
            raise BenchError("missing Python packages: " + ", ".join(missing))
        if zarr is not None and "zarr" in a.baselines and int(zarr.__version__.split(".")[0]) < 3:
            raise BenchError(f"zarr {zarr.__version__} is installed; zarr >= 3 is needed")
        if os.geteuid() != 0:
            log("WARNING: not root: dropping caches will fail and the daemon may not mount")
        if a.layouts:
            self.check_binaries()

    def check_binaries(self):
        """The daemon and mkfs.mmfs of --build, and fusermount3."""
        a = self.a
        self.mmfs_bin = os.path.join(a.build, "daemon", "mmfs")
        self.mkfs_bin = os.path.join(a.build, "mkfs", "mkfs.mmfs")
        for what, p in (("daemon", self.mmfs_bin), ("mkfs", self.mkfs_bin)):
            if not os.access(p, os.X_OK):
                raise BenchError(f"the mmfs {what} binary {p} is missing or not executable; build it "
                                 f"(meson compile -C {a.build}), pass --build DIR or set $MMFS_BUILD")
        if shutil.which("fusermount3") is None:
            raise BenchError("fusermount3 is not installed (apt-get install fuse3)")

    def copy_binaries(self):
        """Private copies of the daemon and mkfs in --dir/bin: a rebuild of the build
        directory during the run (relinking makes the binary briefly unexecutable)
        must not break the remounts nor change what is measured."""
        import hashlib
        bindir = os.path.join(self.a.dir, "bin")
        os.makedirs(bindir, exist_ok=True)
        self.bindir = bindir
        info = {}
        for attr, name in (("mmfs_bin", "mmfs"), ("mkfs_bin", "mkfs.mmfs")):
            src = getattr(self, attr)
            dst = os.path.join(bindir, name)
            for attempt in range(20):
                try:
                    shutil.copy2(src, dst)
                    ok = subprocess.run([dst, "--help"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        timeout=30).returncode == 0
                except OSError:
                    ok = False
                if ok:
                    break
                time.sleep(3)  # being relinked
            else:
                raise BenchError(f"{src} does not run (being rebuilt?)")
            with open(dst, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()[:16]
            info[name] = {"source": src, "sha256_16": digest,
                          "mtime": datetime.datetime.fromtimestamp(os.stat(src).st_mtime).astimezone()
                          .isoformat(timespec="seconds")}
            setattr(self, attr, dst)
        self.setup["binaries"] = info

    def image_size(self):
        # multimap pads basic cubes; 1.6x per array plus room for metadata is plenty (sparse file)
        # (an array with copies counts once per placement)
        def placements_of(lb):
            copies = layout_attrs(lb).get("copies", "none")
            return 1 + (0 if copies == "none" else len(copies.split(";")))
        placements = sum(placements_of(lb) for lb in self.a.layouts)
        size = int(self.nbytes * placements * 1.6) + 512 * MiB
        size = max(size, GiB)
        return (size + 64 * MiB - 1) // (64 * MiB) * (64 * MiB)

    def check_space(self):
        need = self.nbytes * (len(self.a.baselines) * 1.05 + len(self.a.layouts) * 1.4) + 128 * MiB
        free = shutil.disk_usage(self.a.dir).free
        if free < need:
            raise BenchError(f"{self.a.dir}: {fmt_bytes(free)} free, about {fmt_bytes(int(need))} needed")

    # setup ------------------------------------------------------------
    def manifest_wanted(self):
        return {"version": MANIFEST_VERSION, "shape": list(self.shape), "seed": self.a.seed,
                "geometry": self.a.geometry, "chunks": list(self.chunks)}

    def try_reuse(self):
        if not self.a.reuse:
            return False
        m, err = read_json_file(self.manifest)
        if m is None:
            log(f"--reuse: no usable manifest in {self.a.dir} ({err}); building the data")
            return False
        want = self.manifest_wanted()
        diff = [k for k in want if m.get(k) != want[k]]
        if diff:
            log(f"--reuse: the kept data differs in {', '.join(diff)}; building it again")
            return False
        lacks = self.kept_data_lacks(m)
        if lacks:
            log(f"--reuse: {lacks}")
            return False
        if not all(os.path.exists(p) for p in self.kept_files()):
            log("--reuse: some kept files are missing; building the data again")
            return False
        log(f"--reuse: taking up the data kept in {self.a.dir}")
        self.setup["reused_from"] = m.get("date")
        self.setup["ingest_s"] = m.get("ingest_s")
        self.setup["image_bytes"] = m.get("image_bytes")
        return True

    def reuse_or_build(self):
        """The data: taken up with --reuse when it can be (not mounted: the caller
        mounts what it reads), else built (the build's time in setup["build_s"]).
        Returns self.reused."""
        self.reused = self.try_reuse()
        if not self.reused:
            self.check_space()
            t0 = time.perf_counter()
            self.build_data()
            self.setup["build_s"] = time.perf_counter() - t0
        return self.reused

    def kept_data_lacks(self, m):
        """What the kept data of manifest `m` (which matches manifest_wanted) lacks for this run, or None."""
        if not set(self.a.layouts) <= set(m.get("layouts", [])) or not set(self.a.baselines) <= set(
                m.get("baselines", [])):
            return "the kept data lacks some layouts or baselines; building it again"
        return None

    def kept_files(self):
        """The files a --reuse takes up."""
        return [self.files[b] for b in self.a.baselines] + ([self.image] if self.a.layouts else [])

    def write_manifest(self, **extra):
        """--keep: the manifest a --reuse compares, manifest_wanted() with `extra` and the date."""
        m = self.manifest_wanted()
        m.update(extra, date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"))
        with open(self.manifest, "w") as f:
            json.dump(m, f, indent=1)

    def remove_data(self):
        for p in [self.manifest, self.image] + list(self.files.values()):
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            elif os.path.exists(p):
                os.unlink(p)

    def mount(self):
        self.mnt = tempfile.mkdtemp(prefix="mnt-", dir=self.a.dir)
        self.daemon = MmfsDaemon(self.mmfs_bin, self.image, self.mnt, self.a.mount_options, self.daemon_log)
        self.daemon.mount()

    def remount(self):
        self.daemon.unmount()
        self.force_unmount()
        self.daemon.mount()

    def force_unmount(self):
        """A mount left behind (e.g. by a daemon that died): fusermount3 -u, then -uz."""
        if not self.mnt or not is_mounted(self.mnt):
            return
        log(f"WARNING: {self.mnt} still mounted; fusermount3 -u")
        subprocess.run(["fusermount3", "-u", self.mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-uz", self.mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def make_image(self):
        """A sparse image of image_size() made by mkfs.mmfs -g --geometry, then mounted; returns its size."""
        a = self.a
        size = self.image_size()
        log(f"mkfs.mmfs -g {a.geometry} -s {size} {self.image}")
        p = run_cmd([self.mkfs_bin, "-f", "-s", str(size), "-g", a.geometry, self.image])
        self.setup["mkfs_output"] = p.stdout.strip()
        self.setup["image_bytes"] = size
        self.mount()
        return size

    def build_data(self):
        a = self.a
        self.remove_data()
        ingest = {}
        fds = {}
        self.setup["image_bytes"] = None
        if a.layouts:
            self.make_image()
            shape_x = ",".join(map(str, self.shape)).encode()
            for lb in a.layouts:
                path = self.arr(lb)
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                try:
                    for k, v in layout_attrs(lb).items():
                        os.setxattr(path, f"user.mmfs.{k}", v.encode())
                    os.setxattr(path, "user.mmfs.shape", shape_x)
                except OSError as e:
                    raise BenchError(f"setting the schema of {path} (layout {lb}) failed: {e.strerror}; "
                                     f".mmfs/errors: {self.mmfs_errors()}")
                st = os.stat(path)
                if st.st_size != self.nbytes:
                    raise BenchError(f"{path}: st_size {st.st_size} after setting the shape, expected {self.nbytes}")
                fds[lb] = os.open(path, os.O_WRONLY)
        h5 = {}
        z = None
        raw = None
        try:
            for b in a.baselines:
                ingest[b] = 0.0
            if "h5py-contig" in a.baselines:
                f = h5py.File(self.files["h5py-contig"], "w")
                h5["h5py-contig"] = (f, f.create_dataset("a", shape=self.shape, dtype="<f8"))
            if "h5py-chunked" in a.baselines:
                f = h5py.File(self.files["h5py-chunked"], "w")
                h5["h5py-chunked"] = (f, f.create_dataset("a", shape=self.shape, dtype="<f8", chunks=self.chunks))
            if "zarr" in a.baselines:
                z = zarr.create_array(store=self.files["zarr"], shape=self.shape, dtype="<f8", chunks=self.chunks,
                                      compressors=None, filters=None, fill_value=0.0, overwrite=True)
            if "memmap" in a.baselines:
                raw = os.open(self.files["memmap"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            row_bytes = self.nbytes // self.shape[0]
            for lb in fds:
                ingest[f"mmfs-{lb}"] = 0.0
            log(f"writing {fmt_bytes(self.nbytes)} into {len(fds)} mmfs array(s) and {len(a.baselines)} baseline(s)")
            t_all = time.perf_counter()
            for r0, slab in data_slabs(self.shape, self.chunks[0], a.seed):
                buf = slab.tobytes()
                r1 = r0 + slab.shape[0]
                for lb, fd in fds.items():
                    t0 = time.perf_counter()
                    write_all(fd, buf, r0 * row_bytes)
                    ingest[f"mmfs-{lb}"] += time.perf_counter() - t0
                for b, (_, ds) in h5.items():
                    t0 = time.perf_counter()
                    ds[r0:r1] = slab
                    ingest[b] += time.perf_counter() - t0
                if z is not None:
                    t0 = time.perf_counter()
                    z[r0:r1] = slab
                    ingest["zarr"] += time.perf_counter() - t0
                if raw is not None:
                    t0 = time.perf_counter()
                    write_all(raw, buf, r0 * row_bytes)
                    ingest["memmap"] += time.perf_counter() - t0
            synced = {}
            for lb, fd in fds.items():
                t0 = time.perf_counter()
                os.fsync(fd)
                synced[lb] = time.perf_counter()
                ingest[f"mmfs-{lb}"] += synced[lb] - t0
            for b, (f, _) in h5.items():
                t0 = time.perf_counter()
                f.close()
                fd = os.open(self.files[b], os.O_RDONLY)
                os.fsync(fd)
                os.close(fd)
                ingest[b] += time.perf_counter() - t0
            h5 = {}
            if raw is not None:
                t0 = time.perf_counter()
                os.fsync(raw)
                ingest["memmap"] += time.perf_counter() - t0
            if z is not None:
                t0 = time.perf_counter()
                os.sync()  # zarr writes one file per chunk
                ingest["zarr"] += time.perf_counter() - t0
            log(f"written in {time.perf_counter() - t_all:.1f} s")
            # Arrays with copies: the primary is durable at fsync; the copies
            # catch up in the background after it. Wait for them (they must
            # serve the views) and time it.
            for lb in fds:
                if "copies" in layout_attrs(lb):
                    self.setup.setdefault("copies_catch_up_s", {})[f"mmfs-{lb}"] = \
                        self.wait_copies_current(lb) - synced[lb]
        finally:
            for fd in fds.values():
                os.close(fd)
            for f, _ in h5.values():
                f.close()
            if raw is not None:
                os.close(raw)
        self.setup["ingest_s"] = ingest
        if a.keep:
            self.write_manifest(layouts=list(a.layouts), baselines=list(a.baselines), ingest_s=ingest,
                                image_bytes=self.setup["image_bytes"])

    def wait_copies_current(self, lb, timeout=3600.0):
        """Waits until every copy of array `lb` is current (A@/info); returns the time then."""
        deadline = time.perf_counter() + timeout
        while True:
            with open(self.arr(lb) + "@/info") as f:
                info = json.load(f)
            if all(c["state"] == "current" for c in info.get("copies", [])):
                return time.perf_counter()
            if time.perf_counter() > deadline:
                raise BenchError(f"{self.arr(lb)}: copies still behind after {timeout:.0f} s: {info.get('copies')}")
            time.sleep(0.05)

    def mmfs_errors(self):
        try:
            with open(os.path.join(self.mnt, ".mmfs", "errors")) as f:
                return f.read().strip().splitlines()[-3:]
        except (OSError, TypeError):
            return "(unreadable)"

    def build_reference(self):
        """The generated data in RAM when it fits; else the raw file (checked
        against the generator here) through a memmap."""
        if self.nbytes <= mem_available() // 4 or "memmap" not in self.a.baselines:
            if self.nbytes > mem_available() // 2:
                raise BenchError(f"the array ({fmt_bytes(self.nbytes)}) does not fit in memory for the reference; "
                                 f"keep the memmap baseline (the raw file then serves as the reference)")
            log("generating the reference in memory")
            self.ref = np.empty(self.shape, dtype="<f8")
            for r0, slab in data_slabs(self.shape, self.chunks[0], self.a.seed):
                self.ref[r0:r0 + slab.shape[0]] = slab
            self.ref_in_ram = True
            return
        log("checking the raw file against the generator (it is the reference)")
        mm = np.memmap(self.files["memmap"], dtype="<f8", mode="r", shape=self.shape)
        for r0, slab in data_slabs(self.shape, self.chunks[0], self.a.seed):
            if not np.array_equal(mm[r0:r0 + slab.shape[0]].view("<u8"), slab.view("<u8")):
                raise BenchError(f"{self.files['memmap']}: rows {r0}.. differ from the generated data")
        self.ref = mm

    def read_plans(self):
        for lb in self.a.layouts:
            info, err = read_json_file(self.arr(lb) + "@/info")
            self.infos[lb] = info if info is not None else {"error": err}
            for w in self.workloads:
                per = []
                err = None
                for view, sel in zip(w["plans"], w["sels"]):
                    plan, e = read_json_file(f"{self.arr(lb)}@/plan/{view}")
                    if plan is None:
                        err = f"plan/{view}: {e}"
                        break
                    per.append(plan)
                if err:
                    self.plans[(w["id"], lb)] = {"error": err}
                    self.failures.append(f"mmfs-{lb} {w['id']}: {err}")
                    log("ERROR: " + self.failures[-1])
                    continue
                keys = ("modeled_ms", "bytes_read", "bytes_useful", "requests", "cells")
                s = {k: statistics.fmean(float(p.get(k) or 0) for p in per) for k in keys}
                # A geometry that knows the machine's costs (a measured one):
                # modeled_ms is the whole read, device_ms the device's part.
                for k in ("device_ms", "host_ms"):
                    if all(k in p for p in per):
                        s[k] = statistics.fmean(float(p[k]) for p in per)
                s["batches"] = statistics.fmean(len(p.get("batches") or []) for p in per)
                s["reads"] = len(per)
                self.plans[(w["id"], lb)] = s
                # the view's size must be the selection's
                for view in w["mmfs"]:
                    st = os.stat(self.mmfs_path(lb, view))
                    if st.st_size != w["bytes"]:
                        raise BenchError(f"{self.mmfs_path(lb, view)}: st_size {st.st_size}, expected {w['bytes']}")

    # measurement ------------------------------------------------------
    def verify(self, got, sel, plod):
        """True when `got` equals the reference's selection (after PLoD)."""
        shape = result_shape(sel, self.shape)
        if got.size != int(np.prod(shape)):
            return False
        got = got.reshape(shape)
        if all(x is None for x in sel):  # the whole array: in blocks of rows
            rows = max(1, VERIFY_BLOCK // (self.nbytes // self.shape[0]))
            for r0 in range(0, self.shape[0], rows):
                exp = np.array(self.ref[r0:r0 + rows])
                if plod:
                    plod_inplace(exp, plod)
                if not np.array_equal(got[r0:r0 + rows].view("<u8"), exp.view("<u8")):
                    return False
            return True
        exp = np.array(self.ref[np_index(sel)])
        if plod:
            plod_inplace(exp, plod)
        # ravel: a point is a 0-d array (or a numpy scalar from h5py)
        return np.array_equal(np.ascontiguousarray(got).ravel().view("<u8"), exp.ravel().view("<u8"))

    def timed_read(self, t, w, i):
        sel = w["sels"][i]
        if t["kind"] == "mmfs":
            if self.a.remount:
                self.remount()
            self.drop()
            path = self.mmfs_path(t["layout"], w["mmfs"][i])
            dt, got = read_mmfs(path, w["bytes"])
            return dt, got
        self.drop()
        idx = np_index(sel)
        b = t["name"]
        if b.startswith("h5py"):
            return read_h5(self.files[b], idx, w["plod"])
        if b == "zarr":
            return read_zarr(self.files[b], idx, w["plod"])
        return read_memmap(self.files[b], idx, w["plod"], self.shape)

    def measure(self):
        a = self.a
        nt = len(self.targets)
        for run in range(a.runs):
            log(f"--- run {run + 1}/{a.runs}")
            # rotate the target order from run to run, so no target always follows the same one
            order = self.targets[run % nt:] + self.targets[:run % nt]
            for w in self.workloads:
                for t in order:
                    key = (w["id"], t["name"])
                    if key in self.errors:
                        continue
                    per_read = []
                    stats = []
                    try:
                        for i in range(len(w["sels"])):
                            dt, got = self.timed_read(t, w, i)
                            if t["kind"] == "mmfs" and a.remount:
                                stats.append(read_json_file(os.path.join(self.mnt, ".mmfs", "stats"))[0])
                            ok = self.verify(got, w["sels"][i], w["plod"])
                            del got
                            if not ok:
                                self.verified[key] = False
                                msg = (f"{t['name']} {w['id']}: WRONG RESULT for "
                                       f"{w['mmfs'][i] if t['kind'] == 'mmfs' else w['numpy'][i]}")
                                if msg not in self.failures:
                                    self.failures.append(msg)
                                log(msg)
                            per_read.append(dt)
                    except (OSError, BenchError) as e:
                        if isinstance(e, OSError):
                            msg = (f"{t['name']} {w['id']}: {e.strerror or e} "
                                   f"({errno.errorcode.get(e.errno, e.errno)})")
                        else:
                            msg = f"{t['name']} {w['id']}: {e}"
                        if t["kind"] == "mmfs" and self.mnt:
                            msg += f"; .mmfs/errors: {self.mmfs_errors()}"
                        self.errors[key] = msg
                        self.failures.append(msg)
                        log("ERROR: " + msg)
                        if t["kind"] == "mmfs" and self.daemon is not None and self.daemon.proc is not None \
                                and self.daemon.proc.poll() is not None:
                            log("the daemon died; mounting again")
                            self.remount()
                        continue
                    self.verified.setdefault(key, True)
                    self.times.setdefault(key, []).append(statistics.fmean(per_read))
                    if stats:
                        self.stats.setdefault(key, []).append(stats)
                    log(f"{w['id']:>14} {t['name']:>13}: {statistics.fmean(per_read) * 1e3:9.2f} ms"
                        + ("" if len(per_read) == 1 else f" (mean of {len(per_read)} reads)"))

    # results ----------------------------------------------------------
    def ref_cell(self):
        """The cell of "ms per cell": the mmfs cell of the naive array (the daemon's
        default brick), as `mmfs-bench modeled` counts; one element without mmfs."""
        for lb in (["naive"] if "naive" in self.a.layouts else []) + list(self.a.layouts):
            cell = (self.infos.get(lb) or {}).get("cell")
            if isinstance(cell, list) and len(cell) == self.n:
                return [int(c) for c in cell]
        return [1] * self.n

    def results(self):
        rows = []
        cell = self.ref_cell()
        self.cell = cell
        for w in self.workloads:
            w["cells"] = statistics.fmean(grid_cells(x, self.shape, cell) for x in w["sels"])
            meds = {}
            for t in self.targets:
                s = self.times.get((w["id"], t["name"]))
                if s and (w["id"], t["name"]) not in self.errors and self.verified.get((w["id"], t["name"])):
                    meds[t["name"]] = statistics.median(s)
            base = {b: m for b, m in meds.items() if b in self.a.baselines}
            best = min(base, key=base.get) if base else None
            for t in self.targets:
                key = (w["id"], t["name"])
                secs = self.times.get(key, [])
                ms = summary([x * 1e3 for x in secs])
                cells = w["cells"]
                row = dict(workload=w["id"], kind=w["kind"], dim=w["dim"], p=w["p"], plod=w["plod"],
                           target=t["name"], target_kind=t["kind"], layout=t["layout"], clock="real",
                           elements=w["elements"], bytes=w["bytes"], reads=len(w["sels"]), ref_cells=cells,
                           ms=ms,
                           ms_per_cell=summary([x * 1e3 / cells for x in secs]),
                           us_per_element=summary([x * 1e6 / w["elements"] for x in secs]),
                           verified=bool(secs) and self.verified.get(key, False) and key not in self.errors,
                           error=self.errors.get(key),
                           best_baseline=best,
                           ratio_vs_best_baseline=(base[best] / meds[t["name"]]
                                                   if best and t["name"] in meds and meds[t["name"]] > 0 else None),
                           modeled=None)
                if t["kind"] == "mmfs":
                    plan = self.plans.get((w["id"], t["layout"]))
                    if plan is not None:
                        row["modeled"] = dict(plan)
                        if "modeled_ms" in plan:
                            row["modeled"]["us_per_element"] = plan["modeled_ms"] * 1e3 / w["elements"]
                            row["modeled"]["ms_per_cell"] = plan["modeled_ms"] / cells
                    st = self.stats.get(key)
                    if st:
                        row["daemon_stats"] = st
                        # The device's own clock for the read (fresh mount:
                        # the counters hold only this read's batches).
                        busy = [statistics.fmean(float(x.get("device_busy_ms", 0)) for x in run) for run in st]
                        row["device_ms"] = summary(busy)
                rows.append(row)
        # The host part of a cold read, per layout (see the point workload),
        # beside each view's modeled device time: only where the geometry's
        # model has no host part of its own.
        for lb in self.a.layouts:
            pt = next((r for r in rows if r["workload"] == "point" and r["target"] == f"mmfs-{lb}"), None)
            pm = ((pt or {}).get("modeled") or {}).get("modeled_ms")
            if not pt or not pt["ms"] or pm is None or "device_ms" in pt["modeled"]:
                continue
            host = max(0.0, pt["ms"]["median"] - pm)
            for r in rows:
                if r["target"] == f"mmfs-{lb}" and r["modeled"] and r["modeled"].get("modeled_ms") is not None:
                    r["modeled"]["run_host_ms"] = host
                    r["modeled"]["modeled_plus_host_ms"] = r["modeled"]["modeled_ms"] + host
        return rows

    def to_json(self, machine, rows):
        a = self.a
        return json_head(SCHEMA, machine) | {
            "config": {"shape": list(self.shape), "dtype": "float64", "bytes": self.nbytes,
                       "geometry": a.geometry, "layouts": a.layouts, "baselines": a.baselines,
                       "runs": a.runs, "beams": a.beams, "cubes": a.cubes, "plod": a.plod, "seed": a.seed,
                       "chunks": list(self.chunks), "dir": a.dir, "mount_options": a.mount_options,
                       "quick": a.quick, "cell": self.cell,
                       "cell_definition": "ms_per_cell = time / cells of the mmfs grid (the cell of the naive "
                                          "array's A@/info, the daemon's default; one element without mmfs "
                                          "arrays) the selection touches, as mmfs-bench modeled counts",
                       "cube_definition": "p%-length cube (MultiMap §5.2): edge_d = max(1, round(p/100 * S_d)) "
                                          "along every dimension, corner uniform among the positions where it "
                                          "fits"},
            "cold_cache": {"drop_caches": self.drop.ok, "error": self.drop.error, "remount_mmfs": a.remount},
            "setup": dict(self.setup, reference="generated, in memory" if self.ref_in_ram else "the raw file"),
            "arrays": self.infos,
            "targets": self.targets,
            "workloads": [{k: v for k, v in w.items() if k != "sels"} | {"sels": [list(s) for s in w["sels"]]}
                          for w in self.workloads],
            "results": rows,
            "failures": self.failures,
        }

    # cleanup ----------------------------------------------------------
    def cleanup(self):
        if self.daemon is not None:
            try:
                self.daemon.unmount()
            except Exception as e:  # keep cleaning up
                log(f"WARNING: unmount failed: {e}")
            self.force_unmount()
        if self.mnt and os.path.isdir(self.mnt) and not is_mounted(self.mnt):
            try:
                os.rmdir(self.mnt)
            except OSError as e:
                log(f"WARNING: cannot remove {self.mnt}: {e.strerror}")
        if self.mnt and is_mounted(self.mnt):
            log(f"WARNING: {self.mnt} is still mounted")
        if self.bindir:
            shutil.rmtree(self.bindir, ignore_errors=True)
        if not self.a.keep:
            try:
                self.remove_data()
            except OSError as e:
                log(f"WARNING: cannot remove the data: {e}")
            if not self.failures and os.path.exists(self.daemon_log):
                os.unlink(self.daemon_log)
            if self.made_dir:
                try:
                    os.rmdir(self.a.dir)  # only when empty
                except OSError:
                    pass
