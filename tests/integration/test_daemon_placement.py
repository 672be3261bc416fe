"""Placement is real (docs/reference.md §4, §5 `A@/lbn`): the bytes of an element sit in the
image at LBN * sector_size + OFFSET (mloc: the element's most significant byte,
since its bytes lie in one unit per byte group), and MultiMap places cells by the paper's
MAP (Fig. 11) on the volume's own GETADJACENT (`/.mmfs/adjacent`)."""
import math
import re

import numpy as np
import pytest

from mmfs_mount import LAYOUTS, make_array, parse_ints, random_array, read_bytes, read_json, view


@pytest.fixture(scope="module")
def vol(module_volume):
    return module_volume


def lbn_of(path, idx):
    text = read_bytes(view(path, "lbn", ",".join(str(int(i)) for i in idx))).decode()
    m = re.fullmatch(r"(\d+) (\d+)\n", text)
    assert m, f"{path.name}@/lbn/{idx}: {text!r} is not 'LBN OFFSET\\n'"
    return int(m.group(1)), int(m.group(2))


def test_elements_are_at_their_lbn_in_the_image(vol):
    geometry = read_json(vol.mnt / ".mmfs" / "geometry")
    sector = geometry["sector_size"]
    image_size = vol.image.stat().st_size
    root = vol.mnt / "placement"
    root.mkdir()
    samples = []  # (name, index, lbn, offset, bytes)
    rng = np.random.default_rng(31)
    for li, layout in enumerate(LAYOUTS):
        for ci, (dtype, shape) in enumerate([("float64", (20, 30, 40)), ("uint32", (33, 65, 9)),
                                             ("int16", (1000,)), ("uint8", (3, 5, 7, 11))]):
            arr = random_array(np.random.default_rng(li * 10 + ci), shape, dtype)
            path = make_array(root / f"{layout}-{dtype}", shape, dtype, layout, arr)
            picks = {tuple(s - 1 for s in shape), tuple(0 for _ in shape)}
            while len(picks) < 40:
                picks.add(tuple(int(rng.integers(0, s)) for s in shape))
            for idx in sorted(picks):
                lbn, off = lbn_of(path, idx)
                data = arr[idx].tobytes()[-1:] if layout == "mloc" else arr[idx].tobytes()
                assert 0 <= off and off + len(data) <= sector, f"{path.name}{idx}: offset {off}"
                assert (lbn + 1) * sector <= image_size, f"{path.name}{idx}: LBN {lbn} beyond the image"
                samples.append((path.name, idx, lbn, off, data))
    places = [(lbn, off) for _, _, lbn, off, _ in samples]
    assert len(set(places)) == len(places), "two elements at the same place"
    vol.unmount()
    try:
        wrong = []
        with open(vol.image, "rb") as f:
            for name, idx, lbn, off, data in samples:
                f.seek(lbn * sector + off)
                got = f.read(len(data))
                if got != data:
                    wrong.append(f"{name}{idx} at LBN {lbn}+{off}: {got.hex()} != {data.hex()}")
        assert not wrong, f"{len(wrong)} of {len(samples)} elements not at their LBN: " + "; ".join(wrong[:5])
    finally:
        vol.mount()


CUBES = {
    "default": {},
    # 16 basic cubes packed side by side on the same 16 tracks (K_0 = 32 cells < T).
    "packed": {"cell": "4,4,8", "basic_cube": "4,4,32"},
    # 512 cubes of 2 cells along the primary dimension: more than one track group.
    "groups": {"cell": "1,1,128", "basic_cube": "2,4,2"},
}


@pytest.mark.parametrize("variant", list(CUBES))
def test_multimap_follows_map_on_getadjacent(vol, variant):
    attrs = CUBES[variant]
    shape, dtype = (64, 64, 256), "float32"
    root = vol.mnt / "multimap-map"
    root.mkdir(exist_ok=True)
    arr = random_array(np.random.default_rng(41), shape, dtype)
    path = make_array(root / variant, shape, dtype, "multimap", arr, attrs=attrs)
    geometry = read_json(vol.mnt / ".mmfs" / "geometry")
    sector, depth = geometry["sector_size"], geometry["depth"]
    info = read_json(view(path, "info"))
    cell, cube, order = parse_ints(info["cell"]), parse_ints(info["basic_cube"]), parse_ints(info["order"])
    if attrs:
        assert cell == parse_ints(attrs["cell"]) and cube == parse_ints(attrs["basic_cube"])
    n = len(shape)
    assert sorted(order) == list(range(n)) and len(cell) == n and len(cube) == n
    grid = [math.ceil(s / c) for s, c in zip(shape, cell)]
    cubes = [math.ceil(g / k) for g, k in zip(grid, cube)]
    if attrs:
        assert max(cubes) >= 2, f"the test needs more than one basic cube: {cubes}"
    assert math.prod(cube[d] for d in order[1:-1]) <= depth, "Eq. 3"
    spc = math.ceil(math.prod(cell) * arr.itemsize / sector)
    primary = order[0]

    lbns = {}

    def lbn_of_cell(c):
        c = tuple(c)
        if c not in lbns:
            lbns[c] = lbn_of(path, [ci * si for ci, si in zip(c, cell)])[0]
        return lbns[c]

    adj = {}

    def adjacent(lbn, step):
        if (lbn, step) not in adj:
            adj[(lbn, step)] = int(read_bytes(vol.mnt / ".mmfs" / "adjacent" / str(lbn) / str(step)).decode())
        return adj[(lbn, step)]

    rng = np.random.default_rng(43)
    picks = {tuple(int(rng.integers(0, g)) for g in grid) for _ in range(40)}
    picks |= {tuple(g - 1 for g in grid), tuple(min(g - 1, k) for g, k in zip(grid, cube))}
    checked_cubes = set()
    for c in sorted(picks):
        k = [c[d] % cube[d] for d in range(n)]
        base = [c[d] if d == primary else c[d] - k[d] for d in range(n)]
        expected = lbn_of_cell(base)
        step = 1
        for d in order[1:]:  # MAP: x_i hops of K_1 * ... * K_{i-1} tracks
            for _ in range(k[d]):
                expected = adjacent(expected, step)
            step *= cube[d]
        assert lbn_of_cell(c) == expected, (f"cell {c} (cube-local {k}, base {base}): LBN {lbn_of_cell(c)}, "
                                            f"MAP on GETADJACENT gives {expected}")
        checked_cubes.add(tuple(c[d] // cube[d] for d in range(n)))
        # Along the primary dimension, consecutive cells follow each other on the track.
        if c[primary] % cube[primary] + 1 < cube[primary] and c[primary] + 1 < grid[primary]:
            nxt = list(base)
            nxt[primary] += 1
            lbn = lbn_of_cell(base)
            low, high = map(int, read_bytes(vol.mnt / ".mmfs" / "boundaries" / str(lbn)).split())
            want = lbn + spc if lbn + spc <= high else low + (lbn + spc - high - 1)
            assert lbn_of_cell(nxt) == want, f"cell {nxt} does not follow cell {base} on the track"
    if attrs:
        assert len(checked_cubes) >= 2, "the sample must span more than one basic cube"
    # The data is really there.
    sample = tuple(s // 3 for s in shape)
    assert read_bytes(view(path, "box", ",".join(map(str, sample)))) == arr[sample].tobytes()
