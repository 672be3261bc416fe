"""Array files through the schema xattrs (docs/reference.md §4): sizes, defaults, reads and
writes at any offset for every layout and dtype, truncate, conversion of a
plain file, frozen shape/dtype, relayout, persistence."""
import errno
import hashlib
import mmap
import os
import subprocess

import numpy as np
import pytest

from mmfs_mount import (DTYPES, LAYOUTS, SCHEMA, assert_array_bytes, expect_errno, getx, make_array, parse_ints,
                        pread_all, pwrite_all, random_array, random_pieces, read_array, read_bytes, read_json, setx,
                        shape_str, view, write_array, write_pieces)

MiB = 1 << 20


@pytest.fixture(scope="module")
def vol(module_volume):
    return module_volume


@pytest.fixture
def d(vol, request):
    path = vol.mnt / request.node.name.replace("[", "_").replace("]", "").replace("/", "_").replace(",", "_")
    path.mkdir()
    return path


def roundtrip(path, arr, layout, seed, max_piece=None):
    """Creates an array, writes it in random pieces (half, check zeros, the rest),
    reads it back with numpy and with preads at random places."""
    rng = np.random.default_rng(seed)
    make_array(path, arr.shape, arr.dtype, layout)
    nbytes = arr.nbytes
    assert os.stat(path).st_size == nbytes
    assert read_bytes(path) == bytes(nbytes), "a new array reads as zeros"
    data = arr.tobytes()
    pieces = random_pieces(rng, nbytes, max_piece or max(1, min(4096, nbytes // 4 + 3)))
    half = pieces[: len(pieces) // 2]
    write_pieces(path, data, half)
    expected = bytearray(nbytes)
    for off, n in half:
        expected[off:off + n] = data[off:off + n]
    assert read_bytes(path) == bytes(expected), "written bytes, and zeros where nothing was written"
    write_pieces(path, data, pieces[len(pieces) // 2:])
    assert_array_bytes(read_bytes(path), arr, f"{path.name} read back")
    np.testing.assert_array_equal(read_array(path, arr.dtype, arr.shape), arr)
    fd = os.open(path, os.O_RDONLY)
    try:
        for _ in range(10):
            off = int(rng.integers(0, nbytes))
            n = int(rng.integers(1, nbytes - off + 1))
            assert pread_all(fd, n, off) == data[off:off + n], f"pread({n}, {off})"
        assert pread_all(fd, 16, nbytes) == b""
    finally:
        os.close(fd)


# --- sizes and defaults ---------------------------------------------------------------

def test_shape_sets_the_size(d):
    p = d / "a"
    p.touch()
    setx(p, "dtype", "int16")
    setx(p, "layout", "naive")
    assert os.stat(p).st_size == 0
    setx(p, "shape", "3,5,7")
    assert os.stat(p).st_size == 3 * 5 * 7 * 2
    q = d / "b"
    q.touch()
    setx(q, "shape", "10,20")
    assert os.stat(q).st_size == 10 * 20 * 8  # float64 by default
    r = d / "c"
    r.touch()
    setx(r, "dtype", "<f4")  # numpy spelling
    setx(r, "shape", "9")
    assert os.stat(r).st_size == 36
    assert np.dtype(getx(r, "dtype")) == np.float32


def schema_values(path):
    names = [n for n in os.listxattr(path) if n.startswith("user.mmfs.")]
    return {n[len("user.mmfs."):]: os.getxattr(path, n).decode() for n in names}


def test_defaults_are_shown_for_every_schema_attribute(d):
    p = d / "floats"
    p.touch()
    setx(p, "shape", "5,7,3")
    values = schema_values(p)
    assert set(SCHEMA) <= set(values), f"missing: {set(SCHEMA) - set(values)}"
    assert values["shape"] == "5,7,3"
    assert values["dtype"] == "float64"
    # No layout set: the volume's model chose one (test_default_layout.py), and info says which.
    assert values["layout"] == read_json(view(p, "info"))["layout_choice"]["layout"]
    assert parse_ints(values["order"]) == [2, 1, 0]
    assert values["priority"] == "V-M-S"
    assert values["compress"] == "none"
    assert values["index"] == "none"
    assert values["bins"] == "100"
    cell = parse_ints(values["cell"])
    assert len(cell) == 3 and all(c >= 1 for c in cell)
    if values["layout"] == "multimap":
        cube = parse_ints(values["basic_cube"])
        assert len(cube) == 3 and all(k >= 1 for k in cube)
    else:
        assert values["basic_cube"] == "none"

    q = d / "ints"
    q.touch()
    setx(q, "dtype", "int16")
    setx(q, "layout", "naive")
    setx(q, "shape", "37")
    values = schema_values(q)
    assert set(SCHEMA) <= set(values)
    assert values["dtype"] == "int16" and values["layout"] == "naive" and values["bins"] == "exact"
    assert parse_ints(values["order"]) == [0]

    r = d / "four"
    r.touch()
    setx(r, "dtype", "uint32")
    setx(r, "shape", "2,3,4,5")
    assert parse_ints(getx(r, "order")) == [3, 2, 1, 0]
    assert getx(r, "bins") == "exact"

    # getfattr shows the same.
    proc = subprocess.run(["getfattr", "-d", "-m", "user.mmfs", "--absolute-names", str(p)], capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    for name in SCHEMA:
        assert f"user.mmfs.{name}=" in proc.stdout, proc.stdout


def test_attributes_set_before_the_shape_take_effect(d):
    p = d / "a"
    p.touch()
    setx(p, "order", "0,1,2")
    setx(p, "cell", "2,4,8")
    setx(p, "layout", "zorder")
    setx(p, "dtype", "float32")
    setx(p, "shape", "8,16,32")
    assert parse_ints(getx(p, "order")) == [0, 1, 2]
    assert parse_ints(getx(p, "cell")) == [2, 4, 8]
    assert getx(p, "layout") == "zorder"
    info = read_json(view(p, "info"))
    assert info["layout"] == "zorder" and parse_ints(info["order"]) == [0, 1, 2]
    assert parse_ints(info["cell"]) == [2, 4, 8] and info["dtype"] == "float32"


def test_other_user_xattrs_on_an_array_are_ordinary(d):
    p = make_array(d / "a", (4, 4), "int8")
    setx(p, "user.note", b"temperature")
    assert os.getxattr(p, "user.note") == b"temperature"
    assert "user.note" in os.listxattr(p)
    os.removexattr(p, "user.note")
    expect_errno(errno.ENODATA, os.getxattr, p, "user.note")
    assert os.stat(p).st_size == 16


# --- every layout x every dtype ---------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_write_read_every_layout_and_dtype(d, layout, dtype):
    seed = LAYOUTS.index(layout) * 100 + DTYPES.index(dtype)
    arr = random_array(np.random.default_rng(seed), (5, 7, 3), dtype)
    roundtrip(d / "a", arr, layout, seed, max_piece=3 * arr.dtype.itemsize + 5)


SHAPES = [(1,), (37,), (1, 1, 1), (3, 1, 17), (6, 5, 4, 3), (2, 3, 1, 4, 5), (300, 7), (33, 65, 9)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_write_read_shapes(d, layout, shape):
    dtype = DTYPES[(len(shape) * 3 + sum(shape)) % len(DTYPES)]
    seed = 1000 + LAYOUTS.index(layout) * 100 + SHAPES.index(shape)
    arr = random_array(np.random.default_rng(seed), shape, dtype)
    roundtrip(d / "a", arr, layout, seed)


def test_sixteen_dimensions(d):
    shape = (1,) * 13 + (2, 3, 2)
    arr = random_array(np.random.default_rng(7), shape, "int32")
    roundtrip(d / "a", arr, "multimap", 7)
    assert len(parse_ints(getx(d / "a", "order"))) == 16


def test_one_gib_float64_array(volume_factory):
    vol = volume_factory(size="2G")
    p = vol.mnt / "big"
    shape = (1024, 1024, 128)
    make_array(p, shape, "float64", "multimap")
    total = int(np.prod(shape))
    assert os.stat(p).st_size == total * 8 == 1 << 30
    chunk = (64 * MiB) // 8
    digest = hashlib.sha256()
    fd = os.open(p, os.O_WRONLY)
    try:
        for start in range(0, total, chunk):
            data = np.arange(start, start + chunk, dtype=np.float64).tobytes()
            digest.update(data)
            pwrite_all(fd, data, start * 8)
        os.fsync(fd)
    finally:
        os.close(fd)
    assert os.stat(p).st_size == 1 << 30

    def expect(sel):
        grid = np.indices(shape, sparse=True)
        lin = grid[0] * (1024 * 128) + grid[1] * 128 + grid[2]
        return lin[sel].astype(np.float64)

    for dim, idx in [(0, 0), (0, 777), (1, 1023), (1, 5), (2, 64)]:
        sel = [slice(None)] * 3
        sel[dim] = idx
        assert_array_bytes(read_bytes(view(p, "slice", dim, idx)), expect(tuple(sel)), f"slice/{dim}/{idx}")
    assert_array_bytes(read_bytes(view(p, "box", "100:300:7,5,64:128")), expect((slice(100, 300, 7), 5,
                                                                                 slice(64, 128))), "box")
    readback = hashlib.sha256()
    with open(p, "rb", buffering=0) as f:
        while True:
            block = f.read(16 * MiB)
            if not block:
                break
            readback.update(block)
    assert readback.hexdigest() == digest.hexdigest(), "the 1 GiB array read back differs from what was written"
    # The same through O_DIRECT (no page cache: every byte comes from the
    # daemon's chunks, gathered with streamed stores, into the reader's buffer).
    assert o_direct_digest(p, 8 * MiB) == digest.hexdigest(), "the O_DIRECT read differs from what was written"


def o_direct_digest(path, block):
    """SHA-256 of the file read with O_DIRECT in `block`-byte reads into one page-aligned buffer."""
    buf = mmap.mmap(-1, block)
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        while True:
            n = os.readv(fd, [buf])
            if not n:
                break
            digest.update(buf[:n])
    finally:
        os.close(fd)
    return digest.hexdigest()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_o_direct_reads_see_every_write(d, layout):
    # 6 MiB of float64 in cells of 8x8x8 (64-byte rows): more than the size at
    # which results are gathered with streamed stores.
    rng = np.random.default_rng(11)
    arr = random_array(rng, (24, 256, 128), "float64")
    p = d / "a"
    make_array(p, arr.shape, arr.dtype, layout)
    write_array(p, arr)
    data = arr.tobytes()
    assert o_direct_digest(p, 1 * MiB) == hashlib.sha256(data).hexdigest()
    # A write through another descriptor is seen by the next O_DIRECT read.
    patch = rng.bytes(3 * 4096 + 5)
    off = 2 * MiB + 4093
    fd = os.open(p, os.O_WRONLY)
    try:
        pwrite_all(fd, patch, off)
    finally:
        os.close(fd)
    expected = data[:off] + patch + data[off + len(patch):]
    assert o_direct_digest(p, 4 * MiB) == hashlib.sha256(expected).hexdigest()


# --- truncate, writes past the end, plain files becoming arrays ------------------------------

def test_truncate_to_zero_zeroes_the_array(d):
    arr = random_array(np.random.default_rng(11), (6, 10, 10), "int32")
    p = make_array(d / "a", arr.shape, arr.dtype, "hilbert", arr)
    os.truncate(p, arr.nbytes)  # the current size: nothing happens
    np.testing.assert_array_equal(read_array(p, arr.dtype, arr.shape), arr)
    expect_errno(errno.EINVAL, os.truncate, p, arr.nbytes - 4)
    expect_errno(errno.EINVAL, os.truncate, p, arr.nbytes + 4)
    expect_errno(errno.EINVAL, os.truncate, p, 1)
    np.testing.assert_array_equal(read_array(p, arr.dtype, arr.shape), arr)
    os.truncate(p, 0)
    assert os.stat(p).st_size == arr.nbytes
    assert read_bytes(p) == bytes(arr.nbytes)
    assert read_bytes(view(p, "slice", 2, 3)) == bytes(6 * 10 * 4)
    assert getx(p, "shape") == "6,10,10"


def test_cat_into_an_array_replaces_its_contents(d, tmp_path):
    arr = random_array(np.random.default_rng(12), (20, 30), "float64")
    p = make_array(d / "a", arr.shape, arr.dtype, "multimap", np.ones(arr.shape))
    raw = tmp_path / "data.raw"
    arr.tofile(raw)
    proc = subprocess.run(["sh", "-c", f"cat '{raw}' > '{p}'"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert os.stat(p).st_size == arr.nbytes
    np.testing.assert_array_equal(np.fromfile(p), arr.reshape(-1))
    arr2 = arr * 2
    arr2.tofile(p)  # numpy writes through open("wb")
    np.testing.assert_array_equal(np.fromfile(p).reshape(arr.shape), arr2)


def test_write_past_the_end_is_efbig(d):
    arr = random_array(np.random.default_rng(13), (7, 9), "uint16")
    p = make_array(d / "a", arr.shape, arr.dtype, "zorder", arr)
    fd = os.open(p, os.O_WRONLY)
    try:
        expect_errno(errno.EFBIG, os.pwrite, fd, b"\1\2", arr.nbytes)
        expect_errno(errno.EFBIG, os.pwrite, fd, b"\1" * 100, arr.nbytes + 4096)
    finally:
        os.close(fd)
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)  # at the end
    try:
        expect_errno(errno.EFBIG, os.write, fd, b"\1\2")
    finally:
        os.close(fd)
    assert os.stat(p).st_size == arr.nbytes
    np.testing.assert_array_equal(read_array(p, arr.dtype, arr.shape), arr)


def test_a_plain_file_of_the_right_size_becomes_the_array(d):
    arr = random_array(np.random.default_rng(14), (12, 5, 8), "int32")
    p = d / "plain"
    p.write_bytes(arr.tobytes())
    setx(p, "dtype", "int32")
    setx(p, "layout", "hilbert")
    setx(p, "shape", "12,5,8")
    assert os.stat(p).st_size == arr.nbytes
    np.testing.assert_array_equal(read_array(p, arr.dtype, arr.shape), arr)
    assert read_json(view(p, "info"))["layout"] == "hilbert"
    assert_array_bytes(read_bytes(view(p, "slice", 1, 3)), arr[:, 3, :], "slice/1/3")

    q = d / "wrong"
    data = arr.tobytes() + b"!"
    q.write_bytes(data)
    setx(q, "dtype", "int32")
    expect_errno(errno.EINVAL, setx, q, "shape", "12,5,8")
    assert os.stat(q).st_size == len(data) and q.read_bytes() == data
    expect_errno(errno.ENODATA, getx, q, "shape")
    expect_errno(errno.EINVAL, setx, q, "shape", "100,100")
    assert q.read_bytes() == data


def test_shape_and_dtype_are_frozen_once_the_array_holds_data(d):
    arr = random_array(np.random.default_rng(15), (8, 8), "float32")
    p = make_array(d / "a", arr.shape, arr.dtype, "naive", arr)
    expect_errno(errno.EBUSY, setx, p, "shape", "4,16")
    expect_errno(errno.EBUSY, setx, p, "shape", "9,9")
    expect_errno(errno.EBUSY, setx, p, "dtype", "int32")
    expect_errno(errno.EBUSY, setx, p, "dtype", "float64")
    assert getx(p, "shape") == "8,8" and getx(p, "dtype") == "float32"
    assert os.stat(p).st_size == arr.nbytes
    np.testing.assert_array_equal(read_array(p, arr.dtype, arr.shape), arr)


def test_shape_and_dtype_can_change_until_the_array_holds_data(d):
    p = d / "a"
    p.touch()
    setx(p, "shape", "3")
    assert os.stat(p).st_size == 24
    setx(p, "dtype", "int8")
    assert getx(p, "dtype") == "int8"
    assert os.stat(p).st_size == 3, "st_size follows the dtype"
    setx(p, "shape", "4,5")
    assert getx(p, "shape") == "4,5" and os.stat(p).st_size == 20
    arr = random_array(np.random.default_rng(18), (4, 5), "int8")
    write_array(p, arr)
    expect_errno(errno.EBUSY, setx, p, "dtype", "uint8")
    np.testing.assert_array_equal(read_array(p, arr.dtype, arr.shape), arr)


# --- relayout ---------------------------------------------------------------------------------

def check_views(p, arr, what):
    assert_array_bytes(read_bytes(p), arr, f"{what}: contents")
    for dim in range(arr.ndim):
        idx = arr.shape[dim] // 2
        assert_array_bytes(read_bytes(view(p, "slice", dim, idx)), np.take(arr, idx, axis=dim),
                           f"{what}: slice/{dim}/{idx}")
    assert_array_bytes(read_bytes(view(p, "box", "3:17:3,:,5")), arr[3:17:3, :, 5], f"{what}: box")


def test_relayout_keeps_the_contents(vol, d):
    arr = random_array(np.random.default_rng(16), (20, 30, 40), "float32")
    p = make_array(d / "a", arr.shape, arr.dtype, "naive", arr)
    check_views(p, arr, "naive")
    for layout in ["hilbert", "multimap", "zorder"]:
        setx(p, "layout", layout)
        assert getx(p, "layout") == layout
        assert read_json(view(p, "info"))["layout"] == layout
        check_views(p, arr, layout)
    setx(p, "order", "0,2,1")
    assert parse_ints(getx(p, "order")) == [0, 2, 1]
    assert parse_ints(read_json(view(p, "info"))["order"]) == [0, 2, 1]
    check_views(p, arr, "zorder, order 0,2,1")
    setx(p, "cell", "2,4,8")
    assert parse_ints(read_json(view(p, "info"))["cell"]) == [2, 4, 8]
    check_views(p, arr, "zorder, cell 2,4,8")
    setx(p, "layout", "multimap")
    setx(p, "order", "1,2,0")
    setx(p, "cell", "1,4,32")
    info = read_json(view(p, "info"))
    assert info["layout"] == "multimap" and parse_ints(info["order"]) == [1, 2, 0]
    assert parse_ints(info["cell"]) == [1, 4, 32]
    check_views(p, arr, "multimap, order 1,2,0, cell 1,4,32")
    # Writes after a relayout go to the new placement.
    arr[4, 5:9, :] = 42.5
    fd = os.open(p, os.O_WRONLY)
    try:
        off = (4 * 30 * 40 + 5 * 40) * 4
        pwrite_all(fd, arr[4, 5:9, :].tobytes(), off)
        os.fsync(fd)
    finally:
        os.close(fd)
    check_views(p, arr, "after a write")
    vol.remount()
    check_views(p, arr, "after a remount")
    assert read_json(view(p, "info"))["layout"] == "multimap"


# --- persistence -----------------------------------------------------------------------------

def test_arrays_survive_a_remount_for_every_layout(vol, d):
    arrays = {}
    for i, layout in enumerate(LAYOUTS):
        for j, (dtype, shape) in enumerate([("float64", (17, 9, 11)), ("int8", (5, 300)), ("uint64", (3, 4, 5, 6))]):
            arr = random_array(np.random.default_rng(200 + i * 10 + j), shape, dtype)
            p = make_array(d / f"{layout}-{dtype}", shape, dtype, layout, arr, fsync=(j != 1))
            arrays[p] = arr
    vol.remount()
    for p, arr in arrays.items():
        assert os.stat(p).st_size == arr.nbytes
        assert getx(p, "shape") == shape_str(arr.shape)
        assert np.dtype(getx(p, "dtype")) == arr.dtype
        assert_array_bytes(read_bytes(p), arr, p.name)
        assert_array_bytes(read_bytes(view(p, "slice", 0, 1)), arr[1], f"{p.name}@/slice/0/1")


def test_fsync_on_an_array(d):
    arr = random_array(np.random.default_rng(17), (64, 64), "int64")
    p = make_array(d / "a", arr.shape, arr.dtype, "multimap")
    fd = os.open(p, os.O_RDWR)
    try:
        pwrite_all(fd, arr.tobytes(), 0)
        os.fsync(fd)
        os.fdatasync(fd)
        assert pread_all(fd, arr.nbytes, 0) == arr.tobytes()
    finally:
        os.close(fd)
    write_array(p, arr[::-1], fsync=True)
    np.testing.assert_array_equal(read_array(p, arr.dtype, arr.shape), arr[::-1])


@pytest.mark.parametrize("how", ["unlink", "rename-over", "unlink-while-open"])
def test_removing_an_array_with_unwritten_cells_frees_it_cleanly(volume, how):
    """The last close leaves dirty cells to an asynchronous write-back; removing
    the array right after must neither write into the freed extents nor leave
    checksums of a missing inode behind (the fixture runs mmfsck -n at the end)."""
    data = np.arange(64 * 64, dtype="float32").reshape(64, 64)
    for k in range(8):
        p = make_array(volume.mnt / f"a{k}", data.shape, data.dtype, "multimap")
        fd = os.open(p, os.O_WRONLY)
        try:
            pwrite_all(fd, data.tobytes(), 0)
            if how == "unlink-while-open":
                os.unlink(p)
                pwrite_all(fd, data[::-1].tobytes(), 0)
        finally:
            os.close(fd)
        if how == "unlink":
            os.unlink(p)
        elif how == "rename-over":
            q = make_array(volume.mnt / f"b{k}", data.shape, data.dtype, "naive", data=data[::-1])
            os.rename(q, p)
            np.testing.assert_array_equal(read_array(p, data.dtype, data.shape), data[::-1])
            os.unlink(p)
    assert os.listdir(volume.mnt) == []
