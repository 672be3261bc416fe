"""mmfs-geom, the geometry CLI of docs/reference.md §7, run as a user would."""
import errno
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

PROFILES = ["atlas10k3", "cheetah36es", "mems-g2", "ssd"]
SUBCOMMANDS = ["info", "boundaries", "adjacent", "equivalent", "quadrangle", "time"]


def ok(result):
    rc, out, err = result
    assert rc == 0, f"exit {rc}, stderr: {err}"
    assert err == ""
    return out


def fails(result):
    """Asserts the error convention of docs/reference.md §8: exit 1, 'mmfs-geom: <message>' on stderr."""
    rc, out, err = result
    assert rc == 1, f"exit {rc}, stdout: {out!r}, stderr: {err!r}"
    assert err.startswith("mmfs-geom: "), err
    return err


def times(out):
    """Parses `time` output: per-batch ms lines, then 'total X'."""
    lines = out.splitlines()
    assert lines and lines[-1].startswith("total "), out
    for line in lines[:-1]:
        assert re.fullmatch(r"\d+\.\d{4}", line), line
    assert re.fullmatch(r"total \d+\.\d{4}", lines[-1]), lines[-1]
    return [float(x) for x in lines[:-1]], float(lines[-1].split()[1])


def boundaries(mmfs_geom, geom, lbn):
    low, high = ok(mmfs_geom(geom, "boundaries", lbn)).split()
    return int(low), int(high)


# --- help ------------------------------------------------------------------

def test_help(mmfs_geom):
    out = ok(mmfs_geom("--help"))
    assert "Usage" in out
    for sub in SUBCOMMANDS:
        assert sub in out


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_subcommand_help(mmfs_geom, sub):
    assert "Usage" in ok(mmfs_geom("atlas10k3", sub, "--help"))
    assert "Usage" in ok(mmfs_geom(sub, "--help"))


def test_no_subcommand_is_an_error(mmfs_geom):
    fails(mmfs_geom("atlas10k3"))


# --- info ------------------------------------------------------------------

@pytest.mark.parametrize("profile", PROFILES)
def test_info_has_derived_values(mmfs_geom, profile):
    info = json.loads(ok(mmfs_geom(profile, "info")))
    for key in ("sector_size", "capacity_sectors", "tracks", "depth", "skew_deg"):
        assert key in info, f"{profile}: info lacks {key}"
    assert info["sector_size"] > 0
    assert info["capacity_sectors"] > 0
    assert info["tracks"] > 0
    assert info["depth"] >= 1


def test_info_of_toy_disk(mmfs_geom, toy_disk):
    info = json.loads(ok(mmfs_geom(toy_disk, "info")))
    assert info["sector_size"] == 512
    assert info["capacity_sectors"] == 1000 * 8
    assert info["tracks"] == 1000
    assert info["depth"] == 4


# --- the uniform toy disk of docs/reference.md §7 (MultiMap §4.2 examples) --------------

@pytest.mark.parametrize("lbn,step,expected", [(0, 1, 8), (0, 2, 16), (0, 3, 24), (0, 4, 32), (9, 2, 25)])
def test_toy_adjacent(mmfs_geom, toy_disk, lbn, step, expected):
    assert ok(mmfs_geom(toy_disk, "adjacent", lbn, step)) == f"{expected}\n"


def test_toy_step_beyond_depth(mmfs_geom, toy_disk):
    err = fails(mmfs_geom(toy_disk, "adjacent", 0, 5))
    assert "step" in err.lower() or "D" in err


def test_toy_step_zero(mmfs_geom, toy_disk):
    fails(mmfs_geom(toy_disk, "adjacent", 0, 0))


def test_toy_boundaries(mmfs_geom, toy_disk):
    assert ok(mmfs_geom(toy_disk, "boundaries", 9)) == "8 15\n"
    assert ok(mmfs_geom(toy_disk, "boundaries", 0)) == "0 7\n"
    assert ok(mmfs_geom(toy_disk, "boundaries", 7999)) == "7992 7999\n"


# --- quadrangle ------------------------------------------------------------

def test_atlas10k3_quadrangle(mmfs_geom):
    q = json.loads(ok(mmfs_geom("atlas10k3", "quadrangle")))
    assert q == {"N": 686, "H": 139, "Dmax": 5, "d": 5, "b": 26, "w": 26, "R": 10}


def test_atlas10k3_quadrangle_explicit_block(mmfs_geom):
    assert json.loads(ok(mmfs_geom("atlas10k3", "quadrangle", 1))) == json.loads(
        ok(mmfs_geom("atlas10k3", "quadrangle")))


# --- equivalence classes (MEMS) --------------------------------------------

def test_mems_equivalent(mmfs_geom):
    lbn = 12345
    out = ok(mmfs_geom("mems-g2", "equivalent", lbn))
    members = [int(x) for x in out.splitlines()]
    assert len(members) == 100
    assert lbn in members
    assert members == sorted(set(members))
    # An equivalence class is the class of each of its members.
    assert ok(mmfs_geom("mems-g2", "equivalent", members[-1])) == out


def test_equivalent_on_a_disk_is_refused(mmfs_geom):
    err = fails(mmfs_geom("atlas10k3", "equivalent", 0))
    assert "mems" in err.lower() or "equivalen" in err.lower()


# --- errors ----------------------------------------------------------------

def test_unknown_profile(mmfs_geom):
    err = fails(mmfs_geom("no-such-disk", "info"))
    assert "no-such-disk" in err


def test_malformed_json(mmfs_geom, geometry_file):
    fails(mmfs_geom(geometry_file('{"kind": "disk", "sector_size": 512,'), "info"))


def test_negative_field_is_named(mmfs_geom, geometry_file, toy_disk_definition):
    err = fails(mmfs_geom(geometry_file(dict(toy_disk_definition, sectors_per_track=-8)), "info"))
    assert "sectors_per_track" in err


@pytest.mark.parametrize("profile", ["atlas10k3", "mems-g2"])
def test_lbn_beyond_capacity(mmfs_geom, profile):
    capacity = json.loads(ok(mmfs_geom(profile, "info")))["capacity_sectors"]
    ok(mmfs_geom(profile, "boundaries", capacity - 1))
    assert "capacity" in fails(mmfs_geom(profile, "boundaries", capacity))
    assert "capacity" in fails(mmfs_geom(profile, "adjacent", capacity, 1))


@pytest.mark.parametrize("bad", ["-1", "12x", "+5", " 5", "0x10", "", "1.0", "18446744073709551616"])
def test_lbn_parsed_strictly(mmfs_geom, toy_disk, bad):
    fails(mmfs_geom(toy_disk, "boundaries", bad))
    fails(mmfs_geom(toy_disk, "adjacent", bad, 1))


# --- time ------------------------------------------------------------------

def test_time_format_and_total(mmfs_geom, toy_disk):
    out = ok(mmfs_geom(toy_disk, "time", input="0:1 8:1\n# a comment\n\n16:8  # trailing comment\n"))
    batches, total = times(out)
    assert len(batches) == 2
    assert all(t > 0 for t in batches)
    assert total == pytest.approx(sum(batches), abs=2e-4)


def test_time_reads_a_file(mmfs_geom, toy_disk, tmp_path):
    text = "0:1 8:1\n100:4\n"
    batch_file = tmp_path / "batches.txt"
    batch_file.write_text(text)
    from_file = ok(mmfs_geom(toy_disk, "time", batch_file))
    assert from_file == ok(mmfs_geom(toy_disk, "time", "-", input=text))
    assert from_file == ok(mmfs_geom(toy_disk, "time", input=text))


@pytest.mark.parametrize("fraction", [0, 0.3])
def test_time_adjacent_pair_is_faster(mmfs_geom, fraction):
    """Reading L then adjacent(L, 1) needs no rotational latency; a block on the
    same track as adjacent(L, 1) but half a revolution away costs about half a
    revolution more (MultiMap §3). L is on track 0, where the idle head starts."""
    low, high = boundaries(mmfs_geom, "atlas10k3", 0)
    lbn = low + int((high - low + 1) * fraction)
    adj = int(ok(mmfs_geom("atlas10k3", "adjacent", lbn, 1)))
    a_low, a_high = boundaries(mmfs_geom, "atlas10k3", adj)
    n = a_high - a_low + 1
    far = a_low + (adj - a_low + n // 2) % n
    (t_adjacent,), _ = times(ok(mmfs_geom("atlas10k3", "time", input=f"{lbn}:1 {adj}:1\n")))
    (t_far,), _ = times(ok(mmfs_geom("atlas10k3", "time", input=f"{lbn}:1 {far}:1\n")))
    assert t_adjacent < t_far
    # Half a revolution at 10k rpm is 3 ms.
    assert t_far - t_adjacent > 1.0


def test_time_malformed_line(mmfs_geom, toy_disk):
    err = fails(mmfs_geom(toy_disk, "time", input="0:1\n5:x\n"))
    assert "line 2" in err
    assert "5:x" in err


@pytest.mark.parametrize("line", ["5", "5:0", "a:1", "1:1:1", "-1:1", "7999:2"])
def test_time_bad_requests(mmfs_geom, toy_disk, line):
    err = fails(mmfs_geom(toy_disk, "time", input=f"0:1\n\n{line}\n"))
    assert "line 3" in err


def test_time_missing_file(mmfs_geom, toy_disk, tmp_path):
    fails(mmfs_geom(toy_disk, "time", tmp_path / "nope.txt"))


# --- measure -----------------------------------------------------

def _data_file(path, mib):
    """A file of `mib` MiB of incompressible bytes (enough data for the probe)."""
    chunk = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for i in range(mib):
            f.write(chunk[i % 7:] + chunk[: i % 7])
    return path


def test_measure_a_file_prints_a_flash_geometry_that_loads_and_leaves_the_file_alone(mmfs_geom, tmp_path):
    data = _data_file(tmp_path / "data", 272)
    before = (data.stat().st_mtime_ns, hashlib.sha256(data.read_bytes()).hexdigest())
    out_json = tmp_path / "measured.json"
    probe_dirs = set(Path("/tmp").glob("mmfs-host-probe.*")) | set(Path("/tmp").glob("mmfs-read-path-probe.*"))
    rc, out, err = mmfs_geom("measure", data, "-t", "3", "-o", out_json)
    assert rc == 0, err
    assert out == ""
    assert "measured" in err and "latency" in err and "a gap under" in err
    g = json.loads(out_json.read_text())
    assert g["kind"] == "flash" and g["name"] == "measured"
    assert g["sector_size"] == 4096 and g["capacity_sectors"] == (272 << 20) // 4096
    m = g["measured"]
    assert m["target"] == str(data) and m["scratch_file"] is False and m["probed_bytes"] == 272 << 20
    assert m["seconds"] <= 6
    assert len(m["cells"]) >= 12 and all(c[2] > 0 and c[3] > 0 for c in m["cells"])
    assert {line["depth"] for line in m["lines"]} == {1, 4, 16, 64}
    assert m["sequential_mb_s"] > 0
    # The machine's part, timed through a throwaway FUSE mount that is gone.
    assert g["host"]["request_ms"] > 0 and g["host"]["ms_per_mib"] > 0, g["host"]
    assert len(m["host"]["cold_read_ms"]) == 9 and len(m["host"]["stream_ms"]) == 3
    assert m["host"]["stream_bytes"] == 64 << 20
    assert "handing a result to its reader" in err
    # The daemon's part, timed by its own code on a volume in memory: a cold
    # one-element view through its FUSE operations is the request cost; the
    # cells' work per MiB comes from two views read without FUSE.
    rp = m["host"]["read_path"]
    assert all(len(rp[k]) == 7 and all(v >= 0 for v in rp[k])
               for k in ("view_ms", "open_ms", "point_ms", "cube_ms", "beam_ms"))
    assert sorted(rp["view_ms"])[3] == pytest.approx(g["host"]["request_ms"], abs=1e-6)
    assert sorted(rp["view_ms"])[3] > sorted(m["host"]["cold_read_ms"])[4] * 0.5  # the kernel's part is in it
    assert rp["point_bytes"][1] == 8 and rp["point_bytes"][0] in (4096, 8192)  # one float64: a block or its cell
    assert rp["cube_bytes"][1] == 102 * 102 * 26 * 8 and rp["cube_bytes"][0] >= rp["cube_bytes"][1]
    assert rp["beam_bytes"][1] == 16 * 16 * 8 and rp["beam_bytes"][0] >= 256 * 4096
    assert g["host"]["verify_ms_per_mib"] >= 0 and g["host"]["gather_ms_per_mib"] >= 0
    assert g["host"]["verify_ms_per_mib"] + g["host"]["gather_ms_per_mib"] > 0
    assert "the daemon: a cold one-element view" in err
    mounts = Path("/proc/self/mounts").read_text()
    assert "mmfs-host-probe" not in mounts and "mmfs-read-path-probe" not in mounts
    assert set(Path("/tmp").glob("mmfs-host-probe.*")) | set(Path("/tmp").glob("mmfs-read-path-probe.*")) == probe_dirs
    # The geometry is usable as is, and the data was only read.
    info = json.loads(ok(mmfs_geom(out_json, "info")))
    assert info["profile"] == "measured" and info["measured"]["cells"] == m["cells"]
    assert (data.stat().st_mtime_ns, hashlib.sha256(data.read_bytes()).hexdigest()) == before


def test_measure_a_sparse_image_uses_a_scratch_file_and_leaves_nothing(mmfs_geom, tmp_path):
    image = tmp_path / "sparse.img"
    with open(image, "wb") as f:
        f.truncate(4 << 30)
    rc, out, err = mmfs_geom("measure", image, "-t", "3", "-q")
    assert rc == 0, err
    assert err == ""
    g = json.loads(out)
    assert g["measured"]["scratch_file"] is True
    assert g["capacity_sectors"] == (4 << 30) // 4096
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sparse.img"]
    assert image.stat().st_blocks == 0


def test_measure_without_the_read_path_probe_times_the_rest_and_says_where_it_looked(mmfs_geom_path, tmp_path):
    """The daemon's read path is timed in a process of its own, mmfs-read-path-probe
    (probes/read_path_client.h): a copy of mmfs-geom with none beside it nor on PATH keeps the
    throwaway mount's figures and names every place it looked."""
    geom = tmp_path / "bin" / "mmfs-geom"
    geom.parent.mkdir()
    shutil.copy(mmfs_geom_path, geom)
    (tmp_path / "empty").mkdir()
    image = tmp_path / "sparse.img"
    with open(image, "wb") as f:
        f.truncate(1 << 30)
    out_json = tmp_path / "measured.json"
    p = subprocess.run([str(geom), "measure", str(image), "-t", "2", "-o", str(out_json)], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, PATH=str(tmp_path / "empty")))
    assert p.returncode == 0, p.stderr
    g = json.loads(out_json.read_text())
    assert g["host"]["request_ms"] > 0 and g["host"]["ms_per_mib"] > 0, g["host"]
    assert "verify_ms_per_mib" not in g["host"] and "read_path" not in g["measured"]["host"]
    assert "the daemon's read path was not timed: cannot find mmfs-read-path-probe" in p.stderr, p.stderr
    for looked in (tmp_path / "probes", tmp_path / "bin", tmp_path / "empty"):
        assert str(looked / "mmfs-read-path-probe") in p.stderr, p.stderr


def test_the_read_path_probe_answers_in_json(mmfs_geom_path):
    """mmfs-read-path-probe's protocol: the geometry on stdin, one JSON object on stdout."""
    probe = mmfs_geom_path.parent.parent / "probes" / "mmfs-read-path-probe"
    p = subprocess.run([str(probe), "--samples", "1"], input=json.dumps({"kind": "flash"}), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 1
    assert json.loads(p.stdout) == {"error": errno.EINVAL,
                                    "message": "the read-path probe needs a flash geometry (capacity_sectors)"}
    p = subprocess.run([str(probe)], input="not json", capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "is not JSON" in json.loads(p.stdout)["message"]
    p = subprocess.run([str(probe), "--bogus"], input="", capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "usage: mmfs-read-path-probe" in p.stderr


@pytest.mark.parametrize("args, says", [
    (["{dir}"], "neither a block device nor a regular file"),
    (["{dir}/missing"], "cannot open"),
    (["{dir}/x", "-t", "0"], "seconds"),
    ([], "TARGET"),
])
def test_measure_errors(mmfs_geom, tmp_path, args, says):
    (tmp_path / "x").write_bytes(b"x" * 4096)
    err = fails(mmfs_geom("measure", "-q", *[a.format(dir=tmp_path) for a in args]))
    assert says in err, err


def test_measure_help(mmfs_geom):
    out = ok(mmfs_geom("measure", "--help"))
    assert "O_DIRECT" in out and "--seconds" in out
    assert "measure" in ok(mmfs_geom("--help"))
