"""mmfs: the Python client of the mmfs filesystem for multidimensional arrays.

mmfs is used through its mount: an array file's schema is a set of
``user.mmfs.*`` xattrs and every selection, reduced-precision copy and query
is a read-only view file beside it (docs/reference.md §4, §5). This package
maps numpy's vocabulary onto those files::

    import mmfs
    a = mmfs.create("/mnt/t", (1024, 1024, 256), "float64", layout="multimap", data=src)
    a[5]                         # one read of /mnt/t@/slice/0/5
    a[10:20, ::-1, 7]            # one read of /mnt/t@/box/10:20,:,7, reversed in memory
    a.where("> 0.5 & < 0.7").count()
    a.box[0:100, :, 5].where("> 0.5").coords()
    mmfs.open_table("/mnt/sales").rows(0, 1000)

Every OSError is raised as :class:`mmfs.Error` carrying the daemon's
explanation from ``MOUNT/.mmfs/errors``. The xarray backend is
``xr.open_dataset(path, engine="mmfs")`` (:mod:`mmfs.xarray_backend`).
"""
from ._errors import Error
from ._io import Trace, trace
from .array import Array, Box, open
from .attrs import Attrs
from ._create import SLAB_BYTES, create
from .query import Query
from .table import Table, TableQuery, open_table

__version__ = "0.1.0"

__all__ = ["Array", "Attrs", "Box", "Error", "Query", "Table", "TableQuery", "SLAB_BYTES", "Trace", "create", "open",
           "open_table", "trace", "__version__"]
