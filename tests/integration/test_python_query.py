"""mmfs.Query (python/mmfs/query.py) against numpy: a.where(cond) and
a.box[key].where(cond) give count, coords (as np.nonzero), flat indices,
values and the mask of the daemon's query views (docs/reference.md §5), with
and without a bitmap index, on PLoD copies, and across arrays of a directory.

Data are multiples of 1/64 and the constants are too, so numpy (which compares
float32 elements with float32 constants) and the daemon (which compares with
the constant as written) agree; float32 data are widened to float64 anyway."""
import errno
import pickle
import sys

import numpy as np
import pytest

import python_support  # noqa: F401  (puts python/ on sys.path)
import mmfs
from mmfs_mount import make_array, plod

CONDS = {
    "> 0.5 & < 0.75": lambda x: (x > 0.5) & (x < 0.75),
    ">= -1": lambda x: x >= -1,
    "in [ -0.25, 0.25 ]": lambda x: (x >= -0.25) & (x <= 0.25),
    "!(< 0) | == -1.5": lambda x: ~(x < 0) | (x == -1.5),
    "> 100": lambda x: x > 100,
}
INT_CONDS = {
    "> 10 & < 20": lambda x: (x > 10) & (x < 20),
    "== 0 | == 7": lambda x: (x == 0) | (x == 7),
    "in [-3, 3]": lambda x: (x >= -3) & (x <= 3),
}


def dyadic(rng, shape, dtype):
    return (rng.integers(-128, 128, size=shape) / 64.0).astype(dtype)


@pytest.fixture(scope="module")
def arrays(module_volume):
    root = module_volume.mnt / "q"
    root.mkdir()
    rng = np.random.default_rng(5)
    out = {}
    for name, shape, dtype, layout, index in [
        ("f8", (12, 9, 7), "float64", "multimap", None),
        ("f4", (40, 33), "float32", "hilbert", "e1"),
        ("i4", (300,), "int32", "zorder", "bn"),
    ]:
        data = dyadic(rng, shape, dtype) if dtype.startswith("float") else rng.integers(-50, 50, shape).astype(dtype)
        path = make_array(root / name, shape, dtype, layout, data)
        a = mmfs.open(path)
        if index:
            a.set_index(index)
        out[name] = (a, data)
    return out


def check(q, data, cond):
    """Every result of the query `q` equals numpy's for the condition `cond` on `data`."""
    wide = data.astype(np.float64)
    match = {**CONDS, **INT_CONDS}[cond](wide)
    what = repr(q)
    assert q.count() == np.count_nonzero(match), what
    coords = q.coords()
    expected = np.nonzero(match)
    assert len(coords) == len(expected), what
    for c, e in zip(coords, expected):
        assert c.dtype == e.dtype and np.array_equal(c, e), what
    assert np.array_equal(q.flat_indices(), np.flatnonzero(match)), what
    values = q.values()
    assert values.dtype == data.dtype and np.array_equal(values, data[match]), what
    mask = q.mask()
    import pyroaring
    assert isinstance(mask, pyroaring.BitMap), what
    assert np.array_equal(np.array(mask, dtype=np.int64), np.flatnonzero(match)), what


@pytest.mark.parametrize("name", ["f8", "f4", "i4"])
def test_where_equals_numpy(arrays, name):
    a, data = arrays[name]
    for cond in (CONDS if data.dtype.kind == "f" else INT_CONDS):
        q = a.where(cond)
        with mmfs.trace() as t:
            check(q, data, cond)
        assert all("@/query/" in p for p in t.paths), t.paths
        assert f"{a.path}@/query/{cond}/mask" in t.paths  # the daemon's own bitmap


BOX_KEYS = [
    (slice(2, 10), slice(None), 5),
    (slice(None, None, -1), slice(1, 8, 3), slice(None, None, -2)),
    (Ellipsis, 3),
    (4, None, slice(None, None, -1), slice(2, 5)),
    (slice(None), slice(None), slice(None)),
    (slice(None, None, -1), Ellipsis),
    (slice(3, 3), 0, 0),
]


def test_boxed_where_equals_numpy_of_the_selection(arrays):
    a, data = arrays["f8"]
    for key in BOX_KEYS:
        box = a.box[key]
        sel = data[key]
        assert box.shape == sel.shape and box.dtype == data.dtype and box.ndim == sel.ndim
        with mmfs.trace() as t:
            assert np.array_equal(np.asarray(box), sel)
        assert len(t.reads) == (1 if sel.size else 0)
        for cond in ("> 0.5 & < 0.75", "!(< 0) | == -1.5"):
            q = box.where(cond)
            with mmfs.trace() as t:
                check(q, sel, cond)
            if sel.size and key != (slice(None),) * 3 and key != (slice(None, None, -1), Ellipsis):
                assert all("@/box/" in p and "@/query/" in p for p in t.paths), t.paths
            if sel.size:
                # the daemon's coordinates are indices into the whole array
                flat = q.array_flat_indices()
                idx = np.unravel_index(flat.astype(np.intp), data.shape)
                assert np.array_equal(np.sort(data[idx]), np.sort(q.values()))
            else:
                assert t.reads == []


def test_box_of_a_0d_selection(arrays):
    a, data = arrays["f8"]
    q = a.box[1, 2, 3].where("> -100")
    assert q.count() == 1 and np.array_equal(q.values(), data[1, 2, 3].reshape(1))
    with pytest.raises(ValueError):
        q.coords()


def test_mask_without_pyroaring_is_a_boolean_array(arrays, monkeypatch):
    a, data = arrays["f4"]
    monkeypatch.setitem(sys.modules, "pyroaring", None)  # as if it were not installed
    match = (data.astype(np.float64) > 0.5) & (data < 0.75)
    mask = a.where("> 0.5 & < 0.75").mask()
    assert mask.dtype == bool and mask.shape == data.shape and np.array_equal(mask, match)
    box_mask = a.box[::-1, 3:20].where("> 0.5 & < 0.75").mask()
    assert np.array_equal(box_mask, match[::-1, 3:20])


def test_plan_and_index(arrays):
    a, data = arrays["f4"]
    assert a.info["index"] == "e1"
    plan = a.where("> 0.5").plan("count")
    assert plan["matches"] == np.count_nonzero(data > 0.5)
    assert plan["scanned"] is False
    plan = a.where("> 0.5").plan()
    assert "modeled_ms" in plan and plan["matches"] == np.count_nonzero(data > 0.5)
    b, bdata = arrays["f8"]
    plan = b.box[2:10, :, 5].where("> 0").plan("values")
    assert plan["matches"] == np.count_nonzero(bdata[2:10, :, 5] > 0) and plan["scanned"] is True
    with pytest.raises(ValueError):
        b.where("> 0").plan("bogus")


def test_plod_where(arrays):
    # The condition is evaluated on the full-precision elements; only the
    # values returned are reduced (docs/reference.md §5, A@/plod/K@/query).
    a, data = arrays["f8"]
    p = a.plod(2)
    q = p.where("> 0.5")
    match = data > 0.5
    assert q.count() == np.count_nonzero(match)
    assert np.array_equal(q.values(), plod(data[match], 2))
    assert all(np.array_equal(c, e) for c, e in zip(q.coords(), np.nonzero(match)))
    assert q.plan("count")["matches"] == np.count_nonzero(match)
    sel = data[::2, 1]
    bq = p.box[::2, 1].where("> 0.5")
    assert np.array_equal(bq.values(), plod(sel[sel > 0.5], 2))


def test_multi_variable_condition(module_volume):
    root = module_volume.mnt / "mv"
    root.mkdir()
    rng = np.random.default_rng(9)
    t = dyadic(rng, (20, 30), "float64")
    u = rng.integers(0, 10, (20, 30)).astype("int32")
    a = mmfs.create(root / "t", data=t)
    mmfs.create(root / "u", data=u)
    q = a.where("> 0 & u < 3")
    match = (t > 0) & (u < 3)
    assert q.count() == np.count_nonzero(match)
    assert np.array_equal(q.values(), t[match])
    assert all(np.array_equal(c, e) for c, e in zip(q.coords(), np.nonzero(match)))


def test_errors_carry_the_daemons_reason(arrays):
    a, _ = arrays["f8"]
    with pytest.raises(mmfs.Error) as e:
        a.where("> 0.5 && < 1").count()
    err = e.value
    assert isinstance(err, OSError) and err.errno == errno.EINVAL
    assert err.reason and "malformed condition" in err.reason and "position" in err.reason
    assert err.reason in str(err) and err.filename == f"{a.path}@/query/> 0.5 && < 1/count"
    again = pickle.loads(pickle.dumps(err))
    assert again.errno == err.errno and again.reason == err.reason and str(again) == str(err)
    with pytest.raises(mmfs.Error) as e:
        a.box[2:4].where("nosuch > 1").values()
    assert e.value.errno == errno.ENOENT and e.value.reason and "nosuch" in e.value.reason
    for bad in ("", "a/b", "  "):
        with pytest.raises(ValueError):
            a.where(bad)
    with pytest.raises(TypeError):
        a.where(0.5)
