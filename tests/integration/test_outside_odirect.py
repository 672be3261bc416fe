"""O_DIRECT mixed with buffered I/O on one file, every read compared with a model
(outside suites: fsx-rs has no O_DIRECT mode).

One file is open twice at once: with O_DIRECT (page-aligned buffers from
mmap, offsets and lengths multiples of 4096) and without. A seeded random
sequence of direct and buffered reads and writes, fsyncs, size checks,
reopens and (plain file) truncates runs against it while a bytearray holds
what the file must contain; every read, direct or buffered, is compared with
the model, byte for byte, and a mismatch fails at once with the recent
operations. The same runs on an array file, whose size is fixed (docs/reference.md §4): no
write reaches past its end, and a truncate to 0 zeroes it without changing
the size.

The number of operations is $MMFS_ODIRECT_OPS (default OPS below, the CI's
count; scripts/stress.sh sets 100,000), the seed $MMFS_ODIRECT_SEED.
"""
import collections
import errno
import mmap
import os
import random
import subprocess
import sys
import time

import numpy as np

import conftest
from mmfs_mount import make_array

OPS = int(os.environ.get("MMFS_ODIRECT_OPS", "20000"))
SEED = int(os.environ.get("MMFS_ODIRECT_SEED", "19"))
ALIGN = 4096
MAX_IO = 64 * 1024        # the longest read or write
PLAIN_MAX = 1 << 20       # a plain file stays below 1 MiB

# An array of 960 KiB (240 pages), 4-byte elements, the default layout.
ARRAY_SHAPE = (64, 48, 80)
ARRAY_DTYPE = "int32"

# Relative weights of the operations.
WEIGHTS = {
    "dread": 10, "dwrite": 10, "bread": 10, "bwrite": 10,
    "truncate": 2, "fsync": 1, "stat": 2, "reopen": 1,
}


class Checker:
    def __init__(self, path, fixed_size, rng):
        self.path, self.fixed, self.rng = str(path), fixed_size, rng
        self.model = bytearray(os.stat(self.path).st_size)
        if fixed_size is not None:
            assert len(self.model) == fixed_size
        self.buf = mmap.mmap(-1, MAX_IO)  # page-aligned: what O_DIRECT needs
        self.log = collections.deque(maxlen=40)
        self.counts = collections.Counter()
        self.dfd = self.bfd = None
        self.ops = list(WEIGHTS)
        self.weights = [WEIGHTS[o] for o in self.ops]
        self.open()
        # Start from known contents: the whole file, written buffered.
        if self.model:
            self.model[:] = rng.randbytes(len(self.model))
            self.pwrite(self.bfd, self.model, 0)

    def open(self):
        self.dfd = os.open(self.path, os.O_RDWR | os.O_DIRECT)
        self.bfd = os.open(self.path, os.O_RDWR)

    def close(self):
        for fd in (self.dfd, self.bfd):
            if fd is not None:
                os.close(fd)
        self.dfd = self.bfd = None

    def limit(self):
        """The largest end offset a write may reach."""
        return self.fixed if self.fixed is not None else PLAIN_MAX

    def fail(self, msg):
        raise AssertionError(f"{self.path}: {msg}\nlast operations (oldest first):\n" + "\n".join(self.log))

    @staticmethod
    def pwrite(fd, data, offset):
        view = memoryview(data)
        while view:
            n = os.pwrite(fd, view, offset)
            assert n > 0, f"pwrite returned {n}"
            view, offset = view[n:], offset + n

    def check(self, what, offset, got):
        want = bytes(self.model[offset:offset + len(got)])
        if got != want:
            bad = next(i for i in range(len(got)) if got[i] != want[i])
            self.fail(f"{what} at {offset:#x}+{len(got):#x}: byte {offset + bad:#x} is {got[bad]:#04x}, "
                      f"the model says {want[bad]:#04x} ({sum(a != b for a, b in zip(got, want))} bytes differ)")

    def expect_length(self, what, offset, length, got):
        want = max(0, min(length, len(self.model) - offset))
        if got != want:
            self.fail(f"{what} at {offset:#x}+{length:#x} returned {got} bytes; the file holds {len(self.model)}, "
                      f"so {want} were due")

    def aligned_range(self):
        # Mostly inside the file, sometimes across or past its end.
        top = max(len(self.model), ALIGN) + (ALIGN if self.fixed is None else 0)
        offset = self.rng.randrange(0, (top + ALIGN - 1) // ALIGN) * ALIGN
        length = self.rng.randint(1, MAX_IO // ALIGN) * ALIGN
        return offset, length

    def any_range(self):
        top = max(len(self.model), 1) + (4096 if self.fixed is None else 0)
        offset = self.rng.randrange(0, top)
        length = self.rng.randint(1, MAX_IO)
        return offset, length

    def step(self, i):
        op = self.rng.choices(self.ops, self.weights)[0]
        if op == "dread":
            offset, length = self.aligned_range()
            n = os.preadv(self.dfd, [memoryview(self.buf)[:length]], offset)
            self.log.append(f"{i}: O_DIRECT read {offset:#x}+{length:#x} -> {n}")
            self.expect_length("O_DIRECT read", offset, length, n)
            self.check("O_DIRECT read", offset, self.buf[:n])
        elif op == "bread":
            offset, length = self.any_range()
            got = os.pread(self.bfd, length, offset)
            self.log.append(f"{i}: buffered read {offset:#x}+{length:#x} -> {len(got)}")
            self.expect_length("buffered read", offset, length, len(got))
            self.check("buffered read", offset, got)
        elif op in ("dwrite", "bwrite"):
            offset, length = self.aligned_range() if op == "dwrite" else self.any_range()
            end = min(offset + length, self.limit())
            if end <= offset:
                return self.step(i)  # nothing to write there: draw again
            length = end - offset
            if op == "dwrite":
                length -= length % ALIGN
                if length == 0:
                    return self.step(i)
            data = self.rng.randbytes(length)
            if op == "dwrite":
                self.buf[:length] = data
                n = os.pwritev(self.dfd, [memoryview(self.buf)[:length]], offset)
                if n != length:
                    self.fail(f"O_DIRECT write at {offset:#x}+{length:#x} wrote {n} bytes")
            else:
                self.pwrite(self.bfd, data, offset)
            self.log.append(f"{i}: {'O_DIRECT' if op == 'dwrite' else 'buffered'} write {offset:#x}+{length:#x}")
            if offset > len(self.model):
                self.model.extend(bytes(offset - len(self.model)))
            self.model[offset:offset + length] = data
        elif op == "truncate":
            if self.fixed is not None:
                # docs/reference.md §4: a truncate to 0 zeroes an array, its size stays; any
                # other size but the current one is EINVAL.
                if self.rng.random() < 0.5:
                    os.ftruncate(self.bfd if self.rng.random() < 0.5 else self.dfd, 0)
                    self.model[:] = bytes(len(self.model))
                    # Both descriptors stay open: the pages the kernel cached
                    # through them must go (the size does not change, so only
                    # the daemon can drop them; see
                    # test_array_truncate_zero_open_descriptor).
                    self.log.append(f"{i}: truncate to 0 (zeroes the array)")
                else:
                    size = self.rng.choice([len(self.model) - 1, len(self.model) + ALIGN, len(self.model) // 2])
                    try:
                        os.ftruncate(self.bfd, size)
                    except OSError as e:
                        if e.errno != errno.EINVAL:
                            raise
                    else:
                        self.fail(f"truncate of the array to {size} succeeded (EINVAL was due)")
                    self.log.append(f"{i}: truncate to {size:#x}: EINVAL")
            else:
                size = self.rng.randrange(0, PLAIN_MAX + 1)
                if self.rng.random() < 0.3:
                    size -= size % ALIGN
                os.ftruncate(self.bfd if self.rng.random() < 0.5 else self.dfd, size)
                if size < len(self.model):
                    del self.model[size:]
                else:
                    self.model.extend(bytes(size - len(self.model)))
                self.log.append(f"{i}: truncate to {size:#x}")
        elif op == "fsync":
            os.fsync(self.dfd if self.rng.random() < 0.5 else self.bfd)
            self.log.append(f"{i}: fsync")
        elif op == "stat":
            for fd in (self.dfd, self.bfd):
                size = os.fstat(fd).st_size
                if size != len(self.model):
                    self.fail(f"fstat: st_size {size}, the model holds {len(self.model)} bytes")
            self.log.append(f"{i}: fstat size {len(self.model):#x}")
        elif op == "reopen":
            self.close()
            self.open()
            self.log.append(f"{i}: close and reopen both")
        self.counts[op] += 1

    def run(self, ops):
        for i in range(ops):
            self.step(i)
        # At the end: the whole file, read both ways, equals the model.
        with open(self.path, "rb") as f:
            whole = f.read()
        if len(whole) != len(self.model):
            self.fail(f"the file holds {len(whole)} bytes at the end, the model {len(self.model)}")
        self.check("final buffered read", 0, whole)
        for offset in range(0, len(self.model), MAX_IO):
            n = os.preadv(self.dfd, [self.buf], offset)
            self.expect_length("final O_DIRECT read", offset, MAX_IO, n)
            self.check("final O_DIRECT read", offset, self.buf[:n])


def run_checker(path, fixed_size, what):
    rng = random.Random(SEED)
    started = time.monotonic()
    checker = Checker(path, fixed_size, rng)
    try:
        checker.run(OPS)
    finally:
        checker.close()  # even after a mismatch: an open file keeps the unmount busy
    seconds = time.monotonic() - started
    counts = ", ".join(f"{op} {checker.counts[op]}" for op in WEIGHTS)
    line = (f"O_DIRECT + buffered checker on mmfs, {what}: {OPS} ops (seed {SEED}) in {seconds:.1f} s, "
            f"{OPS / seconds:,.0f} ops/s, 0 mismatches ({counts})")
    print(line)
    conftest.TERMINAL_SUMMARY.append(line)


def test_odirect_mixed_plain_file(volume):
    path = volume.mnt / "odirect.plain"
    path.touch()
    run_checker(path, None, "plain file")


def test_odirect_mixed_array_file(volume):
    path = make_array(volume.mnt / "odirect.array", ARRAY_SHAPE, ARRAY_DTYPE)
    size = int(np.prod(ARRAY_SHAPE)) * np.dtype(ARRAY_DTYPE).itemsize
    run_checker(path, size, f"array file {ARRAY_DTYPE} {'x'.join(map(str, ARRAY_SHAPE))}")
    assert os.stat(path).st_size == size


def test_array_truncate_zero_open_descriptor(volume):
    """A truncate to 0 zeroes an array without changing its size, so the
    kernel would keep the pages it cached through descriptors already open
    (found by this checker): the daemon drops them before it replies."""
    path = make_array(volume.mnt / "zeroed", (64, 64), "int32", data=np.full((64, 64), 7, dtype=np.int32))
    fd = os.open(path, os.O_RDWR)
    try:
        assert os.pread(fd, 4096, 0) == np.full(1024, 7, dtype=np.int32).tobytes()  # now in the page cache
        os.ftruncate(fd, 0)
        assert os.stat(path).st_size == 64 * 64 * 4
        assert os.pread(fd, 4096, 0) == bytes(4096), "the descriptor opened before the truncate reads stale bytes"
    finally:
        os.close(fd)
    with open(path, "rb") as f:
        assert f.read(4096) == bytes(4096)


# A child process: maps the array shared, dirties its first page through the
# mapping, truncates the array to 0, prints the seconds the truncate took.
DIRTY_MAPPING_TRUNCATE = """
import mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, int(sys.argv[2]), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[0:4] = (9).to_bytes(4, "little")
started = time.monotonic()
os.ftruncate(fd, 0)
print(time.monotonic() - started)
m.close()
os.close(fd)
"""


def test_array_truncate_zero_dirty_shared_mapping(volume):
    """Dropping a page dirtied through a shared mapping writes it first, and
    the kernel holds that write until the truncate has its reply: the daemon
    must not wait for the invalidation without bound (it would deadlock with
    the truncating caller). The truncate returns after the daemon's patience
    (1 s); the page's bytes are written back after the zeroing, as a dirty
    mapping's are, and the rest of the array is zeros."""
    shape = (64, 64)
    path = make_array(volume.mnt / "mapped", shape, "int32", data=np.full(shape, 7, dtype=np.int32))
    size = 64 * 64 * 4
    proc = subprocess.run([sys.executable, "-c", DIRTY_MAPPING_TRUNCATE, str(path), str(size)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    took = float(proc.stdout)
    assert took < 10, f"the truncate took {took:.1f} s"
    with open(path, "rb") as f:
        data = np.frombuffer(f.read(), dtype=np.int32)
    page = 4096 // 4
    assert not data[page:].any(), "the array is not zeros past the mapped page"
    # The mapped page: written back whole after the zeroing, or zeroed after it was written back.
    written_back = np.full(page, 7, dtype=np.int32)
    written_back[0] = 9
    assert not data[:page].any() or (data[:page] == written_back).all(), f"the mapped page holds {data[:8]}..."
