"""The capsule layout on volumes of several MEMS devices (layouts/capsule.h,
"A volume of p > 1 striped MEMStores"; geometry/striped.h): RAID 0 and RAID 1
volumes of 2 and 4 sparse mems-g2 images (p = 2, 4 stripe members for RAID 0;
p = 1, 2 for RAID 1).

* Capsule arrays (2-D float64 and int32) and a table in capsules: the raw
  file, slices along every dimension, boxes and the table's record views
  equal numpy, before and after a remount (the members given in another
  order) and after the table grows.
* Placement, seen through `A@/lbn`, `/.mmfs/geometry` and
  `/.mmfs/equivalent`: a band group is p member bands side by side; capsule q
  lives on member (q mod pT) / T, all its sectors (a record) in one
  equivalence class of that member; a column is whole tracks of every member
  (one request of p tracks per band group in `A@/plan`).
* `/.mmfs/stats`: a full read of an array, and a read of one column, read
  every stripe member (RAID 1: one copy or the other of each).

Every mount is unmounted by the fixture, even on failure.
"""
import numpy as np
import pytest

from mmfs_mount import assert_array_bytes, getx, make_array, random_array, read_bytes, read_json, setx, view
from test_daemon_table import COLUMNS, make_table, rows, structured
from test_daemon_volume import MemberVolume, check_all_views, devices

GEOMETRY = "mems-g2"
MEMBER_SIZE = "128M"
# (name, dtype, shape): a few MiB each, capsules on every member of 4.
ARRAYS = [("cap-f8", "float64", (150000, 6)), ("cap-i4", "int32", (120000, 5))]
TABLE_RECORDS = 250000


@pytest.fixture(scope="module", params=[(0, 2), (0, 4), (1, 2), (1, 4)],
                ids=["raid0-2", "raid0-4", "raid1-2", "raid1-4"])
def mems_volume(request):
    """A mounted RAID 0/1 volume of 2 or 4 mems-g2 images of 128 MiB."""
    raid, count = request.param
    vol = MemberVolume(raid, count, MEMBER_SIZE, GEOMETRY)
    vol.data = None  # capsule_data() fills it
    try:
        yield vol
    finally:
        vol.close()


def geometry(vol):
    """(p stripe members, T sectors per track, sectors per parallel access)."""
    g = read_json(vol.mnt / ".mmfs" / "geometry")
    return g.get("members", 1), g["stripe_unit_sectors"], g["parallelism"]


def member_of(vol, lbn):
    """The stripe member holding volume LBN `lbn` (volume track t is on member t mod p)."""
    p, T, _ = geometry(vol)
    return lbn // T % p


def lbn_of(path, *idx):
    return int(read_bytes(view(path, "lbn", ",".join(str(i) for i in idx))).split()[0])


def equivalence_class(vol, lbn):
    return {int(x) for x in read_bytes(vol.mnt / ".mmfs" / "equivalent" / str(lbn)).split()}


def capsule_data(vol):
    """The volume's capsule arrays and table ({name: array}, (dir, columns)),
    written and placed the first time they are asked for."""
    if vol.data is None:
        rng = np.random.default_rng(31 + vol.raid * 10 + len(vol.members))
        arrays = {}
        for name, dtype, shape in ARRAYS:
            arr = random_array(rng, shape, dtype)
            make_array(vol.mnt / name, shape, dtype, "capsule", arr)
            arrays[name] = arr
        d, columns = make_table(vol.mnt, "table", records=TABLE_RECORDS, seed=len(vol.members) + vol.raid)
        setx(d, "layout", "capsule")
        vol.data = (arrays, (d, columns))
    return vol.data


def check_table(d, columns, what):
    expected = structured(columns)
    assert_array_bytes(rows(d, ":"), expected, f"{what}: rows")
    n = len(expected)
    for a, b in [(0, 1), (12345, 13000), (n // 2, n // 2 + 700), (n - 7, n)]:
        assert_array_bytes(rows(d, f"{a}:{b}"), expected[a:b], f"{what}: rows {a}:{b}")
    for col, _ in COLUMNS:
        assert_array_bytes(read_bytes(d / col), columns[col], f"{what}: {col}")


def test_capsule_arrays_equal_numpy(mems_volume):
    arrays, _ = capsule_data(mems_volume)
    p, T, _ = geometry(mems_volume)
    for k, (name, arr) in enumerate(arrays.items()):
        path = mems_volume.mnt / name
        info = read_json(view(path, "info"))
        assert info["layout"] == "capsule"
        cap = info["capsule"]
        assert cap["attributes"] == arr.shape[1] and cap["sectors"] == arr.shape[1]
        assert cap["split_capsules"] == 0  # band groups stay inside one cylinder of every member
        assert cap["bands"] == -(-cap["capsules"] // (p * T))  # a band group holds p*T capsules
        check_all_views(path, arr, k)


def test_a_record_is_one_class_of_one_member_and_capsules_rotate_over_members(mems_volume):
    arrays, _ = capsule_data(mems_volume)
    p, T, parallelism = geometry(mems_volume)
    for name, arr in arrays.items():
        path = mems_volume.mnt / name
        per = read_json(view(path, "info"))["capsule"]["records"]  # records per capsule
        capsules = -(-arr.shape[0] // per)
        seen = set()
        # The first and last capsule of every member band, and a few inside.
        qs = {min(g * p * T + k * T + off, capsules - 1) for g in range(-(-capsules // (p * T)))
              for k in range(p) for off in (0, 1, T // 2, T - 1)}
        for q in sorted(qs):
            row = q * per + per // 2 if q * per + per // 2 < arr.shape[0] else arr.shape[0] - 1
            lbns = [lbn_of(path, row, c) for c in range(arr.shape[1])]
            assert len(set(lbns)) == len(lbns)
            members = {member_of(mems_volume, lbn) for lbn in lbns}
            assert members == {q % (p * T) // T}, f"{name}: capsule {q} (record {row}) on members {members}"
            seen |= members
            assert set(lbns) <= equivalence_class(mems_volume, lbns[0]), f"{name}: record {row}"
            plan = read_json(view(path, "plan", "slice", "0", str(row)))
            assert len(plan["batches"]) == 1 and plan["requests"] == arr.shape[1] <= parallelism
        assert seen == set(range(p)), f"{name}: capsules on members {seen} of {p}"
        # A column: block c of a band group is p consecutive volume tracks, one
        # per member; every whole group is one request of p*T sectors.
        plan = read_json(view(path, "plan", "slice", "1", "2"))
        full = capsules // (p * T)
        runs = [r[1] for b in plan["batches"] for r in b]
        assert sum(n == p * T for n in runs) >= full, (runs, full)
        whole = read_json(view(path, "plan", "box", ":,:"))
        assert plan["modeled_ms"] < whole["modeled_ms"] / (arr.shape[1] - 2)


def test_table_in_capsules_on_the_members(mems_volume):
    _, (d, columns) = capsule_data(mems_volume)
    p, T, _ = geometry(mems_volume)
    info = read_json(view(d, "info"))
    assert info["layout"] == "capsule" and all(a["in_capsules"] for a in info["attributes"])
    cap = info["capsule"]
    assert cap["split_capsules"] == 0
    per = cap["records_per_capsule"]
    check_table(d, columns, "table")
    members = set()
    # Records of the first and last capsule, and one of each member band of the first group.
    for r in sorted({0, TABLE_RECORDS - 1} | {min((k * T + T // 2) * per + 3, TABLE_RECORDS - 1) for k in range(p)}):
        lbns = [lbn_of(d / c, r) for c, _ in COLUMNS]
        m = {member_of(mems_volume, lbn) for lbn in lbns}
        assert m == {r // per % (p * T) // T}, f"record {r} on members {m}"
        members |= m
        assert set(lbns) <= equivalence_class(mems_volume, lbns[0]), f"record {r}"
        plan = read_json(view(d, "plan", "rows", str(r)))
        assert len(plan["batches"]) == 1 and plan["requests"] == len(COLUMNS)
    assert members == set(range(p))


def test_remount_keeps_the_bytes(mems_volume):
    vol = mems_volume
    arrays, (d, columns) = capsule_data(vol)
    lbns = {name: [lbn_of(vol.mnt / name, i, 0) for i in (0, arr.shape[0] - 1)] for name, arr in arrays.items()}
    vol.unmount()  # the daemon exited 0 and mmfsck -n found the members clean
    # The members in another order (placed by their superblocks, not the command line).
    vol.mount(order=list(reversed(range(len(vol.members)))))
    for k, (name, arr) in enumerate(arrays.items()):
        path = vol.mnt / name
        assert [lbn_of(path, i, 0) for i in (0, arr.shape[0] - 1)] == lbns[name]
        check_all_views(path, arr, 10 + k)
    check_table(d, columns, "table after remount")


def test_reads_use_every_member(mems_volume):
    vol = mems_volume
    arrays, _ = capsule_data(vol)
    p, _, _ = geometry(vol)
    name, arr = next(iter(arrays.items()))
    path = vol.mnt / name
    copies = 2 if vol.raid == 1 else 1
    for what, read, expected in [("full read", lambda: read_bytes(path), arr),
                                 ("column 4", lambda: read_bytes(view(path, "slice", 1, 4)), arr[:, 4])]:
        vol.remount()  # nothing cached in the daemon
        before = devices(vol.mnt)
        assert_array_bytes(read(), expected, what)
        after = devices(vol.mnt)
        assert len(after) == p * copies
        read_by = [a["bytes_read"] - b["bytes_read"] for b, a in zip(before, after)]
        assert all(a["state"] == "ok" and a["errors"] == 0 for a in after), after
        # Devices 2k and 2k+1 are member k's copies (RAID 1): either may serve.
        per_member = [sum(read_by[k * copies:(k + 1) * copies]) for k in range(p)]
        assert all(n > 0 for n in per_member), f"{what}: bytes each stripe member read: {per_member}"


def test_a_table_grows_over_the_members(mems_volume):
    vol = mems_volume
    p, T, _ = geometry(vol)
    n0 = 20000
    d, columns = make_table(vol.mnt, "grows", records=n0, seed=77)
    setx(d, "layout", "capsule")
    per = read_json(view(d, "info"))["capsule"]["records_per_capsule"]
    old = {c: [lbn_of(d / c, i) for i in (0, n0 - 1)] for c, _ in COLUMNS}
    n1 = per * (p * T + T // 2)  # past the first band group, into the second
    setx(d, "shape", n1)
    assert getx(d, "shape") == str(n1)
    rng = np.random.default_rng(78)
    for col, dtype in COLUMNS:
        assert [lbn_of(d / col, i) for i in (0, n0 - 1)] == old[col], "old records stay in place"
        more = random_array(rng, (n1 - n0,), dtype)
        with open(d / col, "r+b") as f:
            f.seek(n0 * np.dtype(dtype).itemsize)
            f.write(more.tobytes())
        columns[col] = np.concatenate([columns[col], more])
    info = read_json(view(d, "info"))["capsule"]
    assert info["bands"] == 2 and info["split_capsules"] == 0
    vol.remount()
    check_table(d, columns, "grown table")
    last = [lbn_of(d / c, n1 - 1) for c, _ in COLUMNS]
    assert {member_of(vol, lbn) for lbn in last} == {0}  # capsule pT + T/2 - 1: member 0 of the second group
    assert set(last) <= equivalence_class(vol, last[0])
