"""Bitmap-index queries of arrays (docs/reference.md §5, "Query conditions").

``a.where(cond)`` reads ``A@/query/COND/{count,coords,values,mask}``;
``a.box[key].where(cond)`` reads ``A@/box/SEL@/query/COND/...``, the daemon's
boxed query, and maps the coordinates it returns (C-order linear indices into
``A``) into the selection, as ``np.nonzero`` of the selection would give them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

import numpy as np

from . import _io
from ._indexing import Selection

if TYPE_CHECKING:
    from .array import Array

__all__ = ["Query", "check_condition", "bitmap_from_bytes", "bitmap_from_indices"]

_RESULTS = ("count", "coords", "values", "mask")


def check_condition(cond: str) -> str:
    """``cond`` if it can be one path component (the daemon parses it)."""
    if not isinstance(cond, str):
        raise TypeError(f"a condition is a str such as '> 0.5 & < 0.7', not {type(cond).__name__}")
    if not cond.strip() or "/" in cond or "\0" in cond or cond in (".", ".."):
        raise ValueError(f"malformed condition {cond!r}: it must be non-empty, without '/' or NUL "
                         "(grammar: docs/reference.md §5)")
    return cond


def _roaring(size: int):
    try:
        import pyroaring
    except ImportError:
        return None
    return pyroaring.BitMap if size <= 2 ** 32 else pyroaring.BitMap64


def bitmap_from_bytes(raw: bytes, size: int):
    """The daemon's CRoaring portable serialization as a pyroaring bitmap
    (``BitMap``, or ``BitMap64`` past 2**32 elements); ``None`` without
    pyroaring."""
    cls = _roaring(size)
    return None if cls is None else cls.deserialize(raw)


def bitmap_from_indices(flat: np.ndarray, shape: Tuple[int, ...]):
    """A mask of the C-order flat indices ``flat`` in an array of ``shape``:
    a pyroaring bitmap when pyroaring is importable, else a boolean array."""
    size = int(np.prod(shape, dtype=np.int64))
    cls = _roaring(size)
    if cls is not None:
        if cls.__name__ == "BitMap":
            return cls(np.asarray(flat, dtype=np.uint32))
        return cls(np.asarray(flat, dtype=np.uint64).tolist())
    mask = np.zeros(size, dtype=bool)
    mask[np.asarray(flat, dtype=np.intp)] = True
    return mask.reshape(shape)


class Query:
    """The elements of an array (or of a box of it) that satisfy a condition.

    Nothing is read until a result is asked for; each result is one read of
    the daemon's query view.
    """

    __slots__ = ("array", "selection", "cond")

    def __init__(self, array: "Array", selection: Optional[Selection], cond: str) -> None:
        self.array = array
        self.selection = selection
        self.cond = check_condition(cond)

    def __repr__(self) -> str:
        where = "" if self.selection is None else f", box/{self.selection.box_selector()}"
        return f"mmfs.Query({self.array.path!r}{where}, {self.cond!r})"

    # --- paths ------------------------------------------------------------------

    @property
    def _identity(self) -> bool:
        """True when the results' coordinates are the array's own."""
        sel = self.selection
        return sel is None or (sel.whole and not sel.nones and not any(d.reverse for d in sel.dims))

    def _view(self, result: str) -> str:
        sel = self.selection
        box = "" if sel is None or sel.whole else f"box/{sel.box_selector()}@/"
        return f"{box}query/{self.cond}/{result}"

    def path(self, result: str = "count") -> str:
        """The path of ``result`` (count, coords, values or mask)."""
        if result not in _RESULTS:
            raise ValueError(f"result must be one of {', '.join(_RESULTS)}, not {result!r}")
        return self.array.view_path(self._view(result))

    @property
    def shape(self) -> Tuple[int, ...]:
        """The shape of what is queried (the array's, or the selection's)."""
        return self.array.shape if self.selection is None else self.selection.shape

    @property
    def _empty(self) -> bool:
        return self.selection is not None and self.selection.empty

    # --- results ----------------------------------------------------------------

    def count(self) -> int:
        """The number of matching elements."""
        if self._empty:
            return 0
        return int(_io.read_text(self.path("count"), self.array.path).strip())

    def array_flat_indices(self) -> np.ndarray:
        """The C-order linear indices into the whole array of the matches,
        ascending (``uint64``), as the daemon returns them."""
        if self._empty:
            return np.empty(0, dtype=np.uint64)
        return _io.read_sized(self.path("coords"), "<u8", self.array.path)

    def _relative(self) -> Tuple[Tuple[np.ndarray, ...], Optional[np.ndarray]]:
        """The matches' coordinates within the selection, in its C order, and
        the permutation from the daemon's order to that (None: the same)."""
        flat = self.array_flat_indices().astype(np.intp, copy=False)
        full = np.unravel_index(flat, self.array.shape)
        sel = self.selection
        if sel is None:
            return tuple(full), None
        per_dim = []
        for d, c in zip(sel.dims, full):
            if d.fixed:
                continue
            rel = c - d.first
            if d.step != 1:
                rel //= d.step
            if d.reverse:
                rel = (d.count - 1) - rel
            per_dim.append(rel)
        it = iter(per_dim)
        coords = tuple(np.zeros(len(flat), dtype=np.intp) if axis in sel.nones else next(it)
                       for axis in range(len(sel.shape)))
        perm = None
        if any(d.reverse for d in sel.dims) and coords:
            perm = np.lexsort(coords[::-1])
            coords = tuple(c[perm] for c in coords)
        return coords, perm

    def coords(self) -> Tuple[np.ndarray, ...]:
        """The matches' coordinates as ``np.nonzero`` gives them: one index
        array per dimension (of the selection, for a box), in C order."""
        if self.selection is not None and not self.selection.shape:
            raise ValueError("a query of a 0-d selection has no coordinates (as np.nonzero of a 0-d array); "
                             "use count() or values()")
        if self._empty:
            return tuple(np.empty(0, dtype=np.intp) for _ in self.shape)
        return self._relative()[0]

    def flat_indices(self) -> np.ndarray:
        """The matches' C-order flat indices (into the array, or the selection
        for a box), ascending: ``np.flatnonzero`` of the condition."""
        if self._identity:
            return self.array_flat_indices().astype(np.intp, copy=False)
        coords = self.coords()
        return np.ravel_multi_index(coords, self.shape).astype(np.intp, copy=False)

    def values(self) -> np.ndarray:
        """The matching elements, in the order of :meth:`coords` (for a PLoD
        copy, the reduced values; the condition is still evaluated on the
        full-precision elements)."""
        if self._empty:
            return np.empty(0, dtype=self.array.dtype)
        vals = _io.read_sized(self.path("values"), self.array.dtype, self.array.path)
        if self.selection is not None and any(d.reverse for d in self.selection.dims):
            _, perm = self._relative()
            if perm is not None:
                vals = vals[perm]
        return vals

    def mask(self) -> Any:
        """The match set: a ``pyroaring.BitMap`` of flat indices (``BitMap64``
        past 2**32 elements) when pyroaring is importable, else a boolean array
        of :attr:`shape`. For a whole-array query the bitmap is the daemon's
        ``mask`` view itself."""
        if self._identity and not self._empty:
            size = self.array.size
            if _roaring(size) is not None:
                raw = _io.read_bytes(self.path("mask"), self.array.path)
                return bitmap_from_bytes(raw, size)
        return bitmap_from_indices(self.flat_indices() if not self._empty else np.empty(0, np.intp), self.shape)

    def plan(self, result: str = "coords") -> Dict[str, Any]:
        """The daemon's plan of the query (``A@/plan/.../query/COND/RESULT``):
        whether it is answered from the index, bytes read, modeled time."""
        if result not in _RESULTS:
            raise ValueError(f"result must be one of {', '.join(_RESULTS)}, not {result!r}")
        if self._empty:
            raise ValueError("a query of an empty selection reads nothing and has no plan")
        return _io.read_json(self.array.plan_path(self._view(result)), self.array.path)

    def __len__(self) -> int:
        return self.count()
