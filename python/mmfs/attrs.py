"""User attributes of array files and directories: the ordinary ``user.*``
xattrs (not ``user.mmfs.*``), encoded as mmfs-import writes HDF5 attributes
(docs/import-export.md, "Attributes"; tools/h5/attributes.h):

* a string: its UTF-8 bytes, as they are;
* a number: its JSON text (``2.5``, ``-3``; a float32 in the shortest text
  that reads back to the same float32; NaN and infinities as the bare words
  ``NaN``, ``Infinity``, ``-Infinity``);
* an array or list of numbers or strings: a JSON list nested in C order, with
  non-finite floats as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``;
* ``user.hdf5.types`` records each such attribute's type and shape
  (``{"origin": {"type": "float64", "shape": [3]}}``) so that mmfs-export and
  this module give back the same types.

Other JSON-serializable values (``bool``, ``None``, dicts, mixed lists) are
stored as JSON text without a type record. Reading an attribute without a
type record decodes it as JSON when it is JSON, else as text (bytes when it is
not UTF-8).
"""
from __future__ import annotations

import errno
import json
import math
import os
from collections.abc import MutableMapping
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ._errors import wrap_oserror

__all__ = ["Attrs", "encode_attr", "decode_attr", "TYPES_XATTR", "DIMS_XATTR"]

TYPES_XATTR = "user.hdf5.types"
# Dimension names that are not identifiers (netCDF-4 takes any name;
# user.mmfs.dims takes identifiers): a JSON list, one per dimension
# (docs/import-export.md, "Dimension names"). Not an attribute either.
DIMS_XATTR = "user.hdf5.dims"
_NUMERIC = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"}
_NONFINITE = {"NaN": math.nan, "nan": math.nan, "Infinity": math.inf, "inf": math.inf,
              "-Infinity": -math.inf, "-inf": -math.inf}


def _float_text(x: float, dtype: str) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    # repr of a numpy float32 is its shortest round-trip text
    text = str(np.float32(x)) if dtype == "float32" else repr(float(x))
    return text


def _json_leaf(x: Any, dtype: str) -> Any:
    if dtype == "string":
        return str(x)
    if dtype.startswith("float"):
        f = float(x)
        if not math.isfinite(f):
            return _float_text(f, dtype)
        return json.loads(_float_text(f, dtype))
    return int(x)


def _nest(arr: np.ndarray, dtype: str) -> Any:
    """``arr`` as nested lists of JSON leaves, in C order."""
    def convert(x: Any) -> Any:
        return [convert(e) for e in x] if isinstance(x, list) else _json_leaf(x, dtype)
    return convert(arr.tolist())


def encode_attr(value: Any) -> Tuple[bytes, Optional[Dict[str, Any]]]:
    """``value`` as the bytes of its xattr and its ``user.hdf5.types`` record
    (``None`` when the value has no HDF5 type)."""
    if isinstance(value, bytes):
        return value, None
    if isinstance(value, str):
        return value.encode("utf-8"), {"type": "string", "shape": []}
    if isinstance(value, (bool, np.bool_)) or value is None or isinstance(value, dict):
        return json.dumps(value.item() if isinstance(value, np.bool_) else value).encode(), None
    if isinstance(value, (int, float, np.integer, np.floating)):
        arr = np.asarray(value)
        if isinstance(value, int) and not isinstance(value, np.integer):
            arr = np.asarray(value, dtype=np.uint64 if value > np.iinfo(np.int64).max else np.int64)
        elif isinstance(value, float) and not isinstance(value, np.floating):
            arr = np.asarray(value, dtype=np.float64)
    else:
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError):
            return json.dumps(value).encode(), None
    if arr.dtype.kind in "US":
        dtype_name = "string"
    else:
        dtype_name = arr.dtype.newbyteorder("=").name if arr.dtype.byteorder != "|" else arr.dtype.name
    if dtype_name != "string" and dtype_name not in _NUMERIC:
        # object arrays (ragged or mixed lists), bools, complex, ...: plain JSON
        try:
            return json.dumps(value.tolist() if isinstance(value, np.ndarray) else value).encode(), None
        except TypeError as exc:
            raise TypeError(f"cannot store an attribute of type {type(value).__name__} ({arr.dtype}): {exc}") from None
    record = {"type": dtype_name, "shape": [int(s) for s in arr.shape]}
    if arr.ndim == 0:
        if dtype_name == "string":
            return str(arr[()]).encode("utf-8"), record
        if dtype_name.startswith("float"):
            return _float_text(float(arr[()]), dtype_name).encode(), record
        return str(int(arr[()])).encode(), record
    return json.dumps(_nest(arr, dtype_name), ensure_ascii=False).encode("utf-8"), record


def _leaf_number(x: Any) -> Any:
    if isinstance(x, str) and x in _NONFINITE:
        return _NONFINITE[x]
    return x


def decode_attr(raw: bytes, record: Optional[Dict[str, Any]] = None) -> Any:
    """The value of an xattr's bytes ``raw``, given its ``user.hdf5.types``
    record (or ``None``): ``str``, a Python number, a numpy array (typed
    lists), or whatever the JSON holds."""
    if record is not None and isinstance(record, dict):
        tname, shape = record.get("type"), record.get("shape")
        try:
            if tname == "string" and shape == []:
                return raw.decode("utf-8")
            if tname == "string":
                return np.array(json.loads(raw), dtype=str).reshape(shape)
            if tname in _NUMERIC and isinstance(shape, list):
                text = raw.decode("utf-8")
                if shape == []:
                    value = _NONFINITE[text] if text in _NONFINITE else json.loads(text)
                    return np.dtype(tname).type(value)
                nested = json.loads(text)
                flat = np.array(nested, dtype=object).reshape(-1)
                flat = np.array([_leaf_number(x) for x in flat], dtype=tname)
                return flat.reshape(shape)
        except (ValueError, TypeError, UnicodeDecodeError):
            pass  # a value that does not match its record: decode it as untyped
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw
    try:
        return json.loads(text)
    except ValueError:
        return text


class Attrs(MutableMapping):
    """A dict-like view of the ordinary ``user.*`` xattrs of a file or
    directory (``user.NAME`` is key ``NAME``); ``user.mmfs.*`` (the schema) and
    ``user.hdf5.types`` are not part of it. Every access reads or writes the
    xattrs, so it always shows the current state (``user.hdf5.dims`` is not
    part of it either). Values are encoded as the
    module doc says; errors are :class:`mmfs.Error` with the daemon's reason."""

    def __init__(self, path: str) -> None:
        self._path = os.fspath(path)

    @staticmethod
    def _xattr(key: str) -> str:
        if not isinstance(key, str):
            raise TypeError(f"attribute names are str, not {type(key).__name__}")
        if not key or key.startswith("mmfs.") or key in ("hdf5.types", "hdf5.dims"):
            raise KeyError(f"{key!r} is reserved for mmfs (user.mmfs.*, user.hdf5.types and user.hdf5.dims)" if key else
                           "attribute names are not empty")
        return "user." + key

    def _types(self) -> Dict[str, Any]:
        try:
            raw = os.getxattr(self._path, TYPES_XATTR)
        except OSError:
            return {}
        try:
            types = json.loads(raw)
        except ValueError:
            return {}
        return types if isinstance(types, dict) else {}

    def _set_types(self, types: Dict[str, Any]) -> None:
        with wrap_oserror(self._path):
            if types:
                os.setxattr(self._path, TYPES_XATTR, json.dumps(types, sort_keys=True).encode())
            else:
                try:
                    os.removexattr(self._path, TYPES_XATTR)
                except OSError as exc:
                    if exc.errno != errno.ENODATA:
                        raise

    def _listing(self, names: Optional[List[str]] = None) -> Tuple[List[str], bool]:
        """The attribute names (one listxattr, unless the caller has the
        file's xattr `names` already), and whether ``user.hdf5.types`` is
        among the xattrs."""
        if names is None:
            with wrap_oserror(self._path):
                names = os.listxattr(self._path)
        keys = [n[5:] for n in names
                if n.startswith("user.") and not n.startswith("user.mmfs.") and n not in (TYPES_XATTR, DIMS_XATTR)]
        return keys, TYPES_XATTR in names

    def _names(self) -> List[str]:
        return self._listing()[0]

    def __getitem__(self, key: str) -> Any:
        name = self._xattr(key)
        try:
            raw = os.getxattr(self._path, name)
        except OSError as exc:
            if exc.errno == errno.ENODATA:
                raise KeyError(key) from None
            with wrap_oserror(self._path):
                raise
        return decode_attr(raw, self._types().get(key))

    def __setitem__(self, key: str, value: Any) -> None:
        name = self._xattr(key)
        raw, record = encode_attr(value)
        with wrap_oserror(self._path):
            os.setxattr(self._path, name, raw)
        types = self._types()
        if record is None:
            if key in types:
                del types[key]
                self._set_types(types)
        elif types.get(key) != record:
            types[key] = record
            self._set_types(types)

    def __delitem__(self, key: str) -> None:
        name = self._xattr(key)
        try:
            os.removexattr(self._path, name)
        except OSError as exc:
            if exc.errno == errno.ENODATA:
                raise KeyError(key) from None
            with wrap_oserror(self._path):
                raise
        types = self._types()
        if key in types:
            del types[key]
            self._set_types(types)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def to_dict(self, xattr_names: Optional[List[str]] = None) -> Dict[str, Any]:
        """All attributes, decoded, in one dict: one listxattr (none when
        `xattr_names`, the file's ``os.listxattr``, is given), then one
        getxattr per attribute (and one of ``user.hdf5.types`` when it exists)."""
        keys, typed = self._listing(xattr_names)
        types = self._types() if keys and typed else {}
        out: Dict[str, Any] = {}
        for key in keys:
            try:
                raw = os.getxattr(self._path, "user." + key)
            except OSError:
                continue  # removed meanwhile
            out[key] = decode_attr(raw, types.get(key))
        return out

    def __repr__(self) -> str:
        return f"Attrs({self._path!r}, {self.to_dict()!r})"
