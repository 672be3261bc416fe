"""Reading mmfs views with numpy, the way any program can.

A view (`A@/slice/D/I`, `A@/box/SEL`, `A@/plod/K`, `A@/plod/K@/slice/D/I`, ...)
is a plain file of C-order little-endian elements in the array's dtype. Its
shape is not stored in the file: it follows from the array's shape (in
`A@/info`) and the view's path (docs/reference.md §5), which is what this module computes.

    from mmfsview import read_view
    arr = read_view("/mnt/quake/velocity@/box/:,31,35,0")   # numpy array, shape (T,)
"""
import json
import os
import sys

import numpy as np


def split_view(path):
    """'/m/a@/slice/0/3' -> ('/m/a', 'slice/0/3'); '/m/a' -> ('/m/a', '').

    The array is the shortest prefix ending before an '@/' that names a
    regular file (so array names may contain '@', and in
    'a@/plod/2@/slice/0/3' the array is 'a', not the PLoD copy 'a@/plod/2')."""
    path = str(path)
    pos = path.find("@/")
    while pos != -1:
        if os.path.isfile(path[:pos]):
            return path[:pos], path[pos + 2:].strip("/")
        pos = path.find("@/", pos + 1)
    return path, ""


def info(array_path):
    with open(f"{array_path}@/info") as f:
        return json.load(f)


def _selection_shape(shape, sel):
    items = sel.split(",")
    if len(items) != len(shape):
        raise ValueError(f"box selection {sel!r} has {len(items)} items for {len(shape)} dimensions")
    out = []
    for item, n in zip(items, shape):
        if ":" not in item:
            continue  # a fixed index drops its dimension
        parts = [int(p) if p.strip() else None for p in item.split(":")]
        if len(parts) > 3:
            raise ValueError(f"bad box item {item!r}")
        out.append(len(range(*slice(*parts).indices(n))))
    return tuple(out)


def view_shape(shape, view):
    """The shape of the view `view` (path below `A@/`, '' = the array) of an array of `shape`."""
    shape = tuple(shape)
    if not view:
        return shape
    parts = view.split("/")
    kind = parts[0]
    if kind == "slice" and len(parts) == 3:
        d = int(parts[1])
        return shape[:d] + shape[d + 1:]
    if kind == "box" and len(parts) == 2:
        return _selection_shape(shape, parts[1])
    if kind == "plod" and len(parts) >= 2:
        # A@/plod/K is the whole copy; A@/plod/K@/VIEW is a view of it.
        k, _, rest = view[len("plod/"):].partition("@/")
        int(k)
        return view_shape(shape, rest)
    raise ValueError(f"not a data view: {view!r} (expected slice/D/I, box/SEL, plod/K[@/...])")


def describe(path):
    """(array path, view, dtype, shape of the view) of a view path or an array file."""
    array, view = split_view(path)
    meta = info(array)
    return array, view, np.dtype(meta["dtype"]).newbyteorder("<"), view_shape(meta["shape"], view)


def read_view(path):
    """The view at `path` as a numpy array of its shape (numpy.fromfile: plain bytes)."""
    _, _, dtype, shape = describe(path)
    data = np.fromfile(str(path), dtype=dtype)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: {data.size} elements, expected {int(np.prod(shape))} for shape {shape}")
    return data.reshape(shape)


def xattr(path, name, default=None):
    """A user xattr of an array file as text (HDF5 attributes arrive as user.NAME)."""
    try:
        return os.getxattr(str(path), name).decode()
    except OSError:
        return default


if __name__ == "__main__":
    # python3 mmfsview.py VIEW...   prints each view's dtype and shape
    for p in sys.argv[1:]:
        a, v, dt, sh = describe(p)
        print(f"{p}: {dt.name} {sh}")
