"""fio, the raw device's reference in bench/bench_daemon.py: the file fio
reads (make_fio_file), fio's version for the report, and Fio, a sequential
1 MiB read of a file or of a region of the image (O_DIRECT or through the
page cache) that returns fio's bandwidth."""
import json
import os
import shlex

import numpy as np

from bench_daemon_util import BenchError, fmt_bytes, log, run_cmd, write_all
from bench_daemon_workloads import READ_CHUNK


def make_fio_file(path, size):
    if os.path.exists(path) and os.path.getsize(path) >= size:
        return
    log(f"writing the fio file {path} ({fmt_bytes(size)})")
    rng = np.random.default_rng(1)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for off in range(0, size, READ_CHUNK):
            write_all(fd, rng.bytes(min(READ_CHUNK, size - off)), off)
        os.fsync(fd)
    finally:
        os.close(fd)


def fio_version():
    try:
        return run_cmd(["fio", "--version"]).stdout.strip()
    except (OSError, BenchError):
        return None


class Fio:
    ENGINES = ("io_uring", "libaio", "psync")

    def __init__(self, path, size, direct=True, offset=0):
        """`offset` given: a read-only region of a file another process has open (the image)."""
        self.path, self.size, self.direct, self.offset = path, size, direct, offset
        self.engine = None

    def run(self):
        engines = [self.engine] if self.engine else list(self.ENGINES)
        last = None
        for engine in engines:
            cmd = ["fio", "--name=seq", f"--filename={self.path}", "--rw=read", "--bs=1M",
                   f"--direct={int(self.direct)}", f"--ioengine={engine}", "--iodepth=16",
                   f"--size={self.size}", "--output-format=json"]
            if self.offset:
                cmd[3:3] = [f"--offset={self.offset}", "--readonly"]
            p = run_cmd(cmd, check=False)
            out = p.stdout
            if p.returncode == 0 and "{" in out:
                try:
                    data = json.loads(out[out.index("{"):])
                    job = data["jobs"][0]
                    if job.get("error", 0) == 0:
                        if self.engine is None:
                            self.engine = engine
                            self.cmd = shlex.join(cmd)
                        return job["read"]["bw_bytes"]
                except (ValueError, KeyError, IndexError) as e:
                    last = f"unparsable fio output: {e}"
                    continue
            last = (p.stderr or p.stdout).strip()[-500:]
            log(f"fio with ioengine={engine} failed: {last}")
        raise BenchError(f"fio failed: {last}")
