"""Mounting the mmfs FUSE daemon for the integration tests (docs/reference.md §3), and helpers
shared by tests/integration/test_daemon_*.py.

* `mkfs(image, size, geometry)` formats an image file with build/mkfs/mkfs.mmfs.
* `start_daemon(image, mountpoint, options)` runs `build/daemon/mmfs -f [-o OPTS]
  IMAGE MOUNTPOINT` and waits (at most 15 s) until the mount is up.
* `mounted(image, mountpoint, options)` starts the daemon so, yields a
  `Mount`, and on the way out ALWAYS unmounts (`fusermount3 -u`, falling back
  to `fusermount3 -uz` and killing the daemon), waits for the daemon, asserts
  it exited with status 0, and asserts `mmfsck -n IMAGE` finds the volume clean.
* `Volume`: an image in a fresh directory under /var/tmp (it supports
  O_DIRECT) mounted at a fresh mountpoint; `.mnt`, `.image`, `.remount()`,
  `.errors()`. The pytest fixtures `volume` (per test), `module_volume` (per
  module) and `volume_factory` (any number, any geometry or options) are
  defined at the end and imported by conftest.py.
* Array helpers: schema xattrs, writing an array in random pieces, views'
  paths, the numpy emulation of PLoD, errno and `.mmfs/errors` checks.
"""
import contextlib
import ctypes
import errno
import itertools
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest


def build_dir() -> Path:
    """conftest.build_dir() (imported late: conftest imports this module's fixtures)."""
    import conftest
    return conftest.build_dir()


def run_tool(path, *args, input=None, timeout=120):
    import conftest
    return conftest.run_tool(path, *args, input=input, timeout=timeout)

MOUNT_TIMEOUT = 15.0      # seconds for the mount to appear
EXIT_TIMEOUT = 120.0      # seconds for the daemon to exit after the unmount (it flushes)
SCRATCH = "/var/tmp"      # supports O_DIRECT, unlike a tmpfs /tmp

LAYOUTS = ["naive", "zorder", "hilbert", "multimap", "mloc"]
DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"]
SCHEMA = ["shape", "dtype", "layout", "order", "cell", "basic_cube", "priority", "chunk", "compress", "index",
          "bins"]


# --- the built programs --------------------------------------------------------

def _program(*parts):
    path = build_dir().joinpath(*parts)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built: run scripts/build.sh (or set MMFS_BUILD)", pytrace=False)
    return path


def daemon_path() -> Path:
    return _program("daemon", "mmfs")


def mkfs_path() -> Path:
    return _program("mkfs", "mkfs.mmfs")


def fsck_path() -> Path:
    return _program("tools", "mmfsck")


def geom_path() -> Path:
    return _program("tools", "mmfs-geom")


def mkfs(image, size="512M", geometry="atlas10k3"):
    """Formats `image` (created sparse with SIZE bytes); fails the test on error."""
    rc, out, err = run_tool(mkfs_path(), "-q", "-f", "-s", size, "-g", geometry, image)
    assert rc == 0, f"mkfs.mmfs -s {size} -g {geometry} {image}: exit {rc}\n{out}{err}"
    return Path(image)


def fsck(image):
    """mmfsck -n IMAGE must report a clean volume (exit 0)."""
    rc, out, err = run_tool(fsck_path(), "-n", image, timeout=600)
    assert rc == 0, f"mmfsck -n {image}: exit {rc} (the volume is not clean)\n{out}{err}"
    return out


# --- mounts --------------------------------------------------------------------

def is_mounted(mountpoint) -> bool:
    """True when `mountpoint` is a mount point, read from /proc/self/mountinfo
    (never blocks on a hung FUSE daemon, unlike a stat of the mount point)."""
    target = os.path.realpath(mountpoint)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
            if point == target:
                return True
    return False


def unmount(mountpoint, busy_timeout=5.0):
    """fusermount3 -u, retried while busy; then -uz. Returns a problem (str) or None."""
    if not is_mounted(mountpoint):
        return None
    deadline = time.monotonic() + busy_timeout
    last = ""
    while True:
        proc = subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True, text=True, timeout=60)
        if proc.returncode == 0 or not is_mounted(mountpoint):
            return None
        last = proc.stderr.strip()
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    subprocess.run(["fusermount3", "-uz", str(mountpoint)], capture_output=True, text=True, timeout=60)
    return f"fusermount3 -u {mountpoint} failed ({last}); unmounted lazily"


def as_target(image):
    """An image path as a Path; an NBD URI (nbd://..., nbd+unix://...) stays a str."""
    return image if isinstance(image, str) and "://" in image else Path(image)


class Mount:
    """A running daemon: .proc (Popen), .image, .mnt, .stderr_path, .stderr()."""

    def __init__(self, proc, image, mnt, stderr_path):
        self.proc, self.image, self.mnt, self.stderr_path = proc, as_target(image), Path(mnt), Path(stderr_path)

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""


_serial = itertools.count()


def start_daemon(image, mountpoint, options=()) -> Mount:
    """Runs `mmfs -f [-o OPTS] IMAGE MOUNTPOINT` and waits (at most MOUNT_TIMEOUT)
    for the mount. A daemon that exits first or never mounts fails the test,
    killed and its mount point cleaned first. The caller owns the running daemon:
    `mounted` unmounts and checks it; a crash test may kill it."""
    image, mountpoint = as_target(image), Path(mountpoint)
    daemon = daemon_path()
    mountpoint.mkdir(parents=True, exist_ok=True)
    assert not is_mounted(mountpoint), f"{mountpoint} is already a mount point"
    stderr_path = mountpoint.parent / f"{mountpoint.name}.mmfs.{os.getpid()}.{next(_serial)}.stderr"
    cmd = [str(daemon), "-f"]
    if options:
        cmd += ["-o", ",".join(options)]
    cmd += [str(image), str(mountpoint)]
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
    mount = Mount(proc, image, mountpoint, stderr_path)
    try:
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not is_mounted(mountpoint):
            if proc.poll() is not None:
                pytest.fail(f"{' '.join(cmd)} exited with status {proc.returncode} before mounting:\n"
                            f"{mount.stderr()}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"{' '.join(cmd)}: no mount after {MOUNT_TIMEOUT:.0f} s:\n{mount.stderr()}",
                            pytrace=False)
            time.sleep(0.05)
        assert os.path.ismount(mountpoint), f"{mountpoint} is in mountinfo but not a mount point"
    except BaseException:
        if proc.poll() is None:
            proc.kill()  # never came up: our own child, by its pid
        try:
            proc.wait(timeout=30)
        finally:
            unmount(mountpoint)
        raise
    return mount


@contextlib.contextmanager
def mounted(image, mountpoint, options=()):
    """Mounts IMAGE at MOUNTPOINT with the daemon in the foreground (see the module doc)."""
    mount = start_daemon(image, mountpoint, options)
    proc, image, mountpoint = mount.proc, mount.image, mount.mnt
    try:
        yield mount
    finally:
        problems = []
        problem = unmount(mountpoint)
        if problem:
            problems.append(problem)
        try:
            rc = proc.wait(timeout=EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()  # our own child, by its pid
            proc.wait(timeout=30)
            problems.append(f"the daemon did not exit within {EXIT_TIMEOUT:.0f} s of the unmount; killed it")
            rc = None
        if is_mounted(mountpoint):
            unmount(mountpoint)
        if rc is not None and rc != 0:
            problems.append(f"the daemon exited with status {rc} after the unmount (expected 0)")
        if problems:
            raise AssertionError("; ".join(problems) + f"\ndaemon stderr:\n{mount.stderr()}")
        fsck(image)


def stop_daemon(mount, timeout=EXIT_TIMEOUT):
    """Unmounts a daemon started by `start_daemon` (as `mounted` does: fusermount3
    -u, then -uz) and waits for it, killing it after `timeout` seconds. Returns
    (exit status, or None when it had to be killed; list of problems). Runs no
    mmfsck, unlike `mounted`: for volumes a test broke on purpose (a member's
    NBD server killed)."""
    problems = []
    problem = unmount(mount.mnt)
    if problem:
        problems.append(problem)
    try:
        rc = mount.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        mount.proc.kill()  # our own child, by its pid
        mount.proc.wait(timeout=30)
        problems.append(f"the daemon did not exit within {timeout:.0f} s of the unmount; killed it")
        rc = None
    if is_mounted(mount.mnt):
        unmount(mount.mnt)
    return rc, problems


class Volume:
    """A formatted image in a fresh directory under /var/tmp, mounted at .mnt."""

    def __init__(self, size="512M", geometry="atlas10k3", options=()):
        self.root = Path(tempfile.mkdtemp(dir=SCRATCH, prefix="mmfs-test-"))
        os.chmod(self.root, 0o755)  # so other users (permission tests) can reach the mount
        self.image = self.root / "vol.img"
        self.mnt = self.root / "mnt"
        self.size, self.geometry, self.options = size, geometry, tuple(options)
        self._cm = None
        self.mount_info = None
        try:
            mkfs(self.image, size, geometry)
            self.mount()
        except BaseException:
            if not is_mounted(self.mnt):
                shutil.rmtree(self.root, ignore_errors=True)
            raise

    @property
    def is_mounted(self):
        return self._cm is not None

    def mount(self, options=None):
        assert self._cm is None, "already mounted"
        cm = mounted(self.image, self.mnt, self.options if options is None else tuple(options))
        self.mount_info = cm.__enter__()
        self._cm = cm

    def unmount(self):
        """Unmounts; asserts a clean exit (status 0) and a clean mmfsck."""
        cm, self._cm = self._cm, None
        if cm is not None:
            cm.__exit__(None, None, None)

    def remount(self, options=None):
        self.unmount()
        self.mount(options)

    def errors(self) -> str:
        return (self.mnt / ".mmfs" / "errors").read_text()

    def close(self):
        try:
            self.unmount()
        finally:
            if not is_mounted(self.mnt):
                shutil.rmtree(self.root, ignore_errors=True)

    def __repr__(self):
        return f"Volume({self.image} at {self.mnt})"


# --- fixtures (imported by conftest.py) ----------------------------------------

@pytest.fixture
def volume():
    """A fresh 512 MiB atlas10k3 volume, mounted for one test."""
    vol = Volume()
    try:
        yield vol
    finally:
        vol.close()


@pytest.fixture(scope="module")
def module_volume():
    """A 512 MiB atlas10k3 volume shared by the tests of one module."""
    vol = Volume()
    try:
        yield vol
    finally:
        vol.close()


@pytest.fixture(scope="module")
def mems():
    """A 512 MiB mems-g2 volume shared by the tests of one module (capsules, tables)."""
    vol = Volume(geometry="mems-g2")
    try:
        yield vol
    finally:
        vol.close()


@pytest.fixture
def volume_factory():
    """volume_factory(size="512M", geometry="atlas10k3", options=()) -> a mounted Volume,
    closed (unmounted, checked, removed) after the test."""
    made = []

    def make(size="512M", geometry="atlas10k3", options=()):
        vol = Volume(size, geometry, options)
        made.append(vol)
        return vol

    try:
        yield make
    finally:
        failures = []
        for vol in reversed(made):
            try:
                vol.close()
            except AssertionError as e:
                failures.append(str(e))
        assert not failures, "\n".join(failures)


# --- files, xattrs and errors --------------------------------------------------

def xname(name):
    return name if name.startswith(("user.", "trusted.", "security.", "system.")) else "user.mmfs." + name


def setx(path, name, value, flags=0):
    os.setxattr(str(path), xname(name), value if isinstance(value, bytes) else str(value).encode(), flags)


def getx(path, name) -> str:
    return os.getxattr(str(path), xname(name)).decode()


def shape_str(shape):
    return ",".join(str(int(s)) for s in shape)


def expect_errno(expected, fn, *args, **kwargs):
    """Calls fn; it must raise OSError with errno in `expected` (one or a tuple)."""
    expected = expected if isinstance(expected, tuple) else (expected,)
    try:
        result = fn(*args, **kwargs)
    except OSError as e:
        assert e.errno in expected, (f"{getattr(fn, '__name__', fn)}{args}: errno {errno.errorcode.get(e.errno)} "
                                     f"({e}), expected {'/'.join(errno.errorcode[x] for x in expected)}")
        return e
    raise AssertionError(f"{getattr(fn, '__name__', fn)}{args} succeeded (returned {result!r:.200}), expected "
                         f"{'/'.join(errno.errorcode[x] for x in expected)}")


def new_lines(before: str, after: str):
    """The lines appended to a bounded log (`.mmfs/errors`) between two reads."""
    b, a = before.splitlines(), after.splitlines()
    for m in range(len(b) + 1):  # drop the m oldest lines of `before`
        kept = b[m:]
        if a[:len(kept)] == kept:
            return a[len(kept):]
    return a


class ErrorLog:
    """with ErrorLog(vol, "name"): ... -> asserts a new line in .mmfs/errors mentions name."""

    def __init__(self, vol, *names):
        self.vol, self.names = vol, names

    def __enter__(self):
        self.before = self.vol.errors()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            return False
        added = new_lines(self.before, self.vol.errors())
        assert added, f"no new line in {self.vol.mnt}/.mmfs/errors"
        for name in self.names:
            assert any(name in line for line in added), f"no new line of .mmfs/errors mentions {name!r}: {added}"
        return False


def fsync_dir(path):
    """fsync of a directory (makes its entries durable)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pwrite_all(fd, data, offset):
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        assert n > 0
        view, offset = view[n:], offset + n


def pread_all(fd, length, offset):
    out = bytearray()
    while len(out) < length:
        chunk = os.pread(fd, length - len(out), offset + len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def random_pieces(rng, total, max_len):
    """Random (offset, length) pieces covering [0, total) exactly, in random order."""
    pieces, off = [], 0
    while off < total:
        n = int(rng.integers(1, max_len + 1))
        n = min(n, total - off)
        pieces.append((off, n))
        off += n
    order = rng.permutation(len(pieces))
    return [pieces[i] for i in order]


def write_pieces(path, data, pieces):
    data = memoryview(data).cast("B")
    fd = os.open(path, os.O_WRONLY)
    try:
        for off, n in pieces:
            pwrite_all(fd, data[off:off + n], off)
    finally:
        os.close(fd)


def random_array(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        arr = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    else:
        arr = (rng.standard_normal(size=shape) * 1000).astype(dtype)
    flat = arr.reshape(-1)
    flat[flat == 0] = 1  # no element equals the zeros of unwritten data
    return arr


def make_array(path, shape, dtype="float64", layout=None, data=None, attrs=None, fsync=True):
    """Creates an array file: schema xattrs, then shape, then (optionally) its data."""
    path = Path(path)
    with open(path, "xb"):
        pass
    if dtype is not None:
        setx(path, "dtype", np.dtype(dtype).name)
    if layout is not None:
        setx(path, "layout", layout)
    for name, value in (attrs or {}).items():
        setx(path, name, value)
    setx(path, "shape", shape_str(shape))
    if data is not None:
        write_array(path, data, fsync=fsync)
    return path


def write_array(path, data, fsync=True):
    fd = os.open(path, os.O_WRONLY)
    try:
        pwrite_all(fd, np.ascontiguousarray(data).tobytes(), 0)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_array(path, dtype, shape):
    return np.fromfile(str(path), dtype=dtype).reshape(shape)


def assert_array_bytes(got: bytes, expected: np.ndarray, what=""):
    exp = np.ascontiguousarray(expected).tobytes()
    if got == exp:
        return
    item = expected.dtype.itemsize
    msg = f"{what}: {len(got)} bytes, expected {len(exp)}"
    if len(got) == len(exp):
        g = np.frombuffer(got, dtype=expected.dtype)
        e = np.frombuffer(exp, dtype=expected.dtype)
        bad = np.flatnonzero(g != e) if item else []
        if len(bad):
            i = int(bad[0])
            msg += (f"; {len(bad)} of {e.size} elements differ, first at flat index {i}"
                    f" (C index {np.unravel_index(i, expected.shape) if expected.ndim else ()}): {g[i]!r} != {e[i]!r}")
        else:
            msg += "; elements equal but bytes differ (padding or NaN bits)"
    raise AssertionError(msg)


def view(array_path, *parts) -> Path:
    """The path of a view of `array_path`: view(a, "slice", 1, 2) -> a@/slice/1/2."""
    return Path(str(array_path) + "@").joinpath(*map(str, parts))


def read_bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def read_json(path):
    return json.loads(Path(path).read_text())


def sel_string(sel):
    """numpy-style selection (ints, slices) -> the SEL of `A@/box/SEL`."""
    items = []
    for s in sel:
        if isinstance(s, slice):
            if s.start is None and s.stop is None and s.step is None:
                items.append(":")
            elif s.step is None:
                items.append(f"{s.start}:{s.stop}")
            else:
                items.append(f"{s.start}:{s.stop}:{s.step}")
        else:
            items.append(str(int(s)))
    return ",".join(items)


def plod(arr: np.ndarray, k: int) -> np.ndarray:
    """docs/reference.md §5: keep the K most significant bytes of each little-endian element;
    float64 fills the dropped bytes with 0x7F (the most significant dropped byte)
    then 0xFF (MLOC), other dtypes with zeros."""
    arr = np.ascontiguousarray(arr)
    item = arr.dtype.itemsize
    assert 1 <= k <= item
    b = arr.view(np.uint8).reshape(-1, item).copy()
    drop = item - k
    if drop:
        if arr.dtype == np.float64:
            b[:, drop - 1] = 0x7F
            b[:, :drop - 1] = 0xFF
        else:
            b[:, :drop] = 0
    return b.view(arr.dtype).reshape(arr.shape)


def parse_ints(value):
    """An info/xattr list: JSON list or "a,b,c" string -> list of ints."""
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value]
    return [int(v) for v in str(value).split(",") if v.strip() != ""]


def is_sanitized(binary) -> bool:
    """True for a binary built with AddressSanitizer (meson -Dsanitize=true)."""
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


def daemon_pids(image, mountpoint):
    """Pids of processes running the mmfs daemon for IMAGE at MOUNTPOINT (for a
    daemon started by `mount -t fuse.mmfs`, which backgrounds)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv if a]
        if args and os.path.basename(args[0]) == "mmfs" and str(image) in args and str(mountpoint) in args:
            pids.append(int(entry))
    return pids


def daemon_status_kib(vol, field):
    """A KiB field of /proc/PID/status (VmRSS, VmLck, ...) of the daemon serving `vol`."""
    [pid] = daemon_pids(vol.image, vol.mnt)
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def wait_pid_gone(pid, timeout):
    """Waits until pid has exited (or is a zombie of someone else's)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False



# --- outside tools built from crates.io by scripts/install-deps.sh ---------------

def cargo_tool(name, version, env_var):
    """The path of an outside test tool (pjdfstest, fsx) that install-deps.sh
    builds into /opt/NAME-VERSION: $ENV_VAR, then /opt, then PATH, then
    ~/.cargo/bin. Skips the test only where there is no cargo to build it
    with; otherwise a missing tool fails it (CI installs both)."""
    for c in (os.environ.get(env_var), f"/opt/{name}-{version}/bin/{name}", shutil.which(name),
              str(Path.home() / ".cargo" / "bin" / name)):
        if c and os.access(c, os.X_OK):
            return c
    if shutil.which("cargo") is None and not os.access(Path.home() / ".cargo" / "bin" / "cargo", os.X_OK):
        pytest.skip(f"{name} is not installed and there is no cargo to build it "
                    "(scripts/install-deps.sh installs both)")
    pytest.fail(f"{name} {version} is not installed: run scripts/install-deps.sh (or set ${env_var})",
                pytrace=False)


def cached_pages(fd):
    """Pages of fd's file in the page cache (cachestat(2), Linux 6.5), or None
    where the call is missing."""
    if platform.machine() != "x86_64":
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    whole = (ctypes.c_uint64 * 2)(0, 0)  # offset 0, length 0: to the end
    stat = (ctypes.c_uint64 * 5)()
    if libc.syscall(451, fd, whole, stat, 0) != 0:
        if ctypes.get_errno() == errno.ENOSYS:
            return None
        raise OSError(ctypes.get_errno(), "cachestat")
    return stat[0]
