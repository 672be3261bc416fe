"""The workloads of bench/mmfs_bench_real.py (`mmfs-bench real`) and the data
they read: the deterministic data (standard normals, slab by slab), the
selections (None / int / (a, b) per dimension) spelled as numpy indexes and
as mmfs views, PLoD in numpy, and make_workloads, which draws the beams,
slices, cubes, full scan, points and PLoD reads of a run."""
import numpy as np

KINDS = ["beam", "slice", "cube", "full", "plod", "point"]


# --------------------------------------------------------------------------
# data and selections


def data_slabs(shape, rows, seed):
    """Deterministic data: (row0, ndarray) slabs of `rows` rows along dim 0."""
    rng = np.random.default_rng(seed)
    for r0 in range(0, shape[0], rows):
        n = min(rows, shape[0] - r0)
        yield r0, rng.standard_normal((n,) + tuple(shape[1:]))


def np_index(sel):
    """Selection items: None (all), int (fixed, dim dropped), (a, b) (half-open)."""
    return tuple(slice(None) if x is None else (slice(*x) if isinstance(x, tuple) else x) for x in sel)


def result_shape(sel, shape):
    out = []
    for x, s in zip(sel, shape):
        if x is None:
            out.append(s)
        elif isinstance(x, tuple):
            out.append(x[1] - x[0])
    return tuple(out)


def grid_cells(sel, shape, cell):
    """Cells of the grid `cell` (elements per dim) the selection touches."""
    n = 1
    for x, s, c in zip(sel, shape, cell):
        if x is None:
            n *= -(-s // c)
        elif isinstance(x, tuple):
            n *= (x[1] - 1) // c - x[0] // c + 1
    return n


def box_spelling(sel):
    return ",".join(":" if x is None else (f"{x[0]}:{x[1]}" if isinstance(x, tuple) else str(x)) for x in sel)


def numpy_spelling(sel):
    return "a[" + box_spelling(sel) + "]"


def plod_inplace(arr, k):
    """docs/reference.md §5 PLoD on a little-endian float64 array, in place: keep the k most
    significant bytes of every element; the most significant dropped byte
    becomes 0x7F, the others 0xFF (MLOC's fill)."""
    drop = 8 - k
    if drop <= 0:
        return arr
    u = arr.view("<u8")
    keep = np.uint64(((1 << 64) - 1) ^ ((1 << (8 * drop)) - 1))
    fill = np.uint64((0x7F << (8 * (drop - 1))) | ((1 << (8 * (drop - 1))) - 1))
    np.bitwise_and(u, keep, out=u)
    np.bitwise_or(u, fill, out=u)
    return arr


def pct_label(p):
    return f"{p:g}"


def make_workloads(shape, beams, cubes, plod, kinds, seed):
    """The workload list (see the module doc). Every entry: id, kind, dim, p,
    plod, sels (one per cold read), mmfs (view path per read, '' = the array
    file itself), plans (plan view per read), elements (per read)."""
    rng = np.random.default_rng(seed + 1)
    n = len(shape)
    mid = [s // 2 for s in shape]
    out = []
    if "beam" in kinds:
        for d in range(n):
            sels = []
            for _ in range(beams):
                sel = [int(rng.integers(0, s)) for s in shape]
                sel[d] = None
                sels.append(tuple(sel))
            views = ["box/" + box_spelling(s) for s in sels]
            out.append(dict(id=f"beam{d}", kind="beam", dim=d, p=None, plod=None, sels=sels, mmfs=views,
                            plans=views, elements=shape[d],
                            what=f"beam along dim {d}, {beams} fixed random position(s)"))
    if "slice" in kinds:
        for d in range(n):
            sel = [None] * n
            sel[d] = mid[d]
            v = f"slice/{d}/{mid[d]}"
            out.append(dict(id=f"slice{d}", kind="slice", dim=d, p=None, plod=None, sels=[tuple(sel)], mmfs=[v],
                            plans=[v], elements=int(np.prod(shape)) // shape[d],
                            what=f"middle slice x{d} = {mid[d]}"))
    if "cube" in kinds:
        for p in cubes:
            edge = [max(1, min(s, round(p / 100.0 * s))) for s in shape]
            corner = [int(rng.integers(0, s - e + 1)) for s, e in zip(shape, edge)]
            sel = tuple((c, c + e) for c, e in zip(corner, edge))
            v = "box/" + box_spelling(sel)
            out.append(dict(id=f"cube{pct_label(p)}", kind="cube", dim=None, p=p, plod=None, sels=[sel], mmfs=[v],
                            plans=[v], elements=int(np.prod(edge)),
                            what=f"{pct_label(p)}%-length cube, edges {'×'.join(map(str, edge))}"))
    if "full" in kinds:
        sel = tuple([None] * n)
        out.append(dict(id="full", kind="full", dim=None, p=None, plod=None, sels=[sel], mmfs=[""],
                        plans=["box/" + box_spelling(sel)], elements=int(np.prod(shape)),
                        what="full scan (mmfs: the array file itself)"))
    if "point" in kinds:
        sels = [tuple(int(rng.integers(0, s)) for s in shape) for _ in range(beams)]
        views = ["box/" + box_spelling(x) for x in sels]
        out.append(dict(id="point", kind="point", dim=None, p=None, plod=None, sels=sels, mmfs=views, plans=views,
                        elements=1, what=f"one element, {beams} random position(s)"))
    if "plod" in kinds:
        sel = tuple([None] * n)
        out.append(dict(id=f"plod{plod}-full", kind="plod", dim=None, p=None, plod=plod, sels=[sel],
                        mmfs=[f"plod/{plod}"], plans=[f"plod/{plod}"], elements=int(np.prod(shape)),
                        what=f"PLoD {plod} of {8} bytes, whole array"))
        sel = [None] * n
        sel[0] = mid[0]
        v = f"plod/{plod}@/slice/0/{mid[0]}"
        out.append(dict(id=f"plod{plod}-slice0", kind="plod", dim=0, p=None, plod=plod, sels=[tuple(sel)],
                        mmfs=[v], plans=[v], elements=int(np.prod(shape)) // shape[0],
                        what=f"PLoD {plod} of {8} bytes, middle slice x0 = {mid[0]}"))
    for w in out:
        w["bytes"] = w["elements"] * 8
        w["views"] = w["plans"]          # the views below A@, as mmfs-bench modeled spells them
        w["random"] = w["kind"] in ("beam", "cube", "point")
        w["numpy"] = [numpy_spelling(s) for s in w["sels"]]
    return out
