"""A geometry that knows what a read costs the machine (the "host" of a
measured geometry): the volume keeps it, and a view's plan then predicts the
whole read (modeled_ms), with the device's part (device_ms) and the machine's
(host_ms) beside it. A profile's plan stays the device's alone."""
import json
import subprocess

import numpy as np
import pytest

from mmfs_mount import make_array, mkfs_path, random_array, read_bytes, read_json, view

MiB = 1 << 20
HOST = {"request_ms": 0.25, "ms_per_mib": 0.5}


def flash_with_host(tmp_path, host=HOST):
    g = {"kind": "flash", "name": "with-host", "sector_size": 4096, "capacity_sectors": 262144,
         "track_sectors": 32, "queues": 8, "latency_ms": 0.1, "bandwidth_mb_s": 2000, "depth": 128,
         "host": host}
    path = tmp_path / "with-host.json"
    path.write_text(json.dumps(g))
    return str(path)


def test_plans_on_a_volume_with_a_host_predict_the_read(volume_factory, tmp_path):
    vol = volume_factory(size="1G", geometry=flash_with_host(tmp_path))
    assert read_json(vol.mnt / ".mmfs" / "geometry")["host"] == HOST
    shape = (512, 256, 64)  # 64 MiB: a full read comes in chunks
    arr = random_array(np.random.default_rng(9), shape, "float64")
    a = make_array(vol.mnt / "a", shape, "float64", None, arr)

    # One chunk: the device, then the bytes handed over, plus the requests.
    plan = read_json(view(a, "plan", "slice", "1", "100"))
    assert plan["chunks"] == 1
    useful = 512 * 64 * 8
    assert plan["bytes_useful"] == useful
    assert plan["host_ms"] == pytest.approx(HOST["request_ms"] + useful / MiB * HOST["ms_per_mib"])
    assert plan["modeled_ms"] == pytest.approx(plan["device_ms"] + plan["host_ms"])
    assert plan["device_ms"] > 0

    # Several chunks: the hand-over of one overlaps the device's next, so the
    # read takes at least the slower stage and less than both added.
    full = read_json(view(a, "plan", "box", ":,:,:"))
    assert full["chunks"] > 1, full["chunks"]
    handed = full["bytes_useful"] / MiB * HOST["ms_per_mib"]
    assert full["modeled_ms"] == pytest.approx(full["device_ms"] + full["host_ms"])
    assert full["modeled_ms"] >= HOST["request_ms"] + max(full["device_ms"], handed) - 1e-9
    assert full["modeled_ms"] < HOST["request_ms"] + full["device_ms"] + handed
    # The reads themselves are what they always were.
    got = np.frombuffer(read_bytes(view(a, "slice", 1, 100)), "<f8")
    assert np.array_equal(got, arr[:, 100, :].ravel())


def test_the_cells_work_adds_to_a_one_batch_view_and_hides_behind_a_slice(volume_factory, tmp_path):
    cells = dict(HOST, verify_ms_per_mib=0.3, gather_ms_per_mib=0.2)
    vol = volume_factory(size="1G", geometry=flash_with_host(tmp_path, cells))
    assert read_json(vol.mnt / ".mmfs" / "geometry")["host"] == cells
    shape = (256, 256, 64)
    arr = random_array(np.random.default_rng(5), shape, "float64")
    a = make_array(vol.mnt / "a", shape, "float64", None, arr)

    # A box of one batch (at most 16 requests): all its cells' work after the device.
    box = read_json(view(a, "plan", "box", "10:60,20:70,5:15"))
    assert box["chunks"] == 1 and len(box["batches"]) == 1, box
    work = (box["bytes_read"] * cells["verify_ms_per_mib"] + box["bytes_useful"] * cells["gather_ms_per_mib"]) / MiB
    assert box["host_ms"] == pytest.approx(HOST["request_ms"] + work + box["bytes_useful"] / MiB * HOST["ms_per_mib"])

    # A slice of many batches: the work overlaps the device but for the last batch's share.
    sl = read_json(view(a, "plan", "slice", "2", "7"))
    batches = len(sl["batches"])
    assert sl["chunks"] == 1 and batches >= 4, batches
    work = (sl["bytes_read"] * cells["verify_ms_per_mib"] + sl["bytes_useful"] * cells["gather_ms_per_mib"]) / MiB
    handed = sl["bytes_useful"] / MiB * HOST["ms_per_mib"]
    first = sl["device_ms"] / batches
    expect = HOST["request_ms"] + max(first + work, sl["device_ms"] + work / batches) + handed
    assert sl["modeled_ms"] == pytest.approx(expect)
    assert sl["modeled_ms"] < HOST["request_ms"] + sl["device_ms"] + work + handed
    got = np.frombuffer(read_bytes(view(a, "slice", 2, 7)), "<f8")
    assert np.array_equal(got, arr[:, :, 7].ravel())


def test_a_profile_plan_is_the_device_alone(volume_factory):
    vol = volume_factory(size="1G", geometry="ssd")
    assert "host" not in read_json(vol.mnt / ".mmfs" / "geometry")
    shape = (64, 64, 16)
    a = make_array(vol.mnt / "a", shape, "float64", None, random_array(np.random.default_rng(3), shape, "float64"))
    plan = read_json(view(a, "plan", "slice", "0", "5"))
    assert "device_ms" not in plan and "host_ms" not in plan and plan["modeled_ms"] > 0


@pytest.mark.parametrize("host, says", [
    ({"request_ms": -0.1}, "host.request_ms"),
    ({"ms_per_mb": 0.4}, "ms_per_mb"),
    ({"request_ms": 0.2, "verify_ms_per_mib": -1}, "host.verify_ms_per_mib"),
    ({"request_ms": 0.2, "gather_ms_per_mib": "fast"}, "gather_ms_per_mib"),
    ("fast", "'host' must be an object"),
])
def test_mkfs_refuses_a_malformed_host(tmp_path, host, says):
    g = json.loads(open(flash_with_host(tmp_path)).read())
    g["host"] = host
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(g))
    image = tmp_path / "v.img"
    p = subprocess.run([str(mkfs_path()), "-q", "-s", "64M", "-g", str(path), str(image)], capture_output=True, text=True)
    assert p.returncode != 0
    assert says in p.stderr, p.stderr
