"""bench/mmfs_bench_real.py (`mmfs-bench real`): the real-clock, cold-cache
benchmark of the workloads on every mmfs layout and on the h5py, zarr and
numpy.memmap baselines. One --quick run (64x64x32, 1 run) checks that every
workload x target is measured and verified, that mmfs targets carry their
modeled time, that the markdown table and the PNG plots are written, and that
nothing stays mounted or on disk."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT, build_dir
from mmfs_mount import SCRATCH, plod

SCRIPT = REPO_ROOT / "bench" / "mmfs_bench_real.py"
LAYOUTS = ["naive", "zorder", "hilbert", "multimap"]
BASELINES = ["h5py-contig", "h5py-chunked", "zarr", "memmap"]


def run_script(*args, timeout=300):
    env = dict(os.environ, MMFS_BUILD=str(build_dir()))
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def mounts_under(path):
    root = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(root)]


def daemons_for(path):
    """Pids of processes whose command line names `path` (a daemon left running)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(str(path).encode() in a for a in argv) and int(entry) != os.getpid():
            pids.append(int(entry))
    return pids


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    for prog in (build_dir() / "daemon" / "mmfs", build_dir() / "mkfs" / "mkfs.mmfs"):
        if not os.access(prog, os.X_OK):
            pytest.fail(f"{prog} is not built: run scripts/build.sh (or set MMFS_BUILD)", pytrace=False)
    out = tmp_path_factory.mktemp("bench-real") / "real"
    work = Path(tempfile.mkdtemp(dir=SCRATCH, prefix="mmfs-bench-real-test-")) / "work"  # O_DIRECT-capable disk
    try:
        proc = run_script("--quick", "--dir", work, "--out", out, "--build", build_dir())
        left_mounts = mounts_under(work.parent)
        left_daemons = daemons_for(work)
        left_files = sorted(os.listdir(work)) if work.exists() else []
    finally:
        for m in mounts_under(work.parent):  # never leave a mount behind, even when the test fails
            subprocess.run(["fusermount3", "-uz", m], capture_output=True)
        shutil.rmtree(work.parent, ignore_errors=True)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    res = json.loads(Path(f"{out}.json").read_text())
    return dict(proc=proc, out=out, res=res, mounts=left_mounts, daemons=left_daemons, files=left_files,
                md=Path(f"{out}.md").read_text())


def test_every_workload_and_target_is_measured_and_verified(quick):
    res = quick["res"]
    assert res["schema"] == "mmfs-bench-real/1"
    assert res["config"]["shape"] == [64, 64, 32] and res["config"]["runs"] == 1
    targets = [t["name"] for t in res["targets"]]
    assert targets == [f"mmfs-{lb}" for lb in LAYOUTS] + BASELINES
    ids = [w["id"] for w in res["workloads"]]
    assert ids == ["beam0", "beam1", "beam2", "slice0", "slice1", "slice2", "cube1", "cube5", "cube10", "full",
                   "point", "plod2-full", "plod2-slice0"]
    rows = {(r["workload"], r["target"]): r for r in res["results"]}
    assert len(rows) == len(ids) * len(targets)
    for w in res["workloads"]:
        for t in targets:
            r = rows[(w["id"], t)]
            assert r["verified"] is True and r["error"] is None, (w["id"], t, r["error"])
            assert r["ms"]["median"] > 0 and len(r["ms"]["runs"]) == 1
            assert r["us_per_element"]["median"] == pytest.approx(r["ms"]["median"] * 1e3 / w["elements"])
            assert r["ms_per_cell"]["median"] == pytest.approx(r["ms"]["median"] / w["cells"])
            assert r["clock"] == "real"
            assert r["best_baseline"] in BASELINES
            assert r["ratio_vs_best_baseline"] > 0
            if t.startswith("mmfs-"):
                m = r["modeled"]
                assert m["modeled_ms"] > 0, (w["id"], t, m)
                assert m["bytes_read"] >= m["bytes_useful"] > 0 and m["requests"] >= 1
                assert m["ms_per_cell"] == pytest.approx(m["modeled_ms"] / w["cells"])
                # the host part of a cold read: the layout's point, real less modeled
                point = rows[("point", t)]
                host = max(0.0, point["ms"]["median"] - point["modeled"]["modeled_ms"])
                assert m["run_host_ms"] == pytest.approx(host)
                assert m["modeled_plus_host_ms"] == pytest.approx(m["modeled_ms"] + host)
                # the device's own clock, from the fresh mount's /.mmfs/stats
                busy = [sum(float(x["device_busy_ms"]) for x in run) / len(run) for run in r["daemon_stats"]]
                assert r["device_ms"]["median"] == pytest.approx(sorted(busy)[len(busy) // 2]) and busy[0] > 0
            else:
                assert r["modeled"] is None
    assert res["failures"] == []


def test_workload_definitions(quick):
    ws = {w["id"]: w for w in quick["res"]["workloads"]}
    shape = (64, 64, 32)
    cell = quick["res"]["config"]["cell"]      # the naive array's cell: the unit of ms per cell
    assert len(cell) == 3 and all(c >= 1 for c in cell)
    assert ws["full"]["cells"] == np.prod([-(-s // c) for s, c in zip(shape, cell)])
    for d in range(3):
        beam = ws[f"beam{d}"]
        assert beam["elements"] == shape[d] and len(beam["sels"]) == 2      # --quick: 2 positions per dim
        assert beam["cells"] == -(-shape[d] // cell[d])
        for sel in beam["sels"]:
            assert sel[d] is None and all(isinstance(x, int) for i, x in enumerate(sel) if i != d)
        assert ws[f"slice{d}"]["mmfs"] == [f"slice/{d}/{shape[d] // 2}"]
    # p%-length cubes: edge max(1, round(p/100 * S_d))
    for p in (1, 5, 10):
        sel = ws[f"cube{p}"]["sels"][0]
        edges = [b - a for a, b in sel]
        assert edges == [max(1, round(p / 100 * s)) for s in shape]
        assert all(0 <= a and b <= s for (a, b), s in zip(sel, shape))
    assert ws["full"]["mmfs"] == [""] and ws["full"]["plans"] == ["box/:,:,:"]
    point = ws["point"]
    assert point["elements"] == 1 and len(point["sels"]) == 2 and point["cells"] == 1
    for sel, v in zip(point["sels"], point["mmfs"]):
        assert all(isinstance(x, int) and 0 <= x < s for x, s in zip(sel, shape))
        assert v == "box/" + ",".join(map(str, sel))
    assert ws["plod2-full"]["mmfs"] == ["plod/2"]
    assert ws["plod2-slice0"]["mmfs"] == ["plod/2@/slice/0/32"]


def test_markdown_table_and_plots(quick):
    md = quick["md"]
    header = "| workload | elements | " + " | ".join([f"mmfs-{lb}" for lb in LAYOUTS] + BASELINES) + " |"
    assert header in md
    for w in quick["res"]["workloads"]:
        assert f"\n| {w['id']} | " in md
    assert "*model " in md and "drop_caches" in md
    assert "| model + host ms | error |" in md and "model + host" in md.split("Within ±30 %")[1]
    assert "| real ms | device ms | model ms |" in md and "of the device time" in md.split("Within ±30 %")[1]
    if not quick["res"]["cold_cache"]["drop_caches"]:
        assert "NOT cold-cache" in md
    plots = quick["res"]["plots"]
    names = [Path(p).name for p in plots]
    for k in ("beams", "slices", "cubes", "scans"):
        assert f"real-{k}.png" in names
    if (REPO_ROOT / "bench" / "plot_workloads.py").exists():  # the shared figure, per geometry
        assert "real-atlas10k3-real.png" in names, quick["res"].get("plot_error")
    for p in plots:
        data = Path(p).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10000, p
        assert f"]({Path(p).name})" in md


def test_nothing_left_mounted_running_or_on_disk(quick):
    assert quick["mounts"] == []
    assert quick["daemons"] == []
    assert quick["files"] == []


def test_numpy_plod_matches_the_views_definition():
    spec = importlib.util.spec_from_file_location("mmfs_bench_real", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a = np.random.default_rng(3).standard_normal(1000) * 1e3
    for k in range(1, 9):
        assert np.array_equal(mod.plod_inplace(a.copy(), k).view("<u8"), plod(a, k).view("<u8")), k


def test_help_and_bad_arguments():
    proc = run_script("--help", timeout=60)
    assert proc.returncode == 0
    for word in ("--quick", "--layouts", "--baselines", "--cubes", "--keep", "--reuse", "--no-remount", "drop_caches"):
        assert word in proc.stdout, word
    for bad in (["--shape", "64"], ["--baselines", "netcdf"], ["--runs", "0"], ["--cubes", "0"], ["--plod", "9"]):
        proc = run_script(*bad, "--dir", "/nonexistent/never-created", timeout=60)
        assert proc.returncode == 2, (bad, proc.stderr)
        assert not os.path.exists("/nonexistent/never-created")
