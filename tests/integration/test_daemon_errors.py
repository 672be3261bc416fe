"""Bad input (docs/reference.md §1, §4, §5): the right errno, a line in `.mmfs/errors` naming
the file, and nothing changed."""
import errno
import itertools
import os

import numpy as np
import pytest

from mmfs_mount import (ErrorLog, expect_errno, getx, make_array, new_lines, parse_ints, random_array, read_array,
                        read_bytes, read_json, setx, view)


@pytest.fixture(scope="module")
def vol(module_volume):
    (module_volume.mnt / "err").mkdir()
    return module_volume


_serial = itertools.count()


@pytest.fixture
def names():
    """Unique file names (across the module), so each error line can be told from the others."""
    return lambda prefix: f"{prefix}-{next(_serial)}"


def fails(vol, err, name, fn, *args, problems=None):
    """fn(*args) must fail with errno `err` (or one of a tuple) and log a line naming `name`.
    With a `problems` list, a missing log line is appended to it instead of raised (so a
    loop still checks the errno of every case)."""
    log = ErrorLog(vol, name)
    log.__enter__()
    expect_errno(err, fn, *args)
    try:
        log.__exit__(None, None, None)
    except AssertionError as e:
        if problems is None:
            raise
        problems.append(f"{getattr(fn, '__name__', fn)}{args}: {e}")


def empty_file(vol, name):
    p = vol.mnt / "err" / name
    p.touch()
    return p


def assert_still_plain(p):
    assert os.stat(p).st_size == 0
    expect_errno(errno.ENODATA, getx, p, "shape")


@pytest.fixture(scope="module")
def target(vol):
    """An array with data that the failing calls must leave alone."""
    arr = random_array(np.random.default_rng(51), (8, 600, 8), "float64")
    path = make_array(vol.mnt / "err" / "target", arr.shape, arr.dtype, "multimap", arr,
                      attrs={"cell": "4,4,4"})
    return path, arr


def assert_unchanged(target):
    path, arr = target
    assert os.stat(path).st_size == arr.nbytes
    np.testing.assert_array_equal(read_array(path, arr.dtype, arr.shape), arr)
    info = read_json(view(path, "info"))
    assert list(info["shape"]) == list(arr.shape) and info["dtype"] == "float64"
    assert info["layout"] == "multimap" and parse_ints(info["order"]) == [2, 1, 0]
    assert parse_ints(info["cell"]) == [4, 4, 4]


# --- schema xattrs --------------------------------------------------------------------

@pytest.mark.parametrize("shape", ["", "0", "3,,4", "-1", "a", "4,0,2", "3,4,", "1.5", "3x4", ",".join(["2"] * 17)],
                         ids=["empty", "zero", "empty-item", "negative", "letter", "zero-dim", "trailing-comma",
                              "fraction", "x", "17-dims"])
def test_malformed_shapes(vol, names, shape):
    p = empty_file(vol, names("shape"))
    fails(vol, errno.EINVAL, p.name, setx, p, "shape", shape)
    assert_still_plain(p)


def test_sixteen_dims_are_accepted(vol, names):
    p = empty_file(vol, names("dims16"))
    setx(p, "dtype", "uint8")
    setx(p, "shape", ",".join(["1"] * 14 + ["2", "3"]))
    assert os.stat(p).st_size == 6


@pytest.mark.parametrize("dtype", ["float16", ">f8", "complex128", "bool", "float128", ""])
def test_unknown_dtypes(vol, names, dtype):
    p = empty_file(vol, names("dtype"))
    fails(vol, errno.EINVAL, p.name, setx, p, "dtype", dtype)
    setx(p, "shape", "4")
    assert os.stat(p).st_size == 32, "the default dtype float64 is still in effect"


@pytest.mark.parametrize("alias,name", [("f8", "float64"), ("<f8", "float64"), ("i1", "int8"), ("u2", "uint16"),
                                        ("<i4", "int32"), ("u8", "uint64"), ("f4", "float32")])
def test_dtype_aliases_are_accepted(vol, names, alias, name):
    p = empty_file(vol, names("alias"))
    setx(p, "dtype", alias)
    setx(p, "shape", "3")
    assert os.stat(p).st_size == 3 * np.dtype(name).itemsize
    assert np.dtype(getx(p, "dtype")) == np.dtype(name)


def test_shape_overflow_is_efbig(vol, names):
    p = empty_file(vol, names("overflow"))
    fails(vol, errno.EFBIG, p.name, setx, p, "shape", "4294967296,4294967296,16")
    fails(vol, errno.EFBIG, p.name, setx, p, "shape", "18446744073709551615")
    fails(vol, (errno.EFBIG, errno.EINVAL), p.name, setx, p, "shape", "18446744073709551616")
    assert_still_plain(p)


def test_shape_bigger_than_the_volume(vol, names):
    p = empty_file(vol, names("oversize"))
    before = os.statvfs(vol.mnt)
    fails(vol, (errno.ENOSPC, errno.EFBIG), p.name, setx, p, "shape", "1024,1024,1024")  # 8 GiB of float64
    assert_still_plain(p)
    # Just more than the free space.
    free = before.f_bfree * before.f_frsize
    q = empty_file(vol, names("justover"))
    setx(q, "dtype", "uint8")
    fails(vol, (errno.ENOSPC, errno.EFBIG), q.name, setx, q, "shape", str(free + (1 << 20)))
    assert_still_plain(q)
    after = os.statvfs(vol.mnt)
    assert abs(after.f_bfree - before.f_bfree) * before.f_frsize <= 1 << 20, "a refused array must not keep space"


def test_unknown_mmfs_attribute(vol, names):
    p = empty_file(vol, names("unknown"))
    fails(vol, errno.EINVAL, p.name, setx, p, "user.mmfs.colour", "blue")
    fails(vol, errno.EINVAL, p.name, setx, p, "user.mmfs.", "x")
    assert "user.mmfs.colour" not in os.listxattr(p)


@pytest.mark.parametrize("name,value", [("layout", "spiral"), ("layout", ""), ("priority", "V-M"),
                                        ("priority", "V-V-S"), ("compress", "gzip"), ("compress", "zstd:x"),
                                        ("index", "btree"), ("bins", "many"), ("bins", "precision:"),
                                        ("bins", "edges:3,1,2"), ("order", "a,b"), ("cell", "0,1,1")])
def test_malformed_schema_values(vol, names, name, value):
    p = empty_file(vol, names(f"bad-{name}"))
    fails(vol, errno.EINVAL, p.name, setx, p, name, value)


def test_order_must_be_a_permutation(vol, target):
    path, _ = target
    problems = []
    for order in ["0,0,1", "0,1", "0,1,2,3", "1,2,3", "2,1,-1", "0;1;2"]:
        fails(vol, errno.EINVAL, path.name, setx, path, "order", order, problems=problems)
    assert_unchanged(target)
    assert not problems, "\n".join(problems)


def test_cell_rank_mismatch(vol, target):
    path, _ = target
    problems = []
    for cell in ["4,4", "4,4,4,4", "4,0,4"]:
        fails(vol, errno.EINVAL, path.name, setx, path, "cell", cell, problems=problems)
    assert_unchanged(target)
    assert not problems, "\n".join(problems)


def test_basic_cube_must_satisfy_the_papers_constraints(vol, target, names):
    path, _ = target  # cells (2, 150, 2); primary dim 2, middle dim 1; D = 128
    problems = []
    for cube in ["2,150,2",   # Eq. 3: the middle dimension has 150 > D cells
                 "2,10,3",    # more cells than the array has along dim 2
                 "0,10,2",    # zero
                 "2,10",      # rank
                 "x,1,1"]:
        fails(vol, errno.EINVAL, path.name, setx, path, "basic_cube", cube, problems=problems)
    assert_unchanged(target)
    # Eq. 1: K_0 cells must fit a track (T = 686 sectors on atlas10k3).
    arr = random_array(np.random.default_rng(52), (4, 4, 2800), "float64")
    long = make_array(vol.mnt / "err" / names("long"), arr.shape, arr.dtype, "multimap", arr,
                      attrs={"cell": "4,4,4"})
    fails(vol, errno.EINVAL, long.name, setx, long, "basic_cube", "1,1,700", problems=problems)
    np.testing.assert_array_equal(read_array(long, arr.dtype, arr.shape), arr)
    # A valid one is accepted (and re-lays the data out).
    setx(long, "basic_cube", "1,1,350")
    assert parse_ints(read_json(view(long, "info"))["basic_cube"]) == [1, 1, 350]
    np.testing.assert_array_equal(read_array(long, arr.dtype, arr.shape), arr)
    assert not problems, "\n".join(problems)


def test_writes_past_the_end(vol, target):
    path, arr = target
    problems = []
    fd = os.open(path, os.O_WRONLY)
    try:
        fails(vol, errno.EFBIG, path.name, os.pwrite, fd, b"\xff" * 8, arr.nbytes, problems=problems)
        expect_errno(errno.EFBIG, os.pwrite, fd, b"\xff" * 8, arr.nbytes * 3)
    finally:
        os.close(fd)
    assert_unchanged(target)
    assert not problems, "\n".join(problems)


# --- views -----------------------------------------------------------------------------

@pytest.mark.parametrize("parts,err", [
    (("slice", 9, 0), errno.ERANGE),
    (("slice", 3, 0), errno.ERANGE),
    (("slice", 0, 999999), errno.ERANGE),
    (("slice", 1, 600), errno.ERANGE),
    (("box", "8,0,0"), errno.ERANGE),
    (("box", ":,600,:"), errno.ERANGE),
    (("plod", 0), errno.ERANGE),
    (("plod", 9), errno.ERANGE),
    (("plod", 99), errno.ERANGE),
    (("lbn", "8,0,0"), errno.ERANGE),
    (("lbn", "0,0,999"), errno.ERANGE),
    (("box", "1:2:0,:,:"), errno.EINVAL),
    (("box", "a"), errno.EINVAL),
    (("box", "1:2:3:4,:,:"), errno.EINVAL),
    (("box", "-1,:,:"), (errno.EINVAL, errno.ERANGE)),
    (("slice", "x", 0), errno.EINVAL),
    (("slice", 0, "1e3"), errno.EINVAL),
    (("lbn", "1,x"), errno.EINVAL),
    (("lbn", "1,,2"), errno.EINVAL),
    (("plod", "two"), errno.EINVAL),
    (("plan", "slice", 9, 0), errno.ERANGE),
    (("plan", "box", "a"), errno.EINVAL),
], ids=lambda v: "-".join(map(str, v)) if isinstance(v, tuple) else errno.errorcode.get(v, str(v)))
def test_bad_view_paths(vol, target, parts, err):
    path, _ = target
    with ErrorLog(vol, path.name):
        expect_errno(err, read_bytes, view(path, *parts))
    assert_unchanged(target)


def test_query_is_not_supported_yet_or_correct(vol, target):
    path, arr = target
    before = vol.errors()
    try:
        text = read_bytes(view(path, "query", ">0", "count")).decode()
    except OSError as e:
        error = e
    else:  # once queries exist, the answer must be right
        assert text == f"{int((arr > 0).sum())}\n"
        return
    assert error.errno == errno.ENOTSUP, f"A@/query: {error}"
    added = new_lines(before, vol.errors())
    assert any(path.name in line for line in added), f"no new line of .mmfs/errors mentions {path.name}: {added}"


def test_nothing_under_a_view_can_be_changed(vol, target):
    path, _ = target
    at = view(path)
    cases = [
        (os.open, view(path, "info"), os.O_RDWR),
        (os.open, view(path, "slice", 0, 0), os.O_WRONLY),
        (os.open, view(path, "new-file"), os.O_CREAT | os.O_WRONLY, 0o644),
        (os.mkdir, view(path, "dir")),
        (os.truncate, view(path, "slice", 0, 0), 0),
        (os.unlink, view(path, "info")),
        (os.rmdir, view(path, "slice")),
        (os.rename, view(path, "info"), view(path, "info2")),
        (os.symlink, "x", view(path, "link")),
        (os.chmod, view(path, "info"), 0o777),
        (os.setxattr, view(path, "info"), "user.x", b"1"),
        (os.setxattr, at, "user.mmfs.layout", b"naive"),
        (os.removexattr, view(path, "slice", 0, 0), "user.x"),
        (os.utime, view(path, "info"), None),
    ]
    problems = []
    for fn, *args in cases:
        fails(vol, errno.EROFS, path.name, fn, *args, problems=problems)
    assert_unchanged(target)
    assert not os.path.exists(view(path, "new-file"))
    assert not problems, "\n".join(problems)


def test_many_errors_most_recent_last_and_the_daemon_survives(vol, target):
    path, _ = target
    for i in range(2000):
        try:
            read_bytes(view(path, "slice", 0, 100000 + i))
        except OSError as e:
            assert e.errno == errno.ERANGE
        else:
            raise AssertionError("slice out of range was accepted")
    text = vol.errors()
    assert str(100000 + 1999) in text.splitlines()[-1], "most recent last"
    assert_unchanged(target)


def test_unimplemented_layout_on_an_array_names_the_attribute_once(vol, target):
    path, _ = target
    before = vol.errors()
    expect_errno(errno.ENOTSUP, os.setxattr, path, "user.mmfs.layout", b"capsule")
    [line] = [line for line in new_lines(before, vol.errors()) if path.name in line]
    assert "'capsule'" in line and line.count("user.mmfs.layout") == 1, line
    assert_unchanged(target)
