"""Copies of an array file under writes (docs/reference.md "Copies"; the
rest is test_copies.py, the shared checks copies_support.py).

What is proven, with numpy as the oracle:

* writes (pwrite, mmap, O_DIRECT) never show stale bytes through any copy,
  at any moment: copies behind or current, a writer thread racing reader
  threads and the background catch-up (a generation oracle), views read in
  several chunks, after a SIGKILL of the daemon at random moments;
  fsync/close brings every copy current; setting copies over unflushed
  writes, reordering or dropping them while behind, relayout of the primary,
  truncate, rename, link, unlink and remount keep every copy equal to the
  data; copies that do not fit are ENOSPC and change nothing;
Also: a read of `A@/copy/K` under concurrent writes never fails (EAGAIN).
The fixtures' unmount asserts a clean daemon exit and a clean `mmfsck -n`.
"""
import errno
import fcntl
import mmap
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mmfs_mount import (SCRATCH, assert_array_bytes, fsck, fsync_dir, getx, make_array, mkfs, pwrite_all,
                        random_array, random_pieces, read_bytes, read_json, setx, start_daemon, unmount, view)
from copies_support import (check_view, info, copies_of, states, wait_current, check_placement, check_default_views,
                            check_everything, set_fails, free_bytes)


@pytest.fixture(scope="module")
def vol(module_volume):
    return module_volume


# --- 4. writes: never stale, caught up, durable ---------------------------------------------

WRITE_COPIES = "hilbert;naive:order=0,1,2;multimap;quadrangle;zorder:order=1,2,0"


def test_writes_are_never_stale_through_any_copy(volume):
    shape = (40, 50, 30)
    rng = np.random.default_rng(80)
    arr = random_array(rng, shape, "float64")
    path = make_array(volume.mnt / "w", shape, "float64", "naive", arr)
    setx(path, "copies", WRITE_COPIES)
    n = len(WRITE_COPIES.split(";"))
    cur = arr.copy()
    flat = cur.reshape(-1).view(np.uint8)
    saw_behind = False
    fd = os.open(path, os.O_WRONLY)
    try:
        for round_ in range(6):
            new = random_array(rng, shape, "float64").reshape(-1).view(np.uint8)
            pieces = random_pieces(rng, flat.size, 20000)[:3]
            for off, length in pieces:
                pwrite_all(fd, new[off:off + length].tobytes(), off)
                flat[off:off + length] = new[off:off + length]
            now = states(path)
            for k, state, behind in now:
                assert (state == "behind") == (behind > 0), f"copy {k}: state {state} with {behind} cells behind"
            saw_behind |= any(state == "behind" for _, state, _ in now)
            # The default views first (a copy behind must not serve them), then each copy in a new order.
            check_default_views(path, cur, f"round {round_}: ")
            for k in rng.permutation(n + 1):
                d = int(rng.integers(0, 3))
                i = int(rng.integers(0, shape[d]))
                check_view(view(path, "copy", f"{k}@", "slice", d, i), np.take(cur, i, axis=d),
                           f"round {round_}: copy/{k}@/slice/{d}/{i}")
                check_view(view(path, "copy", k), cur, f"round {round_}: copy/{k}")
        assert saw_behind, f"no copy was ever behind after unflushed writes ({states(path)}): the test proves nothing"
        os.fsync(fd)
        wait_current(path)
    finally:
        os.close(fd)
    check_everything(path, cur, "after fsync: ")

    volume.remount()
    assert getx(path, "copies") == WRITE_COPIES
    assert all(state == "current" for _, state, _ in states(path)), states(path)
    check_everything(path, cur, "after remount: ")

    os.truncate(path, 0)
    assert os.stat(path).st_size == cur.nbytes
    zeros = np.zeros(shape, dtype=cur.dtype)
    check_everything(path, zeros, "after truncate to 0: ")
    wait_current(path)
    volume.remount()
    check_everything(path, zeros, "after truncate and remount: ")


def test_close_catches_copies_up_in_the_background(volume):
    shape = (40, 50, 30)
    rng = np.random.default_rng(81)
    arr = random_array(rng, shape, "float64")
    path = make_array(volume.mnt / "c", shape, "float64", "hilbert", arr)
    setx(path, "copies", "naive;zorder:order=0,1,2;quadrangle")
    new = random_array(rng, shape, "float64")
    fd = os.open(path, os.O_WRONLY)
    try:
        pwrite_all(fd, new[3:9].tobytes(), new[:3].nbytes)
        assert all(state == "behind" and behind > 0 for _, state, behind in states(path)), states(path)
    finally:
        os.close(fd)
    arr[3:9] = new[3:9]
    # Read at once, racing the catch-up: never stale.
    check_default_views(path, arr, "right after close: ")
    wait_current(path)
    check_everything(path, arr, "after the catch-up: ")


def test_unmount_with_copies_behind_keeps_the_data(volume):
    shape = (37, 61)
    rng = np.random.default_rng(82)
    arr = random_array(rng, shape, "int16")
    path = make_array(volume.mnt / "u", shape, "int16", "zorder", arr)
    setx(path, "copies", "naive:order=0,1;multimap;quadrangle")
    cur = arr.reshape(-1).view(np.uint8).copy()
    new = random_array(rng, shape, "int16").reshape(-1).view(np.uint8)
    fd = os.open(path, os.O_WRONLY)
    try:
        for off, length in random_pieces(rng, cur.size, 700)[:5]:
            pwrite_all(fd, new[off:off + length].tobytes(), off)
            cur[off:off + length] = new[off:off + length]
    finally:
        os.close(fd)
    volume.remount()  # at once: the catch-up may still be under way
    cur = cur.view(np.int16).reshape(shape)
    assert getx(path, "copies") == "naive:order=0,1;multimap;quadrangle"
    check_everything(path, cur, "after remount: ")
    wait_current(path)


def test_copies_set_over_unflushed_writes_hold_them(volume):
    shape = (20, 24, 18)
    rng = np.random.default_rng(83)
    arr = random_array(rng, shape, "float32")
    path = make_array(volume.mnt / "dirty", shape, "float32", "multimap", arr)
    new = random_array(rng, shape, "float32")
    fd = os.open(path, os.O_WRONLY)
    try:
        pwrite_all(fd, new[5:11].tobytes(), new[:5].nbytes)
        arr[5:11] = new[5:11]
        setx(path, "copies", "naive;hilbert:order=0,1,2")
        check_everything(path, arr, "copies built over unflushed writes: ")
        pwrite_all(fd, new[0].tobytes(), 0)
        arr[0] = new[0]
        check_everything(path, arr, "and written again: ")
    finally:
        os.close(fd)
    wait_current(path)
    volume.remount()
    check_everything(path, arr, "after remount: ")


def test_relayout_of_the_primary_keeps_the_copies(vol):
    shape = (30, 40, 20)
    arr = random_array(np.random.default_rng(84), shape, "int32")
    path = make_array(vol.mnt / "relayout", shape, "int32", "naive", arr)
    setx(path, "copies", "hilbert;quadrangle")
    before = copies_of(path)
    for layout in ("zorder", "multimap", "quadrangle", "naive"):
        setx(path, "layout", layout)
        assert info(path)["layout"] == layout
        assert getx(path, "copies") == "hilbert;quadrangle"
        assert [(c["spec"], c["device_bytes"]) for c in copies_of(path)] == \
               [(c["spec"], c["device_bytes"]) for c in before]
        check_everything(path, arr, f"primary {layout}: ")


def test_reorder_drop_and_truncate_while_copies_are_behind(volume):
    shape = (40, 50, 30)
    rng = np.random.default_rng(85)
    arr = random_array(rng, shape, "float64")
    path = make_array(volume.mnt / "behind", shape, "float64", "naive", arr)
    setx(path, "copies", "hilbert;naive:order=0,1,2;quadrangle")
    new = random_array(rng, shape, "float64")
    fd = os.open(path, os.O_WRONLY)
    try:
        pwrite_all(fd, new[10:30].tobytes(), new[:10].nbytes)
        arr[10:30] = new[10:30]
        behind = {c["spec"]: c["cells_behind"] for c in copies_of(path)}
        assert all(n > 0 for n in behind.values()), behind
        # A reorder keeps each copy's lag with the copy, not with its position.
        setx(path, "copies", "quadrangle;hilbert;naive:order=0,1,2")
        after = {c["spec"]: c["cells_behind"] for c in copies_of(path)}
        assert all(after[spec] in (0, n) for spec, n in behind.items()), f"before {behind}, after the reorder {after}"
        check_everything(path, arr, "reordered while behind: ")
        pwrite_all(fd, new[0].tobytes(), 0)
        arr[0] = new[0]
        setx(path, "copies", "zorder;hilbert")  # hilbert kept (behind), two dropped, zorder built
        check_everything(path, arr, "dropped and built while behind: ")
        pwrite_all(fd, new[39].tobytes(), new[:39].nbytes)
        os.truncate(path, 0)
        check_everything(path, np.zeros(shape), "truncated while behind: ")
    finally:
        os.close(fd)
    wait_current(path)
    volume.remount()
    check_everything(path, np.zeros(shape), "after remount: ")


def test_mmap_and_odirect_writes_reach_every_copy(vol):
    shape = (40, 50, 30)
    rng = np.random.default_rng(86)
    arr = random_array(rng, shape, "float64")
    path = make_array(vol.mnt / "mmap", shape, "float64", "zorder", arr)
    setx(path, "copies", "naive;hilbert:cell=3,5,7;quadrangle")
    new = random_array(rng, shape, "float64")
    flat, fresh = arr.reshape(-1).view(np.uint8), new.reshape(-1).view(np.uint8)
    with open(path, "r+b") as f:
        with mmap.mmap(f.fileno(), 0) as m:
            m[8000:16000] = fresh[8000:16000].tobytes()
            flat[8000:16000] = fresh[8000:16000]
            m.flush()
    check_everything(path, arr, "after an mmap write: ")
    fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
    try:
        with mmap.mmap(-1, 8192) as buf:  # page-aligned for O_DIRECT
            buf[:] = fresh[4096:12288].tobytes()
            assert os.pwrite(fd, buf, 4096) == 8192
        flat[4096:12288] = fresh[4096:12288]
        check_everything(path, arr, "after an O_DIRECT write: ")
    finally:
        os.close(fd)
    wait_current(path)


def test_odd_reads_of_a_copy_file(vol):
    shape = (40, 50, 30)
    rng = np.random.default_rng(87)
    arr = random_array(rng, shape, "float64")
    path = make_array(vol.mnt / "odd-reads", shape, "float64", "naive", arr)
    setx(path, "copies", "hilbert:cell=3,5,7;multimap;quadrangle")
    data = arr.tobytes()
    for k in range(4):
        fd = os.open(view(path, "copy", k), os.O_RDONLY)
        try:
            for _ in range(40):
                off, n = int(rng.integers(0, len(data))), int(rng.integers(1, 70000))
                assert os.pread(fd, n, off) == data[off:off + n], f"copy/{k}: pread({n}, {off})"
            assert os.pread(fd, 100, len(data)) == b"", f"copy/{k}: a read at the end"
        finally:
            os.close(fd)


def test_queries_with_copies_see_the_writes(vol):
    shape = (30, 40)
    arr = np.arange(1200, dtype=np.int32).reshape(shape)
    path = make_array(vol.mnt / "indexed", shape, "int32", "hilbert", arr,
                      attrs={"index": "e1", "copies": "naive;zorder:order=0,1"})
    assert read_bytes(view(path, "query", ">=600", "count")) == b"600\n"
    fd = os.open(path, os.O_WRONLY)
    try:
        pwrite_all(fd, np.full(40, 5000, np.int32).tobytes(), 0)
        arr[0] = 5000
        assert read_bytes(view(path, "query", ">=600", "count")) == f"{int((arr >= 600).sum())}\n".encode()
        check_everything(path, arr, "indexed, behind: ")
    finally:
        os.close(fd)
    wait_current(path)


class Generations:
    """The oracle of concurrent writes: write g fills its elements with the value g
    (increasing), so a read started after write g returned sees >= g there, and
    never a value no write had started when the read ended."""

    def __init__(self, total):
        self.completed = np.zeros(total)
        self.issued = 0
        self.lock = threading.Lock()

    def start(self, gen):
        with self.lock:
            self.issued = gen

    def done(self, a, b, gen):
        with self.lock:
            self.completed[a:b] = gen

    def lower(self, sel):
        with self.lock:
            return self.completed[sel].copy()

    def upper(self):
        with self.lock:
            return self.issued


def read_all(path):
    """The whole file with os.read (an EAGAIN raises; Python's f.read() would return None)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        out = bytearray()
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return bytes(out)
            out += chunk
    finally:
        os.close(fd)


def concurrent_writes(path, shape, seconds, readers, seed):
    """A writer thread (fd kept open; now and then fsync, or close and reopen, so
    the background catch-up races the writes) and `readers` reader threads
    reading views through random placements for `seconds`. Returns (problems,
    EAGAIN count, reads checked)."""
    total = int(np.prod(shape))
    n = len(copies_of(path))
    gens = Generations(total)
    stop = threading.Event()
    problems, eagain, checked = [], [0], [0]
    index = np.arange(total).reshape(shape)

    def writer():
        rng = np.random.default_rng(seed)
        fd = os.open(path, os.O_WRONLY)
        gen = 0
        try:
            while not stop.is_set():
                gen += 1
                a = int(rng.integers(0, total))
                b = min(total, a + int(rng.integers(1, 3000)))
                gens.start(gen)
                pwrite_all(fd, np.full(b - a, float(gen)).tobytes(), a * 8)
                gens.done(a, b, gen)
                r = rng.integers(0, 10)
                if r == 0:
                    os.fsync(fd)
                elif r == 1:
                    os.close(fd)
                    fd = os.open(path, os.O_WRONLY)
        except Exception as e:  # noqa: BLE001 - reported below
            problems.append(f"writer: {e!r}")
        finally:
            os.close(fd)

    def reader(rseed):
        rng = np.random.default_rng(rseed)
        while not stop.is_set():
            k = int(rng.integers(-1, n + 1))  # -1: the default views
            prefix = () if k < 0 else ("copy", f"{k}@")
            if rng.integers(0, 3) == 0:
                parts, sel = (("copy", k) if k >= 0 else ()), index.reshape(-1)
            else:
                d = int(rng.integers(0, len(shape)))
                i = int(rng.integers(0, shape[d]))
                parts, sel = prefix + ("slice", d, i), np.take(index, i, axis=d).reshape(-1)
            low = gens.lower(sel)
            target = view(path, *parts) if parts else path
            try:
                got = np.frombuffer(read_all(target), np.float64)
            except OSError as e:
                if e.errno == errno.EAGAIN and k > 0:
                    eagain[0] += 1
                else:
                    problems.append(f"{'/'.join(map(str, parts)) or 'the file'}: {e!r}")
                continue
            high = gens.upper()
            bad = np.flatnonzero((got < low) | (got > high))
            checked[0] += 1
            if len(bad):
                e = int(bad[0])
                problems.append(f"{'/'.join(map(str, parts)) or 'the file'}: {len(bad)} stale elements, first at flat "
                                f"{int(sel[e])}: {got[e]} (a read after write {int(low[e])} returned; {high} issued)")
            if len(problems) > 20:
                stop.set()

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader, args=(seed + 1 + i,))
                                                   for i in range(readers)]
    for t in threads:
        t.start()
    try:
        stop.wait(seconds)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    return problems, eagain[0], checked[0]


def test_concurrent_writes_are_never_stale_through_any_placement(volume):
    shape = (40, 50, 30)
    path = make_array(volume.mnt / "race", shape, "float64", "naive", np.zeros(shape))
    setx(path, "copies", "hilbert:cell=3,5,7;naive:order=0,1,2;quadrangle;zorder:order=1,2,0")
    problems, eagain, checked = concurrent_writes(path, shape, seconds=6.0, readers=2, seed=88)
    assert not problems, "\n".join(problems) + f"\n({eagain} reads of copy views failed with EAGAIN, tolerated here)"
    assert checked > 50, f"only {checked} reads checked"
    wait_current(path)
    data = read_bytes(view(path, "copy", 0))
    for k in range(1, 5):
        assert read_bytes(view(path, "copy", k)) == data, f"copy {k} differs from the primary once current"
    volume.remount()
    for k in range(5):
        assert read_bytes(view(path, "copy", k)) == data, f"copy {k} after remount"


def test_copy_views_do_not_fail_under_concurrent_writes(volume):
    shape = (40, 50, 30)
    arr = random_array(np.random.default_rng(89), shape, "float64")
    path = make_array(volume.mnt / "eagain", shape, "float64", "naive", arr)
    setx(path, "copies", "hilbert;naive:order=0,1,2")
    stop = threading.Event()
    data = arr.tobytes()

    def writer():  # rewrites the same bytes: the data never changes, the copies fall behind
        fd = os.open(path, os.O_WRONLY)
        try:
            i = 0
            while not stop.is_set():
                off = (i % 1000) * 8
                pwrite_all(fd, data[off:off + 64], off)
                i += 1
        finally:
            os.close(fd)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        deadline = time.monotonic() + 10.0
        reads = 0
        while time.monotonic() < deadline:
            for k in (1, 2):
                assert_array_bytes(read_all(view(path, "copy", f"{k}@", "slice", 0, 0)), arr[0],
                                   f"copy/{k}@/slice/0/0 (read {reads})")
                reads += 1
    finally:
        stop.set()
        thread.join(timeout=60)


class Crashable:
    """A volume whose daemon (our own child) this test kills with SIGKILL and restarts."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(dir=SCRATCH, prefix="mmfs-copies-crash-"))
        self.image, self.mnt = self.root / "vol.img", self.root / "mnt"
        self.mount = None
        mkfs(self.image)
        self.start()

    def start(self):
        self.mount = start_daemon(self.image, self.mnt)

    def crash(self, open_fd=None):
        """SIGKILL; `open_fd` (a file of the mount still open) is closed before the dead mount goes."""
        mount, self.mount = self.mount, None
        assert mount.proc.poll() is None, f"the daemon exited by itself:\n{mount.stderr()}"
        mount.proc.kill()  # our own child, by its pid
        mount.proc.wait(timeout=30)
        if open_fd is not None:
            try:
                os.close(open_fd)
            except OSError:
                pass  # ENOTCONN from the dead mount
        assert unmount(self.mnt) is None
        fd = os.open(self.image, os.O_RDONLY)  # the dead daemon's requests in flight hold the image
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    break
                except BlockingIOError:
                    assert time.monotonic() < deadline, "the image is still locked after the kill"
                    time.sleep(0.01)
        finally:
            os.close(fd)

    def stop(self):
        mount, self.mount = self.mount, None
        problem = unmount(self.mnt)
        rc = mount.proc.wait(timeout=120)
        assert problem is None and rc == 0, f"unmount: {problem}; daemon status {rc}\n{mount.stderr()}"
        fsck(self.image)

    def close(self):
        if self.mount is not None and self.mount.proc.poll() is None:
            self.mount.proc.kill()  # our own child, by its pid
            self.mount.proc.wait(timeout=30)
        self.mount = None
        unmount(self.mnt)
        shutil.rmtree(self.root, ignore_errors=True)


def test_a_crash_never_leaves_a_stale_copy():
    rig = Crashable()
    try:
        rng = np.random.default_rng(90)
        shape = (40, 50, 30)
        arr = random_array(rng, shape, "float64")
        path = make_array(rig.mnt / "crash", shape, "float64", "naive", arr)
        setx(path, "copies", "hilbert:cell=3,5,7;naive:order=0,1,2;quadrangle;zorder:order=1,2,0")
        durable = arr.reshape(-1).view(np.uint8).copy()
        for round_ in range(10):
            cur = durable.copy()
            fd = os.open(path, os.O_WRONLY)
            for _ in range(int(rng.integers(1, 6))):
                off, n = int(rng.integers(0, cur.size - 30000)), int(rng.integers(1, 30000))
                piece = rng.integers(0, 256, size=n, dtype=np.uint8)
                pwrite_all(fd, piece.tobytes(), off)
                cur[off:off + n] = piece
                if rng.integers(0, 3) == 0:
                    os.fsync(fd)
                    durable = cur.copy()
            if rng.integers(0, 2):
                os.close(fd)  # the catch-up starts; the kill may land in it
                fd = None
            time.sleep(float(rng.uniform(0, 0.03)))
            rig.crash(fd)
            rig.start()
            where = f"round {round_} after SIGKILL"
            assert getx(path, "copies") == "hilbert:cell=3,5,7;naive:order=0,1,2;quadrangle;zorder:order=1,2,0"
            primary = read_bytes(view(path, "copy", 0))
            got = np.frombuffer(primary, np.uint8)
            fsynced = np.flatnonzero(durable != got)
            # What was fsync'd is there, unless a later (unsynced) write changed it.
            assert not np.any((durable != got) & (durable == cur)), f"{where}: fsync'd bytes lost at {fsynced[:5]}"
            now = np.frombuffer(primary, np.float64).reshape(shape)
            check_default_views(path, now, f"{where}: ")  # before any copy read (which catches it up)
            for k in range(1, 5):
                assert read_bytes(view(path, "copy", k)) == primary, f"{where}: copy {k} differs from the primary"
            durable = got.copy()
        wait_current(path)
        rig.stop()
    finally:
        rig.close()


def test_large_views_are_read_in_chunks_through_copies(volume_factory):
    vol = volume_factory(size="1G")
    shape = (300, 200, 150)  # 72 MB: the whole array is read (and planned) in several chunks
    rng = np.random.default_rng(91)
    arr = random_array(rng, shape, "float64")
    path = make_array(vol.mnt / "large", shape, "float64", "naive", arr)
    setx(path, "copies", "naive:order=0,1,2;hilbert")
    plan = read_json(view(path, "plan", "copy", "2"))
    assert plan["bytes_useful"] == arr.nbytes, plan
    data = arr.tobytes()
    for k in range(3):
        assert read_bytes(view(path, "copy", k)) == data, f"copy/{k}"
    assert read_bytes(path) == data, "the file"
    for d in range(3):
        check_view(view(path, "slice", d, 7), np.take(arr, 7, axis=d), f"slice/{d}/7")
        for k in range(3):
            check_view(view(path, "copy", f"{k}@", "slice", d, 7), np.take(arr, 7, axis=d), f"copy/{k}@/slice/{d}/7")
    new = random_array(rng, (2,) + shape[1:], "float64")
    fd = os.open(path, os.O_WRONLY)
    try:
        pwrite_all(fd, new.tobytes(), arr[:150].nbytes)
        arr[150:152] = new
        assert read_bytes(path) == arr.tobytes(), "the file after a write, copies behind"
        check_view(view(path, "slice", 2, 7), arr[:, :, 7], "slice/2/7 after a write")
        check_view(view(path, "copy", "2@", "slice", 0, 151), arr[151], "copy/2@/slice/0/151 after a write")
    finally:
        os.close(fd)
    wait_current(path)
    assert read_bytes(view(path, "copy", 1)) == arr.tobytes(), "copy/1 after the catch-up"


def test_unlink_rename_and_link_of_an_array_with_copies(vol):
    shape = (40, 50, 30)
    arr = random_array(np.random.default_rng(92), shape, "float64")
    fsync_dir(vol.mnt)
    free0 = free_bytes(vol)
    path = make_array(vol.mnt / "linked", shape, "float64", "naive", arr)
    setx(path, "copies", "hilbert;quadrangle")
    assert free0 - free_bytes(vol) >= info(path)["device_bytes"]["copies"]
    os.link(path, vol.mnt / "linked2")
    os.rename(path, vol.mnt / "linked3")
    for name in ("linked2", "linked3"):
        assert getx(vol.mnt / name, "copies") == "hilbert;quadrangle"
        check_placement(vol.mnt / name, arr, 2)
    os.unlink(vol.mnt / "linked2")
    check_placement(vol.mnt / "linked3", arr, 1)
    os.unlink(vol.mnt / "linked3")
    fsync_dir(vol.mnt)
    assert free_bytes(vol) >= free0 - (1 << 20), "unlinking an array gives its copies' space back"


def test_copies_that_do_not_fit_are_enospc_and_change_nothing(volume_factory):
    vol = volume_factory(size="64M")
    shape = (40, 50, 30)
    arr = random_array(np.random.default_rng(93), shape, "float64")
    path = make_array(vol.mnt / "full", shape, "float64", "naive", arr)
    setx(path, "copies", "hilbert;zorder:order=0,1,2")
    before = copies_of(path)
    free = free_bytes(vol)
    set_fails(vol, path, ";".join(["quadrangle"] * 8), errno.ENOSPC)
    assert copies_of(path) == before
    assert free_bytes(vol) >= free - (1 << 20), "a refused value takes no space"
    check_everything(path, arr)
