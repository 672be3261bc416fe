"""The default layout and cell, chosen by the volume's model when the array is
created (layouts/model_default.h): the candidate whose worst view of the
standard mix (middle slices, beams, a 1/20 box) the model prices fastest; an
explicit user.mmfs.layout always wins; A@/info says why and lists every
candidate's prices; the choice is stored and survives a remount."""
import os

import numpy as np

from mmfs_mount import getx, make_array, random_array, read_bytes, read_json, setx, view


def info(path):
    return read_json(view(path, "info"))


def check_choice(i, candidates=9):
    """A@/info's layout_choice: the chosen candidate has the fastest worst view, each
    candidate's worst is the slowest of its seven views, and the array has it."""
    choice = i["layout_choice"]
    cands = choice["candidates"]
    assert len(cands) >= candidates  # 4 layouts x 3 cells, less multimap where it cannot place
    for c in cands:
        assert len(c["views_ms"]) == 7
        assert c["worst_ms"] == max(c["views_ms"].values())
        assert c["views_ms"][c["worst_view"]] == c["worst_ms"]
    best = min(c["worst_ms"] for c in cands)
    assert choice["worst_ms"] == best
    chosen = [c for c in cands if c["layout"] == choice["layout"] and c["cell"] == choice["cell"]]
    assert chosen and chosen[0]["worst_ms"] == best
    assert i["layout"] == choice["layout"] and i["cell"] == choice["cell"]
    assert i["layout_rule"].startswith("chosen by the volume's model: " + choice["layout"])
    return choice


def test_flash_volumes_choose_hilbert_with_an_array_shaped_cell(volume_factory):
    vol = volume_factory(size="1G", geometry="ssd")
    shape = (256, 256, 64)
    arr = random_array(np.random.default_rng(5), shape, "float64")
    a = make_array(vol.mnt / "a", shape, "float64", None, arr)
    # The model agrees with what was measured on flash (docs/benchmarks/flash-default-layout.md).
    assert getx(a, "layout") == "hilbert"
    assert getx(a, "cell") == "16,16,4"  # 8 KiB, sides in the array's proportions
    i = info(a)
    check_choice(i)
    assert read_bytes(a) == arr.tobytes()
    for d in range(3):
        got = np.frombuffer(read_bytes(view(a, "slice", d, shape[d] // 3)), "<f8")
        assert np.array_equal(got, np.take(arr, shape[d] // 3, axis=d).ravel())

    # An explicit layout wins, and keeps its own default cell.
    b = make_array(vol.mnt / "b", shape, "float64", "multimap", arr)
    assert getx(b, "layout") == "multimap"
    ib = info(b)
    assert ib["layout_rule"] == "user.mmfs.layout" and "layout_choice" not in ib
    assert read_bytes(b) == arr.tobytes()
    # Removing the attribute goes back to the model's choice for the array's cell (a relayout), data unchanged.
    cell = getx(b, "cell")
    os.removexattr(b, "user.mmfs.layout")
    ib = info(b)
    assert ib["layout_rule"].startswith("chosen by the volume's model") and "with the given cell" in ib["layout_rule"]
    assert getx(b, "cell") == cell
    assert {c["cell"] == ib["cell"] for c in ib["layout_choice"]["candidates"]} == {True}
    check_choice(ib, candidates=3)
    assert read_bytes(b) == arr.tobytes()

    # The choice is stored with the array: a remount keeps it.
    vol.remount()
    assert getx(a, "layout") == "hilbert" and getx(a, "cell") == "16,16,4"
    assert info(a)["layout_rule"] == i["layout_rule"]
    assert read_bytes(a) == arr.tobytes()


def test_disk_volumes_choose_by_the_model(volume):
    """On the modeled Atlas 10K III, MultiMap's one-sector cells price their worst slice of a cube
    about 3x Hilbert's: the model does not choose them."""
    shape = (64, 64, 64)
    arr = random_array(np.random.default_rng(6), shape, "float64")
    a = make_array(volume.mnt / "a", shape, "float64", None, arr)
    i = info(a)
    choice = check_choice(i)
    mm = [c for c in choice["candidates"] if c["layout"] == "multimap"]
    assert mm and choice["worst_ms"] <= min(c["worst_ms"] for c in mm)
    assert getx(a, "layout") == choice["layout"]
    assert getx(a, "cell") == ",".join(map(str, choice["cell"]))
    assert read_bytes(a) == arr.tobytes()


def test_a_given_cell_is_kept_and_only_layouts_compared(volume):
    shape = (32, 48, 16)
    arr = random_array(np.random.default_rng(7), shape, "float32")
    path = volume.mnt / "c"
    path.touch()
    setx(path, "cell", "4,4,4")
    setx(path, "dtype", "float32")
    setx(path, "shape", "32,48,16")
    with open(path, "r+b") as f:
        f.write(arr.tobytes())
    i = info(path)
    assert getx(path, "cell") == "4,4,4"
    assert "with the given cell" in i["layout_rule"]
    assert {tuple(c["cell"]) for c in i["layout_choice"]["candidates"]} == {(4, 4, 4)}
    check_choice(i, candidates=3)
    assert read_bytes(path) == arr.tobytes()


def test_a_layout_set_before_the_shape_wins(volume):
    path = volume.mnt / "z"
    path.touch()
    setx(path, "layout", "zorder")
    setx(path, "shape", "16,16")
    assert getx(path, "layout") == "zorder"
    assert info(path)["layout_rule"] == "user.mmfs.layout"
