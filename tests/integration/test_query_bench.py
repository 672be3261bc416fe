"""`mmfs-bench query` (bench/query_bench.py): the Set Query Benchmark and
the 3-D array queries on a mounted mmfs beside DuckDB, pyroaring and numpy.

One --quick run end to end (100,000 rows, 64x64x32, the e1 encoding and the
index-less scan, 1 run) through the built `mmfs-bench query`: it exits 0,
every engine returned the reference count for all 75 queries, the 3-D reads
were checked, the report files exist, and nothing stays mounted or on disk
(the test unmounts and removes its scratch directory even when it fails).
The generator is checked against the Park-Miller sequence computed one
number at a time."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import REPO_ROOT, build_dir
from mmfs_mount import SCRATCH

sys.path.insert(0, str(REPO_ROOT / "bench"))
import setquery as sq  # noqa: E402

ENCODINGS = ["e1", "none"]
ENGINES = ["numpy", "pyroaring", "duckdb"] + [f"mmfs-{e}" for e in ENCODINGS]


def mounts_under(path):
    root = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(root)]


def processes_naming(path):
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(str(path).encode() in a for a in argv):
            pids.append(int(entry))
    return pids


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    bench = build_dir() / "bench" / "mmfs-bench"
    for prog in (bench, build_dir() / "daemon" / "mmfs", build_dir() / "mkfs" / "mkfs.mmfs"):
        if not os.access(prog, os.X_OK):
            pytest.fail(f"{prog} is not built: run scripts/build.sh (or set MMFS_BUILD)", pytrace=False)
    out = tmp_path_factory.mktemp("bench-query")
    scratch = Path(tempfile.mkdtemp(dir=SCRATCH, prefix="mmfs-bench-query-test-"))
    try:
        proc = subprocess.run([str(bench), "query", "--quick", "--rows", "100000", "--encodings", ",".join(ENCODINGS),
                               "--runs", "1", "--scratch", str(scratch), "--out", str(out), "--build", str(build_dir())],
                              capture_output=True, text=True, timeout=900,
                              env=dict(os.environ, MMFS_BUILD=str(build_dir())))
        left = dict(mounts=mounts_under(scratch), daemons=processes_naming(scratch), files=sorted(os.listdir(scratch)))
    finally:
        for m in mounts_under(scratch):  # never leave a mount behind, even when the run or the test fails
            subprocess.run(["fusermount3", "-u", m], capture_output=True)
            if m in mounts_under(scratch):
                subprocess.run(["fusermount3", "-uz", m], capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    res = json.loads((out / "mmfs-bench-query.json").read_text())
    return dict(proc=proc, out=out, res=res, md=(out / "mmfs-bench-query.md").read_text(), **left)


def test_every_engine_agrees_on_all_75_queries(quick):
    res = quick["res"]
    assert res["schema"] == "mmfs-bench-query/1"
    assert res["completed"] is True and res["failures"] == [] and res["all_agreed"] is True
    s = res["setquery"]
    assert s["rows"] == 100000 and len(s["queries"]) == 75 and s["all_agreed"] is True
    assert [q["group"] for q in s["queries"]].count("Q1") == 13
    engines = {e["engine"]: e for e in s["engines"]}
    assert sorted(engines) == sorted(ENGINES)
    ref = [q["count"] for q in s["queries"]]
    for name, e in engines.items():
        assert e["agreed"] is True and "mismatch" not in e, (name, e.get("mismatch"))
        assert e["warm"]["passes"] == 1 and e["warm"]["total_s"]["median"] > 0
        assert len(e["warm"]["per_query_ms"]) == 75 and None not in e["warm"]["per_query_ms"]
        if name != "pyroaring":
            assert e["cold"]["total_s"]["median"] > 0
    for enc in ENCODINGS:
        e = engines[f"mmfs-{enc}"]
        assert set(e["index_bytes_per_column"]) == set(sq.COLUMNS)
        assert e["build_s"] >= 0
        assert e["cold"].get("stats") is not None        # /.mmfs/stats deltas of the cold pass
    assert engines["mmfs-e1"]["index_bytes"] > 0
    assert engines["mmfs-none"]["index_bytes"] == 0
    assert sum(ref) > 0 and all(c >= 0 for c in ref)


def test_3d_queries_checked(quick):
    f = quick["res"]["field3d"]
    assert f["shape"] == [64, 64, 32]
    rows = [r for r in f["results"] if r["engine"].startswith("mmfs-")]
    # every encoding x 4 thresholds x count/coords/values, each read checked against numpy
    assert len(rows) == len(ENCODINGS) * 4 * 3
    for r in rows:
        assert "error" not in r, r
        assert r["s"]["median"] > 0
        assert r["selectivity"] > 0
    assert {r["threshold"] for r in rows} == {"p99 edge", "p99 inside a bin", "p90 edge", "p90 inside a bin"}
    # on a bin edge the e1 index answers count and coords alone: no data sector read
    for r in rows:
        if r["encoding"] == "e1" and r["threshold"].endswith("edge") and r["view"] in ("count", "coords"):
            assert r["aligned_plan"] is True and r["data_bytes_read"] == 0, r
        if r["encoding"] == "none":
            assert r["data_bytes_read"] > 0, r
    assert any(r["engine"] == "numpy" for r in f["results"])


def test_report_files_and_figures(quick):
    md = quick["md"]
    for title in ("Figure 1", "Figure 8", "Figure 10", "Every engine returned the reference count for all 75 "
                                                          "queries: yes"):
        assert title in md
    assert "| paper: turing | elapsed s | 259 |" in md        # the paper's Figure 10, embedded
    assert (quick["out"] / "mmfs-bench-query.json").stat().st_size > 0


def test_nothing_left_behind(quick):
    assert quick["mounts"] == []
    assert quick["daemons"] == []
    assert quick["files"] == []


def test_generator_is_the_park_miller_sequence():
    assert int(sq.park_miller_block(1, 10000)[-1]) == 1043618065     # Park & Miller's published check
    rows = 2500
    x, seq = 1, []
    for _ in range(rows * len(sq.GEN_ORDER)):
        x = x * 16807 % (2**31 - 1)
        seq.append(x)
    cols = sq.generate(rows, block_rows=999)                          # several blocks, a short last one
    for j, c in enumerate(sq.GEN_ORDER):
        want = [seq[r * len(sq.GEN_ORDER) + j] % sq.CARD[c] + 1 for r in range(rows)]
        assert cols[c].tolist() == want, c
    assert cols["KSEQ"].tolist() == list(range(1, rows + 1))
    qs = sq.queries()
    assert len(qs) == 75
    assert [sum(q["group"] == g for q in qs) for g in sq.GROUPS] == [13, 12, 12, 11, 11, 8, 8]
    assert sq.mmfs_cond(qs[-1]["tree"]) == "K1K in [850,950]&K10==7&K25 in [3,4]&K2==1&K100>80"
