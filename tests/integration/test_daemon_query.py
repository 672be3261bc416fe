"""Bitmap-index query views (docs/reference.md §4 `user.mmfs.index`/`user.mmfs.bins`, §5
query conditions, §6 stats): every output of `A@/query/COND/` —
count, coords, values, mask — equals numpy, for every encoding (and none: the
scan path) x dtype x binning, random data with duplicates, NaN, -0.0, inf
and extremes, and random condition trees; box-constrained queries,
multi-variable queries, tables (`D@/query`), PLoD of a query, writes that
keep the index current, dropping an index, the plan of a query and the
aligned-bins rule (no data read) in /.mmfs/stats. Errors and hostile
conditions: test_daemon_query_errors.py. The oracle: query_oracle.py."""
import os
import time

import numpy as np
import pytest

from mmfs_mount import (LAYOUTS, getx, make_array, plod, pwrite_all, read_bytes, read_json, sel_string, setx, view,
                        write_array)
from query_oracle import (OUTPUTS, check_query, constants, evaluate, exact_text, query_data, random_condition,
                          random_tree, render)

ENCODINGS = ["none", "e1", "bn", "range", "interval", "re", "ie"]
QDTYPES = ["int8", "uint16", "int32", "int64", "uint64", "float32", "float64"]
SHAPES = {"int8": (300, 300), "uint16": (6000,), "int32": (70, 90), "int64": (5000,), "uint64": (20, 250),
          "float32": (150, 200), "float64": (8, 25, 40)}
BIN_KINDS = ["default", "exact", "N", "precision", "edges"]


@pytest.fixture(scope="module")
def vol(module_volume):
    return module_volume


@pytest.fixture
def d(vol, request):
    rc = vol.mount_info.proc.poll() if vol.is_mounted else None
    assert rc is None, f"the module's daemon exited with status {rc} during an earlier test (see the first failure)"
    path = vol.mnt / request.node.name.replace("[", "_").replace("]", "").replace("/", "_").replace(",", "_")
    path.mkdir()
    return path


def bins_spec(kind, arr):
    """The user.mmfs.bins value of a binning kind for this data (None: the default)."""
    if kind == "default":
        return None
    if kind == "exact":
        return "exact"
    if kind == "N":
        return "7"
    if kind == "precision":
        return "precision:3" if arr.dtype.kind == "f" else "precision:2"
    flat = arr.reshape(-1)
    finite = np.unique(flat[np.isfinite(flat)]) if arr.dtype.kind == "f" else np.unique(flat)
    qs = np.unique(finite[np.linspace(0, len(finite) - 1, 7).astype(int)[1:-1]])
    texts = [t for t in (exact_text(v) for v in qs) if t is not None]
    assert len(texts) >= 3
    return "edges:" + ",".join(texts)


def default_bins(dtype):
    return "100" if np.dtype(dtype).kind == "f" else "exact"


def check_info(path, encoding, bins):
    info = read_json(view(path, "info"))
    assert info["index"] == encoding, f"info index: {info['index']!r}"
    assert str(info["bins"]) == bins, f"info bins: {info['bins']!r}, expected {bins!r}"
    dev = info["device_bytes"]
    if encoding == "none":
        assert dev["index"] == 0, f"no index, yet device_bytes.index = {dev['index']}"
    else:
        assert dev["index"] > 0, f"index {encoding}: device_bytes.index = {dev['index']}"
    assert getx(path, "index") == encoding and getx(path, "bins") == bins
    return info


def fixed_conditions(consts):
    c = consts
    return [("cmp", "", "==", c[0]), ("cmp", "", "!=", c[1]), ("cmp", "", "<", c[2]), ("cmp", "", ">=", c[3]),
            ("in", "", c[4], c[4]), ("cmp", "", ">", "inf"), ("cmp", "", "<", "inf"), ("cmp", "", "==", "-0"),
            ("not", ("cmp", "", "<=", c[5]))]


def run_conditions(path, arr, rng, count, outputs=OUTPUTS):
    """Fixed and random conditions on one array; every wrong answer is reported."""
    flat = arr.reshape(-1)
    consts = constants(rng, arr)
    trees = fixed_conditions(consts) + [random_condition(rng, consts)[0] for _ in range(count)]
    wrong = []
    for t in trees:
        cond = render(t, rng)
        try:
            check_query(view(path), cond, evaluate(t, {"": flat}), flat, outputs, what=f"{path.name}@/query/{cond}")
        except AssertionError as e:
            wrong.append(str(e).splitlines()[0][:400])
    assert not wrong, f"{len(wrong)} of {len(trees)} conditions answered wrong:\n" + "\n".join(wrong[:8])


@pytest.mark.parametrize("dtype", QDTYPES)
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_query_outputs(d, encoding, dtype):
    """Two binnings per (encoding, dtype): the first set before the index is built,
    the second on the indexed array (a rebuild); across the parameters every
    (encoding, binning) and (dtype, binning) pair occurs."""
    e, t = ENCODINGS.index(encoding), QDTYPES.index(dtype)
    rng = np.random.default_rng(1000 + 10 * e + t)
    shape = SHAPES[dtype]
    arr = query_data(rng, shape, dtype)
    path = make_array(d / "a", shape, dtype, LAYOUTS[(e + t) % len(LAYOUTS)], arr)
    kinds = [BIN_KINDS[(e + t) % 5], BIN_KINDS[(e + t + 2) % 5]]
    if kinds[1] == "default":
        kinds.reverse()
    for i, kind in enumerate(kinds):
        spec = bins_spec(kind, arr)
        if spec is not None:
            setx(path, "bins", spec)
        if i == 0 and encoding != "none":
            setx(path, "index", encoding)
        check_info(path, encoding, spec or default_bins(dtype))
        if i == 0:
            cond = render(("cmp", "", ">", constants(rng, arr)[0]))
            assert sorted(os.listdir(view(path, "query", cond))) == sorted(OUTPUTS)
        run_conditions(path, arr, rng, 8)


def test_index_and_bins_set_before_the_shape(d):
    rng = np.random.default_rng(7)
    arr = query_data(rng, (40, 60), "float32")
    path = d / "early"
    path.touch()
    setx(path, "dtype", "float32")
    setx(path, "bins", "precision:2")
    setx(path, "index", "interval")
    setx(path, "shape", "40,60")
    assert getx(path, "index") == "interval" and getx(path, "bins") == "precision:2"
    # The index of the zeros, then of the data written (no fsync).
    flat0 = np.zeros(arr.size, np.float32)
    check_query(view(path), "==0", np.ones(arr.size, bool), flat0)
    write_array(path, arr, fsync=False)
    check_info(path, "interval", "precision:2")
    run_conditions(path, arr, rng, 6)


def test_index_survives_a_remount_and_can_be_dropped(vol, d):
    rng = np.random.default_rng(8)
    arr = query_data(rng, (3000,), "int32")
    path = make_array(d / "a", arr.shape, arr.dtype, "naive", arr, attrs={"index": "bn", "bins": "5"})
    check_info(path, "bn", "5")
    vol.remount()
    indexed = check_info(path, "bn", "5")["device_bytes"]["index"]
    run_conditions(path, arr, rng, 4)
    free = os.statvfs(vol.mnt).f_bfree
    setx(path, "index", "none")
    check_info(path, "none", "5")
    assert os.statvfs(vol.mnt).f_bfree >= free, "dropping an index must not take space"
    run_conditions(path, arr, rng, 4)
    vol.remount()
    check_info(path, "none", "5")
    run_conditions(path, arr, rng, 2)
    setx(path, "index", "re")
    assert check_info(path, "re", "5")["device_bytes"]["index"] > 0
    assert indexed > 0
    run_conditions(path, arr, rng, 4)


def test_scan_and_index_agree_byte_for_byte(d):
    rng = np.random.default_rng(9)
    arr = query_data(rng, (64, 64), "float64")
    plain = make_array(d / "plain", arr.shape, arr.dtype, "zorder", arr)
    indexed = make_array(d / "indexed", arr.shape, arr.dtype, "zorder", arr, attrs={"index": "range", "bins": "9"})
    consts = constants(rng, arr)
    for _ in range(12):
        _, cond = random_condition(rng, consts)
        for output in ("count", "coords", "values"):
            a = read_bytes(view(plain, "query", cond, output))
            b = read_bytes(view(indexed, "query", cond, output))
            assert a == b, f"query/{cond}/{output}: scan and index differ ({len(a)} and {len(b)} bytes)"


# --- box + query ---------------------------------------------------------------------------------

def random_selection(rng, shape):
    sel = []
    for s in shape:
        kind = int(rng.integers(0, 4))
        if kind == 0:
            sel.append(int(rng.integers(0, s)))
        elif kind == 1:
            sel.append(slice(None))
        else:
            a = int(rng.integers(0, s))
            b = int(rng.integers(a + 1, s + 1))
            sel.append(slice(a, b, int(rng.integers(2, 5)) if kind == 3 else None))
    return tuple(sel)


@pytest.mark.parametrize("encoding,dtype", [("interval", "float32"), ("none", "int32"), ("e1", "uint16"),
                                            ("ie", "float64")])
def test_box_then_query(d, encoding, dtype):
    rng = np.random.default_rng(len(encoding) * 31 + np.dtype(dtype).num)
    shape = (12, 30, 25)
    arr = query_data(rng, shape, dtype)
    attrs = {} if encoding == "none" else {"index": encoding}
    path = make_array(d / "a", shape, dtype, "multimap", arr, attrs=attrs)
    flat = arr.reshape(-1)
    linear = np.arange(arr.size).reshape(shape)
    consts = constants(rng, arr)
    sels = [(slice(None),) * 3, (slice(2, 9), slice(0, 30, 3), 7)] + [random_selection(rng, shape) for _ in range(8)]
    for sel in sels:
        inside = np.zeros(arr.size, bool)
        inside[linear[sel].reshape(-1)] = True
        base = view(path, "box", sel_string(sel) + "@")
        for _ in range(3):
            t, cond = random_condition(rng, consts)
            check_query(base, cond, evaluate(t, {"": flat}) & inside, flat, what=f"box/{sel_string(sel)}@/query/{cond}")


# --- several arrays ------------------------------------------------------------------------------

def test_multi_variable_queries(d):
    rng = np.random.default_rng(11)
    shape = (40, 50)
    arrays = {"a": query_data(rng, shape, "float64"), "b": query_data(rng, shape, "int16"),
              "c": query_data(rng, shape, "uint8"), "t2": query_data(rng, shape, "float32")}
    attrs = {"a": {"index": "e1"}, "b": {"index": "range", "bins": "edges:-5,0,7"}, "c": {}, "t2": {"index": "ie"}}
    paths = {n: make_array(d / n, shape, a.dtype, "hilbert", a, attrs=attrs[n]) for n, a in arrays.items()}
    flats = {n: a.reshape(-1) for n, a in arrays.items()}
    consts = {n: constants(rng, a) for n, a in arrays.items()}
    for on in ("a", "b", "c"):
        names = ["", "a", "b", "c", "t2"]
        consts[""] = consts[on]
        env = dict(flats, **{"": flats[on]})
        for _ in range(10):
            t, cond = random_condition(rng, consts, names=[n for n in names if n != on] + [""])
            check_query(view(paths[on]), cond, evaluate(t, env), flats[on], what=f"{on}@/query/{cond}")
        # An array may name itself; a named interval.
        t = ("and", [("cmp", on, ">", consts[on][0]), ("in", "b", "-100", "100")])
        check_query(view(paths[on]), render(t), evaluate(t, env), flats[on])
    # A box of a multi-variable query.
    sel = (slice(5, 30, 2), slice(10, 45))
    inside = np.zeros(arrays["a"].size, bool)
    inside[np.arange(arrays["a"].size).reshape(shape)[sel].reshape(-1)] = True
    t = ("or", [("cmp", "b", "<", "0"), ("cmp", "c", ">=", "200")])
    check_query(view(paths["a"], "box", sel_string(sel) + "@"), render(t),
                evaluate(t, dict(flats, **{"": flats["a"]})) & inside, flats["a"])


def test_tables(d):
    rng = np.random.default_rng(12)
    n = 5000
    table = d / "tbl"
    table.mkdir()
    cols = {"k4": rng.integers(0, 4, n).astype(np.int32), "k10": rng.integers(0, 10, n).astype(np.uint16),
            "kseq": np.arange(n, dtype=np.int64), "f": query_data(rng, (n,), "float64"),
            "g": query_data(rng, (n,), "float32"), "k100k": rng.integers(0, 100000, n).astype(np.uint32)}
    attrs = {"k4": {"index": "e1"}, "k10": {"index": "bn"}, "kseq": {"index": "ie", "bins": "50"},
             "f": {"index": "range"}, "g": {}, "k100k": {"index": "interval", "bins": "precision:1"}}
    for name, col in cols.items():
        make_array(table / name, col.shape, col.dtype, "naive", col, attrs=attrs[name])
    consts = {name: constants(rng, col) for name, col in cols.items()}
    names = list(cols)
    rows = np.arange(n, dtype=np.uint64)
    fixed = [("and", [("cmp", "k4", "==", "1"), ("cmp", "k10", "<", "5")]),
             ("in", "kseq", "100", "2000"),
             ("or", [("cmp", "f", ">", "0"), ("cmp", "g", "<=", "-1")]),
             ("not", ("and", [("cmp", "k100k", ">=", "50000"), ("cmp", "k4", "!=", "3")]))]
    trees = fixed + [random_condition(rng, consts, names=names)[0] for _ in range(15)]
    for t in trees:
        check_query(view(table), render(t, rng), evaluate(t, cols), rows, outputs=("count", "coords"),
                    what=f"{table.name}@/query/{render(t)}")


# --- PLoD of a query -----------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["multimap", "mloc"])
@pytest.mark.parametrize("dtype,encoding", [("float64", "bn"), ("int32", "re"), ("uint16", "none"), ("float64", "none")])
def test_plod_of_a_query(d, dtype, encoding, layout):
    # mloc without an index: answered from its bins (one atom: in one pass).
    rng = np.random.default_rng(13)
    arr = query_data(rng, (50, 60), dtype)
    attrs = {} if encoding == "none" else {"index": encoding}
    path = make_array(d / "a", arr.shape, dtype, layout, arr, attrs=attrs)
    if layout == "mloc":  # sealed by the last close, which the kernel sends without waiting
        deadline = time.monotonic() + 10
        while "byte_groups" not in read_json(view(path, "info"))["mloc"]:
            assert time.monotonic() < deadline, "the mloc array was not sealed 10 s after its last close"
            time.sleep(0.05)
    flat = arr.reshape(-1)
    consts = constants(rng, arr)
    item = arr.dtype.itemsize
    for k in sorted({1, item // 2, item - 1, item} - {0}):
        for _ in range(3):
            t, cond = random_condition(rng, consts)
            mask = evaluate(t, {"": flat})
            got = view(path, "plod", f"{k}@", "query", cond, "values")
            expected = plod(flat[mask], k)
            assert os.stat(got).st_size == expected.nbytes
            assert read_bytes(got) == expected.tobytes(), f"plod/{k}@/query/{cond}/values"


# --- writes --------------------------------------------------------------------------------------

WRITE_CASES = [("e1", "int16", "exact"), ("bn", "float64", "N"), ("range", "uint16", "edges"),
               ("ie", "float32", "precision"), ("interval", "int64", "N"), ("re", "uint64", "exact"),
               ("none", "int32", "default")]


@pytest.mark.parametrize("encoding,dtype,kind", WRITE_CASES, ids=["-".join(c) for c in WRITE_CASES])
def test_writes_keep_the_index_current(vol, d, encoding, dtype, kind):
    rng = np.random.default_rng(14 + WRITE_CASES.index((encoding, dtype, kind)))
    shape = (60, 70)
    arr = query_data(rng, shape, dtype)
    attrs = {} if encoding == "none" else {"index": encoding}
    spec = bins_spec(kind, arr)
    if spec:
        attrs["bins"] = spec
    path = make_array(d / "a", shape, dtype, "zorder", arr, attrs=attrs)
    other = query_data(rng, shape, "int8")
    bpath = make_array(d / "b", shape, "int8", "naive", other, attrs={"index": "e1"})
    consts = {"": constants(rng, arr), "b": constants(rng, other)}
    # The same conditions before and after: a cached answer would be caught.
    trees = [random_condition(rng, consts, names=["", "b"] if i % 3 == 0 else [""])[0] for i in range(6)]
    new_value = arr.dtype.type(123) if dtype != "float64" else np.float64(1234.5625)
    trees.append(("cmp", "", "==", exact_text(new_value)))

    def check_all(what):
        env = {"": arr.reshape(-1), "b": other.reshape(-1)}
        for t in trees:
            check_query(view(path), render(t), evaluate(t, env), arr.reshape(-1), what=f"{what}: {render(t)}")

    check_all("before the writes")
    raw = bytearray(arr.tobytes())
    fd = os.open(path, os.O_WRONLY)
    try:
        # Partial writes at odd offsets, cutting elements; new values never seen by the bins.
        for _ in range(25):
            off = int(rng.integers(0, len(raw) - 20))
            piece = rng.integers(0, 256, int(rng.integers(1, 20)), dtype=np.uint8).tobytes()
            pwrite_all(fd, piece, off)
            raw[off:off + len(piece)] = piece
        for i in rng.choice(arr.size, 40, replace=False):
            off = int(i) * arr.itemsize
            piece = np.array([new_value], dtype=arr.dtype).tobytes()
            pwrite_all(fd, piece, off)
            raw[off:off + len(piece)] = piece
    finally:
        os.close(fd)
    arr = np.frombuffer(bytes(raw), dtype=arr.dtype).reshape(shape).copy()
    # The other array of a multi-variable condition changes too.
    other.reshape(-1)[rng.choice(other.size, 300, replace=False)] = -77
    write_array(bpath, other, fsync=False)
    check_all("after writes, no fsync")
    for p in (path, bpath):
        fd = os.open(p, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    vol.remount()
    check_all("after fsync and a remount")
    assert getx(path, "index") == encoding


def test_rewriting_the_whole_array(d):
    rng = np.random.default_rng(15)
    arr = query_data(rng, (2000,), "uint64")
    path = make_array(d / "a", arr.shape, arr.dtype, "naive", arr, attrs={"index": "e1"})
    check_query(view(path), f"=={arr[5]}", arr == arr[5], arr)
    arr = query_data(rng, (2000,), "uint64")
    write_array(path, arr, fsync=False)
    run_conditions(path, arr, rng, 4)
    os.truncate(path, 0)
    check_query(view(path), "==0", np.ones(arr.size, bool), np.zeros(arr.size, np.uint64))


# --- plan and stats ------------------------------------------------------------------------------

def numbers(obj, prefix=""):
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(numbers(v, f"{prefix}{k}."))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        out[prefix.rstrip(".")] = obj
    return out


def counter(stats, name):
    keys = [k for k in stats if k == name or k.endswith("." + name)]
    assert len(keys) == 1, f"/.mmfs/stats: no single counter {name!r} ({sorted(stats)})"
    return stats[keys[0]]


def stats(vol):
    return numbers(read_json(vol.mnt / ".mmfs" / "stats"))


def read_plan(path, cond, output):
    plan = read_json(view(path, "plan", "query", cond, output))
    for key in ("index_bytes", "data_bytes", "requests", "modeled_ms"):
        assert key in plan, f"plan/query/{cond}/{output} lacks {key}: {sorted(plan)}"
        assert isinstance(plan[key], (int, float)) and plan[key] >= 0, f"plan {key}: {plan[key]!r}"
    assert isinstance(plan["requests"], int)
    return plan


def test_plan_of_a_query(d):
    rng = np.random.default_rng(16)
    arr = rng.integers(0, 50, (100, 100)).astype(np.int32)
    indexed = make_array(d / "indexed", arr.shape, arr.dtype, "multimap", arr, attrs={"index": "e1"})
    plain = make_array(d / "plain", arr.shape, arr.dtype, "multimap", arr)
    # A plan is modeled from a cold cache (as every plan: docs/reference.md §5 "from an idle
    # device"), so the index's requests are planned however often it was read.
    for output in ("count", "coords", "mask", "count"):
        plan = read_plan(indexed, "==7", output)
        assert plan["data_bytes"] == 0, f"an aligned query's {output} reads no data: {plan}"
        if output == "count" and plan.get("from_header"):
            # One aligned atom: the header's per-bin row counts answer it, no bitmap is read.
            assert plan["index_bytes"] == 0 and plan["requests"] == 0 and plan["matches"] == (arr == 7).sum()
            continue
        assert plan["index_bytes"] > 0, f"an indexed query's {output} uses its index: {plan}"
        assert plan["requests"] >= 1 and plan["modeled_ms"] > 0, f"the index is read from the device: {plan}"
    plan = read_plan(indexed, "==7|in[20,29]", "values")
    assert plan["data_bytes"] > 0 and plan["index_bytes"] > 0, plan
    assert plan["data_bytes"] <= 2 * arr.nbytes, plan
    scan = read_plan(plain, "==7", "count")
    assert scan["index_bytes"] == 0, f"no index, nothing read from one: {scan}"
    assert scan["data_bytes"] >= arr.nbytes, f"a scan reads the whole array: {scan}"
    assert scan["requests"] >= 1 and scan["modeled_ms"] > 0
    # The plan does not change the answer, nor is it an answer.
    check_query(view(indexed), "==7|in[20,29]", (arr == 7) | ((arr >= 20) & (arr <= 29)), arr.reshape(-1))


def test_aligned_queries_read_no_data(vol, d):
    rng = np.random.default_rng(17)
    ints = rng.integers(-20, 20, (120, 100)).astype(np.int32)
    floats = (rng.integers(-4000, 4000, (120, 100)) / 16).astype(np.float64)
    floats.reshape(-1)[rng.choice(floats.size, 50, replace=False)] = np.nan
    a = make_array(d / "ints", ints.shape, ints.dtype, "multimap", ints, attrs={"index": "e1"})
    f = make_array(d / "floats", floats.shape, floats.dtype, "multimap", floats,
                   attrs={"index": "range", "bins": "edges:-100,-10.5,0,10.5,100"})
    plain = make_array(d / "plain", ints.shape, ints.dtype, "multimap", ints)
    # x > -1 is x >= 0 for integers: the edge 0 aligns it.
    e = make_array(d / "edges", ints.shape, ints.dtype, "multimap", ints,
                   attrs={"index": "interval", "bins": "edges:-10,0,10"})
    aligned = [(e, ints, ">-1", ints > -1), (e, ints, "<10&>=-10", (ints < 10) & (ints >= -10)),(a, ints, "==3", ints == 3), (a, ints, "!=3&<10", (ints != 3) & (ints < 10)),
               (a, ints, "in[-5,5]|>=17", ((ints >= -5) & (ints <= 5)) | (ints >= 17)),
               (f, floats, ">=10.5", floats >= 10.5), (f, floats, "<-10.5|>=100", (floats < -10.5) | (floats >= 100)),
               (f, floats, "!(<0)", ~(floats < 0))]
    vol.remount()
    for path, arr, cond, mask in aligned:
        for output in ("count", "coords", "mask"):
            before = stats(vol)
            check_query(view(path), cond, mask, arr.reshape(-1), outputs=(output,))
            after = stats(vol)
            grew = counter(after, "data_sectors_read") - counter(before, "data_sectors_read")
            assert grew == 0, f"{path.name}@/query/{cond}/{output} is aligned, yet {grew} data sectors were read"
    assert counter(stats(vol), "index_sectors_read") > 0, "the aligned queries were answered from the index"
    # A scan reads the data.
    before = stats(vol)
    check_query(view(plain), "==3", ints == 3, ints.reshape(-1), outputs=("count",))
    assert counter(stats(vol), "data_sectors_read") > counter(before, "data_sectors_read"), \
        "a cold scan reads data sectors"
