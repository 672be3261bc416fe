"""Crash campaign: the daemon is killed with SIGKILL at random moments
of a mixed workload, again and again, and after every crash the volume must be
clean and hold everything that was made durable (docs/reference.md §9: "Data written and
fsynced survives a crash of the daemon ... metadata is always consistent after
a crash (mount needs no repair; mmfsck finds nothing)"; §4: a relayout leaves
"either the old or the new placement, never a mix").

One 512 MiB atlas10k3 volume for the whole campaign. Each crash point:

1. the daemon is started (`mmfs -f`), WORKERS processes (crash_worker.py) run
   random operations on their own directories — plain files created,
   overwritten, appended to, truncated, renamed (over others too), unlinked,
   unlinked while open and written; arrays created through the schema xattrs
   (every layout, index or not) or converted from a plain file of their
   bytes, written (whole rows, or spans that cut elements and cells), relaid
   out (layout or order), indexed or unindexed, given copies in other layouts
   (set before the shape, or built, changed and dropped later; the kills hit
   their background catch-up after writes too), truncated to 0, renamed,
   unlinked — each to its durability point, journalled outside the mount;
2. after a random delay (mostly 0.05-1.5 s; one point in 20 waits up to 7 s,
   so the daemon's 5-second flusher runs too) the daemon gets SIGKILL; the
   workers' calls fail with ENOTCONN/ECONNABORTED and they exit;
3. the dead mount is cleaned (`fusermount3 -u`), `mmfsck -n` must find the
   volume clean, the daemon is started again, and crash_verify.py checks every
   journalled object (contents, a slice view, `A@/info` against the xattrs,
   every copy's bytes through `A@/copy/K`, query counts against numpy) and
   the state the operation in flight left.

At the end the volume is unmounted cleanly (exit 0, mmfsck clean), remounted
and checked once more, emptied, and its free space must be what it was when
new. The count of crash points is $MMFS_CRASH_POINTS (default POINTS below,
sized for CI; scripts/stress.sh runs 10,000), the seed $MMFS_CRASH_SEED; a
failure names the crash point, seed and operations in flight;
MMFS_CRASH_KEEP=1 keeps the failed campaign's volume and its last round's
journals.
"""
import collections
import fcntl
import json
import multiprocessing
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import pytest

import conftest
import crash_model as cm
import crash_verify
import crash_worker
from mmfs_mount import EXIT_TIMEOUT, SCRATCH, fsck, is_mounted, mkfs, start_daemon, unmount

POINTS = int(os.environ.get("MMFS_CRASH_POINTS", "40"))
SEED = int(os.environ.get("MMFS_CRASH_SEED", "19"))
WORKERS = 2
WORKER_SECONDS = 60.0  # a worker never killed by then fails the test
LOCK_TIMEOUT = 30.0  # seconds for a killed daemon's lock on the image to go
KEEP = os.environ.get("MMFS_CRASH_KEEP") == "1"  # keep a failed campaign's volume for a look


def kill_delay(rng: random.Random) -> float:
    if rng.random() < 0.05:
        return rng.uniform(1.5, 7.0)
    return rng.uniform(0.05, 1.5)


class Rig:
    """The campaign's volume and its daemon (started, killed, restarted)."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(dir=SCRATCH, prefix="mmfs-crash-"))
        self.image, self.mnt = self.root / "vol.img", self.root / "mnt"
        self.mount = None

    def start(self):
        assert self.mount is None
        self.mount = start_daemon(self.image, self.mnt)

    def crash(self):
        """SIGKILL to the daemon, then the dead mount cleaned."""
        mount, self.mount = self.mount, None
        rc = mount.proc.poll()
        assert rc is None, f"the daemon exited by itself (status {rc}) before it was killed:\n{mount.stderr()}"
        mount.proc.kill()  # our own child, by its pid
        mount.proc.wait(timeout=30)
        problem = unmount(self.mnt)
        assert problem is None, problem
        self.wait_unlocked()

    def wait_unlocked(self):
        """Waits for the dead daemon's lock on the image to go. Its io_uring
        requests in flight hold the image open after the process is gone
        until they complete (the kernel tears the ring down afterwards), so
        mmfsck or a new daemon right away may find the image in use — and
        rightly: writes of the dead one may still land."""
        deadline = time.monotonic() + LOCK_TIMEOUT
        fd = os.open(self.image, os.O_RDONLY)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    return
                except BlockingIOError:
                    assert time.monotonic() < deadline, \
                        f"{self.image} is still locked {LOCK_TIMEOUT:.0f} s after the daemon was killed"
                    time.sleep(0.01)
        finally:
            os.close(fd)

    def stop(self):
        """A clean unmount: the daemon must exit with status 0 and mmfsck find nothing."""
        mount, self.mount = self.mount, None
        problem = unmount(self.mnt)
        rc = mount.proc.wait(timeout=EXIT_TIMEOUT)
        assert problem is None and rc == 0, f"unmount: {problem}; daemon status {rc}\n{mount.stderr()}"
        fsck(self.image)

    def errors(self):
        try:
            return (self.mnt / ".mmfs" / "errors").read_text()[-1500:]
        except OSError as e:
            return repr(e)

    def close(self, failed):
        if self.mount is not None and self.mount.proc.poll() is None:
            self.mount.proc.kill()  # our own child, by its pid
            self.mount.proc.wait(timeout=30)
        self.mount = None
        unmount(self.mnt)
        if failed and KEEP:
            print(f"MMFS_CRASH_KEEP: the volume and the journals are in {self.root}")
        elif not is_mounted(self.mnt):
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def rig(request):
    r = Rig()
    try:
        mkfs(r.image, "512M", "atlas10k3")
        yield r
    finally:
        r.close(failed=getattr(request.node, "campaign_failed", True))


class Journal:
    """A worker's journal, taken round by round: the round's records move to
    journalK.last.jsonl (kept for a look at a failure; the test holds the
    model, and a long campaign would otherwise fill the disk with records)."""

    def __init__(self, path):
        self.path, self.last = path, path.with_suffix(".last.jsonl")

    def take(self, space, where, done_kinds):
        """Applies the round's completed operations to `space` (counting their
        kinds in `done_kinds`); returns the one in doubt (or None)."""
        os.replace(self.path, self.last)  # each round's worker appends to a new one
        text = self.last.read_text()
        pending = None
        for line in text.splitlines():
            rec = json.loads(line)
            if rec["phase"] == "fail":
                raise AssertionError(f"{where}: worker failure on a live mount: {rec['op']}: {rec['error']}")
            if rec["phase"] == "begin":
                pending = rec["op"]
            else:
                assert rec["op"] == pending, f"{where}: journal out of order: {rec}"
                cm.apply(space, pending)
                done_kinds[pending["kind"]] += 1
                pending = None
        return pending


def run_workers(rig, dirs, spaces, journals, seed, delay, where):
    """Starts the workers, kills the daemon after `delay` s, and waits for the workers."""
    ctx = multiprocessing.get_context("fork")
    procs = []
    try:
        for k in range(WORKERS):
            p = ctx.Process(target=crash_worker.main,
                            args=(str(dirs[k]), spaces[k], str(journals[k].path), seed * 31 + k, WORKER_SECONDS),
                            daemon=True)
            p.start()
            procs.append(p)
        time.sleep(delay)
        rig.crash()
        for p in procs:
            p.join(30)
            assert not p.is_alive(), f"{where}: a worker (pid {p.pid}) is still running 30 s after the crash"
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()  # our own child, by its pid
                p.join(10)
    return [p.exitcode for p in procs]


def test_crash_campaign(rig, request):
    started = time.monotonic()
    rng = random.Random(SEED)
    rig.start()
    dirs = [rig.mnt / f"w{k}" for k in range(WORKERS)]
    for d in dirs:
        d.mkdir()
    crash_worker.fsync_dir(rig.mnt)
    free_when_new = os.statvfs(rig.mnt).f_bfree
    spaces = [cm.Space() for _ in range(WORKERS)]
    journals = [Journal(rig.root / f"journal{k}.jsonl") for k in range(WORKERS)]
    tally = crash_verify.Tally()
    done = collections.Counter()  # operations journalled as durable, by kind
    for point in range(POINTS):
        delay = kill_delay(rng)
        where = f"crash point {point} of {POINTS} (MMFS_CRASH_SEED={SEED}, killed after {delay:.2f} s)"
        codes = run_workers(rig, dirs, spaces, journals, rng.getrandbits(32), delay, where)
        doubts = [j.take(s, where, done) for j, s in zip(journals, spaces)]
        assert codes == [0] * WORKERS, f"{where}: worker exit codes {codes}"
        try:
            fsck(rig.image)
        except AssertionError as e:
            raise AssertionError(f"{where}, in flight: {doubts}:\n{e}") from None
        rig.start()
        for k in range(WORKERS):
            try:
                crash_verify.check_space(str(dirs[k]), spaces[k], doubts[k], tally, rng.getrandbits(32))
            except (AssertionError, OSError) as e:
                raise AssertionError(f"{where}, worker {k}, in flight {doubts[k]}: {e}\n"
                                     f".mmfs/errors ends:\n{rig.errors()}") from None

    # A clean unmount, a remount, everything once more; then emptied, the
    # volume's space must all be free again.
    rig.stop()
    rig.start()
    for k in range(WORKERS):
        crash_verify.check_space(str(dirs[k]), spaces[k], None, tally, k)
    for d in dirs:
        shutil.rmtree(d)
    crash_worker.fsync_dir(rig.mnt)
    rig.stop()
    rig.start()
    free = os.statvfs(rig.mnt).f_bfree
    assert free == free_when_new, f"{free_when_new - free} blocks stay allocated after every file was removed"
    rig.stop()
    request.node.campaign_failed = False

    elapsed = time.monotonic() - started
    outcomes = ", ".join(f"{k} {o} {n}" for (k, o), n in sorted(tally.in_doubt.items()))
    kinds = ", ".join(f"{k} {n}" for k, n in done.most_common())
    line = (f"crash campaign: {POINTS} SIGKILLs of the daemon in {elapsed:.0f} s (seed {SEED}); "
            f"{sum(done.values())} operations journalled durable ({kinds}); checked after the crashes: "
            f"{tally.plain} plain files, {tally.arrays} arrays, {tally.views} slice views, {tally.queries} query "
            f"counts; operations cut by a crash: {sum(tally.in_doubt.values())} ({outcomes})")
    print(line)
    conftest.TERMINAL_SUMMARY.append(line)
