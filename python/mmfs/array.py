"""mmfs.Array: an array file on an mmfs mount, read through its views."""
from __future__ import annotations

import errno
import json
import os
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from . import _io
from ._errors import Error, wrap_oserror
from ._indexing import Selection, resolve
from .attrs import DIMS_XATTR, Attrs

__all__ = ["Array", "Box", "CHUNK_BYTES", "open", "preferred_chunks", "schema_value"]

SCHEMA_PREFIX = "user.mmfs."


def schema_value(value: Any) -> str:
    """A schema attribute's text: sequences as ``a,b,c``, the rest as ``str``."""
    if isinstance(value, str):
        return value
    if isinstance(value, (tuple, list, np.ndarray)):
        return ",".join(str(int(v)) for v in value)
    return str(value)


def _parse_shape(text: str) -> Tuple[int, ...]:
    return tuple(int(s) for s in text.split(",") if s.strip())


def _parse_extent(text: Optional[str], ndim: int) -> Optional[Tuple[int, ...]]:
    """``user.mmfs.cell`` or ``user.mmfs.chunk`` (``a,b,c``) as a tuple of
    ``ndim`` positive ints; ``None`` for ``none``, absent or malformed text."""
    if not text:
        return None
    try:
        extent = tuple(int(s) for s in text.split(","))
    except ValueError:
        return None
    return extent if len(extent) == ndim and all(e > 0 for e in extent) else None


#: The least size in bytes of :attr:`Array.chunks` (unless one chunk spans the
#: array). Read when ``chunks`` is computed, so it may be changed.
CHUNK_BYTES = 16 << 20


def preferred_chunks(brick: Tuple[int, ...], shape: Tuple[int, ...], itemsize: int,
                     target: Optional[int] = None) -> Tuple[int, ...]:
    """The dask chunk grown from ``brick`` (see :attr:`Array.chunks`): in
    rounds, each dimension not yet spanning ``shape`` is doubled in turn, the
    last (fastest-varying) first, clipped to the shape, until a chunk holds at
    least ``target`` bytes (default :data:`CHUNK_BYTES`, 16 MiB) or spans the
    array. Each extent is the brick's times a power of two, or the whole
    dimension, so chunk boundaries are cell boundaries; the chunk keeps the
    brick's proportions as long as the shape allows.

    >>> preferred_chunks((8, 8, 8), (1024, 1024, 256), 8)
    (128, 128, 128)
    >>> preferred_chunks((8, 8, 8), (1024, 1024, 16), 8)
    (256, 512, 16)
    """
    if target is None:
        target = CHUNK_BYTES
    chunk = [max(1, min(int(b), int(s))) for b, s in zip(brick, shape)]
    size = itemsize * int(np.prod(chunk, dtype=np.int64))
    while size < target:
        grew = False
        for d in reversed(range(len(chunk))):
            if chunk[d] >= shape[d]:
                continue
            grown = min(2 * chunk[d], int(shape[d]))
            size = size // chunk[d] * grown
            chunk[d] = grown
            grew = True
            if size >= target:
                break
        if not grew:
            break
    return tuple(chunk)


class Array:
    """An mmfs array file (docs/reference.md §4), or a PLoD copy of one.

    It holds the file's path and its shape and dtype (read when opened: two
    ``getxattr`` calls; both are frozen once the array holds data), never a
    file descriptor: every read opens the one view it needs, so an ``Array``
    is cheap, picklable and safe to share between threads and processes. The
    other schema attributes it uses (``dims``, ``layout``, ``cell``,
    ``chunk``) are read when first asked for, once each, and kept (see
    :attr:`layout`).

    ``a[key]`` takes numpy basic indexing and returns exactly what numpy
    returns for the same key on ``np.asarray(a)`` (a new array, or a numpy
    scalar when every dimension is fixed by an integer), reading only the
    selected elements with one view (the file itself, ``A@/slice/D/I`` or
    ``A@/box/SEL``). ``np.asarray(a)`` reads the whole file.
    """

    # _schema: the user.mmfs.* texts read so far (name -> text, None when
    # absent). Filled lazily, one getxattr per name; a dict's item assignment
    # is atomic, so threads sharing the Array at worst read a name twice and
    # store the same text. Replaced (never mutated) when relayout changes it.
    __slots__ = ("_path", "_plod", "_shape", "_dtype", "_schema")

    def __init__(self, path: "os.PathLike[str] | str", *, plod: Optional[int] = None) -> None:
        self._path = os.path.abspath(os.fspath(path))
        self._plod = None if plod is None else int(plod)
        self._schema: Dict[str, Optional[str]] = {}
        with wrap_oserror(self._path):
            shape = _io.get_xattr(self._path, SCHEMA_PREFIX + "shape")
            if shape is None:
                # Only now find out why (a stat per open would cost a FUSE call).
                if os.path.isdir(self._path):  # missing: stat raises ENOENT below
                    raise Error(errno.EISDIR, f"{os.strerror(errno.EISDIR)}: a directory is not an array "
                                "(mmfs.open_table opens a directory of columns)", self._path)
                os.stat(self._path)  # a missing file: ENOENT
                raise Error(errno.ENODATA, f"{os.strerror(errno.ENODATA)}: not an mmfs array file "
                            "(it has no user.mmfs.shape)", self._path)
            dtype = _io.get_xattr(self._path, SCHEMA_PREFIX + "dtype") or "float64"
        self._shape = _parse_shape(shape)
        self._dtype = _io.little_endian(dtype)
        if self._plod is not None:
            _check_plod(self._plod, self._dtype)

    # --- identity and pickling ------------------------------------------------

    @property
    def path(self) -> str:
        """The array file's absolute path (for a PLoD copy, the original's)."""
        return self._path

    @property
    def plod_bytes(self) -> Optional[int]:
        """K for the PLoD copy ``a.plod(K)``; ``None`` for the array itself."""
        return self._plod

    def __reduce__(self):
        return (_reopen, (self._path, self._plod, self._shape, self._dtype.str, dict(self._schema)))

    def __dask_tokenize__(self) -> Tuple[Any, ...]:
        try:
            st = os.stat(self._path)
            stamp: Tuple[int, ...] = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = ()
        return ("mmfs.Array", self._path, self._plod, stamp)

    def __repr__(self) -> str:
        what = f", plod={self._plod}" if self._plod is not None else ""
        return f"mmfs.Array({self._path!r}{what}, shape={self._shape}, dtype={self._dtype.name})"

    # --- metadata ---------------------------------------------------------------

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        """The element type (little-endian, as stored)."""
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self._dtype.itemsize

    def __len__(self) -> int:
        return self._shape[0]

    def _schema_text(self, name: str) -> Optional[str]:
        """``user.mmfs.NAME``: read once (one getxattr), then kept."""
        cache = self._schema
        try:
            return cache[name]
        except KeyError:
            pass
        with wrap_oserror(self._path):
            text = _io.get_xattr(self._path, SCHEMA_PREFIX + name)
        cache[name] = text
        return text

    @property
    def layout(self) -> str:
        """The layout placing the array (``user.mmfs.layout``). Like ``dims``,
        ``brick`` and ``chunks``, it is read on first use and kept: the
        Array's :meth:`relayout` forgets it, but a re-layout by another
        ``Array`` or process is seen by a new ``mmfs.open`` (or :attr:`info`,
        which is read afresh)."""
        return self._schema_text("layout") or ""

    @property
    def info(self) -> Dict[str, Any]:
        """``A@/info`` (docs/reference.md §5), read now (on every access; nothing
        else reads it): shape, dtype, layout, order, cell, index, bins, device
        bytes, ... A PLoD copy has no info of its own: this is the original's,
        with ``"plod": K`` added."""
        info = _io.read_json(self._path + "@/info", self._path)
        if self._plod is not None:
            info["plod"] = self._plod
        return info

    @property
    def attrs(self) -> Attrs:
        """The ordinary ``user.*`` xattrs as a mutable mapping (see
        :class:`mmfs.attrs.Attrs`). A PLoD copy shares the original's."""
        return Attrs(self._path)

    @property
    def dims(self) -> Tuple[str, ...]:
        """Dimension names: ``user.mmfs.dims`` (comma-separated) when the file
        has it, else those of ``user.hdf5.dims`` (names that are not
        identifiers, as netCDF-4 allows), else ``dim_0, dim_1, ...``."""
        return self._dims()

    def _dims(self, xattr_names: Optional[List[str]] = None) -> Tuple[str, ...]:
        """:attr:`dims`; given the file's xattr names (``os.listxattr``),
        ``user.hdf5.dims`` is read only when it is among them."""
        default = tuple(f"dim_{i}" for i in range(self.ndim))
        try:
            text = self._schema_text("dims")
        except OSError:
            text = None
        names = tuple(n.strip() for n in text.split(",")) if text else default
        if len(names) != self.ndim or not all(names):
            names = default
        if names == default:
            # Kept like the schema's texts (under a key no user.mmfs name has).
            if DIMS_XATTR not in self._schema and xattr_names is not None and DIMS_XATTR not in xattr_names:
                self._schema[DIMS_XATTR] = None
            if DIMS_XATTR not in self._schema:
                try:
                    raw: Optional[str] = os.getxattr(self._path, DIMS_XATTR).decode("utf-8", "replace")
                except OSError:
                    raw = None
                self._schema[DIMS_XATTR] = raw
            names = _hdf5_dims(self._schema[DIMS_XATTR], self.ndim) or default
        return names

    @property
    def brick(self) -> Tuple[int, ...]:
        """The layout's natural brick, in elements: MLOC's ``chunk``, else the
        ``cell`` a layout places (``user.mmfs.chunk`` and ``user.mmfs.cell``,
        which show the effective values, as ``A@/info`` does), clipped to the
        shape. Reads aligned to it touch no cell twice."""
        brick = _parse_extent(self._schema_text("chunk"), self.ndim) if self.layout == "mloc" else None
        if brick is None:
            brick = _parse_extent(self._schema_text("cell"), self.ndim)
        if brick is None:
            return self._shape
        return tuple(max(1, min(b, s)) for b, s in zip(brick, self._shape))

    @property
    def chunks(self) -> Tuple[int, ...]:
        """The dask chunk the array prefers: the :attr:`brick` doubled along its
        dimensions in turn (last first, a round at a time, never past the
        shape) until a chunk holds at least 16 MiB (:data:`CHUNK_BYTES`) or
        spans the array, so each chunk is whole cells and one view read of a
        useful size (:func:`preferred_chunks`). It is the xarray backend's
        ``preferred_chunks``; ``dask.array.from_array(a)`` (``chunks="auto"``)
        takes multiples of it, as for h5py's and zarr's ``chunks``;
        ``from_array(a, chunks=a.chunks)`` takes it as it is."""
        return preferred_chunks(self.brick, self._shape, self._dtype.itemsize)

    # --- paths of views ---------------------------------------------------------

    def _prefix(self) -> str:
        return "" if self._plod is None else f"plod/{self._plod}@/"

    def view_path(self, view: Optional[str] = None) -> str:
        """The path of ``view`` (e.g. ``"slice/0/3"``) of this array or PLoD
        copy; ``None`` is the whole array (the file, or ``A@/plod/K``)."""
        if view is None:
            return self._path if self._plod is None else f"{self._path}@/plod/{self._plod}"
        return f"{self._path}@/{self._prefix()}{view}"

    def plan_path(self, view: str) -> str:
        """The path of ``A@/plan/...`` for ``view``."""
        return f"{self._path}@/plan/{self._prefix()}{view}"

    # --- reading ----------------------------------------------------------------

    def _read(self, sel: Selection) -> Any:
        if sel.empty:
            return np.empty(sel.shape, dtype=self._dtype)
        raw = _io.read_view(self.view_path(sel.view()), sel.view_shape, self._dtype, self._path)
        return sel.finish(raw)

    def __getitem__(self, key: Any) -> Any:
        return self._read(resolve(key, self._shape))

    def read(self) -> np.ndarray:
        """The whole array (one read of the file, or of ``A@/plod/K``)."""
        return _io.read_view(self.view_path(), self._shape, self._dtype, self._path)

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        out = self.read()
        return out if dtype is None else out.astype(dtype, copy=False)

    def __iter__(self) -> Iterator[Any]:
        for i in range(self._shape[0]):
            yield self[i]

    def plan(self, key: Any = ...) -> Dict[str, Any]:
        """``A@/plan/VIEW`` for the view ``a[key]`` reads (the whole array by
        default): batches, requests, bytes read, modeled time."""
        sel = resolve(key, self._shape)
        if sel.empty:
            raise ValueError("an empty selection reads nothing and has no plan")
        view = sel.view() or "box/" + sel.box_selector()
        return _io.read_json(self.plan_path(view), self._path)

    def plod(self, k: int) -> "Array":
        """The PLoD copy ``A@/plod/K``: the array with only the ``k`` most
        significant bytes of each element kept (docs/reference.md §5). Its
        queries (``a.plod(k).where(cond)``) select by the full-precision
        elements and return the reduced values."""
        if self._plod is not None:
            raise ValueError("a PLoD copy has no PLoD copies of its own (the daemon serves "
                             "slice, box and query views of it)")
        k = _check_plod(int(k), self._dtype)
        # the original's shape, dtype and schema read so far: nothing to read again
        return _reopen(self._path, k, self._shape, self._dtype.str, dict(self._schema))

    @property
    def box(self) -> "_BoxMaker":
        """``a.box[key]``: a lazy :class:`Box` of the selection ``key`` (numpy
        basic indexing), for queries within it (``a.box[0:100, :, 5].where(...)``),
        its plan, or reading it later."""
        return _BoxMaker(self)

    def where(self, cond: str) -> "Query":
        """A query of the condition ``cond`` (docs/reference.md §5 grammar, e.g.
        ``"> 0.5 & < 0.7"``, ``"in [1, 2] | t > 300"``) over the whole array."""
        from .query import Query
        return Query(self, None, cond)

    # --- changing the placement -------------------------------------------------

    def _writable(self, what: str) -> None:
        if self._plod is not None:
            raise ValueError(f"{what}: a PLoD copy is read-only; change the array itself")

    def relayout(self, layout: Optional[str] = None, *, cell: Any = None, order: Any = None,
                 basic_cube: Any = None, chunk: Any = None, priority: Optional[str] = None,
                 compress: Optional[str] = None) -> "Array":
        """Re-lays the array out by setting the given schema attributes
        (``layout`` first, then the others in the order of the signature). Each
        change is one re-layout by the daemon, durable when it returns
        (docs/reference.md §4). Returns ``self``."""
        self._writable("relayout")
        changes = [("layout", layout), ("cell", cell), ("order", order), ("basic_cube", basic_cube),
                   ("chunk", chunk), ("priority", priority), ("compress", compress)]
        try:
            for name, value in changes:
                if value is not None:
                    _io.set_xattr(self._path, SCHEMA_PREFIX + name, schema_value(value))
        finally:
            self._schema = {}  # a re-layout may change layout, cell and chunk: read them again
        return self

    @property
    def copies(self) -> List[Dict[str, Any]]:
        """The array's extra copies (``user.mmfs.copies``), from ``A@/info``, read
        now: per copy its number (1..), ``layout``, ``spec``, ``state``
        (``current`` or ``behind``), ``cells_behind`` and ``device_bytes``.
        Empty without copies."""
        return list(self.info.get("copies", []))

    def set_copies(self, copies: Any) -> "Array":
        """Sets ``user.mmfs.copies``: a string (``"naive;hilbert:cell=16,16,4"``),
        a list of such specs, or ``None``/``"none"`` to drop them. The daemon
        builds the new copies from the data and returns when they are durable.
        Returns ``self``."""
        self._writable("set_copies")
        if copies is None:
            copies = "none"
        elif not isinstance(copies, str):
            copies = ";".join(str(c) for c in copies)
        _io.set_xattr(self._path, SCHEMA_PREFIX + "copies", copies)
        return self

    def set_index(self, index: str, bins: Any = None) -> "Array":
        """Builds (or removes, with ``"none"``) the bitmap index: ``index`` one
        of ``none e1 bn range interval re ie``; ``bins`` ``N``,
        ``"precision:D"``, ``"edges:a,b,..."`` (or a list of edges) or
        ``"exact"``. Returns ``self``."""
        self._writable("set_index")
        if bins is not None:
            if isinstance(bins, (list, tuple, np.ndarray)):
                bins = "edges:" + ",".join(repr(float(b)) for b in bins)
            _io.set_xattr(self._path, SCHEMA_PREFIX + "bins", bins)
        _io.set_xattr(self._path, SCHEMA_PREFIX + "index", index)
        return self


def _check_plod(k: int, dtype: np.dtype) -> int:
    if not 1 <= k <= dtype.itemsize:
        raise ValueError(f"plod({k}): K must be 1..{dtype.itemsize} (the itemsize of {dtype.name})")
    return k


def _reopen(path: str, plod: Optional[int], shape: Tuple[int, ...], dtype: str,
            schema: Optional[Dict[str, Optional[str]]] = None) -> Array:
    """Unpickles an Array without touching the file (it may be unpickled where
    the mount is not yet reachable; the first read will say), with the schema
    texts the pickled one had read."""
    a = Array.__new__(Array)
    a._path, a._plod, a._shape, a._dtype = path, plod, tuple(shape), np.dtype(dtype)
    a._schema = dict(schema or {})
    return a


class _BoxMaker:
    __slots__ = ("_array",)

    def __init__(self, array: Array) -> None:
        self._array = array

    def __getitem__(self, key: Any) -> "Box":
        return Box(self._array, resolve(key, self._array.shape))


class Box:
    """A lazy selection of an array (``a.box[key]``): nothing is read until
    :meth:`read` (or ``np.asarray``). Its shape is numpy's for the key."""

    __slots__ = ("array", "selection")

    def __init__(self, array: Array, selection: Selection) -> None:
        self.array = array
        self.selection = selection

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.selection.shape

    @property
    def dtype(self) -> np.dtype:
        return self.array.dtype

    @property
    def ndim(self) -> int:
        return len(self.selection.shape)

    @property
    def size(self) -> int:
        return self.selection.size

    def read(self) -> Any:
        """The selection, as ``np.asarray(a)[key]`` (one view read)."""
        return self.array._read(self.selection)

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        out = np.asarray(self.read())
        return out if dtype is None else out.astype(dtype, copy=False)

    def where(self, cond: str) -> "Query":
        """A query of ``cond`` within the box (``A@/box/SEL@/query/COND/...``);
        its coordinates and flat indices are relative to the selection, as
        ``np.nonzero`` of the selection would give."""
        from .query import Query
        return Query(self.array, self.selection, cond)

    def plan(self) -> Dict[str, Any]:
        """``A@/plan/box/SEL`` for reading the selection."""
        if self.selection.empty:
            raise ValueError("an empty selection reads nothing and has no plan")
        view = self.selection.view() or "box/" + self.selection.box_selector()
        return _io.read_json(self.array.plan_path(view), self.array.path)

    def __repr__(self) -> str:
        return f"mmfs.Box({self.array!r}, box/{self.selection.box_selector()}, shape={self.shape})"


def open(path: "os.PathLike[str] | str") -> Array:  # noqa: A001 - mmfs.open, like io.open
    """Opens the array file ``path`` on an mmfs mount (see :class:`Array`)."""
    return Array(path)


def _hdf5_dims(raw: Optional[str], ndim: int) -> Optional[Tuple[str, ...]]:
    """The names ``user.hdf5.dims`` (its text `raw`) keeps: a JSON list of
    ``ndim`` distinct, non-empty strings without ``/``; else None."""
    if raw is None:
        return None
    try:
        names = json.loads(raw)
    except ValueError:
        return None
    if (not isinstance(names, list) or len(names) != ndim or len(set(names)) != ndim or
            not all(isinstance(n, str) and n and "/" not in n and "\0" not in n for n in names)):
        return None
    return tuple(names)


from .query import Query  # noqa: E402  (typing only; query imports array lazily)
