"""Copies of an array file (docs/reference.md §4 `user.mmfs.copies`, §5 `A@/copy/K@/VIEW`):
extra placements of the same array in other layouts.

What is proven, with numpy as the oracle:

* every layout as the primary with every layout as a copy (naive, zorder,
  hilbert, multimap, quadrangle on atlas10k3; a few dtypes and ranks): every
  view through every placement (`copy/K`, `copy/K@/slice/D/I` for each D, a
  stepped box, plod, plod of a slice) and every default view (the file,
  slices, boxes, zarr chunks) equals numpy; mloc copies and copies of an mloc
  array are refused (ENOTSUP), capsule copies need a MEMS volume;
* getfattr shows the canonical text; reordering copies keeps each copy's
  placement (no data rewritten, same device_bytes); `none` (or removing the
  attribute) drops them and frees their space; each copy costs exactly what
  the same placement costs as a primary, and device_bytes.copies is the sum;
* malformed values fail with the errno §4 names, leave a line in
  .mmfs/errors and change nothing;
* writes (pwrite, mmap, O_DIRECT) never show stale bytes through any copy,
  at any moment: copies behind or current, a writer thread racing reader
  threads and the background catch-up (a generation oracle), views read in
  several chunks, after a SIGKILL of the daemon at random moments;
  fsync/close brings every copy current; setting copies over unflushed
  writes, reordering or dropping them while behind, relayout of the primary,
  truncate, rename, link, unlink and remount keep every copy equal to the
  data; copies that do not fit are ENOSPC and change nothing;
* `A@/plan/...` names the cheapest current placement (`served_by`) and
  prices every placement (`copies`);
* copies set before the shape (empty or byte-holding file) are built with
  the array;
* everything under `A@/copy` is read-only and listed; bad K is ERANGE, a
  query under a copy ENOENT.
The fixtures' unmount asserts a clean daemon exit and a clean `mmfsck -n`.

Also: a read of `A@/copy/K` under concurrent writes never fails (EAGAIN);
a view read in several chunks is served by the placement the plan prices
cheapest; `A@/plan/copy/K@/VIEW` plans a view through one copy.
"""
import errno
import fcntl
import mmap
import os
import shutil
import subprocess
import tempfile
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from mmfs_mount import (SCRATCH, ErrorLog, assert_array_bytes, fsck, fsync_dir, getx, make_array, mkfs, plod,
                        pwrite_all, random_array, random_pieces, read_bytes, read_json, sel_string, setx, start_daemon,
                        unmount, view, write_array, xname)

COPY_LAYOUTS = ["naive", "zorder", "hilbert", "multimap", "quadrangle"]

# The primary's layout -> (dtype, shape) of its array: several dtypes and ranks.
PRIMARIES = {
    "naive": ("float64", (40, 50, 30)),
    "zorder": ("int16", (37, 61)),
    "hilbert": ("uint8", (6, 7, 9, 11)),
    "multimap": ("float32", (20, 24, 18)),
    "quadrangle": ("int32", (30, 40, 20)),
}

CATCH_UP_TIMEOUT = 10.0  # seconds for the background catch-up after fsync/close


def ascending(ndim):
    return ",".join(str(d) for d in range(ndim))


def every_layout_copies(primary, ndim):
    """All five layouts as copies; the primary's own layout with the other order, so it differs."""
    return ";".join(f"{layout}:order={ascending(ndim)}" if layout == primary else layout
                    for layout in COPY_LAYOUTS)


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
            arr = random_array(np.random.default_rng(COPY_LAYOUTS.index(layout)), shape, dtype)
            path = make_array(root / layout, shape, dtype, layout, arr)
            setx(path, "copies", every_layout_copies(layout, len(shape)))
            made[layout] = (path, arr)
        return made[layout]

    return get


# --- helpers ------------------------------------------------------------------------------

def check_view(path, expected, what):
    expected = np.ascontiguousarray(expected)
    assert os.stat(path).st_size == expected.nbytes, f"{what}: st_size {os.stat(path).st_size} != {expected.nbytes}"
    assert_array_bytes(read_bytes(path), expected, what)


def info(path):
    return read_json(view(path, "info"))


def copies_of(path):
    return info(path).get("copies") or []


def states(path):
    return [(c["copy"], c["state"], c["cells_behind"]) for c in copies_of(path)]


def wait_current(path, timeout=CATCH_UP_TIMEOUT):
    """Polls A@/info until every copy is `current`; returns the seconds it took."""
    start = time.monotonic()
    while True:
        now = states(path)
        if all(state == "current" and behind == 0 for _, state, behind in now):
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            raise AssertionError(f"copies still behind {timeout:.0f} s after fsync/close: {now}")
        time.sleep(0.05)


def stepped(shape):
    """A stepped box: every other item of even dims from 1, a middle index of odd dims."""
    return tuple(slice(1, s, 2) if i % 2 == 0 and s > 1 else s // 2 for i, s in enumerate(shape))


def check_placement(path, arr, k, indices=None, what=""):
    """Every view of `path` read through placement k equals arr."""
    where = f"{what}copy/{k}"
    check_view(view(path, "copy", k), arr, where)
    for dim in range(arr.ndim):
        for idx in (indices or (lambda n: sorted({0, n // 2, n - 1})))(arr.shape[dim]):
            check_view(view(path, "copy", f"{k}@", "slice", dim, idx), np.take(arr, idx, axis=dim),
                       f"{where}@/slice/{dim}/{idx}")
    sel = stepped(arr.shape)
    check_view(view(path, "copy", f"{k}@", "box", sel_string(sel)), arr[sel], f"{where}@/box/{sel_string(sel)}")
    full = tuple(slice(None) for _ in arr.shape)
    check_view(view(path, "copy", f"{k}@", "box", sel_string(full)), arr, f"{where}@/box/{sel_string(full)}")
    keep = max(1, arr.dtype.itemsize // 2)
    reduced = plod(arr, keep)
    check_view(view(path, "copy", f"{k}@", "plod", keep), reduced, f"{where}@/plod/{keep}")
    last = arr.ndim - 1
    check_view(view(path, "copy", f"{k}@", "plod", f"{keep}@", "slice", last, 1),
               np.take(reduced, 1, axis=last), f"{where}@/plod/{keep}@/slice/{last}/1")


def check_default_views(path, arr, what=""):
    """The ordinary views (served by the cheapest current placement) equal arr."""
    check_view(path, arr, f"{what}the file")
    for dim in range(arr.ndim):
        for idx in sorted({0, arr.shape[dim] // 2, arr.shape[dim] - 1}):
            check_view(view(path, "slice", dim, idx), np.take(arr, idx, axis=dim), f"{what}slice/{dim}/{idx}")
    sel = stepped(arr.shape)
    check_view(view(path, "box", sel_string(sel)), arr[sel], f"{what}box/{sel_string(sel)}")
    check_view(view(path, "plod", 1), plod(arr, 1), f"{what}plod/1")


def check_everything(path, arr, what=""):
    n = len(copies_of(path))
    for k in range(n + 1):
        check_placement(path, arr, k, what=what)
    check_default_views(path, arr, what)


def set_fails(vol, path, value, err, *mentions):
    """setxattr user.mmfs.copies=value fails with err, logs a line, and changes nothing."""
    before_text, before_copies = getx(path, "copies"), copies_of(path)
    with ErrorLog(vol, path.name, "copies", *mentions):
        try:
            setx(path, "copies", value)
        except OSError as e:
            assert e.errno == err, f"copies={value!r}: {errno.errorcode.get(e.errno)}, expected {errno.errorcode[err]}"
        else:
            raise AssertionError(f"copies={value!r} was accepted (now {getx(path, 'copies')!r})")
    assert getx(path, "copies") == before_text, f"copies={value!r} changed the attribute"
    assert copies_of(path) == before_copies, f"copies={value!r} changed the copies"


def sectors_written(vol):
    return read_json(vol.mnt / ".mmfs" / "stats")["sectors_written"]


def free_bytes(vol):
    st = os.statvfs(vol.mnt)
    return st.f_bfree * st.f_frsize


# --- 1. every layout as the primary and as a copy ------------------------------------------

@pytest.mark.parametrize("primary", COPY_LAYOUTS)
def test_every_view_through_every_copy_equals_numpy(primaries, primary):
    path, arr = primaries(primary)
    dtype, shape = PRIMARIES[primary]
    listed = copies_of(path)
    assert [c["copy"] for c in listed] == [1, 2, 3, 4, 5]
    assert [c["layout"] for c in listed] == COPY_LAYOUTS
    assert [c["spec"] for c in listed] == every_layout_copies(primary, len(shape)).split(";")
    for c in listed:
        assert c["state"] == "current" and c["cells_behind"] == 0, f"a freshly built copy is current: {c}"
        if c["layout"] == primary:
            assert c["order"] == list(range(len(shape))), c
    check_everything(path, arr)


@pytest.mark.parametrize("primary", COPY_LAYOUTS)
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


def test_mloc_copies_and_copies_of_mloc_arrays_are_not_supported(vol):
    shape = (20, 16, 12)
    arr = random_array(np.random.default_rng(50), shape, "float64")
    path = make_array(vol.mnt / "mloc-copy", shape, "float64", "hilbert", arr)
    set_fails(vol, path, "mloc", errno.ENOTSUP, "mloc")
    set_fails(vol, path, "naive;mloc:priority=M-V-S", errno.ENOTSUP, "mloc")
    setx(path, "copies", "naive")
    set_fails(vol, path, "naive;mloc", errno.ENOTSUP, "mloc")
    assert getx(path, "copies") == "naive"
    check_everything(path, arr)

    mloc = make_array(vol.mnt / "mloc-primary", shape, "float64", "mloc", arr)
    set_fails(vol, mloc, "naive", errno.ENOTSUP, "mloc")
    set_fails(vol, mloc, "hilbert;zorder", errno.ENOTSUP, "mloc")
    assert getx(mloc, "copies") == "none"
    assert "copy" not in os.listdir(view(mloc))
    assert_array_bytes(read_bytes(mloc), arr, "the mloc array")


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
    ("mloc", errno.ENOTSUP, "mloc"),
    ("naive;mloc:compress=zstd", errno.ENOTSUP, None),
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
                       (";".join(["zorder"] * 9), errno.EINVAL), ("mloc", errno.ENOTSUP)]:
        set_fails(vol, path, value, err)
        assert getx(path, "copies") == "none"
        assert "copy" not in os.listdir(view(path))


# --- 4. writes: never stale, caught up, durable ---------------------------------------------

WRITE_COPIES = "hilbert;naive:order=0,1,2;multimap;quadrangle;zorder:order=1,2,0"


def test_writes_are_never_stale_through_any_copy(volume):
    shape = (40, 50, 30)
    rng = np.random.default_rng(80)
    arr = random_array(rng, shape, "float64")
    path = make_array(volume.mnt / "w", shape, "float64", "naive", arr)
    setx(path, "copies", WRITE_COPIES)
    n = len(WRITE_COPIES.split(";"))
    cur = arr.copy()
    flat = cur.reshape(-1).view(np.uint8)
    saw_behind = False
    fd = os.open(path, os.O_WRONLY)
    try:
        for round_ in range(6):
            new = random_array(rng, shape, "float64").reshape(-1).view(np.uint8)
            pieces = random_pieces(rng, flat.size, 20000)[:3]
            for off, length in pieces:
                pwrite_all(fd, new[off:off + length].tobytes(), off)
                flat[off:off + length] = new[off:off + length]
            now = states(path)
            for k, state, behind in now:
                assert (state == "behind") == (behind > 0), f"copy {k}: state {state} with {behind} cells behind"
            saw_behind |= any(state == "behind" for _, state, _ in now)
            # The default views first (a copy behind must not serve them), then each copy in a new order.
            check_default_views(path, cur, f"round {round_}: ")
            for k in rng.permutation(n + 1):
                d = int(rng.integers(0, 3))
                i = int(rng.integers(0, shape[d]))
                check_view(view(path, "copy", f"{k}@", "slice", d, i), np.take(cur, i, axis=d),
                           f"round {round_}: copy/{k}@/slice/{d}/{i}")
                check_view(view(path, "copy", k), cur, f"round {round_}: copy/{k}")
        assert saw_behind, f"no copy was ever behind after unflushed writes ({states(path)}): the test proves nothing"
        os.fsync(fd)
        wait_current(path)
    finally:
        os.close(fd)
    check_everything(path, cur, "after fsync: ")

    volume.remount()
    assert getx(path, "copies") == WRITE_COPIES
    assert all(state == "current" for _, state, _ in states(path)), states(path)
    check_everything(path, cur, "after remount: ")

    os.truncate(path, 0)
    assert os.stat(path).st_size == cur.nbytes
    zeros = np.zeros(shape, dtype=cur.dtype)
    check_everything(path, zeros, "after truncate to 0: ")
    wait_current(path)
    volume.remount()
    check_everything(path, zeros, "after truncate and remount: ")


def test_close_catches_copies_up_in_the_background(volume):
    shape = (40, 50, 30)
    rng = np.random.default_rng(81)
    arr = random_array(rng, shape, "float64")
    path = make_array(volume.mnt / "c", shape, "float64", "hilbert", arr)
    setx(path, "copies", "naive;zorder:order=0,1,2;quadrangle")
    new = random_array(rng, shape, "float64")
    fd = os.open(path, os.O_WRONLY)
    try:
        pwrite_all(fd, new[3:9].tobytes(), new[:3].nbytes)
        assert all(state == "behind" and behind > 0 for _, state, behind in states(path)), states(path)
    finally:
        os.close(fd)
    arr[3:9] = new[3:9]
    # Read at once, racing the catch-up: never stale.
    check_default_views(path, arr, "right after close: ")
    wait_current(path)
    check_everything(path, arr, "after the catch-up: ")


def test_unmount_with_copies_behind_keeps_the_data(volume):
    shape = (37, 61)
    rng = np.random.default_rng(82)
    arr = random_array(rng, shape, "int16")
    path = make_array(volume.mnt / "u", shape, "int16", "zorder", arr)
    setx(path, "copies", "naive:order=0,1;multimap;quadrangle")
    cur = arr.reshape(-1).view(np.uint8).copy()
    new = random_array(rng, shape, "int16").reshape(-1).view(np.uint8)
    fd = os.open(path, os.O_WRONLY)
    try:
        for off, length in random_pieces(rng, cur.size, 700)[:5]:
            pwrite_all(fd, new[off:off + length].tobytes(), off)
            cur[off:off + length] = new[off:off + length]
    finally:
        os.close(fd)
    volume.remount()  # at once: the catch-up may still be under way
    cur = cur.view(np.int16).reshape(shape)
    assert getx(path, "copies") == "naive:order=0,1;multimap;quadrangle"
    check_everything(path, cur, "after remount: ")
    wait_current(path)


def test_copies_set_over_unflushed_writes_hold_them(volume):
    shape = (20, 24, 18)
    rng = np.random.default_rng(83)
    arr = random_array(rng, shape, "float32")
    path = make_array(volume.mnt / "dirty", shape, "float32", "multimap", arr)
    new = random_array(rng, shape, "float32")
    fd = os.open(path, os.O_WRONLY)
    try:
        pwrite_all(fd, new[5:11].tobytes(), new[:5].nbytes)
        arr[5:11] = new[5:11]
        setx(path, "copies", "naive;hilbert:order=0,1,2")
        check_everything(path, arr, "copies built over unflushed writes: ")
        pwrite_all(fd, new[0].tobytes(), 0)
        arr[0] = new[0]
        check_everything(path, arr, "and written again: ")
    finally:
        os.close(fd)
    wait_current(path)
    volume.remount()
    check_everything(path, arr, "after remount: ")


def test_relayout_of_the_primary_keeps_the_copies(vol):
    shape = (30, 40, 20)
    arr = random_array(np.random.default_rng(84), shape, "int32")
    path = make_array(vol.mnt / "relayout", shape, "int32", "naive", arr)
    setx(path, "copies", "hilbert;quadrangle")
    before = copies_of(path)
    for layout in ("zorder", "multimap", "quadrangle", "naive"):
        setx(path, "layout", layout)
        assert info(path)["layout"] == layout
        assert getx(path, "copies") == "hilbert;quadrangle"
        assert [(c["spec"], c["device_bytes"]) for c in copies_of(path)] == \
               [(c["spec"], c["device_bytes"]) for c in before]
        check_everything(path, arr, f"primary {layout}: ")


def test_reorder_drop_and_truncate_while_copies_are_behind(volume):
    shape = (40, 50, 30)
    rng = np.random.default_rng(85)
    arr = random_array(rng, shape, "float64")
    path = make_array(volume.mnt / "behind", shape, "float64", "naive", arr)
    setx(path, "copies", "hilbert;naive:order=0,1,2;quadrangle")
    new = random_array(rng, shape, "float64")
    fd = os.open(path, os.O_WRONLY)
    try:
        pwrite_all(fd, new[10:30].tobytes(), new[:10].nbytes)
        arr[10:30] = new[10:30]
        behind = {c["spec"]: c["cells_behind"] for c in copies_of(path)}
        assert all(n > 0 for n in behind.values()), behind
        # A reorder keeps each copy's lag with the copy, not with its position.
        setx(path, "copies", "quadrangle;hilbert;naive:order=0,1,2")
        after = {c["spec"]: c["cells_behind"] for c in copies_of(path)}
        assert all(after[spec] in (0, n) for spec, n in behind.items()), f"before {behind}, after the reorder {after}"
        check_everything(path, arr, "reordered while behind: ")
        pwrite_all(fd, new[0].tobytes(), 0)
        arr[0] = new[0]
        setx(path, "copies", "zorder;hilbert")  # hilbert kept (behind), two dropped, zorder built
        check_everything(path, arr, "dropped and built while behind: ")
        pwrite_all(fd, new[39].tobytes(), new[:39].nbytes)
        os.truncate(path, 0)
        check_everything(path, np.zeros(shape), "truncated while behind: ")
    finally:
        os.close(fd)
    wait_current(path)
    volume.remount()
    check_everything(path, np.zeros(shape), "after remount: ")


def test_mmap_and_odirect_writes_reach_every_copy(vol):
    shape = (40, 50, 30)
    rng = np.random.default_rng(86)
    arr = random_array(rng, shape, "float64")
    path = make_array(vol.mnt / "mmap", shape, "float64", "zorder", arr)
    setx(path, "copies", "naive;hilbert:cell=3,5,7;quadrangle")
    new = random_array(rng, shape, "float64")
    flat, fresh = arr.reshape(-1).view(np.uint8), new.reshape(-1).view(np.uint8)
    with open(path, "r+b") as f:
        with mmap.mmap(f.fileno(), 0) as m:
            m[8000:16000] = fresh[8000:16000].tobytes()
            flat[8000:16000] = fresh[8000:16000]
            m.flush()
    check_everything(path, arr, "after an mmap write: ")
    fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
    try:
        with mmap.mmap(-1, 8192) as buf:  # page-aligned for O_DIRECT
            buf[:] = fresh[4096:12288].tobytes()
            assert os.pwrite(fd, buf, 4096) == 8192
        flat[4096:12288] = fresh[4096:12288]
        check_everything(path, arr, "after an O_DIRECT write: ")
    finally:
        os.close(fd)
    wait_current(path)


def test_odd_reads_of_a_copy_file(vol):
    shape = (40, 50, 30)
    rng = np.random.default_rng(87)
    arr = random_array(rng, shape, "float64")
    path = make_array(vol.mnt / "odd-reads", shape, "float64", "naive", arr)
    setx(path, "copies", "hilbert:cell=3,5,7;multimap;quadrangle")
    data = arr.tobytes()
    for k in range(4):
        fd = os.open(view(path, "copy", k), os.O_RDONLY)
        try:
            for _ in range(40):
                off, n = int(rng.integers(0, len(data))), int(rng.integers(1, 70000))
                assert os.pread(fd, n, off) == data[off:off + n], f"copy/{k}: pread({n}, {off})"
            assert os.pread(fd, 100, len(data)) == b"", f"copy/{k}: a read at the end"
        finally:
            os.close(fd)


def test_queries_with_copies_see_the_writes(vol):
    shape = (30, 40)
    arr = np.arange(1200, dtype=np.int32).reshape(shape)
    path = make_array(vol.mnt / "indexed", shape, "int32", "hilbert", arr,
                      attrs={"index": "e1", "copies": "naive;zorder:order=0,1"})
    assert read_bytes(view(path, "query", ">=600", "count")) == b"600\n"
    fd = os.open(path, os.O_WRONLY)
    try:
        pwrite_all(fd, np.full(40, 5000, np.int32).tobytes(), 0)
        arr[0] = 5000
        assert read_bytes(view(path, "query", ">=600", "count")) == f"{int((arr >= 600).sum())}\n".encode()
        check_everything(path, arr, "indexed, behind: ")
    finally:
        os.close(fd)
    wait_current(path)


class Generations:
    """The oracle of concurrent writes: write g fills its elements with the value g
    (increasing), so a read started after write g returned sees >= g there, and
    never a value no write had started when the read ended."""

    def __init__(self, total):
        self.completed = np.zeros(total)
        self.issued = 0
        self.lock = threading.Lock()

    def start(self, gen):
        with self.lock:
            self.issued = gen

    def done(self, a, b, gen):
        with self.lock:
            self.completed[a:b] = gen

    def lower(self, sel):
        with self.lock:
            return self.completed[sel].copy()

    def upper(self):
        with self.lock:
            return self.issued


def read_all(path):
    """The whole file with os.read (an EAGAIN raises; Python's f.read() would return None)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        out = bytearray()
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return bytes(out)
            out += chunk
    finally:
        os.close(fd)


def concurrent_writes(path, shape, seconds, readers, seed):
    """A writer thread (fd kept open; now and then fsync, or close and reopen, so
    the background catch-up races the writes) and `readers` reader threads
    reading views through random placements for `seconds`. Returns (problems,
    EAGAIN count, reads checked)."""
    total = int(np.prod(shape))
    n = len(copies_of(path))
    gens = Generations(total)
    stop = threading.Event()
    problems, eagain, checked = [], [0], [0]
    index = np.arange(total).reshape(shape)

    def writer():
        rng = np.random.default_rng(seed)
        fd = os.open(path, os.O_WRONLY)
        gen = 0
        try:
            while not stop.is_set():
                gen += 1
                a = int(rng.integers(0, total))
                b = min(total, a + int(rng.integers(1, 3000)))
                gens.start(gen)
                pwrite_all(fd, np.full(b - a, float(gen)).tobytes(), a * 8)
                gens.done(a, b, gen)
                r = rng.integers(0, 10)
                if r == 0:
                    os.fsync(fd)
                elif r == 1:
                    os.close(fd)
                    fd = os.open(path, os.O_WRONLY)
        except Exception as e:  # noqa: BLE001 - reported below
            problems.append(f"writer: {e!r}")
        finally:
            os.close(fd)

    def reader(rseed):
        rng = np.random.default_rng(rseed)
        while not stop.is_set():
            k = int(rng.integers(-1, n + 1))  # -1: the default views
            prefix = () if k < 0 else ("copy", f"{k}@")
            if rng.integers(0, 3) == 0:
                parts, sel = (("copy", k) if k >= 0 else ()), index.reshape(-1)
            else:
                d = int(rng.integers(0, len(shape)))
                i = int(rng.integers(0, shape[d]))
                parts, sel = prefix + ("slice", d, i), np.take(index, i, axis=d).reshape(-1)
            low = gens.lower(sel)
            target = view(path, *parts) if parts else path
            try:
                got = np.frombuffer(read_all(target), np.float64)
            except OSError as e:
                if e.errno == errno.EAGAIN and k > 0:
                    eagain[0] += 1
                else:
                    problems.append(f"{'/'.join(map(str, parts)) or 'the file'}: {e!r}")
                continue
            high = gens.upper()
            bad = np.flatnonzero((got < low) | (got > high))
            checked[0] += 1
            if len(bad):
                e = int(bad[0])
                problems.append(f"{'/'.join(map(str, parts)) or 'the file'}: {len(bad)} stale elements, first at flat "
                                f"{int(sel[e])}: {got[e]} (a read after write {int(low[e])} returned; {high} issued)")
            if len(problems) > 20:
                stop.set()

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader, args=(seed + 1 + i,))
                                                   for i in range(readers)]
    for t in threads:
        t.start()
    try:
        stop.wait(seconds)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    return problems, eagain[0], checked[0]


def test_concurrent_writes_are_never_stale_through_any_placement(volume):
    shape = (40, 50, 30)
    path = make_array(volume.mnt / "race", shape, "float64", "naive", np.zeros(shape))
    setx(path, "copies", "hilbert:cell=3,5,7;naive:order=0,1,2;quadrangle;zorder:order=1,2,0")
    problems, eagain, checked = concurrent_writes(path, shape, seconds=6.0, readers=2, seed=88)
    assert not problems, "\n".join(problems) + f"\n({eagain} reads of copy views failed with EAGAIN, tolerated here)"
    assert checked > 50, f"only {checked} reads checked"
    wait_current(path)
    data = read_bytes(view(path, "copy", 0))
    for k in range(1, 5):
        assert read_bytes(view(path, "copy", k)) == data, f"copy {k} differs from the primary once current"
    volume.remount()
    for k in range(5):
        assert read_bytes(view(path, "copy", k)) == data, f"copy {k} after remount"


def test_copy_views_do_not_fail_under_concurrent_writes(volume):
    shape = (40, 50, 30)
    arr = random_array(np.random.default_rng(89), shape, "float64")
    path = make_array(volume.mnt / "eagain", shape, "float64", "naive", arr)
    setx(path, "copies", "hilbert;naive:order=0,1,2")
    stop = threading.Event()
    data = arr.tobytes()

    def writer():  # rewrites the same bytes: the data never changes, the copies fall behind
        fd = os.open(path, os.O_WRONLY)
        try:
            i = 0
            while not stop.is_set():
                off = (i % 1000) * 8
                pwrite_all(fd, data[off:off + 64], off)
                i += 1
        finally:
            os.close(fd)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        deadline = time.monotonic() + 10.0
        reads = 0
        while time.monotonic() < deadline:
            for k in (1, 2):
                assert_array_bytes(read_all(view(path, "copy", f"{k}@", "slice", 0, 0)), arr[0],
                                   f"copy/{k}@/slice/0/0 (read {reads})")
                reads += 1
    finally:
        stop.set()
        thread.join(timeout=60)


class Crashable:
    """A volume whose daemon (our own child) this test kills with SIGKILL and restarts."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(dir=SCRATCH, prefix="mmfs-copies-crash-"))
        self.image, self.mnt = self.root / "vol.img", self.root / "mnt"
        self.mount = None
        mkfs(self.image)
        self.start()

    def start(self):
        self.mount = start_daemon(self.image, self.mnt)

    def crash(self, open_fd=None):
        """SIGKILL; `open_fd` (a file of the mount still open) is closed before the dead mount goes."""
        mount, self.mount = self.mount, None
        assert mount.proc.poll() is None, f"the daemon exited by itself:\n{mount.stderr()}"
        mount.proc.kill()  # our own child, by its pid
        mount.proc.wait(timeout=30)
        if open_fd is not None:
            try:
                os.close(open_fd)
            except OSError:
                pass  # ENOTCONN from the dead mount
        assert unmount(self.mnt) is None
        fd = os.open(self.image, os.O_RDONLY)  # the dead daemon's requests in flight hold the image
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    break
                except BlockingIOError:
                    assert time.monotonic() < deadline, "the image is still locked after the kill"
                    time.sleep(0.01)
        finally:
            os.close(fd)

    def stop(self):
        mount, self.mount = self.mount, None
        problem = unmount(self.mnt)
        rc = mount.proc.wait(timeout=120)
        assert problem is None and rc == 0, f"unmount: {problem}; daemon status {rc}\n{mount.stderr()}"
        fsck(self.image)

    def close(self):
        if self.mount is not None and self.mount.proc.poll() is None:
            self.mount.proc.kill()  # our own child, by its pid
            self.mount.proc.wait(timeout=30)
        self.mount = None
        unmount(self.mnt)
        shutil.rmtree(self.root, ignore_errors=True)


def test_a_crash_never_leaves_a_stale_copy():
    rig = Crashable()
    try:
        rng = np.random.default_rng(90)
        shape = (40, 50, 30)
        arr = random_array(rng, shape, "float64")
        path = make_array(rig.mnt / "crash", shape, "float64", "naive", arr)
        setx(path, "copies", "hilbert:cell=3,5,7;naive:order=0,1,2;quadrangle;zorder:order=1,2,0")
        durable = arr.reshape(-1).view(np.uint8).copy()
        for round_ in range(10):
            cur = durable.copy()
            fd = os.open(path, os.O_WRONLY)
            for _ in range(int(rng.integers(1, 6))):
                off, n = int(rng.integers(0, cur.size - 30000)), int(rng.integers(1, 30000))
                piece = rng.integers(0, 256, size=n, dtype=np.uint8)
                pwrite_all(fd, piece.tobytes(), off)
                cur[off:off + n] = piece
                if rng.integers(0, 3) == 0:
                    os.fsync(fd)
                    durable = cur.copy()
            if rng.integers(0, 2):
                os.close(fd)  # the catch-up starts; the kill may land in it
                fd = None
            time.sleep(float(rng.uniform(0, 0.03)))
            rig.crash(fd)
            rig.start()
            where = f"round {round_} after SIGKILL"
            assert getx(path, "copies") == "hilbert:cell=3,5,7;naive:order=0,1,2;quadrangle;zorder:order=1,2,0"
            primary = read_bytes(view(path, "copy", 0))
            got = np.frombuffer(primary, np.uint8)
            fsynced = np.flatnonzero(durable != got)
            # What was fsync'd is there, unless a later (unsynced) write changed it.
            assert not np.any((durable != got) & (durable == cur)), f"{where}: fsync'd bytes lost at {fsynced[:5]}"
            now = np.frombuffer(primary, np.float64).reshape(shape)
            check_default_views(path, now, f"{where}: ")  # before any copy read (which catches it up)
            for k in range(1, 5):
                assert read_bytes(view(path, "copy", k)) == primary, f"{where}: copy {k} differs from the primary"
            durable = got.copy()
        wait_current(path)
        rig.stop()
    finally:
        rig.close()


def test_large_views_are_read_in_chunks_through_copies(volume_factory):
    vol = volume_factory(size="1G")
    shape = (300, 200, 150)  # 72 MB: the whole array is read (and planned) in several chunks
    rng = np.random.default_rng(91)
    arr = random_array(rng, shape, "float64")
    path = make_array(vol.mnt / "large", shape, "float64", "naive", arr)
    setx(path, "copies", "naive:order=0,1,2;hilbert")
    plan = read_json(view(path, "plan", "copy", "2"))
    assert plan["bytes_useful"] == arr.nbytes, plan
    data = arr.tobytes()
    for k in range(3):
        assert read_bytes(view(path, "copy", k)) == data, f"copy/{k}"
    assert read_bytes(path) == data, "the file"
    for d in range(3):
        check_view(view(path, "slice", d, 7), np.take(arr, 7, axis=d), f"slice/{d}/7")
        for k in range(3):
            check_view(view(path, "copy", f"{k}@", "slice", d, 7), np.take(arr, 7, axis=d), f"copy/{k}@/slice/{d}/7")
    new = random_array(rng, (2,) + shape[1:], "float64")
    fd = os.open(path, os.O_WRONLY)
    try:
        pwrite_all(fd, new.tobytes(), arr[:150].nbytes)
        arr[150:152] = new
        assert read_bytes(path) == arr.tobytes(), "the file after a write, copies behind"
        check_view(view(path, "slice", 2, 7), arr[:, :, 7], "slice/2/7 after a write")
        check_view(view(path, "copy", "2@", "slice", 0, 151), arr[151], "copy/2@/slice/0/151 after a write")
    finally:
        os.close(fd)
    wait_current(path)
    assert read_bytes(view(path, "copy", 1)) == arr.tobytes(), "copy/1 after the catch-up"


def test_unlink_rename_and_link_of_an_array_with_copies(vol):
    shape = (40, 50, 30)
    arr = random_array(np.random.default_rng(92), shape, "float64")
    fsync_dir(vol.mnt)
    free0 = free_bytes(vol)
    path = make_array(vol.mnt / "linked", shape, "float64", "naive", arr)
    setx(path, "copies", "hilbert;quadrangle")
    assert free0 - free_bytes(vol) >= info(path)["device_bytes"]["copies"]
    os.link(path, vol.mnt / "linked2")
    os.rename(path, vol.mnt / "linked3")
    for name in ("linked2", "linked3"):
        assert getx(vol.mnt / name, "copies") == "hilbert;quadrangle"
        check_placement(vol.mnt / name, arr, 2)
    os.unlink(vol.mnt / "linked2")
    check_placement(vol.mnt / "linked3", arr, 1)
    os.unlink(vol.mnt / "linked3")
    fsync_dir(vol.mnt)
    assert free_bytes(vol) >= free0 - (1 << 20), "unlinking an array gives its copies' space back"


def test_copies_that_do_not_fit_are_enospc_and_change_nothing(volume_factory):
    vol = volume_factory(size="64M")
    shape = (40, 50, 30)
    arr = random_array(np.random.default_rng(93), shape, "float64")
    path = make_array(vol.mnt / "full", shape, "float64", "naive", arr)
    setx(path, "copies", "hilbert;zorder:order=0,1,2")
    before = copies_of(path)
    free = free_bytes(vol)
    set_fails(vol, path, ";".join(["quadrangle"] * 8), errno.ENOSPC)
    assert copies_of(path) == before
    assert free_bytes(vol) >= free - (1 << 20), "a refused value takes no space"
    check_everything(path, arr)


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

    mloc = vol.mnt / "early-mloc"
    mloc.write_bytes(b"")
    setx(mloc, "copies", "hilbert")
    setx(mloc, "layout", "mloc")
    with ErrorLog(vol, mloc.name, "mloc"):
        try:
            setx(mloc, "shape", "40,50,30")
        except OSError as e:
            assert e.errno == errno.ENOTSUP, e
        else:
            raise AssertionError("an mloc array with copies was created")
    assert os.stat(mloc).st_size == 0


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
