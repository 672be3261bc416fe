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

The code, beside this file (this one parses the command line and runs main):
mmfs_bench_real_workloads.py (data, selections, workloads),
mmfs_bench_real_targets.py (targets and their timed reads, the daemon),
mmfs_bench_real_run.py (Bench: setup, measurement, results),
mmfs_bench_real_report.py (the markdown) and mmfs_bench_real_plots.py.
"""
import argparse
import json
import os
import signal
import sys
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The helpers of bench_daemon.py and this benchmark's modules (mmfs_bench_real_*.py,
# beside this file). Every name this script had is still importable from it
# (tests/integration/test_mmfs_bench_real.py takes plod_inplace).
from bench_daemon import (BenchError, CacheDropper, Daemon, fmt_bytes, fmt_num,  # noqa: E402,F401
                          log, machine_info, read_json_file, run_cmd, summary, write_all)
from bench_daemon_util import GiB, MiB  # noqa: E402,F401
from mmfs_bench_real_plots import plot, plot_shared, target_style  # noqa: E402,F401
from mmfs_bench_real_report import fmt_ms, fmt_sig, report  # noqa: E402,F401
from mmfs_bench_real_run import MANIFEST_VERSION, SCHEMA, VERIFY_BLOCK, Bench, mem_available  # noqa: E402,F401
from mmfs_bench_real_targets import (BASELINES, LAYOUTS, READ_CHUNK, MmfsDaemon, is_mounted,  # noqa: E402,F401
                                     layout_attrs, read_h5, read_memmap, read_mmfs, read_zarr)
from mmfs_bench_real_workloads import (KINDS, box_spelling, data_slabs, grid_cells, make_workloads,  # noqa: E402,F401
                                       np_index, numpy_spelling, pct_label, plod_inplace, result_shape)

try:
    import h5py
except ImportError:  # reported in check_tools()
    h5py = None
try:
    import zarr
except ImportError:
    zarr = None

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


# --------------------------------------------------------------------------
# what bench/python_bench.py (`mmfs-bench python`) shares with this script:
# the parsing of list and shape options, the run guarded by the cleanup, the
# machine's description and the output files


def parse_shape(ap, text, spelling):
    """The dims of `text` ("S0,S1,..."); else `ap` exits naming --shape and `spelling`."""
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        ap.error(f"--shape: expected {spelling}, got {text!r}")


def list_option(ap, name, value, allowed):
    """The comma-separated items of option --`name`; `ap` exits on an item not in
    `allowed` (None: any) or on one given twice."""
    items = [x.strip() for x in value.split(",") if x.strip()]
    bad = [x for x in items if allowed is not None and x not in allowed]
    if bad:
        ap.error(f"--{name}: unknown {', '.join(bad)}; accepted: {', '.join(allowed)}")
    if len(set(items)) != len(items):
        ap.error(f"--{name}: duplicates")
    return items


def note_loadavg(machine, key):
    """machine[key]: the load average now (left out when /proc/loadavg cannot be read)."""
    try:
        machine[key] = " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        pass


def machine_at_start(a, **extra):
    """machine_info without fio, with `extra` and the load average at the start."""
    machine = machine_info(a)
    machine.pop("fio", None)
    machine.update(extra)
    note_loadavg(machine, "loadavg")
    return machine


def run_guarded(b, name, steps, t_start):
    """Runs steps() (the setup and the measurements of Bench `b`; it returns the
    machine's description), then b.cleanup() whatever happens, ignoring SIGTERM,
    SIGHUP and SIGINT while it cleans up. A BenchError or OSError is logged as
    `name: ...` and added to b.failures. When steps() finished, setup["total_s"]
    is the time since `t_start` and the machine gets the load average at the end.
    Returns (exit status, the machine or None when steps() did not finish)."""
    status, machine = 0, None
    try:
        machine = steps()
    except BenchError as e:
        log(f"{name}: {e}")
        b.failures.append(str(e))
        status = 1
    except OSError as e:
        import traceback
        where = traceback.extract_tb(e.__traceback__)[-1]
        log(f"{name}: {e} (in {where.name}, line {where.lineno})")
        b.failures.append(str(e))
        status = 1
    except KeyboardInterrupt:
        log(f"{name}: interrupted")
        status = 130
    finally:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)  # let the cleanup finish
        b.cleanup()
    if machine is not None:
        b.setup["total_s"] = time.perf_counter() - t_start
        note_loadavg(machine, "loadavg_end")
    return status, machine


def write_outputs(out, md, res):
    """PREFIX.md and PREFIX.json (`out` is PREFIX), then the markdown on stdout."""
    with open(out + ".md", "w") as f:
        f.write(md + "\n")
    with open(out + ".json", "w") as f:
        json.dump(res, f, indent=1, default=str)
        f.write("\n")
    print(md)


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
    a.shape = parse_shape(ap, a.shape, "S0,S1,...")
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
    a.layouts = list_option(ap, "layouts", a.layouts, None)
    a.baselines = list_option(ap, "baselines", a.baselines, list(BASELINES))
    a.workloads = list_option(ap, "workloads", a.workloads, KINDS)
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
    t_start = time.perf_counter()

    def steps():
        b.check_tools()
        os.makedirs(a.dir, exist_ok=True)
        machine = machine_at_start(a, zarr=getattr(zarr, "__version__", None))
        if a.layouts:
            b.copy_binaries()
        if b.reuse_or_build() and a.layouts:
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
        return machine

    status, machine = run_guarded(b, "mmfs-bench real", steps, t_start)
    if machine is not None:  # measured
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
        write_outputs(a.out, md, res)
        log(f"wrote {a.out}.md, {a.out}.json" + (f" and {len(res.get('plots', []))} plot(s)" if res.get("plots")
                                                  else "") + f" in {time.perf_counter() - t_start:.0f} s")
        if b.failures:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
