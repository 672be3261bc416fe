"""The mmfs daemon under a benchmark (bench/bench_daemon.py and the scripts
that import it from there): Daemon mounts an image with the built daemon in
the foreground, waits for the mount, keeps its output in a log and unmounts
it again; fresh_volume formats an image and mounts it; read_stats and
stats_delta read the daemon's counters (MOUNT/.mmfs/stats) and their change
over a timed read."""
import json
import os
import shlex
import subprocess
import time
from pathlib import Path

from bench_daemon_util import BenchError, log


class Daemon:
    def __init__(self, binary, image, mnt, options, logpath):
        self.binary, self.image, self.mnt = binary, image, mnt
        self.options, self.logpath = options, logpath
        self.proc = None
        self.logf = None
        self.mounted_before = False

    def mount(self, timeout=60.0):
        cmd = [self.binary, "-f"]
        if self.options:
            cmd += ["-o", self.options]
        cmd += [self.image, self.mnt]
        self.logf = open(self.logpath, "ab" if self.mounted_before else "wb")
        self.mounted_before = True
        self.logf.write(f"\n=== {shlex.join(cmd)}\n".encode())
        self.logf.flush()
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                self.proc = None
                raise BenchError(f"the daemon exited with status {rc} before mounting; "
                                 f"its output:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise BenchError(f"{self.mnt} not mounted after {timeout:.0f} s; "
                                 f"daemon output:\n{self.log_tail()}")
            time.sleep(0.05)

    def log_tail(self, n=4000):
        try:
            with open(self.logpath, "rb") as f:
                data = f.read()
            return data[-n:].decode(errors="replace")
        except OSError:
            return "(no log)"

    def unmount(self):
        """Always safe to call; unmounts and waits for the daemon to exit."""
        if os.path.ismount(self.mnt):
            ok = False
            for attempt in range(10):
                p = subprocess.run(["fusermount3", "-u", self.mnt], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
                if p.returncode == 0:
                    ok = True
                    break
                time.sleep(0.3 * (attempt + 1))
            if not ok:
                log(f"WARNING: fusermount3 -u {self.mnt} failed ({p.stderr.strip()}); lazy unmount")
                subprocess.run(["fusermount3", "-uz", self.mnt])
        if self.proc is not None:
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                log(f"WARNING: daemon pid {self.proc.pid} still running 120 s after unmount; SIGTERM")
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            rc = self.proc.returncode
            self.proc = None
            if rc != 0:
                log(f"WARNING: the daemon exited with status {rc}; output:\n{self.log_tail()}")
        if self.logf:
            self.logf.close()
            self.logf = None


def fresh_volume(build, image, mnt, geometry, size, mkfs_args=(), options=""):
    """mkfs.mmfs -q -f -s SIZE -g GEOMETRY [MKFS_ARGS] IMAGE, then the daemon of
    BUILD mounted at MNT (its log beside the image): the Daemon, mounted."""
    subprocess.run([str(Path(build) / "mkfs" / "mkfs.mmfs"), "-q", "-f", "-s", size, "-g", geometry,
                    *mkfs_args, str(image)], check=True)
    Path(mnt).mkdir(exist_ok=True)
    daemon = Daemon(str(Path(build) / "daemon" / "mmfs"), str(image), str(mnt), options,
                    str(Path(image).with_suffix(".daemon.log")))
    daemon.mount()
    return daemon


def read_stats(mnt):
    try:
        with open(os.path.join(mnt, ".mmfs", "stats"), "rb") as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def stats_delta(before, after):
    if not isinstance(before, dict) or not isinstance(after, dict):
        return None
    out = {}
    for k, v in after.items():
        b = before.get(k)
        if isinstance(v, (int, float)) and isinstance(b, (int, float)) and not isinstance(v, bool):
            out[k] = v - b
    return out
