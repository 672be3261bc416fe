"""mmfs-bench: the modeled MultiMap experiments and the cell-shape trade-off."""
import json
import os

import pytest

from conftest import build_dir, run_tool


@pytest.fixture(scope="module")
def bench():
    path = build_dir() / "tools" / "mmfs-bench"
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
    assert "brick (default) (4,4,4)" in out
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
