"""mmfs.create: a new array file, its schema, and its data streamed in."""
from __future__ import annotations

import json
import os
import re
from typing import Any, Iterator, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _io
from ._errors import translate
from .array import SCHEMA_PREFIX, Array, schema_value
from .attrs import DIMS_XATTR

__all__ = ["create", "SLAB_BYTES", "slabs"]

#: The largest piece of ``data`` held in memory at once while writing.
SLAB_BYTES = 64 << 20
# What user.mmfs.dims takes (fs/array/array_schema.cc is_dim_name): an ASCII identifier of at most 64 bytes.
_DIM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")

_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64")


def slabs(shape: Tuple[int, ...], itemsize: int, limit: int = SLAB_BYTES) -> Iterator[Tuple[Tuple[Any, ...], int]]:
    """C-order slabs of an array of ``shape``: ``(key, element offset)`` pairs,
    each key a box whose bytes are contiguous in C order and at most
    ``limit`` bytes (or one element), covering the array in order."""
    ndim = len(shape)
    # the first dimension k whose trailing rows (shape[k:]) fit in the limit
    k = ndim
    row = itemsize
    while k > 0 and row * shape[k - 1] <= limit:
        k -= 1
        row *= shape[k]
    if k == 0:
        yield tuple(slice(None) for _ in shape), 0
        return
    # rows of shape[k:] are `row` bytes; take up to `per` of them along dim k-1
    per = max(1, limit // row)
    inner = int(np.prod(shape[k:], dtype=np.int64))
    outer_shape = shape[:k - 1]
    n = shape[k - 1]
    for outer in np.ndindex(*outer_shape):
        base = (int(np.ravel_multi_index(outer, outer_shape)) * n if outer_shape else 0)
        for j in range(0, n, per):
            stop = min(n, j + per)
            key = tuple(int(i) for i in outer) + (slice(j, stop),) + tuple(slice(None) for _ in shape[k:])
            yield key, (base + j) * inner


def _normalize_dtype(dtype: Any) -> np.dtype:
    dt = np.dtype(dtype)
    name = dt.newbyteorder("=").name if dt.byteorder not in ("|", "=") else dt.name
    if name not in _DTYPES:
        raise TypeError(f"mmfs stores {', '.join(_DTYPES)}; not {dt}")
    return np.dtype(name)


def _shape_of(data: Any) -> Tuple[int, ...]:
    shape = getattr(data, "shape", None)
    if shape is None:
        return np.shape(data)
    return tuple(int(s) for s in shape)


def create(path: "os.PathLike[str] | str", shape: Optional[Sequence[int]] = None, dtype: Any = None, *,
           layout: Optional[str] = None, cell: Optional[Sequence[int]] = None,
           order: Optional[Sequence[int]] = None, index: Optional[str] = None, bins: Any = None,
           dims: Optional[Sequence[str]] = None, attrs: Optional[Mapping[str, Any]] = None,
           data: Any = None, progress: bool = False, basic_cube: Optional[Sequence[int]] = None,
           chunk: Optional[Sequence[int]] = None, priority: Optional[str] = None,
           compress: Optional[str] = None, copies: Optional[str] = None,
           slab_bytes: int = SLAB_BYTES) -> Array:
    """Creates the array file ``path`` (which must not exist) and returns it.

    As docs/reference.md §4 says: an empty file; the schema attributes that
    take effect at creation (``dtype``, ``layout``, ``order``, ``cell``,
    ``basic_cube``, ``chunk``, ``priority``, ``compress``, ``bins``,
    ``index``, ``copies``); then ``user.mmfs.shape``, which makes it an array; then
    ``user.mmfs.dims`` (names that are not identifiers, as netCDF-4 allows,
    go to ``user.hdf5.dims`` instead) and the user attributes ``attrs`` (see
    :class:`mmfs.attrs.Attrs`); then ``data``, written in C-order slabs of at
    most 64 MiB with ``pwrite`` (any array-like with ``shape`` and numpy
    slicing: numpy, h5py datasets, dask and zarr arrays; a dask array is
    computed one slab at a time), and ``fsync``.

    ``shape`` and ``dtype`` default to ``data``'s. ``progress=True`` shows a
    tqdm progress bar of the bytes written. ``slab_bytes`` bounds the memory
    one slab of ``data`` takes (default :data:`SLAB_BYTES`, 64 MiB; a slab is
    at least one element). Unset schema attributes take the volume's defaults
    (the layout, for one). ``copies`` (e.g. ``"naive;hilbert:cell=16,16,4"``)
    keeps the array in other placements too, each view read from the one the
    model prices cheapest: the data lands in the primary, durable at the
    ``fsync``, and the copies catch up in the background after it.

    On any failure the partly created file is removed and the error raised
    (an OSError as :class:`mmfs.Error` with the daemon's reason).
    """
    path = os.path.abspath(os.fspath(path))
    if data is not None and not hasattr(data, "shape"):
        data = np.asarray(data)
    if shape is None:
        if data is None:
            raise TypeError("create() needs a shape (or data to take it from)")
        shape = _shape_of(data)
    shape = tuple(int(s) for s in shape)
    if slab_bytes < 1:
        raise ValueError(f"slab_bytes must be positive, not {slab_bytes}")
    if dtype is None:
        dtype = getattr(data, "dtype", None) if data is not None else None
        dtype = "float64" if dtype is None else dtype
    dt = _normalize_dtype(dtype)
    if data is not None and _shape_of(data) != shape:
        raise ValueError(f"data has shape {_shape_of(data)}, the array {shape}")
    if dims is not None:
        dims = [str(d) for d in dims]
        if len(dims) != len(shape):
            raise ValueError(f"{len(dims)} dimension names for {len(shape)} dimensions")
        if not all(d and "/" not in d and "\0" not in d for d in dims) or len(set(dims)) != len(dims):
            raise ValueError(f"dimension names are distinct, not empty and without '/': {dims}")

    bar = None
    if progress and data is not None:
        try:
            from tqdm.auto import tqdm
        except ImportError as exc:
            raise ImportError("progress=True needs tqdm (pip install tqdm, or mmfs[progress])") from exc

    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise translate(exc, path) from exc
    try:
        schema = [("dtype", dt.name), ("layout", layout), ("order", order), ("cell", cell),
                  ("basic_cube", basic_cube), ("chunk", chunk), ("priority", priority),
                  ("compress", compress)]
        if bins is not None:
            if isinstance(bins, (list, tuple, np.ndarray)):
                bins = "edges:" + ",".join(repr(float(b)) for b in bins)
            schema.append(("bins", bins))
        schema.append(("index", index))
        schema.append(("copies", copies))
        for name, value in schema:
            if value is not None:
                _io.set_xattr(fd, SCHEMA_PREFIX + name, schema_value(value), path)
        _io.set_xattr(fd, SCHEMA_PREFIX + "shape", schema_value(shape), path)
        if dims is not None:
            if all(_DIM_NAME.fullmatch(d) for d in dims):
                _io.set_xattr(fd, SCHEMA_PREFIX + "dims", ",".join(dims), path)
            else:  # names user.mmfs.dims does not take (netCDF-4 allows any)
                _io.set_xattr(fd, DIMS_XATTR, json.dumps(dims), path)
        array = Array(path)
        if attrs:
            for key, value in attrs.items():
                array.attrs[key] = value
        if data is not None:
            total = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            if progress:
                bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024,
                           desc=os.path.basename(path))
            le = _io.little_endian(dt)
            for box, offset in slabs(shape, dt.itemsize, slab_bytes):
                piece = np.asarray(data[box])
                if piece.dtype != le:
                    piece = piece.astype(le, casting="same_kind")
                piece = np.ascontiguousarray(piece)
                view = piece.reshape(-1).view(np.uint8).data
                try:
                    _io.pwrite_all(fd, view, offset * dt.itemsize)
                except OSError as exc:
                    raise translate(exc, path) from exc
                if bar is not None:
                    bar.update(len(view))
                del piece, view
        try:
            os.fsync(fd)
        except OSError as exc:
            raise translate(exc, path) from exc
    except BaseException:
        try:
            os.close(fd)
        finally:
            fd = -1
            try:
                os.unlink(path)
            except OSError:
                pass
            if bar is not None:
                bar.close()
        raise
    try:
        os.close(fd)
    except OSError as exc:  # a deferred write error is reported at close
        try:
            os.unlink(path)
        except OSError:
            pass
        raise translate(exc, path) from exc
    finally:
        if bar is not None:
            bar.close()
    return array
