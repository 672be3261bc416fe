"""The volume's default layout: multimap on disks, on flash the
measured choice with a cell shaped like the array; an explicit
user.mmfs.layout always wins, and A@/info says which rule chose the layout."""
import os

import numpy as np

from mmfs_mount import getx, make_array, random_array, read_bytes, read_json, view


def info(path):
    return read_json(view(path, "info"))


def test_flash_volumes_default_to_hilbert_with_an_array_shaped_cell(volume_factory):
    vol = volume_factory(size="1G", geometry="ssd")
    shape = (256, 256, 64)
    arr = random_array(np.random.default_rng(5), shape, "float64")
    a = make_array(vol.mnt / "a", shape, "float64", None, arr)
    assert getx(a, "layout") == "hilbert"
    assert getx(a, "cell") == "16,16,4"  # 8 KiB, sides in the array's proportions
    i = info(a)
    assert i["layout"] == "hilbert" and i["cell"] == [16, 16, 4]
    assert "flash" in i["layout_rule"] and "shaped like the array" in i["layout_rule"]
    assert read_bytes(a) == arr.tobytes()
    for d in range(3):
        got = np.frombuffer(read_bytes(view(a, "slice", d, shape[d] // 3)), "<f8")
        assert np.array_equal(got, np.take(arr, shape[d] // 3, axis=d).ravel())

    # An explicit layout wins, and keeps its own default cell.
    b = make_array(vol.mnt / "b", shape, "float64", "multimap", arr)
    assert getx(b, "layout") == "multimap"
    ib = info(b)
    assert ib["layout_rule"].startswith("user.mmfs.layout") and "hilbert" in ib["layout_rule"]
    assert read_bytes(b) == arr.tobytes()
    # Removing the attribute goes back to the volume's default (a relayout), data unchanged.
    os.removexattr(b, "user.mmfs.layout")
    assert getx(b, "layout") == "hilbert"
    assert read_bytes(b) == arr.tobytes()

    # The choice is stored with the array: a remount keeps it.
    vol.remount()
    assert getx(a, "layout") == "hilbert" and getx(a, "cell") == "16,16,4"
    assert read_bytes(a) == arr.tobytes()


def test_disk_volumes_default_to_multimap(volume):
    shape = (40, 30, 20)
    arr = random_array(np.random.default_rng(6), shape, "float64")
    a = make_array(volume.mnt / "a", shape, "float64", None, arr)
    assert getx(a, "layout") == "multimap"
    i = info(a)
    assert "multimap" in i["layout_rule"] and "disk" in i["layout_rule"]
    assert read_bytes(a) == arr.tobytes()
