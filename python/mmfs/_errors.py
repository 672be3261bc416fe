"""mmfs.Error and the daemon's one-line explanations of failures.

The daemon reports every failure as a POSIX errno and, when it can say more,
appends one line to ``MOUNT/.mmfs/errors`` (docs/reference.md §1, §6)::

    ERRNO /PATH: what was wrong and what is accepted

``PATH`` is relative to the mount and names the file, or the part of a view's
path the daemon resolved when it failed (``/a@/box/3:9,:,1@`` for a failure
in ``/a@/box/3:9,:,1@/query/>0/count``). :func:`wrap_oserror` turns an
``OSError`` into :class:`Error` carrying the last such line that matches the
path and errno.
"""
from __future__ import annotations

import contextlib
import errno as _errno
import os
from typing import Iterator, List, Optional

__all__ = ["Error", "mount_root", "daemon_reason", "wrap_oserror", "translate"]


class Error(OSError):
    """An operation on an mmfs file or view failed.

    A subclass of :class:`OSError` with the same ``errno``; ``filename`` is the
    path that failed and ``reason`` the daemon's explanation from
    ``MOUNT/.mmfs/errors`` (``None`` when the daemon wrote none).
    ``str(error)`` includes the reason.
    """

    reason: Optional[str]

    def __init__(self, errno: int, strerror: str, filename: Optional[str] = None,
                 reason: Optional[str] = None) -> None:
        if filename is None:
            super().__init__(errno, strerror)
        else:
            super().__init__(errno, strerror, filename)
        self.reason = reason

    def __reduce__(self):  # keep `reason` through pickling (dask workers raise these)
        return (_rebuild_error, (self.errno, self.strerror, self.filename, self.reason))


def _rebuild_error(errno: int, strerror: str, filename: Optional[str], reason: Optional[str]) -> "Error":
    return Error(errno, strerror, filename, reason)


def mount_root(path: str) -> Optional[str]:
    """The mount point of the mmfs volume holding the existing file or directory
    ``path``: the highest directory above it on the same device, provided it
    holds ``.mmfs``. ``None`` when ``path`` cannot be stat'ed or is not on mmfs.

    Only real directories above ``path`` are stat'ed (never a view), so looking
    for the mount adds no line to ``.mmfs/errors``.
    """
    path = os.path.abspath(path)
    try:
        dev = os.stat(path).st_dev
    except OSError:
        return None
    root = path
    while True:
        parent = os.path.dirname(root)
        if parent == root:
            break
        try:
            if os.stat(parent).st_dev != dev:
                break
        except OSError:
            break
        root = parent
    if not os.path.isdir(root):
        return None
    try:
        os.stat(os.path.join(root, ".mmfs", "errors"))
    except OSError:
        return None
    return root


def _logged_path_matches(logged: str, relative: str) -> bool:
    """True when the daemon's logged path names `relative` or the prefix of it
    the daemon resolved when it failed (a file, a view directory `X@`)."""
    if logged == relative:
        return True
    if not relative.startswith(logged):
        return False
    return logged.endswith("@") or relative[len(logged)] in "/@"


def _errno_names(error: int) -> List[str]:
    """How the daemon may name errno ``error`` in a line: every symbolic name
    of it (ENOTSUP and EOPNOTSUPP are one number), else ``errno N``."""
    names = sorted(n for n in dir(_errno) if n.startswith("E") and getattr(_errno, n) == error)
    return names + [f"errno {error}"]


def daemon_reason(path: str, error: int, anchor: Optional[str] = None) -> Optional[str]:
    """The daemon's explanation of the latest failure with errno ``error`` at
    ``path``: the text after ``ERRNO PATH: `` of the last line of
    ``MOUNT/.mmfs/errors`` whose errno matches and whose path is ``path`` or a
    prefix of it. ``anchor`` is a real file or directory on the same mount used
    to find the mount point (``path`` itself may be a view or may not exist);
    it defaults to ``path``'s nearest existing ancestor."""
    prefixes = tuple(name + " " for name in _errno_names(error))
    path = os.path.abspath(path)
    if anchor is None:
        anchor = path
        while not os.path.lexists(anchor) and os.path.dirname(anchor) != anchor:
            anchor = os.path.dirname(anchor)
    root = mount_root(anchor)
    if root is None:
        return None
    relative = "/" + os.path.relpath(path, root) if path != root else "/"
    try:
        with open(os.path.join(root, ".mmfs", "errors"), "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        prefix = next((p for p in prefixes if line.startswith(p)), None)
        if prefix is None:
            continue
        rest = line[len(prefix):]
        # "PATH: reason"; PATH itself may contain ": " only in odd names, so
        # try each split point, shortest path first.
        start = 0
        while True:
            cut = rest.find(": ", start)
            if cut < 0:
                break
            if _logged_path_matches(rest[:cut], relative):
                return rest[cut + 2:]
            start = cut + 1
    return None


def translate(exc: OSError, path: Optional[str] = None, anchor: Optional[str] = None) -> Error:
    """``exc`` as an :class:`Error` (same errno) whose message ends with the
    daemon's reason for ``path`` (default: ``exc.filename``)."""
    if isinstance(exc, Error):
        return exc
    target = path if path is not None else exc.filename
    if isinstance(target, bytes):
        target = os.fsdecode(target)
    err = exc.errno if exc.errno is not None else _errno.EIO
    reason = daemon_reason(str(target), err, anchor) if target is not None else None
    strerror = exc.strerror or os.strerror(err)
    message = f"{strerror}: {reason}" if reason else strerror
    return Error(err, message, None if target is None else str(target), reason)


@contextlib.contextmanager
def wrap_oserror(path: Optional[str] = None, anchor: Optional[str] = None) -> Iterator[None]:
    """Within the block, an ``OSError`` becomes :class:`Error` with the
    daemon's reason for ``path`` (see :func:`translate`)."""
    try:
        yield
    except Error:
        raise
    except OSError as exc:
        raise translate(exc, path, anchor) from exc
