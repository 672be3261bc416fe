"""Tables: a directory of equal-length 1-D arrays (docs/reference.md §4,
"Directories as tables", and §5, "Directory views")."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

import numpy as np

from . import _io
from .array import Array
from .attrs import Attrs
from .query import bitmap_from_bytes, bitmap_from_indices, check_condition, _roaring

if TYPE_CHECKING:
    import pandas

__all__ = ["Table", "TableQuery", "open_table"]


class Table:
    """A directory of equal-length 1-D arrays, read record by record.

    The columns and the record dtype are read from ``D@/info`` when the table
    is opened; the number of records is read afresh when needed (a table in
    capsules can grow). Records are read from ``D@/rows/A:B``: each record is
    the columns' elements packed in readdir order, a numpy structured dtype
    with those offsets.
    """

    __slots__ = ("_path", "_columns", "_dtype")

    def __init__(self, path: "os.PathLike[str] | str") -> None:
        self._path = os.path.abspath(os.fspath(path))
        info = self.info
        attributes = info.get("attributes") or []
        names = [a["name"] for a in attributes]
        self._columns: Tuple[str, ...] = tuple(names)
        self._dtype = np.dtype({
            "names": names,
            "formats": [_io.little_endian(a["dtype"]) for a in attributes],
            "offsets": [int(a["offset"]) for a in attributes],
            "itemsize": int(info.get("record_bytes", 0)),
        })

    def __reduce__(self):
        return (Table, (self._path,))

    def __repr__(self) -> str:
        return f"mmfs.Table({self._path!r}, columns={list(self._columns)})"

    @property
    def path(self) -> str:
        return self._path

    @property
    def info(self) -> Dict[str, Any]:
        """``D@/info``, read now: records, record_bytes, the columns
        (``attributes``), the layout and capsule details."""
        return _io.read_json(self._path + "@/info", self._path)

    @property
    def columns(self) -> Tuple[str, ...]:
        """The column names, in readdir order (the order of a record's fields)."""
        return self._columns

    @property
    def dtype(self) -> np.dtype:
        """The record dtype (packed: the fields' offsets are the daemon's)."""
        return self._dtype

    @property
    def attrs(self) -> Attrs:
        """The directory's ordinary ``user.*`` xattrs."""
        return Attrs(self._path)

    def __len__(self) -> int:
        return int(self.info["records"])

    def column(self, name: str) -> Array:
        """The column ``name`` as an :class:`mmfs.Array`."""
        if name not in self._columns:
            raise KeyError(name)
        return Array(os.path.join(self._path, name))

    def rows(self, start: Optional[int] = None, stop: Optional[int] = None) -> np.ndarray:
        """Records ``start:stop`` (Python slice semantics: negative indices
        count from the end, bounds are clipped; no step) as a structured
        array, read with one ``D@/rows/A:B`` view (the number of records comes
        from ``D@/info``)."""
        a, b, _ = slice(start, stop).indices(len(self))
        if b <= a:
            return np.empty(0, dtype=self._dtype)
        out = np.empty(b - a, dtype=self._dtype)
        return _io.read_into(f"{self._path}@/rows/{a}:{b}", out, self._path)

    def __getitem__(self, key: Any) -> Any:
        """``t["col"]`` is a column (:class:`mmfs.Array`); ``t[a:b]`` records."""
        if isinstance(key, str):
            return self.column(key)
        if isinstance(key, slice):
            if key.step not in (None, 1):
                raise IndexError("table rows take no step (D@/rows/A:B)")
            return self.rows(key.start, key.stop)
        raise TypeError(f"a table is indexed by a column name or a slice of records, not {type(key).__name__}")

    def plan(self, start: Optional[int] = None, stop: Optional[int] = None) -> Dict[str, Any]:
        """``D@/plan/rows/A:B``: the combined device plan of reading those records."""
        a, b, _ = slice(start, stop).indices(len(self))
        if b <= a:
            raise ValueError("an empty range of records reads nothing and has no plan")
        return _io.read_json(f"{self._path}@/plan/rows/{a}:{b}", self._path)

    def where(self, cond: str) -> "TableQuery":
        """A query whose atoms name columns (``"a4 == 7 & a1 > 0"``)."""
        return TableQuery(self, cond)

    def to_pandas(self, start: Optional[int] = None, stop: Optional[int] = None) -> "pandas.DataFrame":
        """Records ``start:stop`` (all by default) as a pandas DataFrame, one
        column per column (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError("to_pandas needs pandas (pip install pandas, or mmfs[pandas])") from exc
        rows = self.rows(start, stop)
        offset = 0 if start is None else slice(start, stop).indices(len(self))[0]
        index = pd.RangeIndex(offset, offset + len(rows))
        return pd.DataFrame({name: np.ascontiguousarray(rows[name]) for name in self._columns}, index=index)


class TableQuery:
    """Records of a table satisfying a condition (``D@/query/COND/...``)."""

    __slots__ = ("table", "cond")

    def __init__(self, table: Table, cond: str) -> None:
        self.table = table
        self.cond = check_condition(cond)

    def __repr__(self) -> str:
        return f"mmfs.TableQuery({self.table.path!r}, {self.cond!r})"

    def path(self, result: str = "count") -> str:
        if result not in ("count", "coords", "mask"):
            raise ValueError(f"a table query gives count, coords or mask, not {result!r}")
        return f"{self.table.path}@/query/{self.cond}/{result}"

    def count(self) -> int:
        """The number of matching records."""
        return int(_io.read_text(self.path("count"), self.table.path).strip())

    def indices(self) -> np.ndarray:
        """The matching record numbers, ascending."""
        raw = _io.read_sized(self.path("coords"), "<u8", self.table.path)
        return raw.astype(np.intp, copy=False)

    coords = indices

    def mask(self) -> Any:
        """The match set: a pyroaring bitmap of record numbers, or a boolean
        array of the table's length without pyroaring."""
        n = len(self.table)
        if _roaring(n) is not None:
            return bitmap_from_bytes(_io.read_bytes(self.path("mask"), self.table.path), n)
        return bitmap_from_indices(self.indices(), (n,))


def open_table(path: "os.PathLike[str] | str") -> Table:
    """Opens the directory ``path`` as a table (see :class:`Table`)."""
    return Table(path)
