"""One run of bench/bench_daemon.py: Bench sets up the volume (mkfs.mmfs, the
daemon, one array per layout) and the HDF5 baseline, writes and verifies the
data, reads the arrays' info and plans, measures (the full read beside fio,
the views beside h5py, the metadata test), writes the markdown report with
its targets, and removes what it made."""
import errno
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

from bench_daemon_fio import Fio
from bench_daemon_mount import Daemon, read_stats, stats_delta
from bench_daemon_util import (GiB, MiB, BenchError, CacheDropper, fmt_bytes, fmt_num, fmt_sum, log, read_exact,
                               read_json_file, run_cmd, summary, write_all)
from bench_daemon_workloads import (metadata_bench, np_index, sel_str, slabs, time_full_read, time_h5_full,
                                    time_h5_read, time_view_read, views_for)

try:
    import h5py
except ImportError:  # reported in main()
    h5py = None

H5_CHUNK_EDGE = 64
TARGET_FULL = 0.80        # full read >= 80 % of fio in the same I/O mode
FULL_MODES = ("direct", "buffered")  # O_DIRECT (fio --direct=1) and through the page cache
TARGET_META = 10000.0     # metadata ops/s
# the metadata rows the target applies to (cold: every operation reaches the daemon)
META_TARGET_KEYS = ("create", "stat (cold)", "stat (again)", "readdir entries (cold)", "readdir entries")


class Bench:
    def __init__(self, args):
        self.a = args
        self.drop = CacheDropper()
        self.shape = args.shape
        self.nbytes = int(np.prod(self.shape)) * 8
        self.labels = args.layouts or ["default"]
        self.views = views_for(self.shape)
        self.failures = []          # wrong results / errors (exit 1)
        self.res = {
            "command": shlex.join([sys.executable] + sys.argv),
            "shape": list(self.shape), "dtype": "float64", "bytes": self.nbytes,
            "geometry": args.geometry, "layouts": self.labels, "runs": args.runs,
            "mount_options": args.mount_options, "remount": args.remount,
            "h5_chunks": None, "baseline_only": args.baseline_only,
            "fio": {}, "fio_region": {}, "full": {}, "views": {}, "arrays": {}, "metadata": {},
        }
        d = args.dir
        self.image = os.path.join(d, "mmfs-bench.img")
        self.h5 = os.path.join(d, "bench.h5")
        self.fiofile = os.path.join(d, "fio-seq.dat")
        self.daemon = None
        self.mnt = None

    # paths ------------------------------------------------------------
    def arr(self, label):
        return os.path.join(self.mnt, "a" if label == "default" else f"a-{label}")

    # setup ------------------------------------------------------------
    def check_tools(self):
        a = self.a
        if h5py is None:
            raise BenchError("h5py is not installed (pip install h5py)")
        if shutil.which("fio") is None:
            raise BenchError("fio is not installed (apt-get install fio)")
        if os.geteuid() != 0:
            log("WARNING: not root; dropping caches will fail and the daemon may not mount")
        if a.baseline_only:
            return
        self.mmfs = os.path.join(a.build, "daemon", "mmfs")
        self.mkfs = os.path.join(a.build, "mkfs", "mkfs.mmfs")
        for what, p in (("daemon", self.mmfs), ("mkfs", self.mkfs)):
            if not os.access(p, os.X_OK):
                raise BenchError(f"the mmfs {what} binary {p} is missing or not executable; "
                                 f"build it (meson compile -C {a.build}) or pass --build, "
                                 f"or use --baseline-only")
        if shutil.which("fusermount3") is None:
            raise BenchError("fusermount3 is not installed (apt-get install fuse3)")

    def image_size(self):
        n = max(1, len(self.a.layouts))
        size = int(self.nbytes * n * 1.3) + GiB
        return (size + 64 * MiB - 1) // (64 * MiB) * (64 * MiB)

    def check_space(self):
        need = self.a.fio_bytes + self.nbytes * 1.1 + 64 * MiB
        if not self.a.baseline_only:
            need += self.image_size()
        free = shutil.disk_usage(self.a.dir).free
        if free < need:
            raise BenchError(f"{self.a.dir}: {fmt_bytes(free)} free, about {fmt_bytes(need)} needed")

    def setup_volume(self):
        a = self.a
        size = self.image_size()
        log(f"mkfs.mmfs -g {a.geometry} on {self.image} ({fmt_bytes(size)})")
        p = run_cmd([self.mkfs, "-f", "-s", str(size), "-g", a.geometry, self.image])
        self.res["mkfs_output"] = p.stdout.strip()
        self.mnt = tempfile.mkdtemp(prefix="mnt-", dir=a.dir)
        self.daemon = Daemon(self.mmfs, self.image, self.mnt, a.mount_options,
                             os.path.join(a.dir, "daemon.log"))
        log(f"mounting on {self.mnt}")
        self.daemon.mount()

    def remount(self):
        self.daemon.unmount()
        self.daemon.mount()

    def create_arrays(self):
        shape_x = ",".join(map(str, self.shape)).encode()
        for label in self.labels:
            p = self.arr(label)
            os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            try:
                if label != "default":
                    os.setxattr(p, "user.mmfs.layout", label.encode())
                os.setxattr(p, "user.mmfs.shape", shape_x)
            except OSError as e:
                raise BenchError(f"setting the schema of {p} (layout {label}) failed: {e.strerror}; "
                                 f".mmfs/errors: {self.mmfs_errors()}")
            st = os.stat(p)
            if st.st_size != self.nbytes:
                raise BenchError(f"{p}: st_size {st.st_size} after setting the shape, expected {self.nbytes}")

    def mmfs_errors(self):
        try:
            with open(os.path.join(self.mnt, ".mmfs", "errors")) as f:
                return f.read().strip().splitlines()[-3:]
        except OSError:
            return "(unreadable)"

    def write_data(self):
        """Same deterministic data into every mmfs array and the HDF5 file."""
        shape = self.shape
        chunks = tuple(min(H5_CHUNK_EDGE, s) for s in shape)
        self.res["h5_chunks"] = list(chunks)
        row_bytes = self.nbytes // shape[0]
        fds = {}
        if not self.a.baseline_only:
            for label in self.labels:
                fds[label] = os.open(self.arr(label), os.O_WRONLY)
        log(f"writing {fmt_bytes(self.nbytes)} into {len(fds)} mmfs array(s) and {self.h5}")
        t_mmfs = 0.0
        t_h5 = 0.0
        t_start = time.perf_counter()
        try:
            with h5py.File(self.h5, "w") as f:
                ds = f.create_dataset("a", shape=shape, dtype="<f8", chunks=chunks)
                pending, pending_r0 = [], 0
                for r0, slab in slabs(shape):
                    buf = slab.tobytes()
                    t0 = time.perf_counter()
                    for label, fd in fds.items():
                        write_all(fd, buf, r0 * row_bytes)
                    t_mmfs += time.perf_counter() - t0
                    # HDF5: write whole chunk rows only (no read-modify-write of chunks)
                    if not pending:
                        pending_r0 = r0
                    pending.append(slab)
                    rows = sum(s.shape[0] for s in pending)
                    last = r0 + slab.shape[0] == shape[0]
                    if rows >= chunks[0] or last:
                        block = np.concatenate(pending) if len(pending) > 1 else pending[0]
                        n = rows if last else rows // chunks[0] * chunks[0]
                        t0 = time.perf_counter()
                        ds[pending_r0:pending_r0 + n] = block[:n]
                        t_h5 += time.perf_counter() - t0
                        pending = [block[n:]] if n < rows else []
                        pending_r0 += n
            t0 = time.perf_counter()
            for label, fd in fds.items():
                os.fsync(fd)
            t_mmfs += time.perf_counter() - t0
        finally:
            for fd in fds.values():
                os.close(fd)
        t0 = time.perf_counter()
        fd = os.open(self.h5, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        t_h5 += time.perf_counter() - t0
        self.res["ingest"] = {
            "mmfs_s_per_array": t_mmfs / max(1, len(fds)) if fds else None,
            "h5py_s": t_h5,
            "total_s": time.perf_counter() - t_start,
        }
        log(f"written in {time.perf_counter() - t_start:.1f} s")

    def verify_arrays(self):
        """Untimed: every mmfs array and the HDF5 file hold exactly the generated data."""
        self.drop()
        row_bytes = self.nbytes // self.shape[0]
        targets = [] if self.a.baseline_only else [(lb, self.arr(lb)) for lb in self.labels]
        log(f"verifying the content of {len(targets)} mmfs array(s) and the HDF5 file")
        fds = {lb: os.open(p, os.O_RDONLY) for lb, p in targets}
        bad = {}
        try:
            with h5py.File(self.h5, "r") as f:
                ds = f["a"]
                for r0, slab in slabs(self.shape):
                    n = slab.shape[0]
                    want = slab.tobytes()
                    for lb, fd in fds.items():
                        if lb in bad:
                            continue
                        got = read_exact(fd, len(want), r0 * row_bytes)
                        if got != want:
                            first = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y),
                                         min(len(got), len(want)))
                            bad[lb] = (f"array a-{lb}: wrong bytes from offset {r0 * row_bytes + first} "
                                       f"(got {len(got)} bytes of the {len(want)} of rows {r0}..{r0 + n - 1})")
                    if "h5" not in bad and not np.array_equal(ds[r0:r0 + n], slab):
                        bad["h5"] = f"HDF5 file: wrong data in rows {r0}..{r0 + n - 1}"
        finally:
            for fd in fds.values():
                os.close(fd)
        for msg in bad.values():
            self.failures.append(msg)
            log("WRONG: " + msg)
        self.res["verify_full"] = {lb: (lb not in bad) for lb, _ in targets}
        self.res["verify_full"]["h5"] = "h5" not in bad

    def read_infos_and_plans(self):
        for label in self.labels:
            a = self.arr(label)
            info, err = read_json_file(a + "@/info")
            self.res["arrays"][label] = {"info": info, "info_error": err}
            plans = {}
            for name, view, _ in self.views + [("full", "box/" + ",".join([":"] * 3), None)]:
                plan, err = read_json_file(f"{a}@/plan/{view}")
                if plan is not None and name == "full":
                    self.res["arrays"][label]["region"] = self.array_region(plan)
                if plan is not None:
                    plan = {k: v for k, v in plan.items() if k != "batches"}  # batches can be huge
                plans[name] = plan if plan is not None else {"error": err}
            self.res["arrays"][label]["plans"] = plans
            if "region" not in self.res["arrays"][label]:
                raise BenchError(f"cannot read the plan of {a}'s full read: {plans['full'].get('error')}")

    def array_region(self, plan):
        """(byte offset, bytes) of the image that the array's cells occupy:
        from the first to the last sector of its full read's plan."""
        stats, err = read_json_file(os.path.join(self.mnt, ".mmfs", "stats"))
        if stats is None:
            raise BenchError(f"cannot read {self.mnt}/.mmfs/stats: {err}")
        reqs = [r for b in plan["batches"] for r in b]
        lo = min(lbn for lbn, _ in reqs)
        hi = max(lbn + n for lbn, n in reqs)
        ss = stats["sector_size"]
        return {"offset": lo * ss, "bytes": (hi - lo) * ss}

    # measurements -----------------------------------------------------
    def measure(self):
        a = self.a
        fios = {mode: Fio(self.fiofile, a.fio_bytes, direct=(mode == "direct")) for mode in FULL_MODES}
        fio_bw = {mode: [] for mode in FULL_MODES}
        labels = [] if a.baseline_only else self.labels
        # The basis of the full-read target: fio reading the array's own
        # sectors of the image, right before mmfs reads them.
        region_fios = {lb: {mode: Fio(self.image, self.res["arrays"][lb]["region"]["bytes"],
                                      direct=(mode == "direct"),
                                      offset=self.res["arrays"][lb]["region"]["offset"]) for mode in FULL_MODES}
                       for lb in labels}
        region_bw = {lb: {mode: [] for mode in FULL_MODES} for lb in labels}
        full = {mode: {lb: [] for lb in labels} for mode in FULL_MODES}
        full_stats = {mode: {lb: [] for lb in labels} for mode in FULL_MODES}
        h5_full = []
        mm = {lb: {name: [] for name, _, _ in self.views} for lb in labels}
        mm_stats = {lb: {name: [] for name, _, _ in self.views} for lb in labels}
        h5t = {name: [] for name, _, _ in self.views}
        correct = {lb: {name: True for name, _, _ in self.views} for lb in labels}
        errors = {lb: {} for lb in labels}
        meta_mmfs, meta_local = [], []
        for run in range(a.runs):
            log(f"--- run {run + 1}/{a.runs}")
            for mode in FULL_MODES:
                # fio and mmfs back to back, in the same mode: a pair sees the
                # same state of the host's cache.
                self.drop()
                bw = fios[mode].run()
                fio_bw[mode].append(bw)
                log(f"fio ({mode}): {bw / MiB:.0f} MiB/s")
                for lb in labels:
                    self.drop()
                    bw = region_fios[lb][mode].run()
                    region_bw[lb][mode].append(bw)
                    log(f"fio on {lb}'s sectors of the image ({mode}): {bw / MiB:.0f} MiB/s")
                    if a.remount:
                        self.remount()
                    self.drop()
                    s0 = read_stats(self.mnt)
                    try:
                        dt = time_full_read(self.arr(lb), self.nbytes, direct=(mode == "direct"))
                    except (OSError, BenchError) as e:
                        msg = f"{lb} full read ({mode}): {e}"
                        if msg not in self.failures:
                            self.failures.append(msg)
                        log("ERROR: " + msg)
                        full[mode][lb].append(None)
                        continue
                    full_stats[mode][lb].append(stats_delta(s0, read_stats(self.mnt)))
                    full[mode][lb].append(dt)
                    log(f"full read {lb} ({mode}): {self.nbytes / MiB / dt:.0f} MiB/s, "
                        f"{self.nbytes / dt / bw:.2f} of fio's")
            self.drop()
            dt, n = time_h5_full(self.h5)
            h5_full.append(dt)
            log(f"full read h5py: {n / MiB / dt:.0f} MiB/s")
            for name, view, sel in self.views:
                idx = np_index(sel)
                self.drop()
                dt, ref = time_h5_read(self.h5, idx)
                h5t[name].append(dt)
                for lb in labels:
                    if name in errors[lb]:
                        continue
                    if a.remount:
                        self.remount()
                    path = f"{self.arr(lb)}@/{view}"
                    self.drop()
                    s0 = read_stats(self.mnt)
                    try:
                        dt, got = time_view_read(path)
                    except OSError as e:
                        msg = f"{lb} {view}: {e.strerror} ({errno.errorcode.get(e.errno, e.errno)})"
                        errors[lb][name] = msg
                        self.failures.append(msg)
                        log("ERROR: " + msg)
                        continue
                    mm_stats[lb][name].append(stats_delta(s0, read_stats(self.mnt)))
                    ok = got.size == ref.size and np.array_equal(got.reshape(ref.shape), ref)
                    if not ok:
                        correct[lb][name] = False
                        msg = (f"{lb} {view}: WRONG RESULT ({got.nbytes} bytes, expected {ref.nbytes}"
                               f"{'' if got.size != ref.size else ', content differs'})")
                        if msg not in self.failures:
                            self.failures.append(msg)
                        log(msg)
                    mm[lb][name].append(dt)
                    log(f"{lb} {name}: mmfs {dt * 1e3:.1f} ms, h5py {h5t[name][-1] * 1e3:.1f} ms")
            # metadata
            if not a.baseline_only:
                d = os.path.join(self.mnt, f"meta-{run}")
                try:
                    meta_mmfs.append(metadata_bench(d, a.meta_files, self.drop))
                    log("metadata mmfs: " + ", ".join(f"{k} {v:,.0f}/s" for k, v in meta_mmfs[-1].items()))
                except (OSError, BenchError) as e:
                    msg = f"metadata test in {d}: {e}"
                    self.failures.append(msg)
                    log("ERROR: " + msg)
            d = os.path.join(a.dir, f"meta-local-{os.getpid()}-{run}")
            meta_local.append(metadata_bench(d, a.meta_files, self.drop))

        for mode in FULL_MODES:
            self.res["fio"][mode] = {"engine": fios[mode].engine, "command": getattr(fios[mode], "cmd", None),
                                     "file_bytes": a.fio_bytes, "bw_bytes": summary(fio_bw[mode])}
            self.res["full"][mode] = {}
            for lb in labels:
                secs = full[mode][lb]
                # Each run's mmfs read against the fio run just before it.
                ratios = [self.nbytes / t / bw for t, bw in zip(secs, region_bw[lb][mode]) if t is not None]
                done = [t for t in secs if t is not None]
                reg = self.res["arrays"][lb]["region"]
                self.res["fio_region"].setdefault(lb, {})[mode] = {
                    "command": getattr(region_fios[lb][mode], "cmd", None), "offset": reg["offset"],
                    "bytes": reg["bytes"], "bw_bytes": summary(region_bw[lb][mode])}
                self.res["full"][mode][lb] = {
                    "seconds": summary(done), "MiB_s": summary([self.nbytes / MiB / t for t in done]),
                    "ratios_to_fio": ratios, "ratio_to_fio": statistics.median(ratios) if ratios else None,
                    "stats_delta": full_stats[mode][lb]}
        fio_med = statistics.median(fio_bw["direct"])
        self.res["full"]["h5py"] = {"seconds": summary(h5_full),
                                    "MiB_s": summary([self.nbytes / MiB / t for t in h5_full]),
                                    "ratio_to_fio": statistics.median(
                                        [self.nbytes / t for t in h5_full]) / fio_med}
        for name, view, sel in self.views:
            ref_bytes = int(np.prod(np.zeros(self.shape, dtype=np.uint8)[np_index(sel)].shape)) * 8
            entry = {"view": view, "h5py_index": sel_str(sel), "bytes": ref_bytes,
                     "h5py_ms": summary([t * 1e3 for t in h5t[name]]), "mmfs": {}}
            for lb in labels:
                ms = summary([t * 1e3 for t in mm[lb][name]])
                ratio = (entry["h5py_ms"]["median"] / ms["median"]) if ms else None
                entry["mmfs"][lb] = {"ms": ms, "ratio_h5py_over_mmfs": ratio,
                                     "correct": correct[lb][name] and name not in errors[lb],
                                     "error": errors[lb].get(name),
                                     "plan": self.res["arrays"][lb]["plans"].get(name),
                                     "stats_delta": mm_stats[lb][name]}
            self.res["views"][name] = entry
        for where, runs in (("mmfs", meta_mmfs), ("local", meta_local)):
            if runs:
                self.res["metadata"][where] = {k: summary([r[k] for r in runs]) for k in runs[0]}
        self.res["metadata"]["files"] = a.meta_files

    # report -----------------------------------------------------------
    def report(self, machine):
        r, a = self.res, self.a
        L = []
        L.append("# mmfs daemon benchmark")
        L.append("")
        L.append("```")
        L.append(r["command"])
        L.append("```")
        L.append("")
        m = machine
        L.append(f"{m['date']} · `{m['host']}` · kernel {m['kernel']} · {m['nproc']} CPUs"
                 f"{' (' + m['cpu'] + ')' if m.get('cpu') else ''} · {m.get('mem_total', '?')} RAM · "
                 f"{m['fio']} · Python {m['python']}, numpy {m['numpy']}, h5py {m['h5py']} (HDF5 {m['hdf5']})"
                 f" · mmfs {m['git']}")
        L.append("")
        L.append(f"Disk under test: `{a.dir}` on {m.get('dir_filesystem') or '?'}. "
                 f"Array {'×'.join(map(str, self.shape))} float64 ({fmt_bytes(self.nbytes)}), "
                 f"geometry `{a.geometry}`"
                 f"{', mount options `' + a.mount_options + '`' if a.mount_options else ''}, "
                 f"layouts: {', '.join(self.labels)}; HDF5 baseline chunked "
                 f"{'×'.join(map(str, r['h5_chunks'] or []))}, uncompressed, same disk. "
                 f"{a.runs} run(s): median (min–max).")
        L.append("")
        if self.drop.ok:
            L.append("Cold cache: `sync; echo 3 > /proc/sys/vm/drop_caches` before every timed read"
                     + (" and a remount of the daemon before every mmfs read." if a.remount else
                        " (the daemon's own caches, if any, are not dropped; --remount does that)."))
        else:
            L.append(f"**{self.drop.error}.**")
        L.append("Timings include opening the file (mmfs view file / `h5py.File`).")
        L.append("")
        L.append("## Sequential read")
        L.append("")
        L.append("In each run and I/O mode (O_DIRECT, then the page cache): fio reads a file of its own, "
                 "then the array's sectors of the image (from its first to its last, gaps between cells "
                 "included), then mmfs reads the array; a cache drop before each. The image's sectors are "
                 "the device's bandwidth for the bytes mmfs reads, in the same state of the host's cache "
                 "(a VM's disk is served from its host's page cache at speeds that change from one minute "
                 "to the next; the fio file's row shows how much). vs fio = median over the runs of mmfs / "
                 "the image-sectors fio run just before it (per-run ratios in brackets).")
        L.append("")
        L.append("| what | MiB/s | vs fio | target |")
        L.append("|---|---|---|---|")
        for mode in FULL_MODES:
            fio = r["fio"][mode]
            flags = f"--rw=read --bs=1M --direct={int(mode == 'direct')} --ioengine={fio['engine']} --iodepth=16"
            L.append(f"| fio `{flags}`, a file of its own ({fmt_bytes(a.fio_bytes)}; reference) | "
                     f"{fmt_sum(summary([x / MiB for x in fio['bw_bytes']['runs']]), 0)} | | |")
            how = "O_DIRECT, 8 MiB `read`" if mode == "direct" else "page cache, 8 MiB `read`"
            for lb in self.labels if not a.baseline_only else []:
                reg = r["fio_region"][lb][mode]
                L.append(f"| fio `{flags} --offset={reg['offset']} --readonly`, layout {lb}'s sectors of the image "
                         f"({fmt_bytes(reg['bytes'])}) | "
                         f"{fmt_sum(summary([x / MiB for x in reg['bw_bytes']['runs']]), 0)} | 1.00 | |")
                f = r["full"][mode][lb]
                ratio = f["ratio_to_fio"]
                met = ratio is not None and ratio >= TARGET_FULL
                runs = ", ".join(f"{x:.2f}" for x in f["ratios_to_fio"])
                L.append(f"| mmfs full read, layout {lb} ({how}) | {fmt_sum(f['MiB_s'], 0)} | "
                         f"{'failed' if ratio is None else f'{ratio:.2f} ({runs})'} | "
                         f"≥ {TARGET_FULL:.2f}: {'met' if met else '**missed**'} |")
        f = r["full"]["h5py"]
        L.append(f"| h5py `ds[...]` (reference; vs fio direct) | {fmt_sum(f['MiB_s'], 0)} | "
                 f"{f['ratio_to_fio']:.2f} | |")
        L.append("")
        L.append("## Views vs h5py")
        L.append("")
        L.append("ratio = h5py time / mmfs time (> 1: mmfs faster; target: > 1). "
                 "Amplification = bytes_read / bytes_useful of `A@/plan/VIEW`; modeled ms from an idle device.")
        L.append("")
        if a.baseline_only:
            L.append("| view | h5py selection | bytes | h5py ms |")
            L.append("|---|---|---|---|")
            for name, e in r["views"].items():
                L.append(f"| {name} | `{e['h5py_index']}` | {fmt_bytes(e['bytes'])} | {fmt_sum(e['h5py_ms'])} |")
        else:
            L.append("| layout | view | h5py | bytes | mmfs ms | h5py ms | ratio | bytes read / useful (ampl.) | requests | modeled ms | correct |")
            L.append("|---|---|---|---|---|---|---|---|---|---|---|")
            for lb in self.labels:
                for name, e in r["views"].items():
                    x = e["mmfs"][lb]
                    plan = x["plan"] or {}
                    if "error" in plan:
                        amp = f"plan: {plan['error']}"
                    elif plan.get("bytes_read") is not None and plan.get("bytes_useful"):
                        amp = (f"{fmt_bytes(plan['bytes_read'])} / {fmt_bytes(plan['bytes_useful'])} "
                               f"({plan['bytes_read'] / plan['bytes_useful']:.2f})")
                    else:
                        amp = "—"
                    ratio = x["ratio_h5py_over_mmfs"]
                    rs = "—" if ratio is None else (f"{ratio:.2f}" if ratio > 1 else f"**{ratio:.2f}**")
                    ok = "yes" if x["correct"] else f"**NO** {x['error'] or 'wrong bytes'}"
                    L.append(f"| {lb} | `{e['view']}` | `{e['h5py_index']}` | {fmt_bytes(e['bytes'])} | {fmt_sum(x['ms'])} | "
                             f"{fmt_sum(e['h5py_ms'])} | {rs} | {amp} | {plan.get('requests', '—')} | "
                             f"{fmt_num(plan.get('modeled_ms'))} | {ok} |")
        L.append("")
        L.append(f"## Metadata ({a.meta_files} files, one directory, one process)")
        L.append("")
        md = r["metadata"]
        if "mmfs" in md:
            L.append(f"| operation | mmfs ops/s | target | {a.dir} fs ops/s (reference) |")
            L.append("|---|---|---|---|")
            for k, s in md["mmfs"].items():
                tgt = ""
                if k in META_TARGET_KEYS:
                    tgt = f"≥ {TARGET_META:,.0f}: " + ("met" if s["median"] >= TARGET_META else "**missed**")
                L.append(f"| {k} | {fmt_sum(s, 0)} | {tgt} | {fmt_sum(md.get('local', {}).get(k), 0)} |")
        else:
            L.append(f"| operation | {a.dir} fs ops/s (reference) |")
            L.append("|---|---|")
            for k, s in md.get("local", {}).items():
                L.append(f"| {k} | {fmt_sum(s, 0)} |")
        L.append("")
        L.append("readdir entries = entries listed per second by one `os.listdir`; listings = `os.listdir` calls/s "
                 "of the whole directory. stat (cold) follows a cache drop, so every `stat` reaches the daemon.")
        L.append("")
        if r.get("ingest"):
            ing = r["ingest"]
            s = ing.get("mmfs_s_per_array")
            mm = "" if s is None else f"mmfs {self.nbytes / MiB / s:.0f} MiB/s per array, "
            L.append(f"Ingest (not a target; warm, including fsync): {mm}"
                     f"h5py {self.nbytes / MiB / ing['h5py_s']:.0f} MiB/s.")
            L.append("")
        tg = self.targets()
        if tg is not None:
            met, total, missed = tg
            L.append(f"**Targets: {met}/{total} met.**" + (f" Missed: {', '.join(missed)}." if missed else "")
                     + (" (--quick smoke run: the sizes are too small for the targets to mean anything.)"
                        if a.quick else ""))
            L.append("")
        if self.failures:
            L.append("**Errors / wrong results:**")
            L.append("")
            for f_ in self.failures:
                L.append(f"* {f_}")
            L.append("")
        return "\n".join(L)

    def targets(self):
        r = self.res
        if self.a.baseline_only or not r.get("views"):
            return None
        met, total, missed = 0, 0, []
        for lb in self.labels:
            for mode in FULL_MODES:
                total += 1
                if (r["full"][mode][lb]["ratio_to_fio"] or 0) >= TARGET_FULL:
                    met += 1
                else:
                    missed.append(f"{lb} full read ({mode})")
            for name, e in r["views"].items():
                x = e["mmfs"][lb]
                total += 1
                if x["correct"] and x["ratio_h5py_over_mmfs"] and x["ratio_h5py_over_mmfs"] > 1:
                    met += 1
                else:
                    missed.append(f"{lb} {name}")
        for k, s in r["metadata"].get("mmfs", {}).items():
            if k in META_TARGET_KEYS:
                total += 1
                if s["median"] >= TARGET_META:
                    met += 1
                else:
                    missed.append(k)
        return met, total, missed

    # cleanup ----------------------------------------------------------
    def cleanup(self):
        if self.daemon is not None:
            try:
                self.daemon.unmount()
            except Exception as e:  # keep cleaning up
                log(f"WARNING: unmount failed: {e}")
        if self.mnt and os.path.isdir(self.mnt) and not os.path.ismount(self.mnt):
            try:
                os.rmdir(self.mnt)
            except OSError as e:
                log(f"WARNING: cannot remove {self.mnt}: {e.strerror}")
        if not self.a.keep:
            paths = [self.image, self.h5, self.fiofile]
            if not self.failures and self.daemon is not None:
                paths.append(self.daemon.logpath)
            for p in paths:
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
                except OSError as e:
                    log(f"WARNING: cannot remove {p}: {e.strerror}")
