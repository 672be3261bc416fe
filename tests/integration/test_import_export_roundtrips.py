"""mmfs-import and mmfs-export round trips (docs/reference.md §8, docs/import-export.md):
h5py -> mmfs-import -> (numpy.fromfile and views through the mount) -> mmfs-export
-> h5py for every dtype and byte order, odd shapes, HDF5 storage and filters, every
layout and the schema options; --buffer smaller than a chunk, and out of range."""
import h5py
import numpy as np
import pytest

from h5_support import assert_exported, check_array, entries, getfattr, h5_has, mmfs_export, mmfs_import, write_h5
from h5_support import d, vol  # noqa: F401,F811 (fixtures, requested by name)
from mmfs_mount import DTYPES, LAYOUTS, make_array, parse_ints, random_array, read_json, view


# --- round trips: every dtype, byte order, shape, storage, layout -----------------

DTYPE_CASES = [(dt, "<") for dt in DTYPES] + [(dt, ">") for dt in DTYPES if np.dtype(dt).itemsize > 1]


@pytest.mark.parametrize("dtype,byteorder", DTYPE_CASES,
                         ids=[f"{dt}-{'le' if bo == '<' else 'be'}" for dt, bo in DTYPE_CASES])
def test_roundtrip_every_dtype_and_byte_order(d, tmp_path, dtype, byteorder):
    seed = DTYPE_CASES.index((dtype, byteorder))
    arr = random_array(np.random.default_rng(seed), (7, 13, 5), dtype)
    stored = arr.astype(np.dtype(dtype).newbyteorder(byteorder))
    src = write_h5(tmp_path / "in.h5", {"/grp/data": stored})
    with h5py.File(src, "r") as f:  # h5py keeps the byte order of the numpy array
        want = h5py.h5t.ORDER_BE if byteorder == ">" else h5py.h5t.ORDER_LE
        assert arr.dtype.itemsize == 1 or f["/grp/data"].id.get_type().get_order() == want
    mmfs_import(f"{src}:/grp/data", d / "a").ok()
    check_array(d / "a", arr)
    out = tmp_path / "out.h5"
    mmfs_export(d / "a", f"{out}:/back").ok()
    assert_exported(out, "/back", arr, f"{dtype} {byteorder}")


SHAPES = [(1,), (37,), (1, 1, 1), (7, 13, 5), (3, 1, 17), (2, 3, 1, 4, 5), (300, 7), (1,) * 13 + (2, 3, 2)]
STORAGE = {
    "contiguous": lambda shape: {},
    "chunked": lambda shape: {"chunks": tuple(max(1, (s + 1) // 2) for s in shape)},  # partial edge chunks
    "gzip": lambda shape: {"chunks": tuple(max(1, (s + 2) // 3) for s in shape), "compression": "gzip",
                           "compression_opts": 6},
    "shuffle-gzip": lambda shape: {"chunks": tuple(min(s, 4) for s in shape), "compression": "gzip",
                                   "compression_opts": 2, "shuffle": True},
}


@pytest.mark.parametrize("storage", list(STORAGE))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_roundtrip_shapes_and_storage(d, tmp_path, shape, storage):
    dtype = DTYPES[(SHAPES.index(shape) * 3 + list(STORAGE).index(storage)) % len(DTYPES)]
    arr = random_array(np.random.default_rng(SHAPES.index(shape) * 10 + list(STORAGE).index(storage)), shape, dtype)
    src = write_h5(tmp_path / "in.h5", {"/x": (arr, STORAGE[storage](shape))})
    mmfs_import(f"{src}:/x", d / "a").ok()
    check_array(d / "a", arr)
    out = tmp_path / "out.h5"
    mmfs_export(d / "a", f"{out}:/x").ok()
    assert_exported(out, "/x", arr, f"{shape} {storage}")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_roundtrip_every_layout(d, tmp_path, layout):
    arr = random_array(np.random.default_rng(300 + LAYOUTS.index(layout)), (6, 10, 12), "int16")
    src = write_h5(tmp_path / "in.h5", {"/v": (arr, {"chunks": (3, 5, 12)})})
    mmfs_import("--layout", layout, f"{src}:/v", d / "a").ok()
    check_array(d / "a", arr, layout=layout)
    assert read_json(view(d / "a", "info"))["layout"] == layout
    out = tmp_path / "out.h5"
    mmfs_export(d / "a", f"{out}:/v").ok()
    assert_exported(out, "/v", arr, layout)


def test_default_layout_is_the_volumes(d, tmp_path):
    arr = random_array(np.random.default_rng(5), (4, 9), "float32")
    src = write_h5(tmp_path / "in.h5", {"/v": arr})
    mmfs_import(f"{src}:/v", d / "a").ok()
    assert getfattr(d / "a", "user.mmfs.layout") == read_json(view(d / "a", "info"))["layout_choice"]["layout"]
    check_array(d / "a", arr)


@pytest.mark.parametrize("layout,order,cell,cube", [("zorder", "0,1,2", "2,4,8", None),
                                                    ("naive", "1,2,0", "1,2,16", None),
                                                    ("multimap", "0,2,1", None, None),
                                                    ("multimap", None, None, "1,2,1")])
def test_schema_options_are_passed_through(d, tmp_path, layout, order, cell, cube):
    arr = random_array(np.random.default_rng(17), (8, 16, 32), "float32")
    src = write_h5(tmp_path / "in.h5", {"/v": arr})
    args = ["--layout", layout]
    for option, value in (("--order", order), ("--cell", cell), ("--basic-cube", cube)):
        if value:
            args += [option, value]
    mmfs_import(*args, f"{src}:/v", d / "a").ok()
    assert getfattr(d / "a", "user.mmfs.layout") == layout
    info = read_json(view(d / "a", "info"))
    for name, value in (("order", order), ("cell", cell), ("basic_cube", cube)):
        if value:
            assert parse_ints(getfattr(d / "a", f"user.mmfs.{name}")) == parse_ints(value), name
            assert parse_ints(info[name]) == parse_ints(value), f"{name} in {info}"
    check_array(d / "a", arr)


@pytest.mark.parametrize("args", [("--order", "0,0,1"), ("--layout", "no-such-layout"), ("--cell", "0,1,1"),
                                  ("--layout", "multimap", "--basic-cube", "4,2,1")],
                         ids=["order", "layout", "cell", "basic-cube"])
def test_schema_refused_by_the_daemon(vol, d, tmp_path, args):
    arr = random_array(np.random.default_rng(2), (4, 5, 6), "uint8")
    src = write_h5(tmp_path / "in.h5", {"/v": arr})
    before = vol.errors().splitlines()
    res = mmfs_import(*args, f"{src}:/v", d / "a").failed()
    added = [line for line in vol.errors().splitlines() if line not in before]
    assert added, f"the daemon logged no explanation\n{res}"
    # The daemon's explanation ("EINVAL /path: user.mmfs.X: why") is shown.
    why = added[-1].split(": ", 2)[-1]
    assert why[:40] in res.err, f"the daemon's explanation {why!r} is not shown\n{res}"
    assert entries(d) == [], "a refused import leaves nothing behind"


def test_storage_compact_resizable_fill_value_fletcher32(d, tmp_path):
    rng = np.random.default_rng(12)
    compact = random_array(rng, (9, 11), "int32")
    grown = random_array(rng, (13, 5), "float64")
    sparse = np.full((40, 30), 7, dtype="u2")  # chunks never written read as the fill value
    sparse[5:15, 3:9] = random_array(rng, (10, 6), "uint16")
    checked = random_array(rng, (6, 50), "int16")
    src = tmp_path / "in.h5"
    with h5py.File(src, "w") as f:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        dsid = h5py.h5d.create(f.id, b"compact", h5py.h5t.STD_I32LE, h5py.h5s.create_simple(compact.shape),
                               dcpl=dcpl)
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, compact)
        ds = f.create_dataset("grown", shape=(4, 5), maxshape=(None, None), chunks=(16, 16), dtype="f8")
        ds.resize((13, 5))  # chunks larger than the current dimensions
        ds[...] = grown
        ds = f.create_dataset("sparse", shape=(40, 30), chunks=(8, 8), dtype="u2", fillvalue=7)
        ds[5:15, 3:9] = sparse[5:15, 3:9]
        f.create_dataset("checked", data=checked, chunks=(4, 16), fletcher32=True, compression="gzip")
    with h5py.File(src, "r") as f:
        assert f["compact"].id.get_create_plist().get_layout() == h5py.h5d.COMPACT
    mmfs_import(src, d / "w").ok()
    for name, arr in (("compact", compact), ("grown", grown), ("sparse", sparse), ("checked", checked)):
        check_array(d / "w" / name, arr)


def test_buffer_smaller_than_a_chunk(d, tmp_path):
    """Chunks (and chunk rows) larger than --buffer: the boxes must still cover the dataset exactly."""
    arr = random_array(np.random.default_rng(8), (10, 400, 300), "float64")  # 9.2 MiB
    src = write_h5(tmp_path / "in.h5", {"/big": (arr, {"chunks": (3, 200, 300), "compression": "gzip",
                                                        "compression_opts": 1})})  # 1.4 MiB chunks
    mmfs_import("--buffer", "1", "-q", f"{src}:/big", d / "a").ok()
    check_array(d / "a", arr)
    out = tmp_path / "out.h5"
    mmfs_export("--buffer", "1", "--chunks", "3,200,300", "-q", d / "a", f"{out}:/big").ok()
    props = assert_exported(out, "/big", arr, "--buffer 1")
    assert props["chunks"] == (3, 200, 300)
    # Contiguous, moved in C-order slabs; and odd chunks that cut the rows.
    odd = random_array(np.random.default_rng(11), (7, 333, 301), "float32")
    src = write_h5(tmp_path / "more.h5", {"/flat": arr, "/odd": (odd, {"chunks": (2, 100, 77), "shuffle": True,
                                                                        "compression": "gzip"})})
    mmfs_import("--buffer", "1", "-q", f"{src}:/flat", d / "flat").ok()
    check_array(d / "flat", arr)
    mmfs_import("--buffer", "1", "-q", f"{src}:/odd", d / "odd").ok()
    check_array(d / "odd", odd)
    mmfs_export("--buffer", "1", "--chunks", "contiguous", "-q", d / "odd", f"{out}:/odd").ok()
    assert_exported(out, "/odd", odd, "contiguous export with --buffer 1")
    mmfs_export("--buffer", "1", "--chunks", "2,50,100", "-q", view(d / "odd", "box", "1:7:2,:,5:300"),
                f"{out}:/oddbox").ok()
    assert_exported(out, "/oddbox", odd[1:7:2, :, 5:300], "a box exported with --buffer 1")


@pytest.mark.parametrize("value", ["0", "4097", "-1", "lots"])
def test_buffer_out_of_range(d, tmp_path, value):
    src = write_h5(tmp_path / "in.h5", {"/v": np.arange(10, dtype="i4")})
    mmfs_import("--buffer", value, f"{src}:/v", d / "a").failed(rc=None)
    assert entries(d) == []
    make_array(d / "b", (10,), "int32", data=np.arange(10, dtype="i4"))
    out = tmp_path / "out.h5"
    mmfs_export("--buffer", value, d / "b", f"{out}:/v").failed(rc=None)
    assert not h5_has(out, "/v")
