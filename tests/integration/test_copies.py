"""Copies of an array file (docs/reference.md §4 `user.mmfs.copies`, §5 `A@/copy/K@/VIEW`):
extra placements of the same array in other layouts.

What is proven, with numpy as the oracle:

* every layout as the primary with every layout as a copy (naive, zorder,
  hilbert, multimap, quadrangle on atlas10k3; a few dtypes and ranks): every
  view through every placement (`copy/K`, `copy/K@/slice/D/I` for each D, a
  stepped box, plod, plod of a slice) and every default view (the file,
  slices, boxes, zarr chunks) equals numpy, an mloc image among them as
  primary and as copy (its writes, catch-up and truncate: below); capsule
  copies need a MEMS volume;
* getfattr shows the canonical text; reordering copies keeps each copy's
  placement (no data rewritten, same device_bytes); `none` (or removing the
  attribute) drops them and frees their space; each copy costs exactly what
  the same placement costs as a primary, and device_bytes.copies is the sum;
* malformed values fail with the errno §4 names, leave a line in
  .mmfs/errors and change nothing;
* writes: see test_copies_writes.py;
* `A@/plan/...` names the cheapest current placement (`served_by`) and
  prices every placement (`copies`);
* copies set before the shape (empty or byte-holding file) are built with
  the array;
* everything under `A@/copy` is read-only and listed; bad K is ERANGE, a
  query under a copy ENOENT.
The fixtures' unmount asserts a clean daemon exit and a clean `mmfsck -n`.

Also: a view read in several chunks is served by the placement the plan
prices cheapest; `A@/plan/copy/K@/VIEW` plans a view through one copy.
"""
import errno
import os
import shutil
import subprocess
import zlib

import numpy as np
import pytest

from mmfs_mount import (ErrorLog, assert_array_bytes, getx, make_array, pwrite_all, random_array, read_bytes,
                        read_json, setx, view, write_array, xname)
from copies_support import (COPY_LAYOUTS, PRIMARIES, PRIMARY_LAYOUTS, every_layout_copies, check_view, info, copies_of, states,
                            wait_current, check_placement, check_default_views, check_everything, set_fails,
                            sectors_written, free_bytes)

@pytest.fixture(scope="module")
def vol(module_volume):
    return module_volume


@pytest.fixture(scope="module")
def primaries(vol):
    """get(layout) -> (path, numpy array): an array of that primary layout with every layout as a copy."""
    made = {}
    root = vol.mnt / "primaries"
    root.mkdir()

    def get(layout):
        if layout not in made:
            dtype, shape = PRIMARIES[layout]
            arr = random_array(np.random.default_rng(PRIMARY_LAYOUTS.index(layout)), shape, dtype)
            path = make_array(root / layout, shape, dtype, layout, arr)
            setx(path, "copies", every_layout_copies(layout, len(shape)))
            made[layout] = (path, arr)
        return made[layout]

    return get


# --- 1. every layout as the primary and as a copy ------------------------------------------

@pytest.mark.parametrize("primary", PRIMARY_LAYOUTS)
def test_every_view_through_every_copy_equals_numpy(primaries, primary):
    path, arr = primaries(primary)
    dtype, shape = PRIMARIES[primary]
    listed = copies_of(path)
    assert [c["copy"] for c in listed] == list(range(1, len(COPY_LAYOUTS) + 1))
    assert [c["layout"] for c in listed] == COPY_LAYOUTS
    assert [c["spec"] for c in listed] == every_layout_copies(primary, len(shape)).split(";")
    for c in listed:
        assert c["state"] == "current" and c["cells_behind"] == 0, f"a freshly built copy is current: {c}"
        if c["layout"] == primary and primary != "mloc":
            assert c["order"] == list(range(len(shape))), c
    check_everything(path, arr)


@pytest.mark.parametrize("primary", PRIMARY_LAYOUTS)
def test_zarr_chunks_with_copies_equal_numpy(primaries, primary):
    path, arr = primaries(primary)
    cell = info(path)["cell"]
    grid = [-(-s // c) for s, c in zip(arr.shape, cell)]
    for idx in ([0] * arr.ndim, [g - 1 for g in grid]):  # the first chunk and the (padded) last one
        box = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, cell, arr.shape))
        expected = np.zeros(cell, dtype=arr.dtype)
        expected[tuple(slice(0, b.stop - b.start) for b in box)] = arr[box]
        chunk = view(path, "zarr", "c", *idx)
        check_view(chunk, expected, f"zarr/c/{'/'.join(map(str, idx))}")


def test_mloc_copies_and_copies_of_mloc_arrays_take_writes_and_catch_up(vol):
    """An mloc copy (an MLOC image beside the cells): a write puts it behind and
    nothing reads it stale; its catch-up encodes a new image; truncate to 0
    empties it; dropping it frees its space. An mloc array with copies is
    unsealed by a write and sealed by the close, its copies caught up."""
    shape = (20, 16, 12)
    rng = np.random.default_rng(50)
    arr = random_array(rng, shape, "float64")
    path = make_array(vol.mnt / "mloc-copy", shape, "float64", "hilbert", arr)
    free0 = free_bytes(vol)
    setx(path, "copies", "naive;mloc:priority=M-V-S:compress=zstd")
    assert getx(path, "copies") == "naive;mloc:priority=M-V-S:compress=zstd"
    c = copies_of(path)[1]
    assert c["layout"] == "mloc" and c["state"] == "current" and "mloc" in c, c
    assert free0 - free_bytes(vol) == info(path)["device_bytes"]["copies"]
    check_everything(path, arr)
    arr[3, :, 5] = -1.5
    with open(path, "r+b") as f:
        for j in range(shape[1]):
            f.seek(((3 * shape[1] + j) * shape[2] + 5) * 8)
            f.write(arr[3, j, 5].tobytes())
        f.flush()
        check_placement(path, arr, 2, what="before fsync: ")  # A@/copy/K@ catches up at once
        os.fsync(f.fileno())
    wait_current(path)
    check_everything(path, arr, "after a write: ")
    os.truncate(path, 0)
    os.truncate(path, arr.nbytes)
    check_placement(path, np.zeros_like(arr), 2, what="after truncate: ")
    setx(path, "copies", "none")
    os.sync()
    assert free_bytes(vol) == free0

    # An mloc array with copies: a write unseals it, the close seals it again, the copies catch up.
    mloc = make_array(vol.mnt / "mloc-primary", shape, "float64", "mloc", arr)
    setx(mloc, "copies", "naive;hilbert")
    assert getx(mloc, "copies") == "naive;hilbert"
    check_everything(mloc, arr)
    arr[:, 4, :] = 7.25
    with open(mloc, "r+b") as f:
        for i in range(shape[0]):
            f.seek((i * shape[1] + 4) * shape[2] * 8)
            f.write(arr[i, 4].tobytes())
        f.flush()
        check_default_views(mloc, arr, "mloc, unsealed: ")
    wait_current(mloc)
    assert info(mloc)["mloc"]["chunks"] >= 1, info(mloc)  # sealed again
    check_everything(mloc, arr, "mloc, sealed again: ")


def test_capsule_copies_need_a_mems_volume(vol, volume_factory):
    shape = (300, 8)
    arr = random_array(np.random.default_rng(51), shape, "float64")
    disk = make_array(vol.mnt / "capsule-on-disk", shape, "float64", "naive", arr)
    expected = None
    try:
        setx(disk, "layout", "capsule")
    except OSError as e:
        expected = e.errno
    assert expected is not None, "layout=capsule on atlas10k3 was accepted"
    setx(disk, "layout", "naive")
    set_fails(vol, disk, "hilbert;capsule", expected, "capsule")

    mems = volume_factory(geometry="mems-g2")
    path = make_array(mems.mnt / "capsule-copy", shape, "float64", "naive", arr)
    setx(path, "copies", "capsule;hilbert")
    assert [c["layout"] for c in copies_of(path)] == ["capsule", "hilbert"]
    check_everything(path, arr)
    set_fails(mems, path, "quadrangle", errno.ENOTSUP, "disk")  # the same rule as layout=quadrangle
    assert getx(path, "copies") == "capsule;hilbert"


# --- 2. the attribute: canonical text, reordering, none, space -----------------------------

def test_default_is_none_and_listed(vol):
    path = make_array(vol.mnt / "plain", (10, 10), "float64", "naive")
    assert xname("copies") in os.listxattr(path)
    assert getx(path, "copies") == "none"
    assert "copy" not in os.listdir(view(path)), "A@ lists copy only when the array has copies"
    assert info(path)["device_bytes"].get("copies", 0) == 0
    assert copies_of(path) == []
    if shutil.which("getfattr"):
        out = subprocess.run(["getfattr", "-d", "-m", "user.mmfs", str(path)], capture_output=True, text=True,
                             check=True).stdout
        assert 'user.mmfs.copies="none"' in out.splitlines(), out


@pytest.mark.parametrize("value,canonical", [
    ("hilbert", "hilbert"),
    ("hilbert:cell=8,8,4:order=0,1,2", "hilbert:order=0,1,2:cell=8,8,4"),
    ("multimap:basic_cube=5,1,4:order=2,1,0", "multimap:order=2,1,0:basic_cube=5,1,4"),
    ("naive:order=2,1,0;hilbert:cell=8,8,4", "naive:order=2,1,0;hilbert:cell=8,8,4"),
    ("zorder:cell=4,8,8:order=1,0,2;quadrangle;naive", "zorder:order=1,0,2:cell=4,8,8;quadrangle;naive"),
    (";".join(["naive"] * 8), ";".join(["naive"] * 8)),
    ("none", "none"),
])
def test_getfattr_shows_the_canonical_text(vol, value, canonical):
    shape = (40, 50, 30)
    path = make_array(vol.mnt / f"canon-{zlib.crc32(value.encode())}", shape, "float64", "naive")
    setx(path, "copies", value)
    assert getx(path, "copies") == canonical
    specs = [] if canonical == "none" else canonical.split(";")
    assert [c["spec"] for c in copies_of(path)] == specs
    setx(path, "copies", canonical)  # the canonical text is accepted as is
    assert getx(path, "copies") == canonical
    if shutil.which("getfattr"):
        out = subprocess.run(["getfattr", "-n", "user.mmfs.copies", "--only-values", str(path)], capture_output=True,
                             check=True).stdout.decode()
        assert out == canonical


def test_reordering_keeps_each_copys_placement(vol):
    shape = (40, 50, 30)
    arr = random_array(np.random.default_rng(60), shape, "float64")
    path = make_array(vol.mnt / "reorder", shape, "float64", "naive", arr)
    written = sectors_written(vol)
    setx(path, "copies", "hilbert;naive:order=0,1,2;zorder")
    built = sectors_written(vol) - written
    before = {c["spec"]: c for c in copies_of(path)}
    assert built * 512 >= sum(c["device_bytes"] for c in before.values()) // 4, "building copies writes their data"

    written = sectors_written(vol)
    setx(path, "copies", "zorder;hilbert;naive:order=0,1,2")
    rewritten = sectors_written(vol) - written
    after = copies_of(path)
    assert [c["spec"] for c in after] == ["zorder", "hilbert", "naive:order=0,1,2"]
    assert [c["copy"] for c in after] == [1, 2, 3]
    for c in after:
        old = before[c["spec"]]
        for key in ("layout", "order", "cell", "device_bytes", "extents", "state"):
            assert c[key] == old[key], f"{c['spec']}: {key} {c[key]} != {old[key]} before the reorder"
    assert rewritten < built // 4, f"a reorder rewrote {rewritten} sectors (building wrote {built}): copies rebuilt"
    check_everything(path, arr)

    # Dropping one and adding one keeps the others.
    setx(path, "copies", "hilbert;multimap;naive:order=0,1,2")
    kept = {c["spec"]: c for c in copies_of(path)}
    for spec in ("hilbert", "naive:order=0,1,2"):
        assert kept[spec]["device_bytes"] == before[spec]["device_bytes"]
    check_everything(path, arr)


def test_none_drops_copies_and_frees_their_space(vol):
    shape = (40, 50, 30)
    arr = random_array(np.random.default_rng(61), shape, "float64")
    path = make_array(vol.mnt / "drop", shape, "float64", "naive", arr)
    free0 = free_bytes(vol)
    setx(path, "copies", "hilbert;quadrangle")
    total = info(path)["device_bytes"]["copies"]
    used = free0 - free_bytes(vol)
    assert total <= used <= total + (1 << 20), f"copies use {used} bytes of the volume, info says {total}"
    setx(path, "copies", "none")
    assert getx(path, "copies") == "none"
    assert info(path)["device_bytes"]["copies"] == 0
    assert copies_of(path) == []
    assert "copy" not in os.listdir(view(path))
    with ErrorLog(vol, path.name):
        try:
            read_bytes(view(path, "copy", 1))
        except OSError as e:
            assert e.errno == errno.ERANGE, e
        else:
            raise AssertionError("copy/1 of an array without copies was readable")
    assert free_bytes(vol) >= free0 - (1 << 20), "dropping the copies gives their space back"
    check_everything(path, arr)

    # Removing the attribute is the same as none.
    setx(path, "copies", "zorder")
    os.removexattr(path, xname("copies"))
    assert getx(path, "copies") == "none" and copies_of(path) == []
    assert info(path)["device_bytes"]["copies"] == 0


def test_each_copy_costs_what_the_same_placement_costs_as_a_primary(vol):
    root = vol.mnt / "space"
    root.mkdir()
    for dtype, shape in [("float64", (40, 50, 30)), ("int16", (37, 61)), ("uint8", (6, 7, 9, 11))]:
        arr = random_array(np.random.default_rng(62), shape, dtype)
        path = make_array(root / f"{dtype}", shape, dtype, "naive", arr)
        setx(path, "copies", every_layout_copies("naive", len(shape)))
        got = info(path)
        assert got["device_bytes"]["copies"] == sum(c["device_bytes"] for c in got["copies"])
        assert got["device_bytes"]["data"] >= got["bytes"]
        for c in got["copies"]:
            alone = make_array(root / f"{dtype}-{c['copy']}", shape, dtype, c["layout"], arr,
                               attrs={"order": ",".join(map(str, c["order"]))})
            primary = info(alone)
            assert c["device_bytes"] == primary["device_bytes"]["data"], (
                f"{dtype} {shape} copy {c['spec']}: {c['device_bytes']} bytes, the same placement as a primary "
                f"{primary['device_bytes']['data']}")
            assert c["cell"] == primary["cell"]
            assert c["device_bytes"] >= got["bytes"]


# --- 3. malformed values -------------------------------------------------------------------

MALFORMED = [
    ("", errno.EINVAL, "empty"),
    ("foo", errno.EINVAL, "foo"),
    ("NONE", errno.EINVAL, "NONE"),
    ("naive;", errno.EINVAL, None),
    ("naive;;hilbert", errno.EINVAL, None),
    ("naive:foo=1", errno.EINVAL, "foo"),
    ("naive:order", errno.EINVAL, None),
    ("naive:order=0,1,2:order=0,1,2", errno.EINVAL, "twice"),
    ("hilbert:cell=8,8:cell=8,8", errno.EINVAL, None),
    ("naive:order=0,1", errno.EINVAL, None),
    ("naive:order=0,0,1", errno.EINVAL, None),
    ("naive:cell=8,8", errno.EINVAL, None),
    ("naive:cell=8,8,8,8", errno.EINVAL, None),
    ("naive:cell=41,8,8", errno.EINVAL, None),
    ("hilbert:cell=8,51,8", errno.EINVAL, None),
    ("naive:cell=0,8,8", errno.EINVAL, None),
    ("multimap:basic_cube=a,b,c", errno.EINVAL, None),
    (";".join(["naive"] * 9), errno.EINVAL, "8"),
    (";".join(["hilbert", "naive", "zorder"] * 3), errno.EINVAL, "8"),
    ("mloc:compress=lz4", errno.EINVAL, "compress"),
    ("naive;mloc:priority=V-V-S", errno.EINVAL, "priority"),
]


@pytest.fixture(scope="module")
def target(vol):
    shape = (40, 50, 30)
    arr = random_array(np.random.default_rng(70), shape, "float64")
    path = make_array(vol.mnt / "malformed", shape, "float64", "zorder", arr)
    setx(path, "copies", "hilbert:order=0,1,2;naive")
    return path, arr


@pytest.mark.parametrize("value,err,mention", MALFORMED, ids=[repr(v[0])[:40] for v in MALFORMED])
def test_malformed_values_change_nothing(vol, target, value, err, mention):
    path, arr = target
    set_fails(vol, path, value, err, *([mention] if mention else []))
    assert getx(path, "copies") == "hilbert:order=0,1,2;naive"
    assert_array_bytes(read_bytes(view(path, "copy", 2)), arr, "copy/2 after a refused value")


def test_malformed_values_change_nothing_on_an_array_without_copies(vol):
    path = make_array(vol.mnt / "malformed-none", (12, 13), "int32", "naive")
    for value, err in [("", errno.EINVAL), ("hilbert:cell=4,4,4", errno.EINVAL),
                       (";".join(["zorder"] * 9), errno.EINVAL), ("mloc:chunk=4,4,4", errno.EINVAL)]:
        set_fails(vol, path, value, err)
        assert getx(path, "copies") == "none"
        assert "copy" not in os.listdir(view(path))


# --- 5. the plan ---------------------------------------------------------------------------

def check_plan(path, parts, n, layouts):
    plan = read_json(view(path, "plan", *parts))
    what = "plan/" + "/".join(map(str, parts))
    assert "served_by" in plan and "copies" in plan, f"{what}: {sorted(plan)}"
    copies = plan["copies"]
    assert [c["copy"] for c in copies] == list(range(n + 1)), f"{what}: {copies}"
    assert [c["layout"] for c in copies] == layouts, f"{what}: {copies}"
    for c in copies:
        assert c["state"] in ("current", "behind") and c["requests"] >= 1 and c["modeled_ms"] > 0, f"{what}: {c}"
    assert copies[0]["state"] == "current", f"{what}: the primary is always current"
    current = [c for c in copies if c["state"] == "current"]
    best = min(c["modeled_ms"] for c in current)
    served = copies[plan["served_by"]]
    assert served["state"] == "current", f"{what}: served by copy {served['copy']}, which is behind"
    assert served["modeled_ms"] <= best * (1 + 1e-9), \
        f"{what}: served by copy {served['copy']} at {served['modeled_ms']} ms, copy " \
        f"{min(current, key=lambda c: c['modeled_ms'])['copy']} costs {best} ms"
    assert abs(plan["modeled_ms"] - served["modeled_ms"]) <= 1e-6 * max(1.0, served["modeled_ms"]), \
        f"{what}: modeled_ms {plan['modeled_ms']} is not copy {served['copy']}'s {served['modeled_ms']}"
    return plan


def test_plan_names_the_cheapest_current_placement(vol):
    shape = (40, 50, 30)
    rng = np.random.default_rng(90)
    arr = random_array(rng, shape, "float64")
    path = make_array(vol.mnt / "plan", shape, "float64", "naive", arr)
    plain = read_json(view(path, "plan", "slice", 0, 0))
    assert "served_by" not in plain and "copies" not in plain, "no copies: the plan is unchanged"
    setx(path, "copies", "hilbert;naive:order=0,1,2;naive:order=1,0,2;multimap;quadrangle")
    layouts = ["naive"] + [c["layout"] for c in copies_of(path)]
    n = len(layouts) - 1
    served = set()
    views = [("slice", d, i) for d in range(3) for i in sorted({0, 7, shape[d] - 1})]
    views += [("box", "0:40:3,10,:"), ("box", ":,:,5:9"), ("box", "3:20,4:30,2:25")]
    for parts in views:
        served.add(check_plan(path, parts, n, layouts)["served_by"])
        if parts[0] == "slice":
            check_view(view(path, *parts), np.take(arr, int(parts[2]), axis=int(parts[1])), "/".join(map(str, parts)))
    assert served - {0}, f"every view was served by the primary ({served}): the copies are never used"

    # While copies are behind, the plan serves from current placements only, and the data is right.
    new = random_array(rng, shape, "float64")
    fd = os.open(path, os.O_WRONLY)
    try:
        pwrite_all(fd, new.tobytes(), 0)
        assert any(state == "behind" for _, state, _ in states(path)), states(path)
        for parts in views:
            plan = check_plan(path, parts, n, layouts)
            assert plan["served_by"] == 0 or plan["copies"][plan["served_by"]]["state"] == "current"
        check_default_views(path, new, "behind: ")
        os.fsync(fd)
    finally:
        os.close(fd)
    wait_current(path)
    served_after = {check_plan(path, parts, n, layouts)["served_by"] for parts in views}
    assert served_after == served, "once current again, the same placements serve the same views"
    check_everything(path, new, "after the catch-up: ")


def test_plan_of_a_view_read_in_chunks_names_the_cheapest_placement(volume_factory):
    vol = volume_factory(size="1G")
    shape = (300, 200, 150)  # no data is needed for a plan
    path = make_array(vol.mnt / "chunked", shape, "float64", "naive")
    setx(path, "copies", "naive:order=0,1,2;hilbert;zorder:order=1,0,2")
    layouts = ["naive", "naive", "hilbert", "zorder"]
    check_plan(path, ("box", ":,:,:"), 3, layouts)
    check_plan(path, ("box", "::3,:,:"), 3, layouts)


def test_plan_of_a_view_through_a_copy(vol):
    shape = (40, 50, 30)
    path = make_array(vol.mnt / "plan-copy", shape, "float64", "naive")
    setx(path, "copies", "hilbert;naive:order=0,1,2")
    plan = read_json(view(path, "plan", "copy", "2@", "slice", 2, 7))
    assert plan["served_by"] == 2 and plan["requests"] >= 1, plan


# --- 6. copies set before the shape --------------------------------------------------------

def test_copies_set_before_the_shape_are_built_with_the_array(vol):
    shape = (40, 50, 30)
    arr = random_array(np.random.default_rng(100), shape, "float64")
    path = vol.mnt / "early"
    path.write_bytes(b"")
    setx(path, "copies", "quadrangle:cell=8,8,8;hilbert:order=0,1,2")
    assert getx(path, "copies") == "quadrangle:cell=8,8,8;hilbert:order=0,1,2"
    setx(path, "layout", "zorder")
    setx(path, "shape", "40,50,30")
    assert getx(path, "copies") == "quadrangle:cell=8,8,8;hilbert:order=0,1,2"
    got = copies_of(path)
    assert [(c["copy"], c["spec"], c["state"]) for c in got] == \
           [(1, "quadrangle:cell=8,8,8", "current"), (2, "hilbert:order=0,1,2", "current")]
    assert info(path)["device_bytes"]["copies"] == sum(c["device_bytes"] for c in got) > 0
    check_everything(path, np.zeros(shape), "before any write: ")
    write_array(path, arr)
    wait_current(path)
    check_everything(path, arr)


def test_copies_set_before_the_shape_of_a_file_with_bytes(vol):
    shape = (37, 61)
    arr = random_array(np.random.default_rng(101), shape, "int16")
    path = vol.mnt / "early-bytes"
    path.write_bytes(arr.tobytes())
    setx(path, "dtype", "int16")
    setx(path, "copies", "naive:order=0,1;multimap")
    setx(path, "shape", "37,61")
    assert getx(path, "copies") == "naive:order=0,1;multimap"
    assert len(copies_of(path)) == 2
    check_everything(path, arr)


def test_copies_set_before_the_shape_are_checked_against_it(vol):
    path = vol.mnt / "early-bad"
    path.write_bytes(b"")
    with ErrorLog(vol, path.name, "copies"):
        expect = errno.EINVAL
        try:
            setx(path, "copies", "bogus")
        except OSError as e:
            assert e.errno == expect
        else:
            raise AssertionError("copies=bogus was accepted before the shape")
    setx(path, "copies", "naive:cell=8,8")  # a rank the shape will contradict
    with ErrorLog(vol, path.name, "copies"):
        try:
            setx(path, "shape", "40,50,30")
        except OSError as e:
            assert e.errno == errno.EINVAL, e
        else:
            raise AssertionError("shape 40,50,30 was accepted with a copy of cell 8,8")
    assert os.stat(path).st_size == 0, "the refused shape left the file as it was"
    setx(path, "copies", "naive:cell=8,8,8")
    setx(path, "shape", "40,50,30")
    assert [c["spec"] for c in copies_of(path)] == ["naive:cell=8,8,8"]

    # An mloc array with copies listed before its shape: created with them, zeros everywhere.
    mloc = vol.mnt / "early-mloc"
    mloc.write_bytes(b"")
    setx(mloc, "copies", "hilbert;mloc:compress=zstd")
    setx(mloc, "layout", "mloc")
    setx(mloc, "shape", "40,50,30")
    assert [c["spec"] for c in copies_of(mloc)] == ["hilbert", "mloc:compress=zstd"]
    check_everything(mloc, np.zeros((40, 50, 30)))


# --- 7. read-only views and listings -------------------------------------------------------

@pytest.fixture(scope="module")
def listed(vol):
    shape = (6, 7, 9, 11)
    arr = random_array(np.random.default_rng(110), shape, "uint8")
    path = make_array(vol.mnt / "listed", shape, "uint8", "hilbert", arr)
    setx(path, "copies", "naive;zorder:order=0,1,2,3;multimap")
    return path, arr


def test_listings_under_copy(listed):
    path, arr = listed
    assert "copy" in os.listdir(view(path))
    assert sorted(os.listdir(view(path, "copy"))) == sorted(["0", "1", "2", "3", "0@", "1@", "2@", "3@"])
    for k in range(4):
        assert os.path.isfile(view(path, "copy", k)) and os.path.isdir(view(path, "copy", f"{k}@"))
        assert os.stat(view(path, "copy", k)).st_size == arr.nbytes
        assert sorted(os.listdir(view(path, "copy", f"{k}@"))) == ["box", "lbn", "plod", "slice"]
        assert sorted(os.listdir(view(path, "copy", f"{k}@", "slice")), key=int) == [str(d) for d in range(arr.ndim)]
        for d in range(arr.ndim):
            assert sorted(os.listdir(view(path, "copy", f"{k}@", "slice", d)), key=int) == \
                   [str(i) for i in range(arr.shape[d])]
    check_placement(listed[0], arr, 0)
    assert_array_bytes(read_bytes(view(path, "copy", 0)), arr, "copy/0 is the primary")


@pytest.mark.parametrize("parts", [("copy", 4), ("copy", "4@", "slice", 0, 0), ("copy", "99@", "box", ":,:,:,:"),
                                   ("copy", "9")])
def test_a_copy_out_of_range_is_erange(vol, listed, parts):
    path, _ = listed
    with ErrorLog(vol, path.name):
        try:
            read_bytes(view(path, *parts))
        except OSError as e:
            assert e.errno == errno.ERANGE, f"{parts}: {e}"
        else:
            raise AssertionError(f"{parts} was readable")


@pytest.mark.parametrize("parts", [("copy", "1@", "query", ">0", "count"), ("copy", "1@", "info"),
                                   ("copy", "1@", "zarr", "zarr.json"), ("copy", "1@", "copy", "0")])
def test_what_cannot_follow_a_copy_is_enoent(listed, parts):
    path, _ = listed
    try:
        read_bytes(view(path, *parts))
    except OSError as e:
        assert e.errno == errno.ENOENT, f"{parts}: {e}"
    else:
        raise AssertionError(f"{parts} was readable")


def test_nothing_under_copy_can_be_changed(vol, listed):
    path, arr = listed
    cases = [
        (os.open, view(path, "copy", 1), os.O_WRONLY),
        (os.open, view(path, "copy", 0), os.O_RDWR),
        (os.open, view(path, "copy", "1@", "slice", 0, 0), os.O_WRONLY),
        (os.open, view(path, "copy", "2@", "box", ":,1,:,:"), os.O_WRONLY),
        (os.open, view(path, "copy", 1), os.O_CREAT | os.O_WRONLY, 0o644),
        (os.open, view(path, "copy", "1@", "new"), os.O_CREAT | os.O_WRONLY, 0o644),
        (os.mkdir, view(path, "copy", "1@", "dir")),
        (os.truncate, view(path, "copy", 1), 0),
        (os.unlink, view(path, "copy", 1)),
        (os.rmdir, view(path, "copy", "1@")),
        (os.rename, view(path, "copy", 1), view(path, "copy", "1@", "moved")),
        (os.rename, view(path, "copy", 1), view(path, "copy", 2)),
        (os.symlink, "x", view(path, "copy", "1@", "link")),
        (os.chmod, view(path, "copy", 1), 0o777),
        (os.setxattr, view(path, "copy", 1), "user.mmfs.copies", b"none"),
        (os.setxattr, view(path, "copy", "1@"), "user.x", b"1"),
    ]
    problems = []
    for fn, *args in cases:
        try:
            fn(*args)
        except OSError as e:
            if e.errno != errno.EROFS:
                problems.append(f"{fn.__name__}{tuple(map(str, args))}: {errno.errorcode.get(e.errno)}, "
                                "expected EROFS")
        else:
            problems.append(f"{fn.__name__}{tuple(map(str, args))} succeeded, expected EROFS")
    # A name under A@/copy that is no K fails its lookup as under A@/slice (EINVAL, ERANGE), before the create.
    for name, err in (("new", errno.EINVAL), ("4", errno.ERANGE)):
        try:
            os.open(view(path, "copy", name), os.O_CREAT | os.O_WRONLY, 0o644)
        except OSError as e:
            if e.errno not in (err, errno.EROFS):
                problems.append(f"create copy/{name}: {errno.errorcode.get(e.errno)}, expected EROFS or "
                                f"{errno.errorcode[err]}")
        else:
            problems.append(f"create copy/{name} succeeded")
    assert not problems, "\n".join(problems)
    assert sorted(os.listdir(view(path, "copy"))) == sorted(["0", "1", "2", "3", "0@", "1@", "2@", "3@"])
    assert getx(path, "copies") == "naive;zorder:order=0,1,2,3;multimap"
    for k in range(4):
        assert_array_bytes(read_bytes(view(path, "copy", k)), arr, f"copy/{k} after the refused changes")
