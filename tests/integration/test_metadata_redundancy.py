"""A metadata log that survives a bad block: the metadata region
keeps two copies of every structure (docs/on-disk-format.md, "Metadata
region"). One damaged copy of a used block is read from its twin and
rewritten by the next mount or by `mmfsck -y`; a block damaged in both copies
makes the mount refuse, and `mmfsck -y` salvages the metadata written before
it, saying what was lost.

The tests find the structures the way the store does (superblock -> region
header -> newest checkpoint -> its log chunks) and flip 8 bytes in one block
(of the device's logical block size, 512 bytes on image files), as the
outside tester did.
"""
import os
import struct

import numpy as np
import pytest

from mmfs_mount import fsck_path, run_tool, setx

BLOCK = 4096


def u64(buf, off):
    return struct.unpack_from("<Q", buf, off)[0]


class Region:
    """The metadata region of an image: its copies, checkpoints and live chunks."""

    def __init__(self, image):
        with open(image, "rb") as f:
            sb = f.read(BLOCK)
            # Superblock fields (docs/on-disk-format.md): metadata offset and length.
            self.offset, self.length = struct.unpack_from("<QQ", sb, 112)
            f.seek(self.offset)
            header = f.read(BLOCK)
        assert header[:8] == b"MMFSMETA"
        self.version = struct.unpack_from("<I", header, 8)[0]
        assert self.version == 2, "mkfs writes version 2 regions (two copies)"
        self.bs = struct.unpack_from("<I", header, 12)[0]  # the device's logical block
        self.nonce = u64(header, 16)
        self.slots = (u64(header, 32), u64(header, 40))
        self.log_offset, self.log_length = u64(header, 56), u64(header, 64)
        self.stride = self.length // self.bs // 2 * self.bs
        self.image = image
        with open(image, "rb") as f:
            heads = []
            for s in self.slots:
                f.seek(self.offset + s)
                heads.append(f.read(80))
            newest = max((0, 1), key=lambda i: u64(heads[i], 16) if heads[i][:8] == b"MMFSCKPT" else -1)
            ck = heads[newest]
            self.checkpoint = (self.slots[newest], 80 + u64(ck, 56))  # offset in a copy, bytes
            epoch, pos, seq = u64(ck, 16), u64(ck, 24), u64(ck, 32)
            self.chunks = []  # live chunks: (offset in a copy, bytes)
            while True:
                found = False
                for at in (pos, 0):
                    if at + self.bs > self.log_length:
                        continue
                    f.seek(self.offset + self.log_offset + at)
                    h = f.read(80)
                    if h[:8] != b"MMFSLOGC" or u64(h, 8) != self.nonce or u64(h, 16) != epoch or u64(h, 24) != seq:
                        continue
                    size = 80 + u64(h, 56)
                    self.chunks.append((self.log_offset + at, size))
                    pos = at + (size + self.bs - 1) // self.bs * self.bs
                    seq += 1
                    found = True
                    break
                if not found:
                    break

    def damage(self, copy, offset_in_copy, length):
        """Flips 8 bytes inside [offset, offset+length) of a copy."""
        at = self.offset + copy * self.stride + offset_in_copy + min(length - 8, 100)
        with open(self.image, "r+b") as f:
            f.seek(at)
            old = f.read(8)
            f.seek(at)
            f.write(bytes(b ^ 0x5A for b in old))


def mmfsck(image, *flags):
    return run_tool(fsck_path(), *flags, str(image), timeout=600)


def fill(vol, count=40):
    """Many small metadata transactions (one chunk each), an array, and what to expect."""
    files = {}
    for i in range(count):
        p = vol.mnt / f"f{i:03d}"
        data = os.urandom(100 + i)
        p.write_bytes(data)
        fd = os.open(p, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        files[p.name] = data
    a = np.arange(64 * 48, dtype=np.float64).reshape(64, 48)
    arr = vol.mnt / "A"
    arr.touch()
    setx(arr, "dtype", "float64")
    setx(arr, "shape", "64,48")
    arr.write_bytes(a.tobytes())
    fd = os.open(arr, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return files, a


def check(vol, files, a, expect_all=True):
    names = {p.name for p in vol.mnt.iterdir() if p.name.startswith("f")}
    if expect_all:
        assert names == set(files)
    for n in names:
        got = (vol.mnt / n).read_bytes()
        # A salvaged prefix may end between a file's create and its write.
        assert got == files[n] or (not expect_all and n == max(names) and got == b""), n
    if (vol.mnt / "A").exists():
        assert np.array_equal(np.fromfile(vol.mnt / "A", dtype=np.float64).reshape(a.shape), a)
    return names


@pytest.mark.parametrize("where", ["checkpoint", "chunk", "header"])
@pytest.mark.parametrize("copy", [0, 1])
def test_one_bad_block_is_read_from_its_twin_and_rewritten(volume_factory, where, copy):
    vol = volume_factory(size="256M", geometry="ssd")
    files, a = fill(vol)
    vol.unmount()
    region = Region(vol.image)
    assert len(region.chunks) >= 3, "the fill must leave chunks after the newest checkpoint"
    target = {"checkpoint": region.checkpoint, "chunk": region.chunks[len(region.chunks) // 2],
              "header": (0, 80)}[where]
    region.damage(copy, *target)

    # mmfsck -n sees the damage and changes nothing.
    rc, out, err = mmfsck(vol.image, "-n")
    assert rc == 4, out + err
    assert "its twin is intact" in out

    # The mount reads the twin, rewrites the damaged copy and says so.
    vol.mount()
    check(vol, files, a)
    errors = vol.errors()
    assert "metadata found damaged at mount" in errors and "rewrote" in errors, errors
    vol.unmount()  # the fixture's unmount runs mmfsck -n: clean now

    # Both copies are whole again: damaging the other copy is survived too.
    region.damage(1 - copy, *target)
    rc, out, err = mmfsck(vol.image, "-y")
    assert rc == 1, out + err
    assert "rewrote" in out
    rc, out, err = mmfsck(vol.image, "-n")
    assert rc == 0, out + err
    vol.mount()
    check(vol, files, a)


def test_a_chunk_lost_in_both_copies_is_refused_then_salvaged(volume_factory):
    vol = volume_factory(size="256M", geometry="ssd")
    files, a = fill(vol)
    vol.unmount()
    region = Region(vol.image)
    assert len(region.chunks) >= 3
    lost = region.chunks[len(region.chunks) // 2]
    region.damage(0, *lost)
    region.damage(1, *lost)
    before = vol.image.read_bytes()

    # The mount refuses, naming the chunk and the way out; mmfsck -n agrees; nothing is written.
    with pytest.raises(pytest.fail.Exception) as refused:
        vol.mount()
    assert "corrupt in both copies" in str(refused.value) and "mmfsck -y" in str(refused.value)
    rc, out, err = mmfsck(vol.image, "-n")
    assert rc == 4 and "corrupt in both copies" in out + err
    assert vol.image.read_bytes() == before

    # mmfsck -y keeps the state before the chunk, says what was lost, and leaves a clean volume.
    rc, out, err = mmfsck(vol.image, "-y")
    assert rc == 1, out + err
    assert "lost" in out and "salvaged the metadata up to batch" in out, out
    rc, out, err = mmfsck(vol.image, "-n")
    assert rc == 0, out + err
    vol.mount()
    kept = check(vol, files, a, expect_all=False)
    # Files are created in order: the salvaged prefix holds the first ones.
    assert kept == {f"f{i:03d}" for i in range(len(kept))}
    assert len(kept) < len(files)
    # The volume works: new metadata is durable across a remount.
    (vol.mnt / "after").write_bytes(b"salvaged")
    vol.remount()
    assert (vol.mnt / "after").read_bytes() == b"salvaged"
