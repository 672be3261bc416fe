"""The mmfs daemon as a POSIX filesystem: plain files and directories (docs/reference.md §3, §9)."""
import ctypes
import errno
import hashlib
import multiprocessing
import os
import shutil
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import build_dir
from mmfs_mount import (Volume, daemon_pids, expect_errno, fsck, is_mounted, mounted, pread_all, pwrite_all,
                        unmount, wait_pid_gone)

MiB = 1 << 20


@pytest.fixture(scope="module")
def vol(module_volume):
    return module_volume


@pytest.fixture
def d(vol, request):
    """A fresh directory on the shared volume for one test."""
    path = vol.mnt / request.node.name.replace("[", "_").replace("]", "").replace("/", "_")
    path.mkdir()
    return path


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


# --- plain files -----------------------------------------------------------------

def test_create_write_read_and_size(d):
    p = d / "hello.txt"
    write(p, b"hello, mmfs\n")
    assert read(p) == b"hello, mmfs\n"
    st = os.stat(p)
    assert stat.S_ISREG(st.st_mode) and st.st_size == 12 and st.st_nlink == 1
    with open(p, "ab") as f:
        f.write(b"more\n")
    assert read(p) == b"hello, mmfs\nmore\n"
    expect_errno(errno.EEXIST, os.open, p, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    expect_errno(errno.ENOENT, os.stat, d / "missing")
    expect_errno(errno.ENOENT, open, d / "missing", "rb")
    assert sorted(os.listdir(d)) == ["hello.txt"]


def test_random_offset_writes_match_a_bytearray_model(d):
    rng = np.random.default_rng(1)
    p = d / "random.bin"
    model = bytearray()
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        for i in range(300):
            off = int(rng.integers(0, 3 * MiB))
            n = int(rng.integers(1, 70000)) if i % 3 else int(rng.integers(1, 20))
            data = rng.bytes(n)
            pwrite_all(fd, data, off)
            if len(model) < off + n:
                model.extend(bytes(off + n - len(model)))
            model[off:off + n] = data
            if i % 50 == 49:  # reads in between, at random places
                for _ in range(20):
                    o = int(rng.integers(0, len(model)))
                    m = int(rng.integers(1, 100000))
                    assert pread_all(fd, m, o) == bytes(model[o:o + m])
        assert os.fstat(fd).st_size == len(model)
        os.fsync(fd)
    finally:
        os.close(fd)
    assert read(p) == bytes(model)


def test_sparse_writes_read_zeros_in_the_holes(d):
    p = d / "sparse.bin"
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        pwrite_all(fd, b"A" * 10, 0)
        pwrite_all(fd, b"B" * 4096, 40 * MiB + 123)
        pwrite_all(fd, b"C", 100 * MiB)
        os.fsync(fd)
        assert os.fstat(fd).st_size == 100 * MiB + 1
        assert pread_all(fd, 20, 0) == b"A" * 10 + bytes(10)
        assert pread_all(fd, 1 * MiB, 20 * MiB) == bytes(MiB)
        assert pread_all(fd, 4096 + 246, 40 * MiB) == bytes(123) + b"B" * 4096 + bytes(123)
        assert pread_all(fd, 10, 100 * MiB - 9) == bytes(9) + b"C"
        assert pread_all(fd, 10, 100 * MiB + 1) == b""  # EOF
    finally:
        os.close(fd)


def test_truncate_up_and_down(d):
    p = d / "trunc.bin"
    write(p, b"x" * 100000)
    os.truncate(p, 100)
    assert os.stat(p).st_size == 100
    os.truncate(p, 300000)
    assert os.stat(p).st_size == 300000
    data = read(p)
    assert data[:100] == b"x" * 100
    assert data[100:] == bytes(300000 - 100), "bytes past a truncation must read as zeros, not stale data"
    with open(p, "r+b") as f:
        f.truncate(50)
    assert read(p) == b"x" * 50
    with open(p, "wb"):  # O_TRUNC
        pass
    assert os.stat(p).st_size == 0 and read(p) == b""


def test_fallocate(d):
    p = d / "falloc.bin"
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.posix_fallocate(fd, 0, 3 * MiB)
        assert os.fstat(fd).st_size == 3 * MiB
        assert pread_all(fd, 3 * MiB, 0) == bytes(3 * MiB)
        pwrite_all(fd, b"data", 1000)
        os.posix_fallocate(fd, 0, 2 * MiB)  # inside the file: size and data unchanged
        assert os.fstat(fd).st_size == 3 * MiB
        assert pread_all(fd, 8, 998) == b"\0\0data\0\0"
        os.posix_fallocate(fd, 4 * MiB, MiB)  # past the end: extends
        assert os.fstat(fd).st_size == 5 * MiB
        assert pread_all(fd, MiB, 3 * MiB) == bytes(MiB)
    finally:
        os.close(fd)


FALLOC_FL_KEEP_SIZE = 1


def fallocate(fd, mode, offset, length):
    if _libc.fallocate(fd, mode, ctypes.c_long(offset), ctypes.c_long(length)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def test_fallocate_marks_ctime_and_mtime_when_it_changes_the_size(d):
    p = d / "times.bin"
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        old = os.fstat(fd)
        time.sleep(0.02)
        os.posix_fallocate(fd, 0, 123)  # extends an empty file (pjdfstest posix_fallocate::update_ctime_success)
        st = os.fstat(fd)
        assert st.st_size == 123
        assert st.st_ctime_ns > old.st_ctime_ns and st.st_mtime_ns > old.st_mtime_ns
        old = st
        time.sleep(0.02)
        os.posix_fallocate(fd, 0, 100)  # inside the file: the size stays, so do the times
        fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 1 * MiB)  # space only, past the end
        st = os.fstat(fd)
        assert st.st_size == 123
        assert (st.st_ctime_ns, st.st_mtime_ns) == (old.st_ctime_ns, old.st_mtime_ns)
        time.sleep(0.02)
        os.posix_fallocate(fd, 500, 1000)  # extends again
        st = os.fstat(fd)
        assert st.st_size == 1500 and st.st_mtime_ns > old.st_mtime_ns and st.st_ctime_ns > old.st_ctime_ns
        expect_errno(errno.EINVAL, os.posix_fallocate, fd, 0, 0)
    finally:
        os.close(fd)
    # Committed at the close: the same times from the metadata store.
    assert os.stat(p).st_mtime_ns == st.st_mtime_ns and os.stat(p).st_size == 1500


def test_an_open_file_unlinked_or_renamed_over_has_no_links(d):
    p = d / "doomed"
    write(p, b"still readable")
    fd = os.open(p, os.O_RDWR)
    try:
        assert os.fstat(fd).st_nlink == 1
        os.unlink(p)
        assert os.fstat(fd).st_nlink == 0  # POSIX: the last link is gone
        assert pread_all(fd, 14, 0) == b"still readable"
        pwrite_all(fd, b"STILL", 0)
        assert os.fstat(fd).st_nlink == 0 and pread_all(fd, 5, 0) == b"STILL"
    finally:
        os.close(fd)
    target, other = d / "target", d / "other"
    write(target, b"old")
    write(other, b"new")
    fd = os.open(target, os.O_RDONLY)
    try:
        os.rename(other, target)
        assert os.fstat(fd).st_nlink == 0 and pread_all(fd, 3, 0) == b"old"
        assert os.stat(target).st_nlink == 1 and read(target) == b"new"
    finally:
        os.close(fd)
    # One of two links: the file keeps the other.
    write(d / "a", b"x")
    os.link(d / "a", d / "b")
    fd = os.open(d / "a", os.O_RDONLY)
    try:
        os.unlink(d / "a")
        assert os.fstat(fd).st_nlink == 1
    finally:
        os.close(fd)
    assert sorted(os.listdir(d)) == ["b", "target"]


def test_fsync_and_fdatasync(d):
    p = d / "sync.bin"
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        pwrite_all(fd, b"durable" * 1000, 0)
        os.fsync(fd)
        pwrite_all(fd, b"DURABLE", 7)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    assert read(p) == b"durable" + b"DURABLE" + b"durable" * 998


# --- directories -------------------------------------------------------------------

def test_mkdir_rmdir_unlink(d):
    sub = d / "sub"
    os.mkdir(sub)
    assert stat.S_ISDIR(os.stat(sub).st_mode)
    expect_errno(errno.EEXIST, os.mkdir, sub)
    write(sub / "f", b"1")
    os.mkdir(sub / "deeper")
    assert sorted(os.listdir(sub)) == ["deeper", "f"]
    expect_errno(errno.ENOTEMPTY, os.rmdir, sub)
    expect_errno(errno.ENOTDIR, os.rmdir, sub / "f")
    expect_errno(errno.EISDIR, os.unlink, sub / "deeper")
    expect_errno(errno.ENOTDIR, os.listdir, sub / "f")
    expect_errno(errno.ENOENT, os.unlink, sub / "nope")
    os.unlink(sub / "f")
    os.rmdir(sub / "deeper")
    assert os.listdir(sub) == []
    os.rmdir(sub)
    assert not os.path.exists(sub)
    # Many entries in one directory.
    many = d / "many"
    os.mkdir(many)
    names = {f"file-{i:04d}" for i in range(600)}
    for name in names:
        write(many / name, name.encode())
    assert set(os.listdir(many)) == names
    for name in sorted(names)[::37]:
        assert read(many / name) == name.encode()
    assert os.stat(d).st_nlink >= 2


def test_rename_files_and_directories(d):
    a, b = d / "a", d / "b"
    write(a, b"AAA")
    write(b, b"BBBB")
    ino_a = os.stat(a).st_ino
    os.rename(a, b)  # over an existing file: atomic replace
    assert not os.path.exists(a)
    assert read(b) == b"AAA"
    assert os.stat(b).st_ino == ino_a
    os.mkdir(d / "dir1")
    write(d / "dir1" / "inside", b"in")
    os.rename(d / "dir1", d / "dir2")
    assert read(d / "dir2" / "inside") == b"in"
    os.mkdir(d / "dir3")
    os.rename(b, d / "dir3" / "moved")
    assert read(d / "dir3" / "moved") == b"AAA"
    assert sorted(os.listdir(d)) == ["dir2", "dir3"]
    os.mkdir(d / "nonempty")
    write(d / "nonempty" / "x", b"")
    expect_errno((errno.ENOTEMPTY, errno.EEXIST), os.rename, d / "dir2", d / "nonempty")
    expect_errno(errno.EINVAL, os.rename, d / "dir3", d / "dir3" / "sub")  # into itself
    expect_errno(errno.ENOENT, os.rename, d / "nothing", d / "x")


_libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


def renameat2(old, new, flags):
    if _libc.renameat2(AT_FDCWD, os.fsencode(str(old)), AT_FDCWD, os.fsencode(str(new)), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), str(old))


def test_renameat2_noreplace_and_exchange(d):
    a, b, c = d / "a", d / "b", d / "c"
    write(a, b"alpha")
    write(b, b"beta")
    expect_errno(errno.EEXIST, renameat2, a, b, RENAME_NOREPLACE)
    assert read(a) == b"alpha" and read(b) == b"beta"
    renameat2(a, c, RENAME_NOREPLACE)
    assert not os.path.exists(a) and read(c) == b"alpha"
    renameat2(b, c, RENAME_EXCHANGE)
    assert read(b) == b"alpha" and read(c) == b"beta"
    os.mkdir(d / "dir")
    write(d / "dir" / "f", b"f")
    renameat2(d / "dir", c, RENAME_EXCHANGE)  # a directory with a file
    assert read(d / "dir") == b"beta" and read(c / "f") == b"f"
    expect_errno(errno.ENOENT, renameat2, d / "missing", b, RENAME_EXCHANGE)


def test_hard_links(d):
    a, b = d / "orig", d / "link"
    write(a, b"shared")
    os.link(a, b)
    sa, sb = os.stat(a), os.stat(b)
    assert sa.st_ino == sb.st_ino and sa.st_nlink == sb.st_nlink == 2
    with open(b, "r+b") as f:
        f.write(b"SHA")
    assert read(a) == b"SHAred"
    os.link(a, d / "third")
    assert os.stat(b).st_nlink == 3
    os.unlink(a)
    assert os.stat(b).st_nlink == 2 and read(d / "third") == b"SHAred"
    os.unlink(d / "third")
    assert os.stat(b).st_nlink == 1
    expect_errno(errno.EEXIST, os.link, b, b)
    os.mkdir(d / "dir")
    expect_errno(errno.EPERM, os.link, d / "dir", d / "dirlink")


def test_symlinks(d):
    target = d / "target"
    write(target, b"pointed at")
    os.symlink("target", d / "rel")
    os.symlink(str(target), d / "abs")
    os.symlink("does/not/exist" * 20, d / "dangling")
    assert os.readlink(d / "rel") == "target"
    assert os.readlink(d / "abs") == str(target)
    assert os.readlink(d / "dangling") == "does/not/exist" * 20
    assert stat.S_ISLNK(os.lstat(d / "rel").st_mode)
    assert os.lstat(d / "abs").st_size == len(str(target))
    assert read(d / "rel") == b"pointed at"
    expect_errno(errno.ENOENT, open, d / "dangling", "rb")
    expect_errno(errno.EINVAL, os.readlink, target)
    os.unlink(d / "rel")
    assert os.path.exists(target)


def test_device_nodes_fifos_and_sockets_are_stored_like_any_inode(vol, d):
    """mknod of character and block devices (pjdfstest's ::char and ::block cases): stat,
    chmod, chown, rename, link and unlink work and st_rdev survives a remount; the mount
    is nodev, so opening a device node is refused by the kernel (EACCES)."""
    chr_dev, blk_dev = os.makedev(1, 3), os.makedev(259, 70000)  # a minor past 255: the long encoding
    os.mknod(d / "chr", stat.S_IFCHR | 0o640, chr_dev)
    os.mknod(d / "blk", stat.S_IFBLK | 0o600, blk_dev)
    os.mknod(d / "fifo", stat.S_IFIFO | 0o644)
    os.mknod(d / "sock", stat.S_IFSOCK | 0o644)
    st = os.lstat(d / "chr")
    assert stat.S_ISCHR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o640 and st.st_rdev == chr_dev
    assert st.st_size == 0 and st.st_nlink == 1
    st = os.lstat(d / "blk")
    assert stat.S_ISBLK(st.st_mode) and st.st_rdev == blk_dev
    assert os.major(st.st_rdev) == 259 and os.minor(st.st_rdev) == 70000
    assert stat.S_ISFIFO(os.lstat(d / "fifo").st_mode) and os.lstat(d / "fifo").st_rdev == 0
    assert stat.S_ISSOCK(os.lstat(d / "sock").st_mode)
    types = {e.name: e for e in os.scandir(d)}
    assert not types["chr"].is_file() and not types["chr"].is_dir()  # readdir's type: DT_CHR
    # Opening: the kernel refuses device nodes on a nodev mount; FIFOs it serves itself.
    expect_errno(errno.EACCES, os.open, d / "chr", os.O_RDONLY)
    expect_errno(errno.EACCES, os.open, d / "blk", os.O_RDONLY)
    fd = os.open(d / "fifo", os.O_RDWR)
    try:
        os.write(fd, b"through the pipe")
        assert os.read(fd, 100) == b"through the pipe"
    finally:
        os.close(fd)
    # Attributes and names.
    os.chmod(d / "chr", 0o604)
    os.chown(d / "chr", 1234, 5678)
    os.rename(d / "chr", d / "chr2")
    os.link(d / "chr2", d / "chr3")
    st = os.lstat(d / "chr3")
    assert stat.S_IMODE(st.st_mode) == 0o604 and (st.st_uid, st.st_gid) == (1234, 5678)
    assert st.st_nlink == 2 and st.st_rdev == chr_dev
    os.unlink(d / "chr2")
    assert os.lstat(d / "chr3").st_nlink == 1
    expect_errno(errno.EEXIST, os.mknod, d / "blk", stat.S_IFBLK | 0o600, blk_dev)
    vol.remount()
    st = os.lstat(d / "chr3")
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == chr_dev and (st.st_uid, st.st_gid) == (1234, 5678)
    assert os.lstat(d / "blk").st_rdev == blk_dev
    assert sorted(os.listdir(d)) == ["blk", "chr3", "fifo", "sock"]
    for name in ("blk", "chr3", "fifo", "sock"):
        os.unlink(d / name)
    assert os.listdir(d) == []


def test_chmod_chown_utimens(d):
    p = d / "meta"
    write(p, b"m")
    os.chmod(p, 0o640)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o640
    os.chmod(p, 0o4755)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o4755
    os.chown(p, 1234, 5678)
    st = os.stat(p)
    assert (st.st_uid, st.st_gid) == (1234, 5678)
    os.chown(p, -1, 42)
    st = os.stat(p)
    assert (st.st_uid, st.st_gid) == (1234, 42)
    atime, mtime = 1_500_000_000_123_456_000, 1_600_000_000_654_321_000
    os.utime(p, ns=(atime, mtime))
    st = os.stat(p)
    assert st.st_atime_ns == atime and st.st_mtime_ns == mtime
    ctime = st.st_ctime_ns
    time.sleep(0.05)
    os.chmod(p, 0o600)
    assert os.stat(p).st_ctime_ns > ctime, "chmod must update ctime"
    before = os.stat(p).st_mtime_ns
    with open(p, "ab") as f:
        f.write(b"x")
    assert os.stat(p).st_mtime_ns > before, "a write must update mtime"
    sub = d / "sub"
    os.mkdir(sub, 0o700)
    assert stat.S_IMODE(os.stat(sub).st_mode) == 0o700
    old = os.umask(0o077)
    try:
        fd = os.open(d / "umasked", os.O_CREAT | os.O_WRONLY, 0o666)
        os.close(fd)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(d / "umasked").st_mode) == 0o600


# --- permissions: another user, through allow_other ---------------------------------

NOBODY = 65534
CHILD = r"""
import errno, os, sys
op, path = sys.argv[1], sys.argv[2]
try:
    if op == "read":
        open(path, "rb").read()
    elif op == "write":
        open(path, "ab").write(b"x")
    elif op == "create":
        open(path, "xb").close()
    elif op == "list":
        os.listdir(path)
    print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])
"""


def _drop_to_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def _python_for_nobody():
    """A python interpreter another user can run (sys.executable may live under /root)."""
    for candidate in ("/usr/bin/python3", sys.executable):
        try:
            proc = subprocess.run([candidate, "-c", "print('OK')"], preexec_fn=_drop_to_nobody, cwd="/",
                                  capture_output=True, text=True, timeout=60)
        except OSError:
            continue
        if proc.stdout.strip() == "OK":
            return candidate
    pytest.fail("no python interpreter that uid 65534 can run", pytrace=False)


def as_nobody(op, path):
    proc = subprocess.run([_python_for_nobody(), "-c", CHILD, op, str(path)], preexec_fn=_drop_to_nobody, cwd="/",
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.parametrize("options", [("allow_other", "default_permissions"), ("allow_other",)],
                         ids=["default_permissions", "daemon_checks"])
def test_permissions_of_another_user(volume_factory, options):
    if os.geteuid() != 0:
        pytest.skip("needs root to run a process as another user")
    vol = volume_factory(options=options)
    top = vol.mnt / "perm"
    os.mkdir(top, 0o755)
    os.chmod(top, 0o755)
    secret, public = top / "secret", top / "public"
    write(secret, b"secret")
    os.chmod(secret, 0o600)
    write(public, b"public")
    os.chmod(public, 0o644)
    assert as_nobody("read", public) == "OK"              # allow_other works at all
    assert as_nobody("read", secret) == "EACCES"
    assert as_nobody("write", public) == "EACCES"
    assert as_nobody("create", top / "new") == "EACCES"  # 0755 directory of root
    assert read(secret) == b"secret" and read(public) == b"public"
    assert not os.path.exists(top / "new")
    shared = top / "shared"
    os.mkdir(shared)
    os.chmod(shared, 0o777)
    assert as_nobody("create", shared / "mine") == "OK"
    st = os.stat(shared / "mine")
    assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY), "new files belong to the caller"
    os.chown(secret, NOBODY, NOBODY)
    assert as_nobody("read", secret) == "OK"
    os.chmod(secret, 0o000)
    assert as_nobody("read", secret) == "EACCES"
    assert read(secret) == b"secret"  # root still can
    private = top / "private"
    os.mkdir(private, 0o700)
    os.chmod(private, 0o700)
    write(private / "inside", b"x")
    os.chmod(private / "inside", 0o644)
    assert as_nobody("list", private) == "EACCES"
    assert as_nobody("read", private / "inside") == "EACCES"  # no search permission on the directory


# --- statfs ----------------------------------------------------------------------------

def test_statfs_tracks_free_space(vol, d):
    before = os.statvfs(vol.mnt)
    assert before.f_frsize > 0 and before.f_bsize > 0
    total = before.f_blocks * before.f_frsize
    assert 256 * MiB < total <= 512 * MiB, f"capacity of a 512 MiB volume: {total}"
    assert before.f_bavail <= before.f_bfree <= before.f_blocks
    assert before.f_namemax >= 255
    p = d / "8mib"
    fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        pwrite_all(fd, np.random.default_rng(2).bytes(8 * MiB), 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    after = os.statvfs(vol.mnt)
    used = (before.f_bfree - after.f_bfree) * before.f_frsize
    assert used >= 8 * MiB, f"writing 8 MiB used {used} bytes of f_bfree"
    os.unlink(p)
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    deadline = time.monotonic() + 10
    while True:
        freed = os.statvfs(vol.mnt)
        if (freed.f_bfree - after.f_bfree) * before.f_frsize >= 8 * MiB or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert (freed.f_bfree - after.f_bfree) * before.f_frsize >= 8 * MiB, "unlink did not free the space"


# --- user.* xattrs --------------------------------------------------------------------

def test_user_xattrs(d):
    p = d / "x"
    write(p, b"data")
    os.setxattr(p, "user.color", b"blue")
    os.setxattr(p, "user.empty", b"")
    big = bytes(range(256)) * 16
    os.setxattr(p, "user.big", big)
    assert os.getxattr(p, "user.color") == b"blue"
    assert os.getxattr(p, "user.empty") == b""
    assert os.getxattr(p, "user.big") == big
    names = set(os.listxattr(p))
    assert {"user.color", "user.empty", "user.big"} <= names
    os.setxattr(p, "user.color", b"green")
    assert os.getxattr(p, "user.color") == b"green"
    expect_errno(errno.EEXIST, os.setxattr, p, "user.color", b"red", os.XATTR_CREATE)
    expect_errno(errno.ENODATA, os.setxattr, p, "user.nothere", b"1", os.XATTR_REPLACE)
    os.removexattr(p, "user.color")
    expect_errno(errno.ENODATA, os.getxattr, p, "user.color")
    expect_errno(errno.ENODATA, os.removexattr, p, "user.color")
    assert "user.color" not in os.listxattr(p)
    assert read(p) == b"data"
    os.mkdir(d / "dir")
    os.setxattr(d / "dir", "user.on_dir", b"yes")
    assert os.getxattr(d / "dir", "user.on_dir") == b"yes"


# --- concurrency --------------------------------------------------------------------------

BLOCK = 16 * 1024
ROUNDS = 64
WRITERS = 4


def _own_data(idx):
    return np.random.default_rng(100 + idx).bytes(2 * MiB + 12345 * idx)


def _shared_block(idx, rnd):
    return bytes([idx * 16 + rnd % 16]) * (BLOCK - 1) + bytes([rnd])


def _writer(directory, idx):
    try:
        own = _own_data(idx)
        with open(os.path.join(directory, f"own-{idx}"), "wb") as f:
            for off in range(0, len(own), 100_003):
                f.write(own[off:off + 100_003])
            f.flush()
            os.fsync(f.fileno())
        fd = os.open(os.path.join(directory, "shared"), os.O_WRONLY)
        try:
            for rnd in range(ROUNDS):  # interleaved disjoint blocks: block r*4+idx
                data = _shared_block(idx, rnd)
                off = (rnd * WRITERS + idx) * BLOCK
                while data:
                    n = os.pwrite(fd, data, off)
                    data, off = data[n:], off + n
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        import traceback
        traceback.print_exc()
        os._exit(1)
    os._exit(0)


def test_concurrent_writers_from_several_processes(d):
    write(d / "shared", b"")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(d), i)) for i in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    for i in range(WRITERS):
        assert read(d / f"own-{i}") == _own_data(i), f"own-{i}"
    shared = read(d / "shared")
    assert len(shared) == ROUNDS * WRITERS * BLOCK
    for rnd in range(ROUNDS):
        for i in range(WRITERS):
            off = (rnd * WRITERS + i) * BLOCK
            assert shared[off:off + BLOCK] == _shared_block(i, rnd), f"shared block {rnd}/{i}"


# --- persistence -----------------------------------------------------------------------------

def test_everything_survives_a_remount(vol, d):
    big = np.random.default_rng(3).bytes(8 * MiB)
    write(d / "big", big)
    write(d / "small", b"small file")
    os.mkdir(d / "dir")
    write(d / "dir" / "nested", b"nested")
    os.link(d / "small", d / "dir" / "hardlink")
    os.symlink("../small", d / "dir" / "symlink")
    os.chmod(d / "small", 0o604)
    os.chown(d / "small", 321, 654)
    os.utime(d / "small", ns=(1_400_000_000_000_000_000, 1_450_000_000_000_000_000))
    os.setxattr(d / "small", "user.kept", b"after remount")
    write(d / "doomed", b"x")
    os.unlink(d / "doomed")
    write(d / "renamed-from", b"renamed")
    os.rename(d / "renamed-from", d / "renamed-to")
    ino = os.stat(d / "small").st_ino
    vol.remount()
    assert read(d / "big") == big
    assert hashlib.sha256(read(d / "big")).digest() == hashlib.sha256(big).digest()
    assert read(d / "small") == b"small file"
    assert read(d / "dir" / "nested") == b"nested"
    assert sorted(os.listdir(d)) == ["big", "dir", "renamed-to", "small"]
    assert sorted(os.listdir(d / "dir")) == ["hardlink", "nested", "symlink"]
    st = os.stat(d / "small")
    assert st.st_ino == os.stat(d / "dir" / "hardlink").st_ino == ino
    assert st.st_nlink == 2
    assert stat.S_IMODE(st.st_mode) == 0o604
    assert (st.st_uid, st.st_gid) == (321, 654)
    assert st.st_mtime_ns == 1_450_000_000_000_000_000
    assert os.getxattr(d / "small", "user.kept") == b"after remount"
    assert os.readlink(d / "dir" / "symlink") == "../small"
    assert read(d / "dir" / "symlink") == b"small file"
    assert read(d / "renamed-to") == b"renamed"


# --- the daemon's life cycle ----------------------------------------------------------------

def test_sigterm_exits_cleanly_and_keeps_the_data(tmp_path):
    vol = Volume()
    try:
        vol.unmount()
        with mounted(vol.image, vol.mnt) as m:
            data = np.random.default_rng(4).bytes(3 * MiB + 7)
            write(vol.mnt / "unsynced", data)  # no fsync: the clean exit flushes it
            m.proc.send_signal(signal.SIGTERM)
            assert m.proc.wait(timeout=120) == 0, m.stderr()
            deadline = time.monotonic() + 10
            while is_mounted(vol.mnt) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not is_mounted(vol.mnt), "the daemon exited on SIGTERM but left the mount behind"
        # mounted() checked the exit status and mmfsck; the data is there after a new mount.
        vol.mount()
        assert read(vol.mnt / "unsynced") == data
    finally:
        vol.close()


STANDARD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@pytest.mark.parametrize("how", ["mount.fuse3", "mount"])
def test_mount_through_the_fuse3_mount_helper(how):
    """`mount -t fuse.mmfs IMAGE MNT` runs /sbin/mount.fuse3 IMAGE MNT -o rw -t fuse.mmfs, which runs
    `mmfs IMAGE MNT -o rw,dev,suid` through /bin/sh: the daemon takes its options after the
    operands and backgrounds itself once mounted. util-linux mount(8) hands its helpers no PATH,
    so `mmfs` must be installed in the standard PATH for `mount -t fuse.mmfs`; when it is not, the
    "mount" variant goes through mount(8) as `mount -t fuse 'DAEMON#IMAGE' MNT` (the same helper and
    the same command line, with the daemon's full path)."""
    daemon = build_dir() / "daemon" / "mmfs"
    if not os.access(daemon, os.X_OK):
        pytest.fail(f"{daemon} is not built", pytrace=False)
    vol = Volume()
    try:
        vol.unmount()
        env = dict(os.environ, PATH=str(daemon.parent) + ":" + os.environ.get("PATH", ""))
        if how == "mount.fuse3":
            helper = shutil.which("mount.fuse3", path=STANDARD_PATH)
            assert helper, "fuse3's mount helper mount.fuse3 is not installed"
            cmd = [helper, str(vol.image), str(vol.mnt), "-o", "rw", "-t", "fuse.mmfs"]
        elif shutil.which("mmfs", path=STANDARD_PATH):
            cmd = ["mount", "-t", "fuse.mmfs", str(vol.image), str(vol.mnt)]
        else:
            cmd = ["mount", "-t", "fuse", f"{daemon}#{vol.image}", str(vol.mnt)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr}"
        pids = []
        try:
            assert is_mounted(vol.mnt)
            pids = daemon_pids(vol.image, vol.mnt)
            assert pids, "no mmfs daemon process found for the mount"
            with open("/proc/self/mountinfo") as f:
                fstypes = [line.split(" - ")[1].split()[0] for line in f
                           if line.split()[4] == os.path.realpath(vol.mnt)]
            assert fstypes == ["fuse.mmfs"], fstypes
            write(vol.mnt / "via-helper", b"mounted by mount(8)")
            assert read(vol.mnt / "via-helper") == b"mounted by mount(8)"
        finally:
            problem = unmount(vol.mnt)
            gone = all(wait_pid_gone(pid, 120) for pid in pids)
        assert problem is None, problem
        assert gone, f"the daemon (pids {pids}) did not exit after fusermount3 -u"
        fsck(vol.image)
        vol.mount()
        assert read(vol.mnt / "via-helper") == b"mounted by mount(8)"
    finally:
        vol.close()


def test_refuses_an_image_that_is_not_mmfs(tmp_path):
    daemon = build_dir() / "daemon" / "mmfs"
    if not os.access(daemon, os.X_OK):
        pytest.fail(f"{daemon} is not built", pytrace=False)
    image = tmp_path / "garbage.img"
    image.write_bytes(np.random.default_rng(5).bytes(4 * MiB))
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        proc = subprocess.run([str(daemon), "-f", str(image), str(mnt)], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode != 0
        assert proc.stderr.strip(), "a refusal must say why"
        assert not is_mounted(mnt)
    finally:
        unmount(mnt)
