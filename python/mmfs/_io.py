"""Low-level I/O: reading a view into a preallocated numpy buffer with one
``open``, writing C-order bytes with ``pwrite``, xattrs, and :func:`trace`."""
from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
from typing import Any, Iterator, List, Optional, Tuple

import numpy as np

from ._errors import Error, wrap_oserror

__all__ = ["Trace", "trace", "read_into", "read_view", "read_sized", "read_text", "read_json", "pwrite_all",
           "get_xattr", "set_xattr", "little_endian"]


class Trace:
    """The views an :func:`trace` block read: ``reads`` is a list of
    ``(path, nbytes)``, one entry per ``open`` of a view or array file."""

    def __init__(self) -> None:
        self.reads: List[Tuple[str, int]] = []

    @property
    def paths(self) -> List[str]:
        """The paths read, in order."""
        return [p for p, _ in self.reads]

    def __len__(self) -> int:
        return len(self.reads)

    def __repr__(self) -> str:
        return f"Trace({self.reads!r})"


_tracers: List[Trace] = []
_tracers_lock = threading.Lock()


@contextlib.contextmanager
def trace() -> Iterator[Trace]:
    """Records every view or array file this process's :mod:`mmfs` calls read
    while the block runs (in every thread)::

        with mmfs.trace() as t:
            a[5]
        assert t.paths == ["/mnt/a@/slice/0/5"]

    A debugging aid: it shows what the client asked of the daemon, not what
    the daemon read from the device (``A@/plan/VIEW`` and ``/.mmfs/stats``
    show that).
    """
    t = Trace()
    with _tracers_lock:
        _tracers.append(t)
    try:
        yield t
    finally:
        with _tracers_lock:
            _tracers.remove(t)


def _record(path: str, nbytes: int) -> None:
    if _tracers:
        with _tracers_lock:
            for t in _tracers:
                t.reads.append((path, nbytes))


def little_endian(dtype: Any) -> np.dtype:
    """``dtype`` with little-endian byte order (mmfs stores little-endian)."""
    dt = np.dtype(dtype)
    return dt.newbyteorder("<") if dt.byteorder not in ("|", "<") else dt


def _fill(fd: int, buf: memoryview, path: str) -> None:
    """Reads exactly len(buf) bytes from fd (a readinto loop)."""
    off, total = 0, len(buf)
    while off < total:
        n = os.readv(fd, [buf[off:]])
        if n == 0:
            raise Error(errno.EIO, f"{os.strerror(errno.EIO)}: short read: {off} of {total} bytes, "
                        "then end of file", path)
        off += n


def read_into(path: str, out: np.ndarray, anchor: Optional[str] = None) -> np.ndarray:
    """Fills the C-contiguous array ``out`` with the bytes of ``path`` (one
    ``open``, then ``readv`` until full). OSErrors become :class:`mmfs.Error`
    with the daemon's reason; ``anchor`` is the real array file (to find the
    mount's ``.mmfs/errors``)."""
    if not out.flags.c_contiguous:
        raise ValueError("read_into needs a C-contiguous buffer")
    raw = out.reshape(-1).view(np.uint8).data
    with wrap_oserror(path, anchor):
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            _record(path, len(raw))
            _fill(fd, raw, path)
        finally:
            os.close(fd)
    return out


def read_view(path: str, shape: Tuple[int, ...], dtype: np.dtype, anchor: Optional[str] = None) -> np.ndarray:
    """A new array of ``shape`` and ``dtype`` read from ``path``."""
    return read_into(path, np.empty(shape, dtype=dtype), anchor)


def read_sized(path: str, dtype: Any, anchor: Optional[str] = None) -> np.ndarray:
    """A 1-D array holding all of ``path`` (whose ``st_size`` is exact), read
    with one ``open``: ``fstat`` sizes the buffer, then a ``readv`` loop."""
    dt = np.dtype(dtype)
    with wrap_oserror(path, anchor):
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            if size % dt.itemsize:
                raise Error(errno.EIO, f"{os.strerror(errno.EIO)}: {size} bytes is not a whole number of "
                            f"{dt} elements", path)
            out = np.empty(size // dt.itemsize, dtype=dt)
            _record(path, size)
            if size:
                _fill(fd, out.view(np.uint8).data, path)
        finally:
            os.close(fd)
    return out


def read_bytes(path: str, anchor: Optional[str] = None) -> bytes:
    """All bytes of a small view (text, JSON, a serialized bitmap)."""
    return read_sized(path, np.uint8, anchor).tobytes()


def read_text(path: str, anchor: Optional[str] = None) -> str:
    return read_bytes(path, anchor).decode("utf-8")


def read_json(path: str, anchor: Optional[str] = None) -> Any:
    return json.loads(read_text(path, anchor))


def pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    """Writes all of ``data`` at ``offset`` (``pwrite`` may write less)."""
    while len(data):
        n = os.pwrite(fd, data, offset)
        if n <= 0:
            raise OSError(errno.EIO, "pwrite wrote nothing")
        data, offset = data[n:], offset + n


def get_xattr(path: str, name: str) -> Optional[str]:
    """The text of xattr ``name`` of ``path``, or ``None`` when it is absent
    (``ENODATA``; also ``ENOTSUP``/``EOPNOTSUPP`` off mmfs)."""
    try:
        return os.getxattr(path, name).decode("utf-8")
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
            return None
        raise


def set_xattr(target: Any, name: str, value: Any, path: Optional[str] = None) -> None:
    """Sets xattr ``name`` on ``target`` (a path or an open fd); ``value`` is
    bytes or anything whose ``str`` is the text. An OSError becomes
    :class:`mmfs.Error` naming ``path`` and the daemon's reason."""
    data = value if isinstance(value, bytes) else str(value).encode("utf-8")
    where = path if path is not None else str(target)
    with wrap_oserror(where):
        try:
            os.setxattr(target, name, data)
        except OSError as exc:
            # Say which attribute: the errno alone does not.
            raise type(exc)(exc.errno, f"{exc.strerror} (setting {name}={data[:80].decode('utf-8', 'replace')})",
                            where) from exc
