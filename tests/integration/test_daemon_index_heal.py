"""A bitmap index heals itself (docs/indexes.md): bytes flipped in the image
inside one of its bitmaps, or its header, while the volume is unmounted,
are met by the next query, which builds the index anew from the data and
answers equal to numpy, with a `self-healed:` line in .mmfs/errors; the
new index is durable (a remount answers without healing again). A
read-only mount says why and builds nothing. The damage is put where
`A@/info`'s `index_detail.lbns` says the index lies. A scrub reads every
index whole from the device and heals one that no query has met broken."""
import json
import time

import numpy as np
import pytest

from mmfs_mount import make_array, read_bytes, read_json, setx, view

SHAPE = (96, 64, 32)
CONDITIONS = {"==7": lambda x: x == 7, ">10&<20": lambda x: (x > 10) & (x < 20), "!(>=25)": lambda x: ~(x >= 25)}


def errors(vol):
    return (vol.mnt / ".mmfs" / "errors").read_text()


def check_queries(path, arr, what):
    for cond, truth in CONDITIONS.items():
        mask = truth(arr)
        assert int(read_bytes(view(path, "query", cond, "count"))) == int(mask.sum()), f"{what}{cond}: count"
        coords = np.frombuffer(read_bytes(view(path, "query", cond, "coords")), dtype="<u8")
        assert np.array_equal(np.sort(coords), np.flatnonzero(mask).astype("<u8")), f"{what}{cond}: coords"


def index_byte_place(path, byte, sector):
    """(LBN, offset in it) of byte `byte` of the index object of `path`."""
    lbns = read_json(view(path, "info"))["index_detail"]["lbns"]
    at = byte // sector
    for first, count in lbns:
        if at < count:
            return first + at, byte % sector
        at -= count
    raise AssertionError(f"byte {byte} past the index {lbns}")


def flip_at(vol, lbn, offset, sector):
    with open(vol.image, "r+b") as f:
        f.seek(lbn * sector + offset)
        b = f.read(1)
        f.seek(lbn * sector + offset)
        f.write(bytes([b[0] ^ 0xA5]))


@pytest.mark.parametrize("where", ["bitmap", "header"])
def test_a_damaged_index_is_built_anew_by_the_next_query(volume, where):
    rng = np.random.default_rng(211)
    arr = rng.integers(0, 50, size=SHAPE).astype("int32")
    path = make_array(volume.mnt / "i", SHAPE, "int32", "naive", arr)
    setx(path, "index", "e1")
    check_queries(path, arr, "before: ")
    info = read_json(view(path, "info"))["index_detail"]
    sector = read_json(volume.mnt / ".mmfs" / "geometry")["sector_size"]
    byte = info["object_bytes"] - 1 if where == "bitmap" else 3
    lbn, offset = index_byte_place(path, byte, sector)
    volume.unmount()
    flip_at(volume, lbn, offset, sector)
    volume.mount(options=("ro",))
    with pytest.raises(OSError) as e:
        check_queries(path, arr, "read-only: ")
    assert e.value.errno == 5
    assert "read-only mount does not build the index anew" in errors(volume), errors(volume)
    volume.unmount()
    volume.mount()
    check_queries(path, arr, "damaged: ")
    text = errors(volume)
    assert "self-healed:" in text and "the bitmap index was built anew from the data" in text, text
    assert ("failed its checksum" if where == "bitmap" else "index is damaged") in text, text
    volume.unmount()
    volume.mount()
    check_queries(path, arr, "remounted: ")
    assert "self-healed:" not in errors(volume), errors(volume)


def wait_scrub(vol, timeout=120):
    deadline = time.monotonic() + timeout
    while True:
        st = read_json(vol.mnt / ".mmfs" / "scrub")
        if st["state"] != "running" and st["copies"]["state"] == "idle" and st["indexes"]["state"] == "idle":
            return st
        assert time.monotonic() < deadline, json.dumps(st)[:2000]
        time.sleep(0.05)


def test_the_scrub_finds_a_bitmap_no_query_reads_and_builds_the_index_anew(volume):
    """The queries' cache holds every bitmap, so no query would meet the damage:
    the scrub reads every index from the device and heals the broken one."""
    rng = np.random.default_rng(223)
    arrs = {name: rng.integers(0, 50, size=SHAPE).astype("int32") for name in ("a", "b")}
    paths = {name: make_array(volume.mnt / name, SHAPE, "int32", "naive", a) for name, a in arrs.items()}
    for name, path in paths.items():
        setx(path, "index", "e1")
        check_queries(path, arrs[name], f"{name} before: ")
    info = read_json(view(paths["a"], "info"))["index_detail"]
    sector = read_json(volume.mnt / ".mmfs" / "geometry")["sector_size"]
    lbn, offset = index_byte_place(paths["a"], info["object_bytes"] - 1, sector)
    flip_at(volume, lbn, offset, sector)
    check_queries(paths["a"], arrs["a"], "damaged, served from the cache: ")
    assert "self-healed:" not in errors(volume), errors(volume)
    with open(volume.mnt / ".mmfs" / "scrub", "w") as f:
        f.write("start\n")
    st = wait_scrub(volume)
    both = sum(read_json(view(p, "info"))["index_detail"]["object_bytes"] for p in paths.values())
    assert st["indexes"]["bytes_read"] >= both, (st["indexes"], both)
    del st["indexes"]["bytes_read"]
    assert st["indexes"] == {"state": "idle", "checked": 2, "rebuilt": 1}, st["indexes"]
    text = errors(volume)
    assert text.count("self-healed:") == 1, text
    assert "built anew from the data after the scrub met it broken" in text and "failed its checksum" in text, text
    assert read_json(volume.mnt / ".mmfs" / "stats")["indexes"]["self_healed"] == 1
    assert read_json(view(paths["a"], "info"))["index_detail"]["lbns"] != info["lbns"], "a new object"
    for name, path in paths.items():
        check_queries(path, arrs[name], f"{name} after the scrub: ")
    # Durable, and whole: a second scrub finds nothing, nor do queries after a remount.
    with open(volume.mnt / ".mmfs" / "scrub", "w") as f:
        f.write("start\n")
    again = wait_scrub(volume)["indexes"]
    assert again["checked"] == 2 and again["rebuilt"] == 0 and again["bytes_read"] > 0, again
    volume.unmount()
    volume.mount()
    for name, path in paths.items():
        check_queries(path, arrs[name], f"{name} remounted: ")
    assert "self-healed:" not in errors(volume), errors(volume)
