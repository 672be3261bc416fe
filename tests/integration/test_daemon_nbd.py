"""Volumes on NBD exports (fs/device/nbd_device.h): mkfs.mmfs, the daemon and mmfsck
take an NBD URI as they take an image path. The servers are nbdkit's memory
plugin on a unix socket and on 127.0.0.1 (a free port), started by the tests
and always stopped by them (the `nbd_server` fixture's finally); every mount
is unmounted. Traffic goes only to this machine.
"""
import errno
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from mmfs_mount import (SCRATCH, assert_array_bytes, fsck_path, is_mounted, make_array, mkfs_path, mounted,
                        random_array, read_bytes, run_tool, start_daemon, unmount, view)

START_TIMEOUT = 15.0


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NbdServer:
    """`nbdkit --foreground --exit-with-parent ... memory SIZE`, on a unix socket
    in `root` or on 127.0.0.1:free port; .uri, .stop(), .kill()."""

    def __init__(self, root: Path, transport: str, plugin_args=("memory", "512M"), extra=()):
        if shutil.which("nbdkit") is None:
            pytest.fail("nbdkit is not installed (scripts/install-deps.sh installs it)", pytrace=False)
        self.pidfile = root / f"nbdkit.{transport}.pid"
        self.pidfile.unlink(missing_ok=True)
        cmd = ["nbdkit", "--foreground", "--exit-with-parent", "-P", str(self.pidfile)]
        if transport == "unix":
            sock = root / "nbd.sock"
            sock.unlink(missing_ok=True)
            cmd += ["--unix", str(sock)]
            self.uri = f"nbd+unix:///?socket={sock}"
        else:
            port = free_port()
            cmd += ["--ipaddr", "127.0.0.1", "--port", str(port)]
            self.uri = f"nbd://127.0.0.1:{port}/"
        cmd += [*extra, *plugin_args]
        self.log = root / f"nbdkit.{transport}.log"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + START_TIMEOUT
        while not (self.pidfile.exists() and self.pidfile.stat().st_size > 0):
            if self.proc.poll() is not None:
                pytest.fail(f"{' '.join(cmd)} exited with {self.proc.returncode}:\n{self.log.read_text()}",
                            pytrace=False)
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"{' '.join(cmd)}: not listening after {START_TIMEOUT:.0f} s", pytrace=False)
            time.sleep(0.02)

    def kill(self, sig=signal.SIGKILL):
        """Sends `sig` to our own nbdkit (by its pid) and reaps it."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def stop(self):
        self.kill(signal.SIGTERM)


@pytest.fixture
def scratch():
    root = Path(tempfile.mkdtemp(dir=SCRATCH, prefix="mmfs-nbd-"))
    try:
        yield root
    finally:
        if not is_mounted(root / "mnt"):
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def nbd_server(scratch):
    """nbd_server(transport) -> a started NbdServer; every one is stopped after the test."""
    servers = []

    def start(transport="unix", **kw):
        servers.append(NbdServer(scratch, transport, **kw))
        return servers[-1]

    try:
        yield start
    finally:
        for s in servers:
            s.stop()


def mkfs_uri(uri, geometry="atlas10k3", *extra):
    rc, out, err = run_tool(mkfs_path(), "-q", "-f", "-g", geometry, *extra, uri)
    assert rc == 0, f"mkfs.mmfs -g {geometry} {uri}: exit {rc}\n{out}{err}"


def check_views(path, arr):
    """The array, a slice along every dimension, a box and a PLoD equal numpy."""
    assert_array_bytes(read_bytes(path), arr, "whole array")
    for d in range(arr.ndim):
        for i in sorted({0, arr.shape[d] // 2, arr.shape[d] - 1}):
            assert_array_bytes(read_bytes(view(path, "slice", d, i)), np.take(arr, i, axis=d), f"slice {d}/{i}")
    box = tuple(slice(1, s, 2) for s in arr.shape)
    assert_array_bytes(read_bytes(view(path, "box", ",".join(f"1:{s}:2" for s in arr.shape))), arr[box], "box")


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_volume_on_nbd(scratch, nbd_server, transport):
    server = nbd_server(transport)
    mkfs_uri(server.uri)
    mnt = scratch / "mnt"
    rng = np.random.default_rng(16)
    arrays = {
        "naive": random_array(rng, (24, 20, 16), "float64"),
        "multimap": random_array(rng, (30, 17, 9), "int32"),
        "hilbert": random_array(rng, (64, 48), "uint16"),
    }
    with mounted(server.uri, mnt) as m:
        assert m.image == server.uri
        for layout, arr in arrays.items():
            make_array(mnt / layout, arr.shape, arr.dtype.name, layout, arr)
        (mnt / "plain.txt").write_bytes(b"plain bytes over NBD\n" * 1000)
        for layout, arr in arrays.items():
            check_views(mnt / layout, arr)
    # mounted() unmounted the volume, saw the daemon exit 0 and mmfsck -n the URI clean.
    with mounted(server.uri, mnt):
        for layout, arr in arrays.items():
            check_views(mnt / layout, arr)
        assert (mnt / "plain.txt").read_bytes() == b"plain bytes over NBD\n" * 1000
    assert not is_mounted(mnt)


def test_mkfs_refusals(scratch, nbd_server):
    server = nbd_server("unix", plugin_args=("memory", "64M"))
    rc, out, err = run_tool(mkfs_path(), "-q", "-s", "1G", "-g", "ssd", server.uri)
    assert rc != 0 and "less than" in err, err
    ro = NbdServer(scratch, "tcp", plugin_args=("memory", "64M"), extra=("--readonly",))
    try:
        rc, out, err = run_tool(mkfs_path(), "-q", "-g", "ssd", ro.uri)
        assert rc != 0 and "read-only" in err, err
    finally:
        ro.stop()
    rc, out, err = run_tool(mkfs_path(), "-q", "-g", "ssd", "nbd+unix:///?socket=" + str(scratch / "nobody.sock"))
    assert rc != 0 and "cannot connect" in err, err
    # A size the export already has is accepted.
    rc, out, err = run_tool(mkfs_path(), "-q", "-s", "64M", "-g", "ssd", server.uri)
    assert rc == 0, err
    rc, out, err = run_tool(fsck_path(), "-n", server.uri)
    assert rc == 0, out + err


def test_killed_server(scratch, nbd_server):
    """The server dies under a mounted volume: reads fail with EIO, the daemon
    stays up, and the unmount goes through."""
    server = nbd_server("unix")
    mkfs_uri(server.uri)
    mnt = scratch / "mnt"
    arr = random_array(np.random.default_rng(3), (40, 30, 20), "float64")
    with mounted(server.uri, mnt):
        make_array(mnt / "a", arr.shape, "float64", "multimap", arr)
    m = start_daemon(server.uri, mnt)  # a fresh mount: nothing of the array is cached
    try:
        assert_array_bytes(read_bytes(view(mnt / "a", "slice", 0, 1)), arr[1], "slice before the kill")
        server.kill()
        failures = 0
        for d, i in [(0, 7), (1, 11), (2, 13)]:
            try:
                read_bytes(view(mnt / "a", "slice", d, i))
            except OSError as e:
                assert e.errno == errno.EIO, f"slice {d}/{i}: {e}"
                failures += 1
        assert failures == 3, "reads of uncached data after the kill must fail with EIO"
        assert m.proc.poll() is None, f"the daemon died:\n{m.stderr()}"
        os.stat(mnt / "a")  # metadata still served from memory
        errors = (mnt / ".mmfs" / "errors").read_text()
        assert errors.strip(), "the EIO is recorded in /.mmfs/errors"
    finally:
        problem = unmount(mnt)
        try:
            rc = m.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            m.proc.kill()
            m.proc.wait(timeout=30)
            rc = None
    assert problem is None, problem
    assert not is_mounted(mnt)
    assert rc == 0, f"the daemon exited with {rc} after the unmount (nothing was dirty):\n{m.stderr()}"
