"""Queries of mloc arrays without a bitmap index (docs/reference.md §5, paper 004 §III-D):
answered from the image's level structure (position lists of aligned bins,
units of edge bins) a slab at a time (the chunks of one chunk row of
dimension 0), each slab's rows a bitset that becomes bitmap containers.

The shapes make slabs larger than a bitmap container (2^16 rows) and start
them inside one, with chunks clipped at the far edges, so every way a slab's
rows meet the containers of the answer is exercised. Every output (count,
coords, values, mask) equals numpy; with a box; with conditions on other
arrays of the directory, where the values of the queried array are gathered
from bins its own last query did not touch (the hint is stale)."""
import numpy as np
import pytest

from mmfs_mount import make_array, sel_string, view
from query_oracle import check_query, constants, evaluate, query_data, random_condition, render

SHAPE = (40, 70, 60)  # with CHUNK: slabs of 16 x 70 x 60 = 67200 rows, from rows 0, 67200, 134400
CHUNK = (16, 16, 16)


@pytest.fixture
def d(module_volume, request):
    name = request.node.name
    for c in "[]/,:":
        name = name.replace(c, "_")
    path = module_volume.mnt / name
    path.mkdir()
    return path


def mloc_array(path, arr, compress="none", priority="V-M-S", chunk=CHUNK):
    return make_array(path, arr.shape, arr.dtype, "mloc", arr,
                      attrs={"chunk": ",".join(map(str, chunk)), "compress": compress, "priority": priority})


def fixed_trees(c):
    """Conditions whose bins are aligned, edge, every bin, none, and NaN-only."""
    return [("cmp", "", ">", c[0]), ("cmp", "", "<=", c[1]), ("in", "", min(c[2], c[3], key=float),
                                                               max(c[2], c[3], key=float)),
            ("cmp", "", "==", c[4]), ("cmp", "", "<", "inf"), ("cmp", "", ">", "inf"),
            ("not", ("cmp", "", "<=", c[5]))]


def run(path, arr, rng, count, box=None):
    flat = arr.reshape(-1)
    consts = constants(rng, arr)
    inside = None
    base = view(path)
    if box is not None:
        inside = np.zeros(arr.size, bool)
        inside[np.arange(arr.size).reshape(arr.shape)[box].reshape(-1)] = True
        base = view(path, "box", sel_string(box) + "@")
    trees = fixed_trees(consts) + [random_condition(rng, consts)[0] for _ in range(count)]
    wrong = []
    for t in trees:
        cond = render(t, rng)
        expected = evaluate(t, {"": flat})
        if inside is not None:
            expected = expected & inside
        try:
            check_query(base, cond, expected, flat, what=f"{path.name}@/query/{cond} box {box}")
        except AssertionError as e:
            wrong.append(str(e).splitlines()[0][:400])
    assert not wrong, f"{len(wrong)} of {len(trees)} conditions answered wrong:\n" + "\n".join(wrong[:8])


@pytest.mark.parametrize("dtype,compress,priority", [("float64", "zstd", "V-M-S"), ("float32", "none", "S-V-M"),
                                                     ("int16", "zstd", "M-S-V"), ("uint8", "none", "V-S-M")])
def test_queries_over_slabs_equal_numpy(d, dtype, compress, priority):
    rng = np.random.default_rng(np.dtype(dtype).num * 7 + len(compress))
    arr = query_data(rng, SHAPE, dtype)
    path = mloc_array(d / "a", arr, compress, priority)
    run(path, arr, rng, 10)


def test_boxed_queries_read_the_box_chunks(d):
    rng = np.random.default_rng(5)
    arr = query_data(rng, SHAPE, "float64")
    path = mloc_array(d / "a", arr, "zstd")
    for box in [(slice(10, 30), slice(None), slice(5, 50, 3)), (slice(15, 17), 33, slice(None)),
                (slice(0, 40, 7), slice(60, 70), slice(40, 60)), (39, 69, 59)]:
        run(path, arr, rng, 3, box=box)


def test_one_dimension_of_many_containers(d):
    rng = np.random.default_rng(9)
    arr = query_data(rng, (300_001,), "int32")
    path = mloc_array(d / "a", arr, "zstd", chunk=(50_000,))
    run(path, arr, rng, 6)


def test_values_found_outside_a_stale_hint(d):
    """A query on b returns a's values: a's bins to search first are those of
    a's own last query, which hold only some of the rows; the rest are found
    in the other bins of their chunks."""
    rng = np.random.default_rng(13)
    a = query_data(rng, SHAPE, "float64")
    b = query_data(rng, SHAPE, "int16")
    pa = mloc_array(d / "a", a, "zstd")
    make_array(d / "b", SHAPE, b.dtype, "hilbert", b)
    flats = {"a": a.reshape(-1), "b": b.reshape(-1)}
    ca, cb = constants(rng, a), constants(rng, b)
    for _ in range(4):
        t = ("cmp", "", ">", ca[int(rng.integers(0, len(ca)))])
        check_query(view(pa), render(t), evaluate(t, {"": flats["a"]}), flats["a"], outputs=("values",))
        t, cond = random_condition(rng, {"": ca, "a": ca, "b": cb}, names=["b"])
        check_query(view(pa), cond, evaluate(t, dict(flats, **{"": flats["a"]})), flats["a"],
                    what=f"a@/query/{cond}")


@pytest.mark.parametrize("dtype,compress", [("float64", "zstd"), ("uint16", "none")])
def test_brick_rows_of_whole_words(d, dtype, compress):
    """Chunks whose last side is a multiple of 64: a brick row is whole words
    of the chunk's match bitset, which are ORed into the slab word by word
    (the other shapes take the general path). Clipped chunks at every far
    edge, slabs that start inside a container."""
    rng = np.random.default_rng(21 + len(dtype))
    arr = query_data(rng, (21, 13, 200), dtype)  # 200 = 64 + 64 + 64 + 8
    path = mloc_array(d / "a", arr, compress, chunk=(4, 5, 64))
    run(path, arr, rng, 8)
    run(path, arr, rng, 2, box=(slice(3, 19), slice(2, 13, 2), slice(60, 200)))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "uint32"])
def test_edge_elements_the_leading_bytes_cannot_decide(d, dtype):
    """Edge bins are read in their leading byte groups first (half the item);
    elements that agree with a condition's constant there are settled by a
    second read of their other groups. Here most elements do: a cluster
    around the constant that differs only in the low half of the bytes, so
    every comparison is decided by the second read, in many chunks."""
    rng = np.random.default_rng(np.dtype(dtype).num)
    n = int(np.prod(SHAPE))
    if dtype.startswith("float"):
        t = np.dtype(dtype).type(2.2144854830202734)
        ulp = np.spacing(t)
        steps = rng.integers(-300, 300, n)
        arr = (t + steps * ulp).astype(dtype)
        far = rng.random(n) < 0.2
        arr[far] = rng.normal(0, 3, far.sum()).astype(dtype)
    else:
        t = np.dtype(dtype).type(3_000_000_000 if dtype == "uint32" else 1 << 40)
        arr = (t + rng.integers(-300, 300, n)).astype(dtype)
        far = rng.random(n) < 0.2
        arr[far] = rng.integers(0, 1 << 20, far.sum()).astype(dtype)
    arr = arr.reshape(SHAPE)
    path = mloc_array(d / "a", arr, "zstd")
    flat = arr.reshape(-1)
    lo, hi = np.sort(flat[rng.integers(0, n, 2)])
    c = repr(float(t)) if dtype.startswith("float") else str(int(t))
    for cond, expected in ((f">{c}", flat > t), (f"<={c}", flat <= t), (f"=={c}", flat == t),
                           (f"!={c}", flat != t), (f"in[{float(lo)!r},{float(hi)!r}]" if dtype.startswith("float")
                                                    else f"in[{int(lo)},{int(hi)}]", (flat >= lo) & (flat <= hi))):
        check_query(view(path), cond, expected, flat, what=f"{dtype} {cond}")
