"""`mmfs-bench freebw`: the MEMS paper's free-bandwidth scan (§5.1, Table 4) on a
small G2-like device (--quick): the table, the JSON, the calibrated rate and
the argument errors."""
import json
import os

import pytest

from conftest import build_dir, run_tool


@pytest.fixture(scope="module")
def bench():
    path = build_dir() / "bench" / "mmfs-bench"
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built", pytrace=False)
    return lambda *args: run_tool(path, *args, timeout=600)


def test_freebw_quick_table_and_json(bench, tmp_path):
    rc, stdout, stderr = bench("freebw", "--quick", "--seed", "7", "--out", tmp_path)
    assert rc == 0, stderr
    assert "| p | M | requests to 95 % |" in stdout and "calibrated" in stdout
    assert (tmp_path / "mmfs-bench-freebw.md").read_text() == stdout
    report = json.loads((tmp_path / "mmfs-bench-freebw.json").read_text())
    assert report["schema"] == "mmfs-bench-freebw/1" and report["quick"]
    rows = {(r["p"], r["M"]): r for r in report["rows"]}
    assert set(rows) == {(10, 0), (10, 5), (20, 0), (20, 5)}
    for r in rows.values():
        assert r["capacity_lbns"] == 100 * 27 * 100
        assert 0 < r["requests_95"] < r["requests_100"]
        assert r["foreground_touched"] + r["granted_100"] == r["capacity_lbns"]
        assert r["curve_requests_per_percent"][-1] == r["requests_100"]
    # One rate for every row, calibrated on p = 10, M = 0 at the paper's 1120 minutes.
    assert rows[(10, 0)]["minutes_95"] == pytest.approx(1120)
    assert report["rate_requests_per_s"] == pytest.approx(rows[(10, 0)]["requests_95"] / (1120 * 60))
    # More parallelism or micropositioning: a faster scan, more free LBNs per request.
    assert rows[(20, 0)]["requests_95"] < rows[(10, 0)]["requests_95"]
    assert rows[(10, 5)]["requests_100"] < rows[(10, 0)]["requests_100"]
    assert rows[(20, 0)]["free_lbns_per_request_95"] > rows[(10, 0)]["free_lbns_per_request_95"]
    assert rows[(10, 0)]["paper"]["free_lbns_per_request_95"] == 6.3


def test_freebw_given_rate_and_calibration_row(bench):
    rc, stdout, stderr = bench("freebw", "--quick", "--p", "20", "-M", "0", "--rate", "10")
    assert rc == 0, stderr
    assert "given with --rate" in stdout and "(calibration)" not in stdout
    rc, stdout, stderr = bench("freebw", "--quick", "--p", "20", "-M", "5")
    assert rc == 0, stderr
    assert "| 10 | 0 (calibration) |" in stdout


def test_freebw_bad_arguments(bench):
    rc, _, err = bench("freebw", "--quick", "--p", "30")  # 100 squares are not a multiple of 30
    assert rc == 1 and "multiple" in err
    rc, _, err = bench("freebw", "--profile", "atlas10k3")
    assert rc == 1 and "MEMS" in err
    rc, _, _ = bench("freebw", "--rate", "0")
    assert rc != 0
    rc, out, _ = bench("freebw", "--help")
    assert rc == 0 and "1120" in out and "--micropositioning" in out
