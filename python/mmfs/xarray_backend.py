"""The xarray backend: ``xr.open_dataset(path, engine="mmfs")``.

* On an array file: a Dataset of one variable, named after the file.
* On a directory: one variable per array file in it (subdirectories and
  files that are not arrays are skipped); the directory's ``user.*`` xattrs
  are the Dataset's attrs. ``group="a/b"`` opens the subdirectory ``a/b`` of
  it instead, as h5netcdf's ``group`` opens an HDF5 group (mmfs-import makes
  a directory of each group).

Each variable's dimensions are its ``user.mmfs.dims`` (or ``user.hdf5.dims``,
names that are not identifiers, as netCDF-4 allows; ``dim_0, dim_1, ...``
without it); a 1-D array whose name is its dimension's becomes that
dimension's coordinate; its ``user.*`` xattrs (decoded as
:class:`mmfs.attrs.Attrs` does, then as netCDF readers give attributes: an
attribute of one element is that element, an array of strings a ``list``)
are its attrs. An array named ``_nc4_non_coord_NAME`` (how netCDF-4 stores a
variable named as a dimension it does not run along) is the variable ``NAME``,
as h5netcdf shows it.

The CF conventions are decoded as xarray's own netCDF backends decode them,
by xarray's own code (:class:`xarray.backends.store.StoreBackendEntrypoint`
over :class:`MmfsDataStore`), with the same options and defaults:
``mask_and_scale`` (``_FillValue``, ``missing_value``, ``scale_factor``,
``add_offset``), ``decode_times`` and ``use_cftime`` (``units``
``"days since ..."``, ``calendar``), ``decode_timedelta``,
``concat_characters``, ``decode_coords`` (the ``coordinates`` attribute) and
``drop_variables``. So a netCDF-4 file imported by mmfs-import opens as
``engine="h5netcdf"`` opens the file.

Opening reads no data and no ``A@/info``: an array file costs one
``getxattr`` each of ``user.mmfs.shape``, ``dtype``, ``dims``, ``layout`` and
``cell`` (``chunk`` too for MLOC), and one ``listxattr`` for its attributes
(plus a ``getxattr`` per attribute and of ``user.hdf5.types`` when there are
any). Data is read lazily: indexing a variable reads one view of its file
(``ds.t.isel(x=5)`` reads ``t@/slice/0/5``; decoding is applied to what was
read). ``encoding["preferred_chunks"]`` is :attr:`mmfs.Array.chunks`, whole
cells of the layout grown to at least 16 MiB, so ``chunks={}`` gives dask
chunks of a useful size aligned with the cells (``chunks="auto"``: multiples
of them).
"""
from __future__ import annotations

import errno
import os
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np
import xarray as xr
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.backends.common import AbstractDataStore
from xarray.backends.store import StoreBackendEntrypoint
from xarray.core import indexing

from . import _io
from ._errors import Error, wrap_oserror
from .array import Array
from .attrs import Attrs

__all__ = ["MmfsBackendArray", "MmfsBackendEntrypoint", "MmfsDataStore", "open_mmfs_dataset", "netcdf_attrs"]


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


def _netcdf_attr(value: Any) -> Any:
    # h5netcdf's Attributes.__getitem__ (as netCDF4-python): arrays of strings
    # are lists; a value of one element is that element (netCDF attributes are
    # 1-D, so a scalar written by h5netcdf is stored as an array of one).
    if isinstance(value, np.ndarray) and value.ndim > 0:
        if value.dtype.kind in "US":
            value = value.tolist()
        if len(value) == 1:
            value = value[0]
    return value


def netcdf_attrs(attrs: Attrs, xattr_names: Optional[List[str]] = None) -> Dict[str, Any]:
    """The attributes of a file or directory as xarray's h5netcdf and netCDF4
    backends give them (see the module doc); `xattr_names`: the file's
    ``os.listxattr``, when the caller has it."""
    return {key: _netcdf_attr(value) for key, value in attrs.to_dict(xattr_names).items()}


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


def _group_path(path: str, group: Optional[str]) -> str:
    """The directory ``group`` (``"a/b"``, ``"/a/b"``; ``None``, ``""`` and
    ``"/"`` are ``path`` itself) below ``path``."""
    if group is None:
        return path
    if not isinstance(group, str):
        raise TypeError(f"group is a str ('a/b'), not {type(group).__name__}")
    parts = [p for p in group.split("/") if p and p != "."]
    if not parts:
        return path
    if ".." in parts:
        raise ValueError(f"group {group!r} names a directory outside {path!r}")
    if not os.path.isdir(path):
        raise ValueError(f"group={group!r} needs a directory, and {path!r} is not one")
    target = os.path.join(path, *parts)
    if not os.path.isdir(target):
        raise OSError(f"group {group!r} not found: {target!r} is not a directory")
    return target


NON_COORD_PREFIX = "_nc4_non_coord_"


def _shown(name: str) -> str:
    """The variable name of the file ``name``: netCDF-4 stores a variable
    named as a dimension it does not run along as ``_nc4_non_coord_NAME``;
    h5netcdf shows ``NAME``."""
    return name[len(NON_COORD_PREFIX):] if name.startswith(NON_COORD_PREFIX) else name


class MmfsDataStore(AbstractDataStore):
    """The variables (undecoded), dimensions and attributes of an array file
    or a directory of them, for xarray's CF decoding (see the module doc).
    ``default_dims`` as :func:`open_mmfs_dataset` says."""

    def __init__(self, path: "os.PathLike[str] | str", group: Optional[str] = None,
                 default_dims: str = "shared", drop_variables: "str | Iterable[str] | None" = None) -> None:
        if default_dims not in ("shared", "per_variable"):
            raise ValueError(f"default_dims is 'shared' or 'per_variable', not {default_dims!r}")
        base = os.path.abspath(os.fspath(path))
        self.path = _group_path(base, group)
        self.default_dims = default_dims
        # not opened at all (xarray's decoding drops them too)
        self.drop = set([drop_variables] if isinstance(drop_variables, str) else (drop_variables or ()))
        # a directory (True), an array file (False), or not known yet (None);
        # _group_path checked a group's directory
        self._isdir: Optional[bool] = True if self.path != base else None
        self._loaded: Optional[Tuple[Dict[str, xr.Variable], Dict[str, int]]] = None

    def _files(self) -> List[Tuple[str, str, Optional[Array]]]:
        """(file name, path, its Array when already opened) of each array file."""
        if self._isdir is None:
            # An array file is told by its user.mmfs.shape, which opening it
            # reads anyway: no stat of the path (a FUSE call) on that path.
            if _shown(os.path.basename(self.path)) in self.drop:
                self._isdir = os.path.isdir(self.path)  # dropped: not opened
            else:
                try:
                    array = Array(self.path)
                except Error as exc:
                    if exc.errno != errno.EISDIR:
                        raise
                    self._isdir = True
                else:
                    self._isdir = False
                    return [(os.path.basename(self.path), self.path, array)]
        if self._isdir:
            # every array file, in readdir order, opened once (its shape read
            # once); dropped ones are not opened
            files = []
            with os.scandir(self.path) as it:
                for entry in it:
                    if not entry.is_file(follow_symlinks=True):
                        continue
                    if _shown(entry.name) in self.drop:
                        continue
                    try:
                        files.append((entry.name, entry.path, Array(entry.path)))
                    except OSError:
                        continue  # not an array file (or gone meanwhile)
            return files
        return [(os.path.basename(self.path), self.path, None)]

    def _variable(self, name: str, file: str, sizes: Dict[str, Tuple[int, str]],
                  array: Optional[Array] = None) -> xr.Variable:
        if array is None:
            array = Array(file)
        # One listxattr serves the attributes and says whether user.hdf5.dims exists.
        with wrap_oserror(file):
            xattr_names = os.listxattr(file)
        dims = array._dims(xattr_names)
        # Array.dims is dim_0, dim_1, ... when user.mmfs.dims is absent (or
        # unusable): such names are not the file's own
        named = dims != tuple(f"dim_{i}" for i in range(array.ndim))
        if not named and self.default_dims == "per_variable":
            dims = tuple(f"{name}_dim_{i}" for i in range(array.ndim))
        for dim, n in zip(dims, array.shape):
            if dim in sizes and sizes[dim][0] != n:
                other_n, other = sizes[dim]
                raise ValueError(
                    f"dimension {dim!r} has length {other_n} in {other!r} but {n} in {name!r}: name the "
                    "dimensions with user.mmfs.dims (mmfs.create(..., dims=...)), or open with "
                    "default_dims='per_variable'")
            sizes.setdefault(dim, (n, name))
        data = indexing.LazilyIndexedArray(MmfsBackendArray(array))
        encoding = {
            "source": array.path,
            "dtype": array.dtype,
            "original_shape": array.shape,
            "preferred_chunks": dict(zip(dims, array.chunks)),
            "mmfs_layout": array.layout,
        }
        return xr.Variable(dims, data, attrs=netcdf_attrs(array.attrs, xattr_names), encoding=encoding)

    def _load(self) -> Tuple[Dict[str, xr.Variable], Dict[str, int]]:
        if self._loaded is None:
            sizes: Dict[str, Tuple[int, str]] = {}
            variables: Dict[str, xr.Variable] = {}
            files: Dict[str, str] = {}
            for name, file, array in self._files():
                shown = _shown(name)
                if shown in self.drop:
                    continue
                if shown in files:
                    raise ValueError(f"{files[shown]!r} and {file!r} are both the variable {shown!r}")
                files[shown] = file
                variables[shown] = self._variable(shown, file, sizes, array)
            self._loaded = variables, {dim: n for dim, (n, _) in sizes.items()}
        return self._loaded

    def get_variables(self) -> Dict[str, xr.Variable]:
        return dict(self._load()[0])

    def get_dimensions(self) -> Dict[str, int]:
        return dict(self._load()[1])

    def get_attrs(self) -> Dict[str, Any]:
        if self._isdir is None:
            self._load()
        return netcdf_attrs(Attrs(self.path)) if self._isdir else {}

    def get_encoding(self) -> Dict[str, Any]:
        return {"source": self.path}


def open_mmfs_dataset(path: "os.PathLike[str] | str", *, mask_and_scale: Any = True, decode_times: Any = True,
                      concat_characters: Any = True, decode_coords: Any = True,
                      drop_variables: "str | Iterable[str] | None" = None, use_cftime: Any = None,
                      decode_timedelta: Any = None, group: Optional[str] = None,
                      default_dims: str = "shared") -> xr.Dataset:
    """The Dataset of an array file or a directory of them, CF-decoded (see
    the module doc; the decoding options are ``xr.open_dataset``'s).

    ``group`` is a subdirectory of the directory ``path`` (``"a/b"``).
    ``default_dims`` names the dimensions of arrays without ``user.mmfs.dims``:
    ``"shared"`` (``dim_0, dim_1, ...``, shared by every such array; arrays
    whose lengths then disagree are an error saying so) or ``"per_variable"``
    (``NAME_dim_0, ...``).

    ``xr.open_dataset(path, engine="mmfs", ...)`` is this plus ``chunks``,
    ``cache`` and the other options xarray applies to every engine's Dataset.
    """
    ds = _open_unindexed(path, mask_and_scale=mask_and_scale, decode_times=decode_times,
                         concat_characters=concat_characters, decode_coords=decode_coords,
                         drop_variables=drop_variables, use_cftime=use_cftime, decode_timedelta=decode_timedelta,
                         group=group, default_dims=default_dims)
    # the default (pandas) indexes of the dimension coordinates, which
    # xr.open_dataset adds to what a backend returns
    indexed = xr.Dataset({name: var.variable for name, var in ds.data_vars.items()},
                         coords={name: var.variable for name, var in ds.coords.items()}, attrs=ds.attrs)
    indexed.encoding = ds.encoding
    return indexed


def _open_unindexed(path: "os.PathLike[str] | str", *, mask_and_scale: Any, decode_times: Any,
                    concat_characters: Any, decode_coords: Any, drop_variables: "str | Iterable[str] | None",
                    use_cftime: Any, decode_timedelta: Any, group: Optional[str], default_dims: str) -> xr.Dataset:
    # What xarray's netCDF backends do: a data store decoded by xarray's
    # StoreBackendEntrypoint (conventions.decode_cf_variables; coordinates
    # without indexes, which xr.open_dataset then builds unless
    # create_default_indexes=False).
    store = MmfsDataStore(path, group=group, default_dims=default_dims, drop_variables=drop_variables)
    return StoreBackendEntrypoint().open_dataset(
        store, mask_and_scale=mask_and_scale, decode_times=decode_times, concat_characters=concat_characters,
        decode_coords=decode_coords, drop_variables=drop_variables, use_cftime=use_cftime,
        decode_timedelta=decode_timedelta)


class MmfsBackendEntrypoint(BackendEntrypoint):
    """``engine="mmfs"``: array files and directories of them on an mmfs mount."""

    description = "Open mmfs array files and directories of them (lazy, one view read per selection)"
    url = "docs/python.md in the mmfs repository"
    open_dataset_parameters = ("filename_or_obj", "mask_and_scale", "decode_times", "concat_characters",
                               "decode_coords", "drop_variables", "use_cftime", "decode_timedelta", "group",
                               "default_dims")

    def open_dataset(self, filename_or_obj: Any, *, mask_and_scale: Any = True, decode_times: Any = True,
                     concat_characters: Any = True, decode_coords: Any = True,
                     drop_variables: "str | Iterable[str] | None" = None, use_cftime: Any = None,
                     decode_timedelta: Any = None, group: Optional[str] = None,
                     default_dims: str = "shared") -> xr.Dataset:
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            raise TypeError(f"the mmfs backend opens paths, not {type(filename_or_obj).__name__}")
        return _open_unindexed(filename_or_obj, mask_and_scale=mask_and_scale, decode_times=decode_times,
                               concat_characters=concat_characters, decode_coords=decode_coords,
                               drop_variables=drop_variables, use_cftime=use_cftime,
                               decode_timedelta=decode_timedelta, group=group, default_dims=default_dims)

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
