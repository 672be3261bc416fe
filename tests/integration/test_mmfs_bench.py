"""mmfs-bench: the modeled MultiMap experiments, the cell-shape trade-off, and the
benchmark workloads in modeled time (`modeled`, checked against a mounted
volume's A@/plan) with the pass-through to the real clock (`real`)."""
import json
import os

import pytest

from conftest import REPO_ROOT, build_dir, run_tool


@pytest.fixture(scope="module")
def bench():
    path = build_dir() / "bench" / "mmfs-bench"
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built", pytrace=False)
    return lambda *args: run_tool(path, *args, timeout=600)


@pytest.fixture(scope="module")
def quick_results(bench, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    rc, stdout, stderr = bench("model", "--quick", "--runs", "3", "--profile", "atlas10k3", "--out", out)
    assert rc == 0, stderr
    assert "### atlas10k3" in stdout
    return json.loads((out / "multimap-table3.json").read_text())["results"]["atlas10k3"]


def pick(rows, dataset, query, layout, discipline="paper"):
    [row] = [r for r in rows if r["dataset"] == dataset and r["query"] == query and r["layout"] == layout
             and r["discipline"] == discipline]
    return row


def test_every_query_has_every_layout_and_discipline(quick_results):
    queries = {(r["dataset"], r["query"]) for r in quick_results}
    assert ("3-D", "Dim_0") in queries and ("4-D", "Dim_3") in queries
    for dataset, query in queries:
        for layout in ("naive", "hilbert", "multimap"):
            for discipline in ("paper", "mmfs"):
                row = pick(quick_results, dataset, query, layout, discipline)
                assert row["mean_ms"] > 0
                assert row["bytes_read"] >= row["bytes_useful"] > 0


def test_multimap_streams_the_primary_dimension_and_is_semi_sequential_elsewhere(quick_results):
    for dataset in ("3-D", "4-D"):
        naive0 = pick(quick_results, dataset, "Dim_0", "naive")["mean_ms"]
        mm0 = pick(quick_results, dataset, "Dim_0", "multimap")["mean_ms"]
        hilbert0 = pick(quick_results, dataset, "Dim_0", "hilbert")["mean_ms"]
        assert mm0 < 0.2 and naive0 < 0.2          # streaming: a fraction of a ms per cell
        assert hilbert0 > 5 * mm0                   # Hilbert gives up streaming
        mm1 = pick(quick_results, dataset, "Dim_1", "multimap")["mean_ms"]
        assert mm1 < 2.5                            # about one settle time per cell


def test_analytic_model_is_reported_for_naive_and_multimap(quick_results):
    row = pick(quick_results, "3-D", "Dim_1", "multimap")
    assert row["analytic_ms"] > 0
    assert "analytic_ms" not in pick(quick_results, "3-D", "Dim_1", "hilbert")
    assert pick(quick_results, "3-D", "Dim_1", "naive")["paper_measured_ms"] == 2.7


def test_amplification_table(bench):
    rc, out, err = bench("amplification", "--shape", "64,64,16", "--layout", "naive", "--layout", "multimap")
    assert rc == 0, err
    assert "brick of one sector (4,4,4)" in out and "brick of 4096 B (daemon default) (8,8,8)" in out
    # A run along the primary dimension amplifies the slice across it by the run length.
    run_rows = [line for line in out.splitlines() if line.startswith("| run along primary")]
    assert run_rows and all("| 64.00 |" in line for line in run_rows)


def test_bad_arguments_fail_cleanly(bench):
    rc, _, err = bench("model", "--profile", "nosuchdisk", "--quick", "--runs", "1")
    assert rc == 1 and "nosuchdisk" in err
    rc, _, _ = bench("model", "--runs", "0")
    assert rc != 0
    rc, out, _ = bench("--help")
    assert rc == 0 and "model" in out


# --- mmfs-bench modeled: the workloads in modeled time ---------------------------

@pytest.fixture(scope="module")
def modeled_quick(bench, tmp_path_factory):
    out = tmp_path_factory.mktemp("modeled")
    rc, stdout, stderr = bench("modeled", "--quick", "--out", out)
    assert rc == 0, stderr
    return out, stdout, json.loads((out / "mmfs-bench-modeled.json").read_text())


def results_of(doc, profile):
    [prof] = [p for p in doc["profiles"] if p["profile"] == profile]
    return prof, {(r["workload"], r["target"]): r for r in prof["results"]}


def test_modeled_quick_writes_markdown_json_and_plots(modeled_quick):
    out, stdout, doc = modeled_quick
    md = (out / "mmfs-bench-modeled.md").read_text()
    assert stdout.startswith(md[:200])
    for profile in ("atlas10k3", "cheetah36es"):
        assert f"## {profile} — modeled clock" in md
    assert "p%-length cubes (§5.2)" in md and "Baselines are models" in md
    assert "Table 3" not in md  # --quick leaves the Table 3 reproduction out
    assert doc["schema"] == "mmfs-bench-modeled/1" and doc["clock"] == "modeled"
    assert doc["config"]["shape"] == [512, 512, 128]
    pytest.importorskip("matplotlib")
    for profile in ("atlas10k3", "cheetah36es"):
        png = out / f"mmfs-bench-modeled-{profile}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({png.name})" in md


def test_modeled_rows_cover_every_workload_and_target(modeled_quick):
    _, _, doc = modeled_quick
    prof, by = results_of(doc, "atlas10k3")
    targets = [t["name"] for t in prof["targets"]]
    assert targets == ["mmfs-naive", "mmfs-zorder", "mmfs-hilbert", "mmfs-multimap", "contiguous", "chunked"]
    ids = [w["id"] for w in prof["workloads"]]
    assert ids == ["beam0", "beam1", "beam2", "slice0", "slice1", "slice2", "cube1", "cube5", "cube10", "full",
                   "plod2-full", "plod2-slice0"]
    for w in ids:
        for t in targets:
            r = by[(w, t)]
            assert r["ms"]["min"] <= r["ms"]["median"] <= r["ms"]["max"]
            assert len(r["ms"]["runs"]) == (5 if w.startswith(("beam", "cube")) else 1)
            assert r["bytes_read"] >= r["bytes_useful"] > 0
        assert max(by[(w, t)]["ratio_vs_best_baseline"] for t in ("contiguous", "chunked")) == 1.0
    # PLoD reads whole elements on these layouts: the same plans as the unreduced views.
    for t in targets:
        assert by[("plod2-full", t)]["ms"] == by[("full", t)]["ms"]
        assert by[("plod2-slice0", t)]["ms"] == by[("slice0", t)]["ms"]


def test_multimap_beats_naive_per_cell_along_the_non_primary_dimensions_on_atlas(modeled_quick):
    # The MultiMap paper's claim (§5.3, Table 3): beams along Dim_1.. cost about
    # one settle time per cell, less than Naive's seeks. The primary dimension
    # (default order) is the last one, dim 2.
    _, _, doc = modeled_quick
    _, by = results_of(doc, "atlas10k3")
    for d in (0, 1):
        mm = by[(f"beam{d}", "mmfs-multimap")]["ms_per_cell"]["median"]
        naive = by[(f"beam{d}", "mmfs-naive")]["ms_per_cell"]["median"]
        assert mm < naive, f"beam{d}: multimap {mm:.3f} ms/cell, naive {naive:.3f}"
    # Along the primary dimension both stream: a fraction of a millisecond per cell.
    assert by[("beam2", "mmfs-multimap")]["ms_per_cell"]["median"] < 0.5


def test_baseline_models_issue_library_requests(modeled_quick):
    _, _, doc = modeled_quick
    _, by = results_of(doc, "atlas10k3")
    # Contiguous: a beam along dim 0 is one page per element row; along the last dim one request.
    assert by[("beam0", "contiguous")]["requests"] == 512
    assert by[("beam2", "contiguous")]["requests"] == 1
    # Chunked 64^3: whole chunks, 2 MiB each.
    assert by[("beam0", "chunked")]["bytes_read"] == 8 * 64 ** 3 * 8
    assert by[("full", "chunked")]["bytes_read"] == 512 * 512 * 128 * 8


def test_modeled_slices_equal_the_amplification_table(bench, tmp_path):
    # `mmfs-bench amplification` plans slices of one-sector 4x4x4 bricks from LBN 0;
    # the same cell through `modeled` gives the same time and amplification.
    rc, amp, err = bench("amplification", "--shape", "64,64,16", "--layout", "naive", "--layout", "multimap")
    assert rc == 0, err
    rc, _, err = bench("modeled", "--profile", "atlas10k3", "--shape", "64,64,16", "--cell", "4,4,4", "--layout",
                       "naive", "--layout", "multimap", "--no-baselines", "--no-plot", "--runs", "1", "--out", tmp_path)
    assert rc == 0, err
    _, by = results_of(json.loads((tmp_path / "mmfs-bench-modeled.json").read_text()), "atlas10k3")
    for layout in ("naive", "multimap"):
        [line] = [ln for ln in amp.splitlines() if ln.startswith(f"| brick of one sector (4,4,4) | {layout} |")]
        cols = [c.strip() for c in line.strip("|").split("|")][2:]
        for d in range(3):
            r = by[(f"slice{d}", f"mmfs-{layout}")]
            assert cols[2 * d] == f"{r['bytes_read'] / r['bytes_useful']:.2f}"
            assert cols[2 * d + 1] == f"{r['ms']['median']:.0f}"


def test_modeled_ms_equals_the_mounted_arrays_plan(bench, volume_factory, tmp_path):
    """A@/plan/VIEW on a mounted atlas10k3 volume gives the modeled_ms, requests and
    bytes `mmfs-bench modeled` computes for the same view, when its space starts
    where the mounted array's does (--first-lbn = A@/lbn/0,0,0)."""
    from mmfs_mount import make_array, read_json, view

    vol = volume_factory(size="256M", geometry="atlas10k3")
    shape = (96, 80, 48)
    for layout in ("naive", "multimap"):
        path = make_array(vol.mnt / layout, shape, layout=layout)
        first_lbn = int((view(path, "lbn", "0,0,0")).read_text().split()[0])
        out = tmp_path / layout
        rc, _, err = bench("modeled", "--profile", "atlas10k3", "--shape", ",".join(map(str, shape)), "--layout",
                           layout, "--no-baselines", "--no-plot", "--runs", "2", "--first-lbn", first_lbn,
                           "--out", out)
        assert rc == 0, err
        prof = json.loads((out / "mmfs-bench-modeled.json").read_text())["profiles"][0]
        by = {r["workload"]: r for r in prof["results"]}
        checked = 0
        for w in prof["workloads"]:
            for i, v in enumerate(w["views"]):
                plan = read_json(view(path, "plan", *v.split("/")))
                r = by[w["id"]]
                assert plan["modeled_ms"] == pytest.approx(r["ms"]["runs"][i], rel=1e-12), (layout, v)
                if not w["random"]:
                    assert plan["requests"] == r["requests"] and plan["bytes_read"] == r["bytes_read"], (layout, v)
                checked += 1
        assert checked >= 12


def test_modeled_and_real_command_lines(bench):
    rc, out, _ = bench("modeled", "--help")
    assert rc == 0 and "--first-lbn" in out and "--with-table3" in out and "--cubes" in out
    rc, _, err = bench("modeled", "--quick", "--layout", "quadtree")
    assert rc == 1 and "quadtree" in err
    rc, _, err = bench("modeled", "--quick", "--shape", "64,64", "--cell", "4,4,4")
    assert rc == 1 and "--cell" in err
    rc, out, _ = bench("--help")
    assert rc == 0 and "modeled" in out and "real" in out
    script = REPO_ROOT / "bench" / "mmfs_bench_real.py"
    if not script.exists():
        pytest.skip("bench/mmfs_bench_real.py is not there yet")
    # Everything after `real`, --help included, goes to the script.
    rc, out, err = bench("real", "--help")
    assert rc == 0, err
    assert "mmfs_bench_real.py" in out and "--shape" in out


def test_capsule_table5_shape_and_directions(bench, tmp_path):
    """`mmfs-bench capsule` (MEMS Table 5) on a smaller table: one attribute
    streams at p LBNs a pass (>= 8x faster than the whole table), capsules
    read only the attributes asked for, and a whole record costs capsules one
    parallel access (less than the normal layout's 16-sector page)."""
    rc, stdout, stderr = bench("capsule", "--records", "400000", "--samples", "50", "--out", tmp_path)
    assert rc == 0, stderr
    assert "| a1 scan |" in stdout
    report = json.loads((tmp_path / "mmfs-bench-capsule.json").read_text())
    assert report["capsule"]["records"] == 64 and report["capsule"]["sectors"] == 9
    assert report["capsule"]["split_capsules"] == 0
    rows = {r["operation"]: r for r in report["rows"]}
    full, a1, a12 = rows["entire table scan"], rows["a1 scan"], rows["a1 + a2 scan"]
    assert report["a1_speedup"] >= 8
    assert a1["bytes_read"][2] * 9 == full["bytes_read"][2]
    assert a12["bytes_read"][2] * 9 == full["bytes_read"][2] * 5
    assert a1["normal_ms"] == pytest.approx(full["normal_ms"])  # pages hold every attribute
    record = rows["one whole record"]
    assert record["capsule_resolved_ms"] < record["normal_ms"]
    assert "paper" not in full  # the paper's figures are for its 10,000,000-record table only
    rc, _, stderr = bench("capsule", "--profile", "atlas10k3")
    assert rc != 0 and "MEMS" in stderr
