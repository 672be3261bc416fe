"""The Zarr v3 view of an array, A@/zarr/ (docs/reference.md §5): stock
readers with no plugin (zarr-python 3, xarray's open_zarr, TensorStore's zarr3
driver on a file:// kvstore) read every chunk equal to numpy, in the natural
chunk shape and in chunk shapes the reader picks (including ones that do not
divide the shape); listings and sizes are exact; writes are refused; and bad
chunk shapes or indices give the errno docs/reference.md names."""
import errno
import json
import os

import numpy as np
import pytest

from mmfs_mount import make_array

zarr = pytest.importorskip("zarr")

DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"]


def random_data(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


@pytest.fixture(scope="module")
def arrays(module_volume):
    root = module_volume.mnt / "z"
    root.mkdir()
    rng = np.random.default_rng(17)
    out = {}
    for i, dtype in enumerate(DTYPES):
        shape = [(9, 10, 11), (37,), (21, 13)][i % 3]
        layout = ["naive", "hilbert", "multimap", "zorder"][i % 4]
        data = random_data(rng, shape, dtype)
        path = make_array(root / f"a_{dtype}", shape, dtype, layout, data)
        out[dtype] = (path, data)
    return out


def natural_chunk(path):
    return tuple(int(x) for x in os.getxattr(path, "user.mmfs.cell").decode().split(","))


@pytest.mark.parametrize("dtype", DTYPES)
def test_zarr_python_reads_every_chunk_shape(arrays, dtype):
    path, data = arrays[dtype]
    store = f"{path}@/zarr"
    z = zarr.open_array(store, mode="r")
    assert z.shape == data.shape and z.dtype == data.dtype
    assert z.chunks == natural_chunk(path)
    np.testing.assert_array_equal(z[...], data)
    # Chunk shapes the reader picks: ones that divide the shape, ones that do
    # not (edge chunks padded), one chunk larger than the array, all of ones.
    for chunk in [tuple(max(1, s // 2) for s in data.shape), tuple(max(1, s // 3 + 1) for s in data.shape),
                  tuple(s + 5 for s in data.shape), tuple(1 for _ in data.shape)]:
        spelled = ",".join(map(str, chunk))
        z = zarr.open_array(f"{store}/{spelled}", mode="r")
        assert z.chunks == chunk
        np.testing.assert_array_equal(z[...], data, err_msg=f"chunks {chunk}")


def test_metadata_and_chunk_files(arrays):
    path, data = arrays["float64"]  # (9, 10, 11)
    meta = json.loads((path.parent / f"{path.name}@" / "zarr" / "4,4,4" / "zarr.json").read_text())
    assert meta["zarr_format"] == 3 and meta["node_type"] == "array"
    assert meta["shape"] == [9, 10, 11] and meta["data_type"] == "float64"
    assert meta["chunk_grid"] == {"name": "regular", "configuration": {"chunk_shape": [4, 4, 4]}}
    assert meta["chunk_key_encoding"] == {"name": "default", "configuration": {"separator": "/"}}
    assert meta["codecs"] == [{"name": "bytes", "configuration": {"endian": "little"}}]
    assert meta["fill_value"] == 0.0
    assert meta["dimension_names"] == ["dim_0", "dim_1", "dim_2"]
    c = path.parent / f"{path.name}@" / "zarr" / "4,4,4" / "c"
    assert sorted(os.listdir(c), key=int) == ["0", "1", "2"]
    assert sorted(os.listdir(c / "2"), key=int) == ["0", "1", "2"]
    assert sorted(os.listdir(c / "2" / "2"), key=int) == ["0", "1", "2"]
    # An interior chunk is its box; an edge chunk is its box padded with zeros.
    inner = np.fromfile(c / "1" / "1" / "1", dtype=np.float64).reshape(4, 4, 4)
    np.testing.assert_array_equal(inner, data[4:8, 4:8, 4:8])
    edge_file = c / "2" / "2" / "2"
    assert edge_file.stat().st_size == 4 * 4 * 4 * 8
    edge = np.fromfile(edge_file, dtype=np.float64).reshape(4, 4, 4)
    want = np.zeros((4, 4, 4))
    want[:1, :2, :3] = data[8:9, 8:10, 8:11]
    np.testing.assert_array_equal(edge, want)
    assert sorted(os.listdir(path.parent / f"{path.name}@" / "zarr")) == ["c", "zarr.json"]


def test_dimension_names_and_attributes(module_volume):
    root = module_volume.mnt / "named"
    root.mkdir()
    data = np.arange(6 * 4, dtype=np.int32).reshape(6, 4)
    p = make_array(root / "t", data.shape, "int32", "naive", data)
    os.setxattr(p, "user.mmfs.dims", b"time,station")
    os.setxattr(p, "user.units", b'"K"')
    os.setxattr(p, "user.scale", b"0.5")
    os.setxattr(p, "user.note", b"not json")
    z = zarr.open_array(f"{p}@/zarr", mode="r")
    assert z.metadata.dimension_names == ("time", "station")
    assert dict(z.attrs) == {"units": "K", "scale": 0.5, "note": "not json"}
    np.testing.assert_array_equal(z[...], data)


def test_tensorstore_reads_the_view(arrays):
    ts = pytest.importorskip("tensorstore")
    for dtype in ("float32", "int16", "uint64"):
        path, data = arrays[dtype]
        for chunk in (None, tuple(max(1, s // 3 + 1) for s in data.shape)):
            sub = "" if chunk is None else "/" + ",".join(map(str, chunk))
            store = ts.open({"driver": "zarr3", "kvstore": f"file://{path}@/zarr{sub}"}, read=True).result()
            np.testing.assert_array_equal(store.read().result(), data, err_msg=f"{dtype} {chunk}")


def test_writes_refused_and_bad_paths(arrays):
    path, _ = arrays["int32"]  # (37,)
    base = path.parent / f"{path.name}@" / "zarr"
    with pytest.raises(OSError) as e:
        with open(base / "zarr.json", "w"):
            pass
    assert e.value.errno in (errno.EROFS, errno.EACCES)
    for bad, err in [("0", errno.EINVAL), ("4,4", errno.ENOENT), ("x", errno.ENOENT), (".zarray", errno.ENOENT), ("999999999999", errno.EINVAL)]:
        with pytest.raises(OSError) as e:
            os.stat(base / bad / "zarr.json")
        assert e.value.errno == err, bad
    with pytest.raises(OSError) as e:
        os.stat(base / "10" / "c" / "4")  # 37 elements in chunks of 10: chunks 0..3
    assert e.value.errno == errno.ERANGE
    with pytest.raises(OSError) as e:
        os.stat(base / "10" / "c" / "1" / "0")
    assert e.value.errno == errno.ENOTDIR


def test_directory_group_opens_in_xarray(module_volume):
    xr = pytest.importorskip("xarray")
    root = module_volume.mnt / "ds"
    root.mkdir()
    rng = np.random.default_rng(3)
    t = rng.standard_normal((5, 7, 6))
    p = (rng.standard_normal((7, 6)) * 100).astype(np.float32)
    lat = np.linspace(-30, 30, 7)
    make_array(root / "T", t.shape, "float64", "hilbert", t)
    make_array(root / "P", p.shape, "float32", "naive", p)
    make_array(root / "lat", lat.shape, "float64", "naive", lat)
    os.setxattr(root / "T", "user.mmfs.dims", b"time,lat,lon")
    os.setxattr(root / "P", "user.mmfs.dims", b"lat,lon")
    os.setxattr(root / "lat", "user.mmfs.dims", b"lat")
    os.setxattr(root / "T", "user.units", b'"K"')
    os.setxattr(root, "user.title", b'"a test"')
    group = f"{root}@/zarr"
    assert sorted(os.listdir(group)) == ["P", "T", "lat", "zarr.json"]
    meta = json.loads((root.parent / "ds@" / "zarr" / "zarr.json").read_text())
    assert meta == {"zarr_format": 3, "node_type": "group", "attributes": {"title": "a test"}}
    ds = xr.open_zarr(group, consolidated=False, zarr_format=3)
    assert ds.attrs == {"title": "a test"}
    assert set(ds.data_vars) == {"T", "P"} and "lat" in ds.coords
    np.testing.assert_array_equal(ds["T"].values, t)
    np.testing.assert_array_equal(ds["P"].values, p)
    np.testing.assert_array_equal(ds["lat"].values, lat)
    assert ds["T"].dims == ("time", "lat", "lon") and ds["T"].attrs == {"units": "K"}
    # A child in a chunk shape of the reader's, and its errors.
    z = zarr.open_array(f"{group}/T/2,3,4", mode="r")
    np.testing.assert_array_equal(z[...], t)
    with pytest.raises(OSError) as e:
        os.stat(root.parent / "ds@" / "zarr" / "nothing")
    assert e.value.errno == errno.ENOENT


def sectors_read(vol):
    with open(vol.mnt / ".mmfs" / "stats") as f:
        return json.load(f)["sectors_read"]


@pytest.mark.parametrize("chunk", [(1, 40, 24), (48, 40, 1), (3, 5, 24), (2, 40, 1)])
def test_thin_chunks_read_each_cell_once(module_volume, chunk):
    """A chunk thinner than the cells is read through the cells' enclosing box
    (DataView::within), which the neighbouring chunks then find cached: reading
    every chunk costs about one read of the array, not one per chunk of each cell."""
    vol = module_volume
    shape = (48, 40, 24)
    data = random_data(np.random.default_rng(18), shape, "float64")
    path = vol.mnt / f"thin_{'x'.join(map(str, chunk))}"
    make_array(path, shape, "float64", "hilbert", data, attrs={"cell": "8,8,8"})
    vol.remount()
    before = sectors_read(vol)
    with open(path, "rb") as f:
        assert f.read() == data.tobytes()
    whole = sectors_read(vol) - before
    vol.remount()
    before = sectors_read(vol)
    z = zarr.open_array(f"{path}@/zarr/{','.join(map(str, chunk))}", mode="r")
    np.testing.assert_array_equal(z[...], data)
    thin = sectors_read(vol) - before
    # Without the enclosing box every chunk re-reads its cells: 8x for (1, 40, 24).
    # (Chunks of 3 and 5 cross cell boundaries: those read their own cells.)
    if chunk != (3, 5, 24):
        assert thin <= 1.5 * whole, f"chunks {chunk}: {thin} sectors read, the whole array {whole}"


def test_a_thin_chunk_is_read_from_a_copy_in_its_shape(module_volume):
    """With a copy whose cells are the reader's chunks, a thin chunk is read from
    that copy by itself (its plan names the copy), not through the enclosing box
    of the primary's cells that DataView::within would read: one chunk costs
    its own sectors, not its layer's 8. The bytes are the same either way."""
    vol = module_volume
    shape, chunk = (64, 256, 64), (1, 256, 64)
    chunk_sectors = np.prod(chunk) * 8 // 512  # 256
    data = random_data(np.random.default_rng(19), shape, "float64")
    path = vol.mnt / "thin_copy"
    make_array(path, shape, "float64", "hilbert", data, attrs={"cell": "8,8,8"})
    spelled = ",".join(map(str, chunk))
    one = f"{path}@/zarr/{spelled}/c/13/0/0"

    def sectors_of_one_chunk():
        vol.remount()
        with open(f"{path}@/info") as f:  # loads the array's metadata first
            json.load(f)
        before = sectors_read(vol)
        with open(one, "rb") as f:
            got = np.frombuffer(f.read(), dtype="float64").reshape(chunk)
        np.testing.assert_array_equal(got, data[13:14])
        return sectors_read(vol) - before

    layer = sectors_of_one_chunk()
    assert layer >= 8 * chunk_sectors, f"without the copy one chunk reads its layer of cells: {layer} sectors"
    os.setxattr(path, "user.mmfs.copies", b"naive:cell=" + spelled.encode())
    with open(f"{path}@/plan/zarr/{spelled}/c/13/0/0") as f:
        plan = json.load(f)
    # chosen without pricing the primary (one request of the chunk's own bytes), and the cheapest all the same
    assert plan["served_by"] == 1 and plan["requests"] == 1, plan
    assert plan["copies"][1]["modeled_ms"] == min(c["modeled_ms"] for c in plan["copies"]), plan
    alone = sectors_of_one_chunk()
    assert alone <= 1.25 * chunk_sectors, f"one chunk from the copy read {alone} sectors, its own are {chunk_sectors}"
    # every chunk, and a chunk shape the copy does not fit (the box of the primary's cells still serves it)
    np.testing.assert_array_equal(zarr.open_array(f"{path}@/zarr/{spelled}", mode="r")[...], data)
    np.testing.assert_array_equal(zarr.open_array(f"{path}@/zarr/64,256,1", mode="r")[...], data)


def test_a_cold_thin_chunk_reads_alone_when_the_model_says_so(volume_factory):
    """On flash a thin chunk whose enclosing box is cold is read by itself when
    the model reads it in half the box's time or less (ArrayFile::choose_within):
    a reader of one chunk reads its own sectors, not the box's. The next chunk
    of that box reads through the box, and the one after finds it cached."""
    vol = volume_factory(geometry="ssd")
    shape, chunk = (64, 256, 64), (1, 256, 64)
    data = random_data(np.random.default_rng(21), shape, "float64")
    path = vol.mnt / "cold_thin"
    make_array(path, shape, "float64", "naive", data, attrs={"cell": "16,64,64"})
    spelled = ",".join(map(str, chunk))
    chunk_sectors = np.prod(chunk) * 8 // 512  # 256
    box_sectors = 16 * chunk_sectors  # the 16 rows of the cells around it
    with open(f"{path}@/plan/zarr/{spelled}/c/13/0/0") as f:
        alone = json.load(f)
    with open(f"{path}@/plan/box/0:16,0:256,0:64") as f:
        box = json.load(f)
    assert 2 * alone["modeled_ms"] <= box["modeled_ms"], (alone, box)
    assert alone["within"] == {"box": f"box/0:16,0:256,0:64#zarr/{spelled}", "read": "alone while the box is cold",
                               "box_modeled_ms": pytest.approx(box["modeled_ms"])}, alone
    vol.remount()
    with open(f"{path}@/info") as f:  # loads the array's metadata first
        json.load(f)

    def read_chunk(row):
        before = sectors_read(vol)
        with open(f"{path}@/zarr/{spelled}/c/{row}/0/0", "rb") as f:
            got = np.frombuffer(f.read(), dtype="float64").reshape(chunk)
        np.testing.assert_array_equal(got, data[row:row + 1])
        return sectors_read(vol) - before

    first = read_chunk(13)
    assert first <= 1.25 * chunk_sectors, f"one cold chunk read {first} sectors, its own are {chunk_sectors}"
    # through the box: the piece of it that holds the chunk (the daemon's chunk
    # of the box, rows 12-15 on this volume), whole cells, more than the chunk's own
    second = read_chunk(14)
    assert 1.25 * chunk_sectors < second <= box_sectors, f"the box's second chunk read {second} sectors"
    assert read_chunk(15) == 0, "the box's third chunk, in the same piece of the box, was read again"
    # the plane of each cell costs about its box: read through it from the start
    with open(f"{path}@/plan/zarr/64,256,1/c/0/0/40") as f:
        assert json.load(f)["within"]["read"] == "through the box"
    np.testing.assert_array_equal(zarr.open_array(f"{path}@/zarr/64,256,1", mode="r")[:, :, 40], data[:, :, 40])


def test_thin_chunks_of_a_box_read_in_several_pieces(module_volume):
    """A 1024x1024x1 chunk over 32x32x8 cells: its enclosing box (64 MiB) is
    read in pieces of the daemon's chunk size, each kept rearranged along the
    reader's chunk grid (layouts/regrid.h), and the next box is loaded while
    one box's chunks are read. Every chunk equals numpy, whole and from odd
    offsets; the scan reads each cell about once."""
    vol = module_volume
    shape, chunk = (1024, 1024, 16), (1024, 1024, 1)
    data = random_data(np.random.default_rng(20), shape, "float64")
    path = vol.mnt / "thin_boxes"
    make_array(path, shape, "float64", "naive", data, attrs={"cell": "32,32,8"})
    try:
        with open(f"{path}@/plan/box/0:1024,0:1024,0:8") as f:
            box = json.load(f)
        assert box["chunks"] >= 2, f"the enclosing box is read in one piece: {box['chunks']} chunks"
        spelled = ",".join(map(str, chunk))
        vol.remount()
        before = sectors_read(vol)
        np.testing.assert_array_equal(zarr.open_array(f"{path}@/zarr/{spelled}", mode="r")[...], data)
        scan = sectors_read(vol) - before
        assert scan <= 1.25 * data.nbytes // 512, f"the scan read {scan} sectors, the array is {data.nbytes // 512}"
        # A chunk file read in pieces that start and end inside the rows of its blocks.
        vol.remount()
        with open(f"{path}@/zarr/{spelled}/c/0/0/11", "rb", buffering=0) as f:
            got = bytearray()
            while piece := f.read(1_000_003):
                got += piece
        np.testing.assert_array_equal(np.frombuffer(bytes(got), dtype="float64").reshape(chunk), data[:, :, 11:12])
    finally:
        os.unlink(path)
