"""Tables in capsules (MEMS paper §5.2): `user.mmfs.layout=capsule` on a
directory of equal-length 1-D arrays co-locates them, record by record, in
capsules. The same queries give the same results as in the default layout, the
record views (`D@/rows`) equal numpy's structured arrays, a record range is one
parallel access per capsule, a query reads only the attributes it names, the
table grows in place, and bad requests fail with a clear errno, changing
nothing."""
import errno
import os

import numpy as np
import pytest

from mmfs_mount import (ErrorLog, Volume, assert_array_bytes, expect_errno, getx, make_array, random_array,
                        read_bytes, read_json, setx, view)

# Itemsizes 8, 4, 2 and 1: attributes of one, two and more sectors per capsule.
COLUMNS = [("a1", "float64"), ("a2", "int32"), ("a3", "uint16"), ("a4", "uint8")]
RECORDS = 20000


def make_table(root, name, records=RECORDS, columns=COLUMNS, seed=1):
    d = root / name
    d.mkdir()
    rng = np.random.default_rng(seed)
    data = {}
    for col, dtype in columns:
        arr = random_array(rng, (records,), dtype)
        if dtype == "uint8":  # a small domain: equality conditions with many matches
            arr = (arr % 50 + 1).astype(np.uint8)
        make_array(d / col, (records,), dtype, None, arr)
        data[col] = arr
    return d, data


def structured(data, columns=COLUMNS):
    dt = np.dtype([(c, t) for c, t in columns])
    out = np.empty(len(next(iter(data.values()))), dtype=dt)
    for c, _ in columns:
        out[c] = data[c]
    return out


def rows(d, sel):
    return read_bytes(view(d, "rows", sel))


def queries(d):
    conds = ["a4==7", "a1>0&a4<10", "a2<0|a3>60000", "a3>=100&a3<=30000&!a4==3"]
    return {c: (read_bytes(view(d, "query", c, "count")), read_bytes(view(d, "query", c, "coords"))) for c in conds}


def equivalence_class(vol, lbn):
    return {int(x) for x in read_bytes(vol.mnt / ".mmfs" / "equivalent" / str(lbn)).split()}


def lbn_of(path, i):
    return int(read_bytes(view(path, "lbn", str(i))).split()[0])


def stats(vol):
    return read_json(vol.mnt / ".mmfs" / "stats")


def test_table_in_capsules_answers_as_the_default_layout(mems):
    d, data = make_table(mems.mnt, "t1")
    expected = structured(data)
    before = queries(d)
    assert_array_bytes(rows(d, ":"), expected, "rows, default layout")
    setx(d, "layout", "capsule")
    assert getx(d, "layout") == "capsule"
    assert getx(d, "shape") == str(RECORDS)
    assert {"user.mmfs.layout", "user.mmfs.shape"} <= set(os.listxattr(d))
    info = read_json(view(d, "info"))
    assert info["layout"] == "capsule" and info["records"] == RECORDS
    assert [a["name"] for a in info["attributes"]] == [c for c, _ in COLUMNS]
    assert [a["offset"] for a in info["attributes"]] == [0, 8, 12, 14] and info["record_bytes"] == 15
    assert all(a["in_capsules"] for a in info["attributes"])
    cap = info["capsule"]
    # CapsuleResolve on p = 10: every attribute's records fill whole sectors.
    assert cap["records_per_capsule"] % 64 == 0 and cap["sectors"] <= 10
    for col, dtype in COLUMNS:
        a = read_json(view(d / col, "info"))
        assert a["layout"] == "capsule"
        assert_array_bytes(read_bytes(d / col), data[col], col)
    assert_array_bytes(rows(d, ":"), expected, "rows in capsules")
    for sel, sl in [("0:1", slice(0, 1)), ("12345:13000", slice(12345, 13000)), (f"{RECORDS - 7}:", slice(RECORDS - 7, None)),
                    ("999", slice(999, 1000))]:
        assert_array_bytes(rows(d, sel), expected[sl], f"rows {sel}")
    assert queries(d) == before
    mems.remount()
    assert_array_bytes(rows(d, ":"), expected, "rows after remount")
    assert queries(d) == before
    for col, _ in COLUMNS:
        assert_array_bytes(read_bytes(d / col), data[col], f"{col} after remount")


def test_a_record_lies_in_one_class_and_a_range_reads_per_capsule(mems):
    d, data = make_table(mems.mnt, "t2", seed=2)
    setx(d, "layout", "capsule")
    cap = read_json(view(d, "info"))["capsule"]
    for r in (0, 777, RECORDS - 1):
        lbns = [lbn_of(d / c, r) for c, _ in COLUMNS]
        assert len(set(lbns)) == len(lbns)
        if cap["split_capsules"] == 0:
            assert set(lbns) <= equivalence_class(mems, lbns[0]), f"record {r}"
        plan = read_json(view(d, "plan", "rows", str(r)))
        assert len(plan["batches"]) == 1 and plan["requests"] == len(COLUMNS)
    # A range of whole capsules: every attribute's sectors of a capsule in the
    # one batch, one request per track of the band (consecutive capsules sit
    # on consecutive LBNs of a track, or two runs where the track's LBN order
    # wraps around in the square column).
    per = cap["records_per_capsule"]
    plan = read_json(view(d, "plan", "rows", f"{per}:{per * 11}"))
    assert len(plan["batches"]) == 1
    assert cap["sectors"] <= plan["requests"] <= 2 * cap["sectors"]
    assert plan["bytes_read"] == 10 * cap["sectors"] * 512
    # Ten capsules cost about ten parallel accesses, not ten per attribute.
    one = read_json(view(d, "plan", "rows", f"{per}:{per * 2}"))["modeled_ms"]
    assert plan["modeled_ms"] < 10 * one


def test_a_query_reads_only_the_attributes_it_names(mems):
    d, data = make_table(mems.mnt, "t3", records=60000, seed=3)
    setx(d, "layout", "capsule")
    mems.remount()  # no cached cells
    s0 = stats(mems)["sectors_read"]
    count = int(read_bytes(view(d, "query", "a4==9", "count")))
    assert count == int(np.count_nonzero(data["a4"] == 9))
    read = stats(mems)["sectors_read"] - s0
    a4_sectors = read_json(view(d / "a4", "info"))["device_bytes"]["data"] // 512
    total = sum(read_json(view(d / c, "info"))["device_bytes"]["data"] for c, _ in COLUMNS) // 512
    assert 0 < read <= a4_sectors + 64, (read, a4_sectors, total)
    assert read < total / 4


def test_growing_a_table_keeps_its_capsules(mems):
    n0 = 5000
    d, data = make_table(mems.mnt, "t4", records=n0, seed=4)
    setx(d, "layout", "capsule")
    info0 = read_json(view(d, "info"))
    lbns0 = {c: [lbn_of(d / c, i) for i in (0, n0 // 2, n0 - 1)] for c, _ in COLUMNS}
    n1 = 200000  # past the first band
    for col, _ in COLUMNS:
        os.stat(d / col)  # the kernel caches the old size: growing must drop it
    setx(d, "shape", n1)
    assert getx(d, "shape") == str(n1)
    rng = np.random.default_rng(44)
    for col, dtype in COLUMNS:
        assert os.stat(d / col).st_size == n1 * np.dtype(dtype).itemsize
        got = np.fromfile(d / col, dtype=dtype)
        assert_array_bytes(got[:n0].tobytes(), data[col], f"{col} old records")
        assert not got[n0:].any(), f"{col}: new records read as zeros"
        assert [lbn_of(d / col, i) for i in (0, n0 // 2, n0 - 1)] == lbns0[col], "old records stay in place"
        more = random_array(rng, (n1 - n0,), dtype)
        with open(d / col, "r+b") as f:
            f.seek(n0 * np.dtype(dtype).itemsize)
            f.write(more.tobytes())
        data[col] = np.concatenate([data[col], more])
    info1 = read_json(view(d, "info"))
    assert info1["records"] == n1 and info1["capsule"]["bands"] > info0["capsule"]["bands"]
    assert info1["capsule"]["records_per_capsule"] == info0["capsule"]["records_per_capsule"]
    assert all(a["in_capsules"] for a in info1["attributes"])
    expected = structured(data)
    mems.remount()
    assert_array_bytes(rows(d, ":"), expected, "rows after growth")
    r = n1 - 3
    lbns = [lbn_of(d / c, r) for c, _ in COLUMNS]
    if info1["capsule"]["split_capsules"] == 0:
        assert set(lbns) <= equivalence_class(mems, lbns[0])


def test_a_table_leaves_capsules_with_its_bytes(mems):
    d, data = make_table(mems.mnt, "t5", records=3000, seed=5)
    setx(d, "layout", "capsule")
    setx(d, "layout", "hilbert")
    for col, _ in COLUMNS:
        assert getx(d / col, "layout") == "hilbert"
        assert_array_bytes(read_bytes(d / col), data[col], col)
    expect_errno(errno.ENODATA, getx, d, "layout")
    assert read_json(view(d, "info"))["layout"] == "none"
    setx(d, "layout", "capsule")
    os.removexattr(d, "user.mmfs.layout")  # back to the volume's default, out of capsules
    expect_errno(errno.ENODATA, getx, d, "layout")
    assert_array_bytes(rows(d, ":"), structured(data), "rows after leaving capsules")


def test_an_attribute_written_alone(mems):
    d, data = make_table(mems.mnt, "t6", records=4000, seed=6)
    setx(d, "layout", "capsule")
    new = np.arange(100, 300, dtype=np.int32)
    with open(d / "a2", "r+b") as f:
        f.seek(1000 * 4)
        f.write(new.tobytes())
    data["a2"][1000:1200] = new
    assert_array_bytes(rows(d, "900:1300"), structured(data)[900:1300], "rows after a write of one attribute")


def test_bad_table_requests_fail_and_change_nothing(mems):
    d, data = make_table(mems.mnt, "t7", records=1000, seed=7)
    odd = d / "zz"
    make_array(odd, (999,), "float64", None, np.ones(999))
    with ErrorLog(mems, "zz"):
        expect_errno(errno.EINVAL, setx, d, "layout", "capsule")
    expect_errno(errno.ENODATA, getx, d, "layout")
    with ErrorLog(mems):
        expect_errno(errno.EINVAL, rows, d, "0:5")  # lengths differ: not a table
    odd.unlink()
    os.link(d / "a1", d / "a1-link")  # one array under two names is one attribute, not two
    with ErrorLog(mems, "hard links"):
        expect_errno(errno.EINVAL, setx, d, "layout", "capsule")
    with ErrorLog(mems, "hard links"):
        expect_errno(errno.EINVAL, rows, d, "0:5")
    (d / "a1-link").unlink()
    with ErrorLog(mems, "shape"):
        expect_errno(errno.EINVAL, setx, d, "shape", 2000)  # not in capsules yet
    with ErrorLog(mems, "layout"):
        expect_errno(errno.EINVAL, setx, d, "layout", "banana")
    with ErrorLog(mems, "cell"):
        expect_errno(errno.EINVAL, setx, d, "cell", "4")
    setx(d, "layout", "capsule")
    with ErrorLog(mems, "table"):
        expect_errno(errno.EBUSY, setx, d / "a1", "layout", "hilbert")
    with ErrorLog(mems):
        expect_errno(errno.EINVAL, setx, d, "shape", 10)  # shrinking
    with ErrorLog(mems):
        expect_errno(errno.EINVAL, setx, d, "shape", "12x")
    with ErrorLog(mems):
        expect_errno(errno.ERANGE, rows, d, "0:1001")
    with ErrorLog(mems):
        expect_errno(errno.EINVAL, rows, d, "0:10:2")
    expect_errno(errno.EROFS, lambda: open(view(d, "rows", "0:5"), "wb"))
    assert getx(d, "shape") == "1000"
    assert_array_bytes(rows(d, ":"), structured(data), "unchanged")


def test_capsule_tables_need_a_mems_volume():
    vol = Volume(size="64M")
    try:
        d, data = make_table(vol.mnt, "t", records=500, seed=8)
        with ErrorLog(vol, "capsule"):
            expect_errno(errno.ENOTSUP, setx, d, "layout", "capsule")
        # The record views work on any volume.
        assert_array_bytes(rows(d, "10:20"), structured(data)[10:20], "rows on a disk volume")
        assert read_json(view(d, "info"))["layout"] == "none"
    finally:
        vol.close()
