"""Shared by test_copies.py and test_copies_writes.py: the layouts, arrays and checks of
copies (docs/reference.md "Copies")."""
import errno
import os
import time

import numpy as np

from mmfs_mount import ErrorLog, assert_array_bytes, getx, plod, read_bytes, read_json, sel_string, setx, view

# The layouts an array with copies may have as its primary, and those a copy may have
# (capsule needs a MEMS volume: test_copies.py).
COPY_LAYOUTS = ["naive", "zorder", "hilbert", "multimap", "quadrangle", "mloc"]
PRIMARY_LAYOUTS = COPY_LAYOUTS

# The primary's layout -> (dtype, shape) of its array: several dtypes and ranks.
PRIMARIES = {
    "naive": ("float64", (40, 50, 30)),
    "zorder": ("int16", (37, 61)),
    "hilbert": ("uint8", (6, 7, 9, 11)),
    "multimap": ("float32", (20, 24, 18)),
    "quadrangle": ("int32", (30, 40, 20)),
    "mloc": ("float64", (24, 30, 16)),
}

CATCH_UP_TIMEOUT = 10.0  # seconds for the background catch-up after fsync/close


def ascending(ndim):
    return ",".join(str(d) for d in range(ndim))


def every_layout_copies(primary, ndim):
    """Every copy layout; the primary's own layout with the other order (an mloc image: the
    other priority), so it differs."""
    def variant(layout):
        if layout != primary:
            return layout
        return "mloc:priority=M-V-S" if layout == "mloc" else f"{layout}:order={ascending(ndim)}"
    return ";".join(variant(layout) for layout in COPY_LAYOUTS)


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
