"""Which names may exist: NAME_MAX on every operation that takes a name, and the
`X@` convention — a real entry named `X@` never sits beside an X that has views
(an array file or a directory), since the views would hide it (docs/reference.md §5,
docs/daemon.md "Names"). Every refusal has its errno and a line in `.mmfs/errors`."""
import ctypes
import errno
import itertools
import os
import stat

import numpy as np
import pytest

from mmfs_mount import ErrorLog, expect_errno, getx, make_array, read_array, read_json, setx, view

NAME_MAX = 255


@pytest.fixture(scope="module")
def vol(module_volume):
    return module_volume


_serial = itertools.count()


@pytest.fixture
def d(vol):
    """A fresh directory for one test."""
    path = vol.mnt / f"names-{next(_serial)}"
    path.mkdir()
    return path


def fails(vol, err, name, fn, *args):
    """fn(*args) fails with `err` and logs a line naming `name`."""
    with ErrorLog(vol, name):
        expect_errno(err, fn, *args)


_libc = ctypes.CDLL(None, use_errno=True)


def renameat2(old, new, flags):
    if _libc.renameat2(-100, os.fsencode(str(old)), -100, os.fsencode(str(new)), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), str(old))


RENAME_EXCHANGE = 2


# --- NAME_MAX ------------------------------------------------------------------------------------

def test_names_longer_than_name_max_are_enametoolong_everywhere(vol, d):
    """pjdfstest's enametoolong cases: a lookup of a too-long name is ENAMETOOLONG, not
    ENOENT, whatever the operation."""
    long = d / ("L" * (NAME_MAX + 1))
    ok = d / ("k" * NAME_MAX)
    ok.write_bytes(b"longest name")
    cases = [
        (os.stat, long), (os.lstat, long), (os.chmod, long, 0o600), (os.chown, long, 1, 1),
        (lambda p: os.chown(p, 1, 1, follow_symlinks=False), long), (os.truncate, long, 0),
        (os.unlink, long), (os.rmdir, long), (os.rename, long, d / "x"), (os.rename, ok, long),
        (os.link, long, d / "x"), (os.link, ok, long), (os.symlink, "t", long), (os.mkdir, long),
        (os.mknod, long, stat.S_IFIFO | 0o644), (os.open, long, os.O_RDONLY),
        (os.open, long, os.O_CREAT | os.O_WRONLY), (os.utime, long, None),
        (os.setxattr, long, "user.x", b"1"), (os.listdir, long),
    ]
    for fn, *args in cases:
        fails(vol, errno.ENAMETOOLONG, "LLLL", fn, *args)
    assert "256 bytes" in vol.errors().splitlines()[-1]
    # NAME_MAX itself is a name like any other.
    assert ok.read_bytes() == b"longest name"
    os.rename(ok, d / ("m" * NAME_MAX))
    os.mkdir(d / ("n" * NAME_MAX))
    assert sorted(os.listdir(d)) == ["m" * NAME_MAX, "n" * NAME_MAX]


def test_the_views_of_an_array_with_a_name_max_name_resolve(d):
    """`A@` is one byte longer than A: for a 255-byte A it is 256 bytes and still resolves."""
    arr = np.arange(12, dtype="float64").reshape(3, 4)
    a = make_array(d / ("a" * NAME_MAX), arr.shape, data=arr)
    assert read_json(view(a, "info"))["shape"] == [3, 4]
    assert np.array_equal(np.fromfile(view(a, "slice", 0, 1)), arr[1])
    expect_errno(errno.ENAMETOOLONG, os.stat, d / ("a" * NAME_MAX + "@@"))


# --- X@ --------------------------------------------------------------------------------------------

def creations(d, name):
    """Every way to make a real entry `name` in d: (label, fn, args)."""
    src = d / "source-file"
    if not src.exists():
        src.write_bytes(b"s")
    return [
        ("create", lambda p: open(p, "xb").close(), (d / name,)),
        ("mkdir", os.mkdir, (d / name,)),
        ("symlink", os.symlink, ("somewhere", d / name)),
        ("mkfifo", os.mkfifo, (d / name,)),
        ("mknod-chr", os.mknod, (d / name, stat.S_IFCHR | 0o600, os.makedev(1, 3))),
        ("link", os.link, (src, d / name)),
        ("rename", os.rename, (src, d / name)),
    ]


def test_no_real_x_at_beside_a_plain_file_x(vol, d):
    """X exists (a plain file, which may become an array): no real X@ may appear
    beside it, whichever way it is made."""
    (d / "X").write_bytes(b"plain")
    for label, fn, args in creations(d, "X@"):
        fails(vol, errno.EEXIST, "X@", fn, *args)
    assert sorted(os.listdir(d)) == ["X", "source-file"]
    # The same beside a symlink. (A directory's D@ is its views, which exist.)
    os.symlink("X", d / "S")
    fails(vol, errno.EEXIST, "S@", os.mkdir, d / "S@")
    os.mkdir(d / "D")
    expect_errno(errno.EEXIST, os.mkdir, d / "D@")
    os.mkdir(d / "source-dir")
    fails(vol, errno.EROFS, "D@", os.rename, d / "source-dir", d / "D@")
    os.rmdir(d / "source-dir")
    # And X still becomes an array, views and all.
    (d / "X").write_bytes(b"")
    make_array_of(d / "X")
    assert read_json(view(d / "X", "info"))["shape"] == [2, 2]


def make_array_of(path):
    setx(path, "shape", "2,2")


def test_the_views_of_an_array_exist_and_are_read_only(vol, d):
    """Creating A@ finds the views there (the kernel answers EEXIST after its lookup, and
    EISDIR to a file renamed onto them); a directory renamed onto them reaches the
    daemon: EROFS, logged."""
    a = make_array(d / "A", (2, 3), data=np.ones((2, 3)))
    for label, fn, args in creations(d, "A@"):
        expect_errno(errno.EISDIR if label == "rename" else errno.EEXIST, fn, *args)
    os.mkdir(d / "source-dir")
    fails(vol, errno.EROFS, "A@", os.rename, d / "source-dir", d / "A@")
    assert read_array(a, "float64", (2, 3)).sum() == 6
    assert sorted(os.listdir(d)) == ["A", "source-dir", "source-file"]


def test_a_real_x_at_keeps_x_from_getting_views(vol, d):
    """A real X@ exists: X may be a plain file, but not a directory or an array — by
    mkdir, link, rename, or setting user.mmfs.shape."""
    os.mkdir(d / "X@")
    (d / "X@" / "inside").write_bytes(b"kept")
    fails(vol, errno.EEXIST, "X@", os.mkdir, d / "X")
    (d / "dir").mkdir()
    fails(vol, errno.EEXIST, "X@", os.rename, d / "dir", d / "X")
    arr = make_array(d / "arr", (2, 2), data=np.zeros((2, 2)))
    fails(vol, errno.EEXIST, "X@", os.rename, arr, d / "X")
    fails(vol, errno.EEXIST, "X@", os.link, arr, d / "X")
    # A plain file X is fine; turning it into an array is not.
    (d / "X").write_bytes(b"")
    setx(d / "X", "dtype", "int32")  # attributes ahead of the shape are fine
    with ErrorLog(vol, "user.mmfs.shape", "X@"):
        expect_errno(errno.EEXIST, setx, d / "X", "shape", "4,4")
    expect_errno(errno.ENODATA, getx, d / "X", "shape")
    assert os.stat(d / "X").st_size == 0
    assert (d / "X@" / "inside").read_bytes() == b"kept"
    assert sorted(os.listdir(d)) == ["X", "X@", "arr", "dir"]
    # Once X@ is gone (renamed away here), X becomes an array with views.
    os.rename(d / "X@", d / "elsewhere")
    setx(d / "X", "shape", "4,4")
    assert read_json(view(d / "X", "info"))["dtype"] == "int32"
    assert (d / "elsewhere" / "inside").read_bytes() == b"kept"


def test_shape_refused_when_any_hard_link_has_a_real_x_at(vol, d):
    """Every name of the file counts, not just the one it was reached by."""
    (d / "one").mkdir()
    (d / "two").mkdir()
    (d / "one" / "F").write_bytes(b"")
    (d / "two" / "G@").write_bytes(b"a real file named G@")
    os.link(d / "one" / "F", d / "two" / "G")  # a plain file G beside G@: fine
    os.stat(d / "one" / "F")  # the name the daemon last saw is one/F
    with ErrorLog(vol, "G@"):
        expect_errno(errno.EEXIST, setx, d / "one" / "F", "shape", "3")
    os.unlink(d / "two" / "G@")
    setx(d / "one" / "F", "shape", "3")
    assert read_json(view(d / "two" / "G", "info"))["shape"] == [3]


def test_renames_that_free_the_stem_or_the_x_at_are_allowed(vol, d):
    # X -> X@: X goes away, so nothing is hidden.
    (d / "X").write_bytes(b"x")
    os.rename(d / "X", d / "X@")
    assert (d / "X@").read_bytes() == b"x"
    # A real directory Y@ renamed to Y: Y@ goes away.
    os.mkdir(d / "Y@")
    os.rename(d / "Y@", d / "Y")
    assert os.path.isdir(d / "Y") and sorted(os.listdir(d)) == ["X@", "Y"]
    # An exchange keeps both names: swapping a directory Q with a plain R beside a real
    # R@ would make R a directory whose views hide R@.
    (d / "Q").mkdir()
    (d / "R@").write_bytes(b"r")
    (d / "R").write_bytes(b"plain R")
    fails(vol, errno.EEXIST, "R@", renameat2, d / "Q", d / "R", RENAME_EXCHANGE)
    assert (d / "R").read_bytes() == b"plain R" and os.path.isdir(d / "Q")
    # ... and a plain file may take the place of another plain file beside R@.
    (d / "S").write_bytes(b"S")
    renameat2(d / "S", d / "R", RENAME_EXCHANGE)
    assert (d / "R").read_bytes() == b"S" and (d / "R@").read_bytes() == b"r"


def test_views_cannot_be_removed_or_renamed(vol, d):
    a = make_array(d / "A", (2,), data=np.ones(2))
    os.mkdir(d / "D")
    fails(vol, errno.EROFS, "A@", os.rmdir, view(a))
    fails(vol, errno.EROFS, "A@", os.rename, view(a), d / "B")
    fails(vol, errno.EROFS, "D@", os.rmdir, d / "D@")
    assert sorted(os.listdir(d)) == ["A", "D"]


def test_x_at_looked_up_before_x_has_views_resolves_at_once(d):
    """The kernel caches no negative entry for an `X@` name: the views appear the moment
    X becomes an array or a directory (the issue's `cat X@/info` gave ENOENT)."""
    (d / "A").write_bytes(b"")
    for _ in range(3):
        expect_errno(errno.ENOENT, os.stat, d / "A@")
    setx(d / "A", "shape", "5")
    assert read_json(view(d / "A", "info"))["shape"] == [5]
    expect_errno(errno.ENOENT, os.stat, d / "D@")
    os.mkdir(d / "D")
    assert stat.S_ISDIR(os.stat(d / "D@").st_mode)
