"""Listings of view directories whose names are a dimension's indices
(`A@/slice/D`, `A@/zarr/.../c/...`): a dimension may hold billions of
indices, so the daemon spells them as a reader of the directory reaches them
(fs::ViewNode::numbered, daemon DirEntries) instead of building every name at
the open. An array of 2^32 one-byte elements (4 GiB of extents, never
written) lists its first names at once, resumes at any offset the kernel asks
for, and lists small dimensions whole and in order, as before."""
import os

import numpy as np

from mmfs_mount import make_array, read_bytes, view

HUGE = 1 << 32


def first_names(directory, count):
    """The first `count` names of a directory, in readdir's order."""
    names = []
    with os.scandir(directory) as it:
        for entry in it:
            names.append(entry.name)
            if len(names) == count:
                break
    return names


def test_a_dimension_of_2_to_the_32_lists_its_first_indices_without_spelling_them_all(volume_factory):
    vol = volume_factory(size="6G", geometry="ssd")
    path = make_array(vol.mnt / "wide", (HUGE,), "uint8", layout="naive")
    # The first 5000 names: more than one FUSE readdir reply holds, so the
    # kernel asks again at the offset where the last reply stopped.
    assert first_names(view(path, "slice", 0), 5000) == [str(i) for i in range(5000)]
    # The last index resolves as any other (lookup needs no listing), and an
    # unwritten element reads as zero.
    last = view(path, "slice", 0, HUGE - 1)
    assert os.stat(last).st_size == 1
    assert read_bytes(last) == b"\0"
    # A Zarr grid of one-element chunks along the same dimension: 2^32 chunk
    # names, listed the same way.
    assert first_names(view(path, "zarr", "1", "c"), 3) == ["0", "1", "2"]
    # The daemon is still serving (no allocation of every name on the way).
    assert first_names(view(path, "slice"), 10) == ["0"]


def test_small_dimensions_list_whole_in_order(volume_factory):
    vol = volume_factory()
    (vol.mnt / "d").mkdir()
    arr = np.arange(3 * 700 * 2, dtype="int16").reshape(3, 700, 2)
    path = make_array(vol.mnt / "d" / "a", arr.shape, "int16", data=arr)
    assert os.listdir(view(path, "slice", 1)) == [str(i) for i in range(700)], "readdir order is index order"
    assert os.listdir(view(path, "slice", 2)) == ["0", "1"]
    assert os.listdir(view(path, "zarr", "1,350,2", "c")) == ["0", "1", "2"]
    # The directory's Zarr group lists its arrays' chunk indices the same way.
    assert os.listdir(str(vol.mnt / "d") + "@/zarr/a/1,350,2/c/0") == ["0", "1"]
    assert os.listdir(str(vol.mnt / "d") + "@/zarr/a/1,350,2/c/0/1") == ["0"]
