"""The xarray backend: ``xr.open_dataset(path, engine="mmfs")``.

* On an array file: a Dataset of one variable, named after the file.
* On a directory: one variable per array file in it (subdirectories and
  files that are not arrays are skipped); the directory's ``user.*`` xattrs
  are the Dataset's attrs.

Each variable's dimensions are its ``user.mmfs.dims`` (``dim_0, dim_1, ...``
without it); a 1-D array whose name is its dimension's becomes that
dimension's coordinate; its ``user.*`` xattrs (decoded as
:class:`mmfs.attrs.Attrs` does) are its attrs. Data is read lazily: indexing
a variable reads one view of its file (``ds.t.isel(x=5)`` reads
``t@/slice/0/5``), and ``encoding["preferred_chunks"]`` is the layout's natural
brick (:attr:`mmfs.Array.brick`), so ``chunks={}`` gives dask chunks aligned
with it (``chunks="auto"``: multiples of it).

No CF decoding is applied (``mask_and_scale``, ``decode_times``): call
``xr.decode_cf(ds)`` when the attributes ask for it.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np
import xarray as xr
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.core import indexing

from . import _io
from .array import Array
from .attrs import Attrs

__all__ = ["MmfsBackendArray", "MmfsBackendEntrypoint", "open_mmfs_dataset"]


class MmfsBackendArray(BackendArray):
    """A lazily indexed mmfs array: basic indexers become one view read each
    (xarray turns outer and vectorized indexers into the bounding basic one
    plus numpy indexing of the result)."""

    __slots__ = ("array", "shape", "dtype")

    def __init__(self, array: Array) -> None:
        self.array = array
        self.shape = array.shape
        self.dtype = array.dtype

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.BASIC, self._raw)

    def _raw(self, key: Tuple[Any, ...]) -> np.ndarray:
        # A numpy scalar (every dimension fixed) as the 0-d array xarray expects.
        return np.asarray(self.array[key])


def _variable(array: Array, dims: Tuple[str, ...]) -> xr.Variable:
    data = indexing.LazilyIndexedArray(MmfsBackendArray(array))
    attrs = array.attrs.to_dict()
    encoding = {
        "source": array.path,
        "dtype": array.dtype,
        "preferred_chunks": dict(zip(dims, array.brick)),
        "mmfs_layout": array.layout,
    }
    return xr.Variable(dims, data, attrs=attrs, encoding=encoding)


def _array_files(directory: str) -> List[str]:
    """The array files of ``directory``, in readdir order."""
    names = []
    with os.scandir(directory) as it:
        for entry in it:
            if not entry.is_file(follow_symlinks=True):
                continue
            try:
                if _io.get_xattr(entry.path, "user.mmfs.shape") is None:
                    continue
            except OSError:
                continue
            names.append(entry.name)
    return names


def open_mmfs_dataset(path: "os.PathLike[str] | str", *, drop_variables: Optional[Iterable[str]] = None,
                      default_dims: str = "shared") -> xr.Dataset:
    """The Dataset of an array file or a directory of them (see the module doc).

    ``default_dims`` names the dimensions of arrays without ``user.mmfs.dims``:
    ``"shared"`` (``dim_0, dim_1, ...``, shared by every such array; arrays
    whose lengths then disagree are an error saying so) or ``"per_variable"``
    (``NAME_dim_0, ...``).
    """
    path = os.path.abspath(os.fspath(path))
    if default_dims not in ("shared", "per_variable"):
        raise ValueError(f"default_dims is 'shared' or 'per_variable', not {default_dims!r}")
    drop = set([drop_variables] if isinstance(drop_variables, str) else (drop_variables or ()))
    if os.path.isdir(path):
        names = _array_files(path)
        files = [(name, os.path.join(path, name)) for name in names if name not in drop]
        ds_attrs = Attrs(path).to_dict()
    else:
        name = os.path.basename(path)
        files = [] if name in drop else [(name, path)]
        ds_attrs = {}

    variables: Dict[str, xr.Variable] = {}
    coords: Dict[str, xr.Variable] = {}
    sizes: Dict[str, Tuple[int, str]] = {}
    for name, file in files:
        array = Array(file)
        named = _io.get_xattr(file, "user.mmfs.dims") is not None and array.dims != tuple(
            f"dim_{i}" for i in range(array.ndim))
        dims = array.dims
        if not named and default_dims == "per_variable":
            dims = tuple(f"{name}_dim_{i}" for i in range(array.ndim))
        for dim, n in zip(dims, array.shape):
            if dim in sizes and sizes[dim][0] != n:
                other_n, other = sizes[dim]
                raise ValueError(
                    f"dimension {dim!r} has length {other_n} in {other!r} but {n} in {name!r}: name the "
                    "dimensions with user.mmfs.dims (mmfs.create(..., dims=...)), or open with "
                    "default_dims='per_variable'")
            sizes.setdefault(dim, (n, name))
        var = _variable(array, dims)
        if array.ndim == 1 and dims == (name,):
            coords[name] = var
        else:
            variables[name] = var
    ds = xr.Dataset(variables, coords=coords, attrs=ds_attrs)
    ds.encoding["source"] = path
    return ds


class MmfsBackendEntrypoint(BackendEntrypoint):
    """``engine="mmfs"``: array files and directories of them on an mmfs mount."""

    description = "Open mmfs array files and directories of them (lazy, one view read per selection)"
    url = "docs/python.md in the mmfs repository"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "default_dims")

    def open_dataset(self, filename_or_obj: Any, *, drop_variables: Optional[Iterable[str]] = None,
                     default_dims: str = "shared") -> xr.Dataset:
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            raise TypeError(f"the mmfs backend opens paths, not {type(filename_or_obj).__name__}")
        return open_mmfs_dataset(filename_or_obj, drop_variables=drop_variables, default_dims=default_dims)

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            return False
        path = os.fspath(filename_or_obj)
        try:
            if os.path.isfile(path):
                return _io.get_xattr(path, "user.mmfs.shape") is not None
            if os.path.isdir(path):
                from ._errors import mount_root
                return mount_root(path) is not None and bool(_array_files(path))
        except OSError:
            return False
        return False
