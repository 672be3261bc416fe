#!/usr/bin/env python3
"""mmfs-bench real: the benchmark workloads (docs/reference.md §8) on the real clock
with cold caches, against every mmfs layout and four baselines on the same disk.

Setup (in --dir, on the disk under test):

* one image formatted by mkfs.mmfs (--geometry, default atlas10k3), mounted
  with the daemon, holding one array file per layout (--layouts; created with
  setxattr user.mmfs.layout, then user.mmfs.shape);
* the same data as an HDF5 file with a contiguous dataset, an HDF5 file with a
  chunked dataset (--chunk edges, default 64 per dim clipped to the dims,
  uncompressed), a zarr v3 array (same chunks, no compressors, no filters, a
  local directory store) and a raw C-order file read with numpy.memmap.

The data: float64 standard normals from numpy.random.default_rng(--seed),
generated slab by slab along dim 0 (slabs of one chunk row) and written to
every target. With --keep the files stay (with a manifest) and --reuse takes
them up again when shape, seed, geometry, chunks and layouts match.

Workloads (S = shape, n = len(S), M_d = S_d // 2):

* beamD   -- the n-1 other coordinates fixed, all of dim D; --beams fixed
             random positions per dim (seeded), the same for every target;
             each beam is a separate cold read, the workload's time is the
             mean over the positions;
* sliceD  -- the middle hyperplane x_D = M_D;
* cubeP   -- a p%-length cube (the MultiMap paper's definition): edge_d =
             max(1, round(p/100 * S_d)) along every dim, the corner drawn
             uniformly (seeded) so that the cube fits; --cubes lists the p;
* full    -- the whole array (mmfs: plain reads of the array file);
* point   -- one element at --beams random positions (seeded), each its
             own cold read: what every cold read pays besides its data (the
             fresh mount's lookups, the open, the first use of an array, a
             READ round trip; for the baselines, opening the file or store);
             the report adds an mmfs layout's host part (its point's real
             time less the point's modeled_ms) to its views' modeled_ms
             (model + host) beside the real time;
* plodK   -- PLoD reads keeping the K (--plod) most significant bytes of
             each element: of the whole array (mmfs `A@/plod/K`) and of the
             middle slice along dim 0 (`A@/plod/K@/slice/0/M_0`). Baselines
             read the same elements and drop the low bytes in numpy (the
             dropped bytes are filled as docs/reference.md §5 says). mmfs reads the whole
             elements from the device today: byte planes come with MLOC.

How targets are read: mmfs through the views (`A@/box/SEL`, `A@/slice/D/I`,
`A@/plod/...`) and the array file itself, with 8 MiB os.readv calls into one
buffer; h5py by `h5py.File(...)["a"][SEL]`; zarr by `zarr.open_array(...)[SEL]`;
the raw file by `np.array(np.memmap(...)[SEL])`. Each timing covers opening
the file/store, the read and the close.

Cold caches (the default): before EVERY timed read `sync; echo 3 >
/proc/sys/vm/drop_caches`, and before every mmfs read the daemon is also
unmounted and mounted again (its chunk cache is not dropped otherwise; the
remount comes first, then the cache drop). --no-remount keeps the daemon up;
if dropping caches is not permitted the run goes on and the report and the
JSON say that the numbers are not cold-cache.

Modeled clock: for every mmfs workload `A@/plan/VIEW` gives modeled_ms (the
volume's geometry model, idle device), bytes_read, bytes_useful, requests.

Every result is compared with the reference (the generated data, in RAM when
it fits in a quarter of the available memory, else the raw file checked
against the generator first); a mismatch or a read error fails the run
(exit 1) after the report is written.

Output: PREFIX.md (machine, command, setup, method, tables), PREFIX.json and
PNG plots PREFIX-beams.png, PREFIX-slices.png, PREFIX-cubes.png,
PREFIX-scans.png (drawn by this script).

Always unmounts and removes what it created (the image, the baselines) unless
--keep, also on errors and SIGTERM/SIGINT.

Usage (as root, from the repository root, after `meson compile -C build`):

  python3 bench/mmfs_bench_real.py                                    # 1024x1024x256, all layouts, 3 runs
  python3 bench/mmfs_bench_real.py --shape 512,512,256 --runs 3 --out /tmp/real-512
  python3 bench/mmfs_bench_real.py --quick --out /tmp/real-quick         # smoke run, seconds
  mmfs-bench real ARGS                                          # the same, through mmfs-bench
"""
import argparse
import datetime
import errno
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_daemon import (BenchError, CacheDropper, Daemon, fmt_bytes, fmt_num,  # noqa: E402
                          log, machine_info, read_json_file, run_cmd, summary, write_all)

try:
    import h5py
except ImportError:  # reported in check_tools()
    h5py = None
try:
    import zarr
except ImportError:
    zarr = None

MiB = 1 << 20
GiB = 1 << 30
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READ_CHUNK = 8 * MiB        # os.readv size for mmfs reads
VERIFY_BLOCK = 64 * MiB     # full-array results are compared in blocks of about this size
SCHEMA = "mmfs-bench-real/1"
MANIFEST_VERSION = 1
LAYOUTS = ["naive", "zorder", "hilbert", "multimap"]
BASELINES = {
    "h5py-contig": "h5py, contiguous dataset",
    "h5py-chunked": "h5py, chunked dataset, uncompressed",
    "zarr": "zarr v3, local store, no compressors",
    "memmap": "raw file, numpy.memmap",
}
KINDS = ["beam", "slice", "cube", "full", "plod", "point"]


# --------------------------------------------------------------------------
# data and selections


def data_slabs(shape, rows, seed):
    """Deterministic data: (row0, ndarray) slabs of `rows` rows along dim 0."""
    rng = np.random.default_rng(seed)
    for r0 in range(0, shape[0], rows):
        n = min(rows, shape[0] - r0)
        yield r0, rng.standard_normal((n,) + tuple(shape[1:]))


def np_index(sel):
    """Selection items: None (all), int (fixed, dim dropped), (a, b) (half-open)."""
    return tuple(slice(None) if x is None else (slice(*x) if isinstance(x, tuple) else x) for x in sel)


def result_shape(sel, shape):
    out = []
    for x, s in zip(sel, shape):
        if x is None:
            out.append(s)
        elif isinstance(x, tuple):
            out.append(x[1] - x[0])
    return tuple(out)


def grid_cells(sel, shape, cell):
    """Cells of the grid `cell` (elements per dim) the selection touches."""
    n = 1
    for x, s, c in zip(sel, shape, cell):
        if x is None:
            n *= -(-s // c)
        elif isinstance(x, tuple):
            n *= (x[1] - 1) // c - x[0] // c + 1
    return n


def box_spelling(sel):
    return ",".join(":" if x is None else (f"{x[0]}:{x[1]}" if isinstance(x, tuple) else str(x)) for x in sel)


def numpy_spelling(sel):
    return "a[" + box_spelling(sel) + "]"


def plod_inplace(arr, k):
    """docs/reference.md §5 PLoD on a little-endian float64 array, in place: keep the k most
    significant bytes of every element; the most significant dropped byte
    becomes 0x7F, the others 0xFF (MLOC's fill)."""
    drop = 8 - k
    if drop <= 0:
        return arr
    u = arr.view("<u8")
    keep = np.uint64(((1 << 64) - 1) ^ ((1 << (8 * drop)) - 1))
    fill = np.uint64((0x7F << (8 * (drop - 1))) | ((1 << (8 * (drop - 1))) - 1))
    np.bitwise_and(u, keep, out=u)
    np.bitwise_or(u, fill, out=u)
    return arr


def pct_label(p):
    return f"{p:g}"


def make_workloads(shape, beams, cubes, plod, kinds, seed):
    """The workload list (see the module doc). Every entry: id, kind, dim, p,
    plod, sels (one per cold read), mmfs (view path per read, '' = the array
    file itself), plans (plan view per read), elements (per read)."""
    rng = np.random.default_rng(seed + 1)
    n = len(shape)
    mid = [s // 2 for s in shape]
    out = []
    if "beam" in kinds:
        for d in range(n):
            sels = []
            for _ in range(beams):
                sel = [int(rng.integers(0, s)) for s in shape]
                sel[d] = None
                sels.append(tuple(sel))
            views = ["box/" + box_spelling(s) for s in sels]
            out.append(dict(id=f"beam{d}", kind="beam", dim=d, p=None, plod=None, sels=sels, mmfs=views,
                            plans=views, elements=shape[d],
                            what=f"beam along dim {d}, {beams} fixed random position(s)"))
    if "slice" in kinds:
        for d in range(n):
            sel = [None] * n
            sel[d] = mid[d]
            v = f"slice/{d}/{mid[d]}"
            out.append(dict(id=f"slice{d}", kind="slice", dim=d, p=None, plod=None, sels=[tuple(sel)], mmfs=[v],
                            plans=[v], elements=int(np.prod(shape)) // shape[d],
                            what=f"middle slice x{d} = {mid[d]}"))
    if "cube" in kinds:
        for p in cubes:
            edge = [max(1, min(s, round(p / 100.0 * s))) for s in shape]
            corner = [int(rng.integers(0, s - e + 1)) for s, e in zip(shape, edge)]
            sel = tuple((c, c + e) for c, e in zip(corner, edge))
            v = "box/" + box_spelling(sel)
            out.append(dict(id=f"cube{pct_label(p)}", kind="cube", dim=None, p=p, plod=None, sels=[sel], mmfs=[v],
                            plans=[v], elements=int(np.prod(edge)),
                            what=f"{pct_label(p)}%-length cube, edges {'×'.join(map(str, edge))}"))
    if "full" in kinds:
        sel = tuple([None] * n)
        out.append(dict(id="full", kind="full", dim=None, p=None, plod=None, sels=[sel], mmfs=[""],
                        plans=["box/" + box_spelling(sel)], elements=int(np.prod(shape)),
                        what="full scan (mmfs: the array file itself)"))
    if "point" in kinds:
        sels = [tuple(int(rng.integers(0, s)) for s in shape) for _ in range(beams)]
        views = ["box/" + box_spelling(x) for x in sels]
        out.append(dict(id="point", kind="point", dim=None, p=None, plod=None, sels=sels, mmfs=views, plans=views,
                        elements=1, what=f"one element, {beams} random position(s)"))
    if "plod" in kinds:
        sel = tuple([None] * n)
        out.append(dict(id=f"plod{plod}-full", kind="plod", dim=None, p=None, plod=plod, sels=[sel],
                        mmfs=[f"plod/{plod}"], plans=[f"plod/{plod}"], elements=int(np.prod(shape)),
                        what=f"PLoD {plod} of {8} bytes, whole array"))
        sel = [None] * n
        sel[0] = mid[0]
        v = f"plod/{plod}@/slice/0/{mid[0]}"
        out.append(dict(id=f"plod{plod}-slice0", kind="plod", dim=0, p=None, plod=plod, sels=[tuple(sel)],
                        mmfs=[v], plans=[v], elements=int(np.prod(shape)) // shape[0],
                        what=f"PLoD {plod} of {8} bytes, middle slice x0 = {mid[0]}"))
    for w in out:
        w["bytes"] = w["elements"] * 8
        w["views"] = w["plans"]          # the views below A@, as mmfs-bench modeled spells them
        w["random"] = w["kind"] in ("beam", "cube", "point")
        w["numpy"] = [numpy_spelling(s) for s in w["sels"]]
    return out


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
# the benchmark


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
        self.manifest = os.path.join(d, "manifest.json")
        self.daemon_log = os.path.join(d, "daemon.log")
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
        self.setup = {}

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
        if not a.layouts:
            return
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
        size = int(self.nbytes * len(self.a.layouts) * 1.6) + 512 * MiB
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
        if not set(self.a.layouts) <= set(m.get("layouts", [])) or not set(self.a.baselines) <= set(
                m.get("baselines", [])):
            log("--reuse: the kept data lacks some layouts or baselines; building it again")
            return False
        paths = [self.files[b] for b in self.a.baselines] + ([self.image] if self.a.layouts else [])
        if not all(os.path.exists(p) for p in paths):
            log("--reuse: some kept files are missing; building the data again")
            return False
        log(f"--reuse: taking up the data kept in {self.a.dir}")
        self.setup["reused_from"] = m.get("date")
        self.setup["ingest_s"] = m.get("ingest_s")
        self.setup["image_bytes"] = m.get("image_bytes")
        return True

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

    def build_data(self):
        a = self.a
        self.remove_data()
        ingest = {}
        fds = {}
        self.setup["image_bytes"] = None
        if a.layouts:
            size = self.image_size()
            log(f"mkfs.mmfs -g {a.geometry} -s {size} {self.image}")
            p = run_cmd([self.mkfs_bin, "-f", "-s", str(size), "-g", a.geometry, self.image])
            self.setup["mkfs_output"] = p.stdout.strip()
            self.setup["image_bytes"] = size
            self.mount()
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
            for lb, fd in fds.items():
                t0 = time.perf_counter()
                os.fsync(fd)
                ingest[f"mmfs-{lb}"] += time.perf_counter() - t0
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
        finally:
            for fd in fds.values():
                os.close(fd)
            for f, _ in h5.values():
                f.close()
            if raw is not None:
                os.close(raw)
        self.setup["ingest_s"] = ingest
        if a.keep:
            m = self.manifest_wanted()
            m.update(layouts=list(a.layouts), baselines=list(a.baselines), ingest_s=ingest,
                     image_bytes=self.setup["image_bytes"],
                     date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"))
            with open(self.manifest, "w") as f:
                json.dump(m, f, indent=1)

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
        return {
            "schema": SCHEMA,
            "clock": "real",
            "command": shlex.join([sys.executable] + sys.argv),
            "machine": machine,
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


# --------------------------------------------------------------------------
# report


def fmt_ms(s):
    if not s:
        return "—"
    if len(s["runs"]) == 1:
        return fmt_num(s["median"], 2 if s["median"] < 10 else 1)
    d = 2 if s["median"] < 10 else 1
    return f"{fmt_num(s['median'], d)} ({fmt_num(s['min'], d)}–{fmt_num(s['max'], d)})"


def fmt_sig(x):
    if x is None:
        return "—"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def report(b, res):
    a = b.a
    m = res["machine"]
    rows = res["results"]
    by = {(r["workload"], r["target"]): r for r in rows}
    tnames = [t["name"] for t in b.targets]
    L = ["# mmfs-bench real: cold-cache workloads, mmfs layouts vs h5py, zarr and numpy.memmap", ""]
    L += ["```", res["command"], "```", ""]
    L.append(f"{m['date']} · `{m['host']}` · kernel {m['kernel']} · {m['nproc']} CPUs"
             f"{' (' + m['cpu'] + ')' if m.get('cpu') else ''} · {m.get('mem_total', '?')} RAM · "
             f"load average {m.get('loadavg', '?')} at the start, {m.get('loadavg_end', '?')} at the end · Python {m['python']}, numpy {m['numpy']}, "
             f"h5py {m['h5py']} (HDF5 {m['hdf5']}), zarr {m.get('zarr')} · mmfs {m['git']}")
    L.append("")
    L.append("## Setup")
    L.append("")
    shp = "×".join(map(str, b.shape))
    L.append(f"* Array {shp} float64 ({fmt_bytes(b.nbytes)}), standard normals from "
             f"`numpy.random.default_rng({a.seed})`, written slab by slab (one chunk row along dim 0) "
             f"into every target. Disk under test: `{a.dir}` on {m.get('dir_filesystem') or '?'}."
             + (f" Data taken up from a kept run of {b.setup.get('reused_from')} (--reuse)."
                if b.setup.get("reused_from") else ""))
    if a.layouts:
        L.append(f"* mmfs: one `mkfs.mmfs -g {a.geometry}` image of {fmt_bytes(b.setup.get('image_bytes'))} "
                 f"(sparse) in the same directory, mounted by the daemon"
                 f"{' with `-o ' + a.mount_options + '`' if a.mount_options else ''}; one array file per layout "
                 f"(`user.mmfs.layout`, then `user.mmfs.shape`):")
        for lb in a.layouts:
            info = b.infos.get(lb) or {}
            extra = []
            if info.get("cell"):
                extra.append(f"cell {'×'.join(map(str, info['cell']))}")
            if info.get("basic_cube"):
                extra.append(f"basic cube {'×'.join(map(str, info['basic_cube']))} cells")
            if info.get("order"):
                extra.append(f"order {','.join(map(str, info['order']))}")
            db = (info.get("device_bytes") or {}).get("data")
            if db:
                extra.append(f"{fmt_bytes(db)} on the device")
            L.append(f"  * `{lb}`: {', '.join(extra) if extra else info.get('error', '')}")
    ch = "×".join(map(str, b.chunks))
    L.append("* Baselines, same data, same disk: "
             + "; ".join({"h5py-contig": "`h5py-contig` an HDF5 contiguous dataset",
                          "h5py-chunked": f"`h5py-chunked` an HDF5 dataset chunked {ch}, uncompressed, "
                                          f"default chunk cache"
                                          + (f" ({fmt_bytes(b.setup['h5_chunk_cache_bytes'])})"
                                             if b.setup.get("h5_chunk_cache_bytes") else ""),
                          "zarr": f"`zarr` a zarr v3 array, chunks {ch}, no compressors or filters, "
                                  f"local directory store",
                          "memmap": "`memmap` the raw C-order file through `numpy.memmap`"}[x]
                         for x in a.baselines) + ".")
    ing = b.setup.get("ingest_s") or {}
    if ing:
        L.append("* Ingest (warm, including fsync; not a measurement of this benchmark): "
                 + ", ".join(f"{k} {b.nbytes / MiB / v:.0f} MiB/s" for k, v in ing.items() if v) + ".")
    st = b.setup
    L.append(f"* Run time: {'setup taken up (--reuse)' if st.get('reused_from') else 'setup %.0f s' % st.get('build_s', 0)}"
             f", plans {st.get('plans_s', 0):.0f} s, measurements {st.get('measure_s', 0):.0f} s "
             f"({sum(len(w['sels']) for w in b.workloads) * len(b.targets) * a.runs} cold reads), "
             f"total {st.get('total_s', 0):.0f} s.")
    L.append("")
    L.append("## Method")
    L.append("")
    if b.drop.ok:
        cold = ("**Cold caches**: `sync; echo 3 > /proc/sys/vm/drop_caches` before every timed read"
                + ("; before every mmfs read the daemon is also unmounted and mounted again (its own chunk "
                   "cache is not dropped otherwise), then the page cache is dropped." if a.remount else
                   "; the daemon stays mounted (--no-remount), so its own caches may be warm."))
    else:
        cold = f"**{b.drop.error}** — the times below are NOT cold-cache."
    L.append(cold + " (drop_caches empties this kernel's caches only: a virtual disk may still be cached by "
             "its host, which a guest cannot drop.)")
    bins = b.setup.get("binaries") or {}
    if bins:
        L.append("The daemon and mkfs.mmfs run from copies taken at the start ("
                 + ", ".join(f"`{v['source']}` of {v['mtime']}, sha256 {v['sha256_16']}…" for v in bins.values())
                 + "), so a rebuild during the run changes nothing.")
    L.append("Each timing covers opening the file or store, the read and the close. mmfs is read through "
             "its views (`A@/box/SEL`, `A@/slice/D/I`, `A@/plod/...`; the full scan reads the array file "
             f"itself) with {READ_CHUNK // MiB} MiB `os.readv` calls into one buffer; h5py by "
             "`h5py.File(...)[\"a\"][SEL]`, zarr by `zarr.open_array(...)[SEL]`, the raw file by "
             "`np.array(np.memmap(...)[SEL])`.")
    L.append("")
    L.append("Workloads (S = shape): **beamD** — every element along dim D, the other coordinates fixed at "
             f"{a.beams} random positions (seeded, the same for every target); each beam is its own cold "
             "read and the workload's time is the mean over the positions. **sliceD** — the middle "
             "hyperplane x_D = S_D/2. **cubeP** — a p%-length cube (MultiMap paper §5): edge "
             "max(1, round(p/100·S_d)) along every dim, random corner (seeded) such that it fits. "
             "**full** — the whole array. "
             f"**point** — one element at {a.beams} random positions, each its own cold read: the fixed cost "
             "of a cold read (for mmfs: the fresh mount's lookups, the open, the array's first use, one READ). "
             f"**plod{a.plod}-full / plod{a.plod}-slice0** — PLoD, keeping the {a.plod} most significant "
             f"bytes of every element, of the whole array (`A@/plod/{a.plod}`) and of the middle slice along "
             f"dim 0 (`A@/plod/{a.plod}@/slice/0/M`); the baselines read the same elements and drop the low bytes "
             "in numpy (inside the timing). mmfs reads the whole elements from the device today: byte planes "
             "come with the MLOC layout, so PLoD costs as much I/O as the plain read.")
    L.append("")
    L.append(f"{a.runs} run(s) of everything; the target order rotates from run to run. Times are the median "
             "(min–max) over runs in ms. **ratio** = the best baseline's median / the target's median "
             "(> 1: the mmfs layout is faster than every baseline), the best baseline per workload in bold. "
             f"**Per-cell time** = time / number of cells of the mmfs cell grid ({'×'.join(map(str, b.cell or []))} "
             "elements: the cell of the naive array, the daemon's default) that the selection touches — the same "
             "unit for every target, as `mmfs-bench modeled` counts (the papers' ms per cell, one cell per disk "
             "block); time per element is in the JSON (`us_per_element`). **model** = `modeled_ms` of "
             "`A@/plan/VIEW`: the service time the volume's geometry model predicts for the view's I/O plan "
             f"on the modeled `{a.geometry}` disk from an idle device (for beams, the mean over the "
             "positions) — the clock of the papers; the real clock is this VM's disk. Every result is "
             "compared with the reference data; a wrong element fails the run.")
    L.append("")
    L.append("## Time per workload (ms, cold cache)")
    L.append("")
    L.append("mmfs cells: real time; *model ms*; ratio vs the best baseline.")
    L.append("")
    L.append("| workload | elements | " + " | ".join(tnames) + " |")
    L.append("|---|---|" + "---|" * len(tnames))
    for w in b.workloads:
        cells = []
        for tn in tnames:
            r = by[(w["id"], tn)]
            if r["error"]:
                cells.append("error")
                continue
            txt = fmt_ms(r["ms"])
            if not r["verified"] and r["ms"]:
                txt += " **WRONG**"
            if r["target_kind"] == "baseline" and r["best_baseline"] == tn:
                txt = f"**{txt}**"
            if r["target_kind"] == "mmfs":
                mod = (r["modeled"] or {}).get("modeled_ms")
                txt += f"<br>*model {fmt_sig(mod)}*"
                if r["ratio_vs_best_baseline"] is not None:
                    txt += f"<br>×{r['ratio_vs_best_baseline']:.2f}"
            cells.append(txt)
        el = f"{w['elements']:,}" + (f" ×{len(w['sels'])}" if len(w["sels"]) > 1 else "")
        L.append(f"| {w['id']} | {el} | " + " | ".join(cells) + " |")
    L.append("")
    cell = "×".join(map(str, b.cell or []))
    L.append(f"## Per-cell time (ms per {cell} cell, median; mmfs: real / model)")
    L.append("")
    L.append("| workload | cells | " + " | ".join(tnames) + " |")
    L.append("|---|---|" + "---|" * len(tnames))
    for w in b.workloads:
        cells = []
        for tn in tnames:
            r = by[(w["id"], tn)]
            u = r["ms_per_cell"]["median"] if r["ms_per_cell"] else None
            txt = fmt_sig(u)
            if r["target_kind"] == "mmfs":
                txt += f" / {fmt_sig((r['modeled'] or {}).get('ms_per_cell'))}"
            cells.append(txt)
        L.append(f"| {w['id']} | {fmt_sig(w['cells'])} | " + " | ".join(cells) + " |")
    L.append("")
    if a.layouts:
        L.append("## mmfs I/O plans (`A@/plan/VIEW`, per read)")
        L.append("")
        # run_host_ms: set by results() on every row of a layout whose point was
        # read, when the geometry's model has no host part of its own.
        floors = {lb: (by.get(("point", f"mmfs-{lb}"), {}).get("modeled") or {}).get("run_host_ms")
                  for lb in a.layouts}
        floors = {lb: v for lb, v in floors.items() if v is not None}
        with_floor = bool(floors)
        # A geometry with the machine's costs: modeled_ms predicts the read itself.
        with_machine = any("device_ms" in ((by.get(("point", f"mmfs-{lb}"), {}).get("modeled")) or {})
                           for lb in a.layouts)
        if with_machine:
            L.append("**model** = `modeled_ms` of `A@/plan/VIEW` on this volume's measured geometry: the whole "
                     "cold read, its **device model** (`device_ms`: the device reading the view's chunks one "
                     "after another) plus the machine's part that `mkfs.mmfs -g measure` timed (`host`: a cold "
                     "read's requests through a throwaway FUSE mount and the daemon's own read path on a volume "
                     "in memory, the cells verified and gathered after each batch arrives, and handing each "
                     "chunk's bytes to the reader while the device reads the next; docs/geometry-format.md). "
                     "**error** = model / real - 1.")
            L.append("")
            L.append("**device ms**: the time the read's batches were on the device (`device_busy_ms` of "
                     "`/.mmfs/stats` on the fresh mount), which the device model predicts; it includes the "
                     "cells verified and gathered as requests arrive, so a CPU-bound read shows its CPU there too.")
            L.append("")
            L.append("| workload | view | layout | real ms | device ms | device model ms | model ms | error | "
                     "bytes read / useful (ampl.) | requests |")
            L.append("|---|---|---|---|---|---|---|---|---|---|")
        elif with_floor:
            L.append("**host** (per layout): the median cold read of one element in this run less its "
                     "`modeled_ms`: what a cold read costs besides the device (the fresh mount's lookups, the "
                     "open, the array's first use, the READ round trip): "
                     + ", ".join(f"{lb} {fmt_sig(v)} ms" for lb, v in floors.items())
                     + ". **model + host** = the view's `modeled_ms` plus that; **error** = (model + host) / "
                     "real - 1.")
            L.append("")
            L.append("**device ms**: the time the read's batches were on the device (`device_busy_ms` of "
                     "`/.mmfs/stats` on the fresh mount), which `modeled_ms` predicts; it includes the cells "
                     "verified and gathered as requests arrive, so a CPU-bound read shows its CPU there too.")
            L.append("")
            L.append("| workload | view | layout | real ms | device ms | model ms | model + host ms | error | "
                     "bytes read / useful (ampl.) | requests |")
            L.append("|---|---|---|---|---|---|---|---|---|---|")
        else:
            L.append("| workload | view | layout | real ms | model ms | bytes read / useful (ampl.) | requests |")
            L.append("|---|---|---|---|---|---|---|")
        within = {}
        for w in b.workloads:
            v = w["mmfs"][0] or "(the array file)"
            if len(w["mmfs"]) > 1:
                v += f" (+{len(w['mmfs']) - 1} more)"
            for lb in a.layouts:
                r = by[(w["id"], f"mmfs-{lb}")]
                p = r["modeled"] or {}
                if "error" in p:
                    amp = p["error"]
                elif p.get("bytes_useful"):
                    amp = (f"{fmt_bytes(int(p['bytes_read']))} / {fmt_bytes(int(p['bytes_useful']))} "
                           f"({p['bytes_read'] / p['bytes_useful']:.2f})")
                else:
                    amp = "—"
                extra = ""
                if with_machine:
                    mod, dmod, real = p.get("modeled_ms"), p.get("device_ms"), (r["ms"] or {}).get("median")
                    dev = (r.get("device_ms") or {}).get("median")
                    row_cells = [fmt_ms(r["device_ms"]) if r.get("device_ms") else "—", fmt_sig(dmod), fmt_sig(mod)]
                    # The point counts here: -g measure timed its own view on a volume in memory, so this
                    # volume's point is predicted, not fitted (in the floor report below it is the fit).
                    if mod is not None and real:
                        err = mod / real - 1
                        row_cells.append(f"{err * 100:+.0f} %")
                        hits = within.setdefault(lb, [0, 0, 0, 0, 0])
                        hits[0] += abs(err) <= 0.30
                        hits[2] += 1
                        if dev and dmod:
                            hits[3] += abs(dmod / dev - 1) <= 0.30
                            hits[4] += 1
                    else:
                        row_cells.append("—")
                    L.append(f"| {w['id']} | `{v}` | {lb} | {fmt_ms(r['ms'])} | " + " | ".join(row_cells)
                             + f" | {amp} | {fmt_sig(p.get('requests'))} |")
                    continue
                if with_floor:
                    mod, pred, real = p.get("modeled_ms"), p.get("modeled_plus_host_ms"), (r["ms"] or {}).get("median")
                    if pred is not None and real and w["kind"] != "point":
                        err = pred / real - 1
                        extra = f"{fmt_sig(pred)} | {err * 100:+.0f} % | "
                        hits = within.setdefault(lb, [0, 0, 0, 0, 0])
                        hits[0] += abs(mod / real - 1) <= 0.30
                        hits[1] += abs(err) <= 0.30
                        hits[2] += 1
                        dev = (r.get("device_ms") or {}).get("median")
                        if dev:
                            hits[3] += abs(mod / dev - 1) <= 0.30
                            hits[4] += 1
                    else:
                        extra = "— | — | "
                device = fmt_ms(r["device_ms"]) if with_floor and r.get("device_ms") else "—"
                L.append(f"| {w['id']} | `{v}` | {lb} | {fmt_ms(r['ms'])} | "
                         + (f"{device} | " if with_floor else "")
                         + f"{fmt_sig(p.get('modeled_ms'))} | {extra}{amp} | {fmt_sig(p.get('requests'))} |")
        L.append("")
        for lb, (alone, plus, total, dev_hits, dev_total) in within.items():
            if with_machine:
                L.append(f"Within ±30 % of the real time ({lb}): the model on {alone} of {total} workloads."
                         + (f" The device model within ±30 % of the device time: {dev_hits} of {dev_total}."
                            if dev_total else ""))
                L.append("")
                pt = by.get(("point", f"mmfs-{lb}"), {})
                pm, pr = (pt.get("modeled") or {}).get("modeled_ms"), (pt.get("ms") or {}).get("median")
                if pm is not None and pr and pr > pm * 1.3:
                    L.append(f"The point ({lb}) took {fmt_sig(pr)} ms against a model of {fmt_sig(pm)} ms: the "
                             f"{fmt_sig(pr - pm)} ms more is what a freshly started daemon's requests cost beyond "
                             "the cold view the probe timed on a volume in memory, and the first device read of a "
                             "fresh mount beyond an idle read (on an image file, the extent tree read again after "
                             "drop_caches). The small views miss their model by about as much.")
                    L.append("")
                continue
            L.append(f"Within ±30 % of the real time ({lb}): model alone {alone} of {total} workloads, "
                     f"model + host {plus} of {total}."
                     + (f" The model within ±30 % of the device time: {dev_hits} of {dev_total}." if dev_total else ""))
            L.append("")
    # summary of who wins
    wins = []
    for w in b.workloads:
        cand = [by[(w["id"], tn)] for tn in tnames if by[(w["id"], tn)]["ms"] and by[(w["id"], tn)]["verified"]]
        if cand:
            best = min(cand, key=lambda r: r["ms"]["median"])
            wins.append(f"{w['id']}: {best['target']}")
    if wins:
        L.append("Fastest target per workload (median): " + "; ".join(wins) + ".")
        L.append("")
    pngs = res.get("plots") or []
    if pngs:
        L.append("## Plots")
        L.append("")
        captions = {"-beams.png": "Beams: time per cell along each dimension, real clock (left) and modeled "
                                  "clock of the mmfs layouts (right).",
                    "-slices.png": "Middle slices: time per cell, real (left) and modeled (right).",
                    "-cubes.png": "p%-length cubes: total time against p, real (left) and modeled (right).",
                    "-scans.png": "Full scan and PLoD reads, real clock.",
                    "-real.png": "Every workload, real clock (bench/plot_workloads.py, the figure "
                                 "`mmfs-bench modeled` draws for the modeled clock)."}
        for p in pngs:
            name = os.path.basename(p)
            cap = next((c for suf, c in captions.items() if name.endswith(suf)), "")
            L.append(f"![{name}]({name})")
            L.append("")
            if cap:
                L.append(cap)
                L.append("")
    if res.get("plot_error"):
        L.append(f"Plots: {res['plot_error']}")
        L.append("")
    if b.failures:
        L.append("**Errors / wrong results:**")
        L.append("")
        L += [f"* {f}" for f in b.failures]
        L.append("")
    return "\n".join(L)


# --------------------------------------------------------------------------
# plots (matplotlib, in the style of the MultiMap paper's Figures 12 and 13)


def target_style(t, i_mmfs, i_base):
    # the palette of bench/plot_workloads.py, so the figures read alike
    mm_colors = {"naive": "#9e9e9e", "zorder": "#e6a532", "hilbert": "#4a7fc1", "multimap": "#cc3333"}
    base_colors = ["#5aa05a", "#8e6bbf", "#3fb7b7", "#b07a4f"]
    if t["kind"] == "mmfs":
        return dict(color=mm_colors.get(t["layout"], "#444444"), hatch=None)
    return dict(color=base_colors[i_base % len(base_colors)], hatch="//")


def plot_shared(json_path, prefix):
    """The shared figure of bench/plot_workloads.py (the style of `mmfs-bench
    modeled`'s plots) from our JSON; returns its PNG paths, or raises."""
    script = os.path.join(REPO, "bench", "plot_workloads.py")
    if not os.path.exists(script):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plot_workloads.py")  # installed copy
    if not os.path.exists(script):
        raise BenchError("bench/plot_workloads.py not found")
    p = subprocess.run([sys.executable, script, json_path, "--out-prefix", prefix], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    if p.returncode != 0:
        raise BenchError(f"plot_workloads.py exited {p.returncode}: {p.stderr.strip()[-500:]}")
    return [line.strip() for line in p.stdout.splitlines() if line.strip().endswith(".png")]


def plot(res, prefix):
    """Writes PREFIX-beams.png, -slices.png, -cubes.png, -scans.png; returns their paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["results"]
    targets = res["targets"]
    styles = {}
    im = ib = 0
    for t in targets:
        styles[t["name"]] = target_style(t, im, ib)
        im += t["kind"] == "mmfs"
        ib += t["kind"] != "mmfs"
    mm_targets = [t for t in targets if t["kind"] == "mmfs"]
    geometry = res["config"]["geometry"]
    shp = "×".join(map(str, res["config"]["shape"]))
    cold = "cold cache" if res["cold_cache"]["drop_caches"] else "NOT cold cache"
    cell_txt = "×".join(map(str, res["config"].get("cell") or []))
    out = []

    def get(wid, tn):
        for r in rows:
            if r["workload"] == wid and r["target"] == tn:
                return r
        return None

    kinds = {w["id"]: w for w in res["workloads"]}

    def group_label(wid):
        w = kinds[wid]
        return f"Dim_{w['dim']}" if w["kind"] in ("beam", "slice") else wid

    def bars(ax, groups, tlist, value, ylabel, title):
        width = 0.8 / max(1, len(tlist))
        for i, t in enumerate(tlist):
            vals, lo, hi = [], [], []
            for wid in groups:
                r = get(wid, t["name"])
                v = value(r)
                if v is None:
                    vals.append(np.nan)
                    lo.append(0)
                    hi.append(0)
                    continue
                med, vmin, vmax = v
                vals.append(med)
                lo.append(max(0.0, med - vmin))
                hi.append(max(0.0, vmax - med))
            xs = [j + (i - (len(tlist) - 1) / 2) * width for j in range(len(groups))]
            st = styles[t["name"]]
            ax.bar(xs, vals, width, yerr=[lo, hi] if any(lo) or any(hi) else None, label=t["name"],
                   color=st["color"], hatch=st["hatch"], edgecolor="black", linewidth=0.5, capsize=2)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([group_label(g) for g in groups])
        ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)

    def real_pc(r):
        s = r and r.get("ms_per_cell")
        return (s["median"], s["min"], s["max"]) if s else None

    def model_pc(r):
        m = r and r.get("modeled")
        v = m.get("ms_per_cell") if m else None
        return (v, v, v) if v is not None else None

    def real_ms(r):
        s = r and r.get("ms")
        return (s["median"], s["min"], s["max"]) if s else None

    def model_ms(r):
        m = r and r.get("modeled")
        v = m.get("modeled_ms") if m else None
        return (v, v, v) if v is not None else None

    for kind, label in (("beam", "beam"), ("slice", "slice")):
        groups = [w["id"] for w in res["workloads"] if w["kind"] == kind]
        if not groups:
            continue
        ncol = 2 if mm_targets else 1
        fig, axes = plt.subplots(1, ncol, figsize=(6.2 * ncol, 4.0), squeeze=False)
        bars(axes[0][0], groups, targets, real_pc, f"time per cell (ms, {cell_txt} cells)",
             f"{label} queries, real time ({cold}), {shp} float64")
        if mm_targets:
            bars(axes[0][1], groups, mm_targets, model_pc, "modeled time per cell (ms)",
                 f"{label} queries, modeled time ({geometry}), mmfs layouts")
        fig.tight_layout()
        path = f"{prefix}-{kind}s.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)

    cubes = [w for w in res["workloads"] if w["kind"] == "cube"]
    if cubes:
        ps = [w["p"] for w in cubes]
        ncol = 2 if mm_targets else 1
        fig, axes = plt.subplots(1, ncol, figsize=(6.2 * ncol, 4.0), squeeze=False)
        for col, (tlist, value, title) in enumerate(
                [(targets, real_ms, f"p%-length cubes, real time ({cold})"),
                 (mm_targets, model_ms, f"p%-length cubes, modeled time ({geometry})")][:ncol]):
            ax = axes[0][col]
            for t in tlist:
                vals = [value(get(w["id"], t["name"])) for w in cubes]
                xs = [p for p, v in zip(ps, vals) if v]
                if not xs:
                    continue
                med = [v[0] for v in vals if v]
                lo = [v[0] - v[1] for v in vals if v]
                hi = [v[2] - v[0] for v in vals if v]
                st = styles[t["name"]]
                ax.errorbar(xs, med, yerr=[lo, hi], label=t["name"], color=st["color"], marker="o",
                            linestyle="--" if st["hatch"] else "-", capsize=2,
                            markeredgecolor="black", markeredgewidth=0.5)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xticks(ps)
            ax.set_xticklabels([pct_label(p) for p in ps])
            ax.set_xlabel("p (cube edge, % of each dimension)")
            ax.set_ylabel("total time (ms)")
            ax.set_title(title + f", {shp}", fontsize=9)
            ax.grid(which="both", alpha=0.3)
            ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        path = f"{prefix}-cubes.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)

    scans = [w["id"] for w in res["workloads"] if w["kind"] in ("full", "plod")]
    if scans:
        fig, ax = plt.subplots(1, 1, figsize=(7.0, 4.0))
        bars(ax, scans, targets, real_ms, "time (ms)", f"full scan and PLoD reads, real time ({cold}), {shp}")
        fig.tight_layout()
        path = f"{prefix}-scans.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)
    return out


# --------------------------------------------------------------------------
# main


EPILOG = """\
workloads (S = shape; the same selections on every target):
  beamD         all of dim D, the other coordinates at --beams random positions
                (seeded); one cold read per position, time = their mean
  sliceD        the middle hyperplane x_D = S_D/2 (mmfs: A@/slice/D/I)
  cubeP         p%-length cube: edge max(1, round(p/100*S_d)) on every dim,
                random corner (mmfs: A@/box/a:b,...)
  full          the whole array (mmfs: plain reads of A)
  plodK-full    K most significant bytes of every element (mmfs: A@/plod/K;
                baselines: read all elements, drop the low bytes in numpy)
  plodK-slice0  the same on the middle slice of dim 0 (A@/plod/K@/slice/0/I)

cold caches (default): before EVERY timed read `sync; echo 3 >
/proc/sys/vm/drop_caches`, and before every mmfs read an unmount + mount of
the daemon (its own chunk cache). If drop_caches is not permitted the run
goes on and the report says the times are not cold-cache.

every result is compared with the reference data; mmfs targets also get the
modeled time of A@/plan/VIEW (modeled_ms, bytes read/useful, requests).
output: PREFIX.md, PREFIX.json, PREFIX-{beams,slices,cubes,scans}.png.
exit status: 0 all results correct, 1 error or wrong result, 2 bad arguments.

examples (as root, from the repository root):
  python3 bench/mmfs_bench_real.py --quick --out /tmp/real-quick
  python3 bench/mmfs_bench_real.py --shape 512,512,256 --runs 3 --out /tmp/real-512
  python3 bench/mmfs_bench_real.py --keep ...; then --reuse ... (skips the setup)
"""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Raw epilog; '(default: X)' only for options whose default means something."""

    def _get_help_string(self, action):
        h = action.help or ""
        if "default" in h or action.default in (None, False, True, "", argparse.SUPPRESS):
            return h
        return h + " (default: %(default)s)"


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog=os.environ.get("MMFS_BENCH_REAL_PROG") or None,  # `mmfs-bench real` may set it
        description=textwrap.fill("Real-clock (cold-cache) benchmark of the mmfs-bench workloads (beams and slices along each "
                    "dimension, p%-length cubes, full scan, PLoD) on one array per mmfs layout and on h5py "
                    "(contiguous, chunked), zarr and numpy.memmap copies of the same data on the same disk, with "
                    "the modeled time of every mmfs read beside the real one. Run as root (drop_caches, FUSE). "
                    "Writes PREFIX.md, PREFIX.json and PREFIX-{beams,slices,cubes,scans}.png.", 79),
        epilog=EPILOG, formatter_class=HelpFormatter)
    ap.add_argument("--dir", default="/var/tmp/mmfs-bench-real",
                    help="working directory on the disk under test (image, baselines, mountpoint)")
    ap.add_argument("--build", default=os.environ.get("MMFS_BUILD") or os.path.join(REPO, "build"),
                    help="meson build directory holding daemon/mmfs and mkfs/mkfs.mmfs ($MMFS_BUILD)")
    ap.add_argument("--shape", default=None, help="array shape S0,S1,... (default 1024,1024,256; --quick 64,64,32)")
    ap.add_argument("--layouts", default=",".join(LAYOUTS),
                    help="comma-separated mmfs layouts, one array each (empty: baselines only); an entry may add "
                    "attributes, e.g. zorder+cell=16x16x16, and 'default' takes the volume's default layout")
    ap.add_argument("--baselines", default=",".join(BASELINES),
                    help="comma-separated baselines among " + ", ".join(BASELINES))
    ap.add_argument("--workloads", default=",".join(KINDS), help="comma-separated workload kinds among "
                    + ", ".join(KINDS))
    ap.add_argument("--geometry", default="atlas10k3", help="mkfs.mmfs -g PROFILE|FILE.json")
    ap.add_argument("--mount-options", default="", help="daemon -o OPTS (e.g. simulate)")
    ap.add_argument("--runs", type=int, default=None, help="repetitions of everything (default 3; --quick 1)")
    ap.add_argument("--beams", type=int, default=None, help="random beam positions per dimension (default 4; "
                    "--quick 2)")
    ap.add_argument("--cubes", default="1,5,10", help="p of the p%%-length cubes, comma-separated percents")
    ap.add_argument("--plod", type=int, default=2, help="PLoD bytes kept (1..8)")
    ap.add_argument("--chunk", type=int, default=64, help="h5py/zarr chunk edge (clipped to the dims)")
    ap.add_argument("--seed", type=int, default=6, help="seed of the data and of the random positions")
    ap.add_argument("--out", default=None, help="output prefix (default docs/benchmarks/mmfs-bench-real; "
                    "--quick /tmp/mmfs-bench-real-quick)")
    ap.add_argument("--keep", action="store_true", help="keep the image and the baselines (and a manifest) in --dir")
    ap.add_argument("--reuse", action="store_true",
                    help="take up the data kept by an earlier --keep run when shape, seed, geometry, chunks, layouts "
                         "and baselines match (else build it again)")
    ap.add_argument("--no-remount", dest="remount", action="store_false",
                    help="do not remount the daemon before every mmfs read (its chunk cache may then be warm)")
    ap.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    ap.add_argument("--quick", action="store_true", help="smoke run: shape 64,64,32, 1 run, 2 beams per dim")
    a = ap.parse_args(argv)
    q = a.quick
    a.shape = a.shape or ("64,64,32" if q else "1024,1024,256")
    a.runs = a.runs if a.runs is not None else (1 if q else 3)
    a.beams = a.beams if a.beams is not None else (2 if q else 4)
    if a.out is None:
        a.out = "/tmp/mmfs-bench-real-quick" if q else os.path.join(REPO, "docs", "benchmarks", "mmfs-bench-real")
    try:
        a.shape = tuple(int(x) for x in a.shape.split(","))
    except ValueError:
        ap.error(f"--shape: expected S0,S1,..., got {a.shape!r}")
    if not 2 <= len(a.shape) <= 16 or min(a.shape) < 1:
        ap.error("--shape: 2 to 16 positive dims")
    if a.runs < 1 or a.beams < 1:
        ap.error("--runs and --beams must be positive")
    if not 1 <= a.plod <= 8:
        ap.error("--plod: 1..8")
    if a.chunk < 1:
        ap.error("--chunk must be positive")
    try:
        a.cubes = sorted({float(x) for x in a.cubes.split(",") if x.strip()})
    except ValueError:
        ap.error(f"--cubes: percents, e.g. 1,5,10; got {a.cubes!r}")
    if any(not 0 < p <= 100 for p in a.cubes):
        ap.error("--cubes: each p in (0, 100]")

    def listopt(name, value, allowed):
        items = [x.strip() for x in value.split(",") if x.strip()]
        bad = [x for x in items if allowed is not None and x not in allowed]
        if bad:
            ap.error(f"--{name}: unknown {', '.join(bad)}; accepted: {', '.join(allowed)}")
        if len(set(items)) != len(items):
            ap.error(f"--{name}: duplicates")
        return items

    a.layouts = listopt("layouts", a.layouts, None)
    a.baselines = listopt("baselines", a.baselines, list(BASELINES))
    a.workloads = listopt("workloads", a.workloads, KINDS)
    if not a.layouts and not a.baselines:
        ap.error("nothing to measure: no layouts and no baselines")
    if not a.workloads:
        ap.error("--workloads: empty")
    a.dir = os.path.abspath(a.dir)
    a.out = os.path.abspath(a.out)
    return a


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    b = Bench(a)
    status = 0
    t_start = time.perf_counter()
    machine = None
    measured = False
    try:
        b.check_tools()
        os.makedirs(a.dir, exist_ok=True)
        machine = machine_info(a)
        machine.pop("fio", None)
        machine["zarr"] = getattr(zarr, "__version__", None)
        try:
            machine["loadavg"] = " ".join(open("/proc/loadavg").read().split()[:3])
        except OSError:
            pass
        if a.layouts:
            b.copy_binaries()
        b.reused = b.try_reuse()
        if not b.reused:
            b.check_space()
            t0 = time.perf_counter()
            b.build_data()
            b.setup["build_s"] = time.perf_counter() - t0
        elif a.layouts:
            b.mount()
        b.build_reference()
        if "h5py-chunked" in a.baselines:
            try:
                with h5py.File(b.files["h5py-chunked"], "r") as f:
                    b.setup["h5_chunk_cache_bytes"] = int(f["a"].id.get_access_plist().get_chunk_cache()[1])
            except Exception as e:  # informational only
                log(f"WARNING: cannot read the HDF5 chunk cache size: {e}")
        if a.layouts:
            t0 = time.perf_counter()
            b.read_plans()
            b.setup["plans_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        b.measure()
        b.setup["measure_s"] = time.perf_counter() - t0
        measured = True
    except BenchError as e:
        log(f"mmfs-bench real: {e}")
        b.failures.append(str(e))
        status = 1
    except OSError as e:
        import traceback
        where = traceback.extract_tb(e.__traceback__)[-1]
        log(f"mmfs-bench real: {e} (in {where.name}, line {where.lineno})")
        b.failures.append(str(e))
        status = 1
    except KeyboardInterrupt:
        log("mmfs-bench real: interrupted")
        status = 130
    finally:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)  # let the cleanup finish
        b.cleanup()
    if measured:
        b.setup["total_s"] = time.perf_counter() - t_start
        try:
            machine["loadavg_end"] = " ".join(open("/proc/loadavg").read().split()[:3])
        except OSError:
            pass
        rows = b.results()
        res = b.to_json(machine, rows)
        out_dir = os.path.dirname(a.out)
        os.makedirs(out_dir, exist_ok=True)
        if not a.no_plots:
            res["plots"] = []
            with open(a.out + ".json", "w") as f:  # plot_workloads.py reads it
                json.dump(res, f, indent=1, default=str)
            try:
                res["plots"] += plot_shared(a.out + ".json", a.out)
            except Exception as e:  # a plot problem must not lose the measurements
                res["plot_error"] = f"bench/plot_workloads.py: {type(e).__name__}: {e}"
                log("WARNING: " + res["plot_error"])
            try:
                res["plots"] += plot(res, a.out)
            except Exception as e:
                res["plot_error"] = f"plotting failed: {type(e).__name__}: {e}"
                log("WARNING: " + res["plot_error"])
        md = report(b, res)
        with open(a.out + ".md", "w") as f:
            f.write(md + "\n")
        with open(a.out + ".json", "w") as f:
            json.dump(res, f, indent=1, default=str)
            f.write("\n")
        print(md)
        log(f"wrote {a.out}.md, {a.out}.json" + (f" and {len(res.get('plots', []))} plot(s)" if res.get("plots")
                                                  else "") + f" in {time.perf_counter() - t_start:.0f} s")
        if b.failures:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
