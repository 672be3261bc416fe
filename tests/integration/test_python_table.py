"""mmfs.Table (python/mmfs/table.py): a directory of equal-length 1-D arrays
read through D@/info, D@/rows and D@/query (docs/reference.md §5), in the
default layout and in capsules (MEMS volumes), against numpy structured
arrays and pandas."""
import errno
import pickle

import numpy as np
import pytest

import python_support  # noqa: F401  (puts python/ on sys.path)
import mmfs
from mmfs_mount import random_array, setx

COLUMNS = [("a1", "float64"), ("a2", "int32"), ("a3", "uint16"), ("a4", "uint8")]
RECORDS = 5000


def make_table(root, name, seed):
    d = root / name
    d.mkdir()
    rng = np.random.default_rng(seed)
    data = {}
    for col, dtype in COLUMNS:
        arr = random_array(rng, (RECORDS,), dtype)
        if dtype == "uint8":
            arr = (arr % 50 + 1).astype(np.uint8)
        mmfs.create(d / col, data=arr)
        data[col] = arr
    expected = np.empty(RECORDS, dtype=[(c, t) for c, t in COLUMNS])
    for c, _ in COLUMNS:
        expected[c] = data[c]
    return d, expected


@pytest.fixture(scope="module", params=["default", "capsule"])
def table(request, mems):
    d, expected = make_table(mems.mnt, f"t-{request.param}", seed=len(request.param))
    if request.param == "capsule":
        setx(d, "layout", "capsule")
    return mmfs.open_table(d), expected


def test_columns_and_dtype(table):
    t, expected = table
    assert t.columns == tuple(c for c, _ in COLUMNS)
    assert t.dtype.names == t.columns and t.dtype.itemsize == 15  # packed records
    assert [t.dtype.fields[c][1] for c in t.columns] == [0, 8, 12, 14]
    assert len(t) == RECORDS and t.info["records"] == RECORDS
    for c, dtype in COLUMNS:
        col = t[c]
        assert isinstance(col, mmfs.Array) and col.dtype == np.dtype(dtype)
        assert np.array_equal(col[10:20], expected[c][10:20])
    with pytest.raises(KeyError):
        t["nosuch"]
    assert "a1" in repr(t)


@pytest.mark.parametrize("start,stop", [(None, None), (0, 1), (123, 4567), (-7, None), (None, -4990), (4999, None),
                                        (10, 10), (20, 5), (-10 ** 6, 3), (4990, 10 ** 6)])
def test_rows_equal_numpy(table, start, stop):
    t, expected = table
    want = expected[start:stop]
    with mmfs.trace() as tr:
        got = t.rows(start, stop)
    assert got.dtype == t.dtype and len(got) == len(want)
    for c in t.columns:
        assert np.array_equal(got[c], want[c]), c
    rows_reads = [p for p in tr.paths if "@/rows/" in p]
    assert len(rows_reads) == (1 if len(want) else 0), tr.paths
    if start is not None and stop is not None and stop > start >= 0 and stop <= RECORDS:
        assert np.array_equal(t[start:stop]["a2"], want["a2"])


def test_where(table):
    t, expected = table
    for cond, match in [
        ("a4 == 7", expected["a4"] == 7),
        ("a1 > 0 & a4 < 10", (expected["a1"] > 0) & (expected["a4"] < 10)),
        ("a2 < 0 | a3 > 60000", (expected["a2"] < 0) | (expected["a3"] > 60000)),
        ("a3 >= 100 & a3 <= 30000 & !a4 == 3", (expected["a3"] >= 100) & (expected["a3"] <= 30000)
         & ~(expected["a4"] == 3)),
    ]:
        q = t.where(cond)
        assert q.count() == np.count_nonzero(match), cond
        assert np.array_equal(q.indices(), np.flatnonzero(match)), cond
        assert np.array_equal(np.array(q.mask(), dtype=np.int64), np.flatnonzero(match)), cond


def test_to_pandas(table):
    pd = pytest.importorskip("pandas")
    t, expected = table
    df = t.to_pandas()
    assert list(df.columns) == list(t.columns) and len(df) == RECORDS
    for c, dtype in COLUMNS:
        assert df[c].dtype == np.dtype(dtype) and np.array_equal(df[c].to_numpy(), expected[c])
    part = t.to_pandas(-5)
    assert list(part.index) == list(range(RECORDS - 5, RECORDS))
    assert np.array_equal(part["a3"].to_numpy(), expected["a3"][-5:])
    assert isinstance(part, pd.DataFrame)


def test_plan_and_pickle(table):
    t, expected = table
    plan = t.plan(100, 200)
    assert plan["requests"] >= 1 and plan["bytes_read"] >= 100 * t.dtype.itemsize
    u = pickle.loads(pickle.dumps(t))
    assert u.columns == t.columns and np.array_equal(u.rows(0, 3), t.rows(0, 3))


def test_errors(table, mems):
    t, _ = table
    with pytest.raises(mmfs.Error) as e:
        t.where("a4 === 7").count()
    assert e.value.errno == errno.EINVAL and e.value.reason and "malformed condition" in e.value.reason
    with pytest.raises(mmfs.Error) as e:
        t.where("nosuch > 1").count()
    assert e.value.errno == errno.ENOENT and e.value.reason and "nosuch" in e.value.reason
    with pytest.raises(IndexError):
        t[1:10:2]
    with pytest.raises(TypeError):
        t[3]
    # columns of different lengths are not a table
    bad = mems.mnt / "not-a-table"
    if not bad.exists():
        bad.mkdir()
        mmfs.create(bad / "x", data=np.arange(10.0))
        mmfs.create(bad / "y", data=np.arange(12.0))
    with pytest.raises(mmfs.Error) as e:
        mmfs.open_table(bad).rows()
    assert e.value.errno == errno.EINVAL and e.value.reason, e.value
