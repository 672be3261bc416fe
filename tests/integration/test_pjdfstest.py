"""pjdfstest — the POSIX conformance suite, its Rust rewrite from crates.io — against a
mounted mmfs: every test case must pass (no expected failures).

The setup of the outside report: an 8 GiB `ssd` volume mounted with
`allow_other` (pjdfstest switches to the users nobody and tests), the features
`posix_fallocate`, `rename_ctime`, `utime_now` and `utimensat`, and a secondary
filesystem (the scratch directory, on /var/tmp) for the EXDEV cases.
scripts/install-deps.sh builds pjdfstest into /opt/pjdfstest-VERSION and creates
the user `tests`; $PJDFSTEST names another binary. Skipped only when pjdfstest
is missing and there is no cargo to build it with, or without root.

The run's summary line goes to the end of the pytest output (conftest.py), and
scripts/test.sh repeats it before its totals. Cases pjdfstest itself skips are
allowed only for the reasons listed in ALLOWED_SKIPS.
"""
import os
import pwd
import re
import subprocess
import time

import pytest

import conftest
from mmfs_mount import Volume, cargo_tool

PJDFSTEST_VERSION = "0.2.2"
FEATURES = ["posix_fallocate", "rename_ctime", "utime_now", "utimensat"]
TIMEOUT = 1200  # seconds; the whole run takes well under a minute

# Why pjdfstest may skip a case here (anything else fails the test):
ALLOWED_SKIPS = [
    # The EROFS cases remount the filesystem read-only with mount(8), which for
    # FUSE runs the mount helper, i.e. would start a second daemon; mmfs's `ro`
    # mount is tested in test_daemon_posix.py.
    "Remounts (allow_remount) are not allowed",
    # link::link_count_max: pathconf(LINK_MAX) has no answer through FUSE (and
    # mmfs has no link limit below 2^32).
    "Cannot get value for LINK_MAX",
]

CONFIG = """\
[features]
{features}

[settings]
naptime = 0.001
allow_remount = false
expected_failures = []

[dummy_auth]
entries = [
  ["nobody", "nogroup"],
  ["tests", "tests"],
]
"""

SUMMARY = re.compile(r"Summary: (\d+) failed, (\d+) skipped, (\d+) passed, (\d+) expected failures, (\d+) total")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def pjdfstest():
    return cargo_tool("pjdfstest", PJDFSTEST_VERSION, "PJDFSTEST")


def parse(output):
    """(summary dict, failed case names, [(skipped case, reason)]) of a pjdfstest run."""
    text = ANSI.sub("", output)
    m = SUMMARY.search(text)
    summary = None
    if m:
        summary = dict(zip(["failed", "skipped", "passed", "expected_failures", "total"], map(int, m.groups())))
    lines = text.splitlines()
    failed = [ln.split()[0] for ln in lines if re.search(r"\s(FAILED|PASSED UNEXPECTEDLY)$", ln)]
    skipped = []
    for i, ln in enumerate(lines):
        if ln.rstrip().endswith(" skipped") and not ln.startswith("Summary"):
            reasons = []
            for follow in lines[i + 1:]:
                if not follow.startswith("\t"):
                    break
                reasons.append(follow.strip())
            skipped.append((ln.split()[0], " ".join(reasons)))
    return summary, failed, skipped


def test_pjdfstest_passes_every_case(pjdfstest):
    if os.geteuid() != 0:
        pytest.skip("pjdfstest needs root (allow_other, switching users, device nodes)")
    for user in ("nobody", "tests"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            pytest.fail(f"pjdfstest switches to the user '{user}', which does not exist: run "
                        "scripts/install-deps.sh", pytrace=False)
    vol = Volume(size="8G", geometry="ssd", options=("allow_other",))
    try:
        work = vol.mnt / "pjdfstest"
        work.mkdir()
        work.chmod(0o755)
        secondary = vol.root / "secondary"  # on /var/tmp: another filesystem (EXDEV cases)
        secondary.mkdir()
        config = vol.root / "pjdfstest.toml"
        config.write_text(CONFIG.format(features="\n".join(f"{f} = {{}}" for f in FEATURES)))
        started = time.monotonic()
        proc = subprocess.run([pjdfstest, "-c", str(config), "-p", str(work), "-s", str(secondary)],
                              cwd=work, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=TIMEOUT, env=dict(os.environ, NO_COLOR="1", RUST_BACKTRACE="0"))
        seconds = time.monotonic() - started
        output = proc.stdout + proc.stderr
        summary, failed, skipped = parse(output)
        assert summary, f"pjdfstest (exit {proc.returncode}) printed no summary:\n{output[-4000:]}"
        conftest.TERMINAL_SUMMARY.append(
            f"pjdfstest {PJDFSTEST_VERSION}: {summary['total']} cases, {summary['failed']} failed, "
            f"{summary['skipped']} skipped, {summary['passed']} passed ({seconds:.0f} s; {', '.join(FEATURES)})")
        errors = vol.errors()
        assert summary["failed"] == 0 and not failed and proc.returncode == 0, (
            f"pjdfstest: {summary['failed']} failed (exit {proc.returncode}): {' '.join(failed)}\n"
            + "\n".join(ln for ln in ANSI.sub("", output).splitlines()
                        if any(name in ln for name in failed) or ln.startswith("\t"))[-8000:]
            + f"\n.mmfs/errors (last lines):\n{errors[-2000:]}")
        unexpected = [(name, why) for name, why in skipped if not any(a in why for a in ALLOWED_SKIPS)]
        assert not unexpected, f"pjdfstest skipped cases for unexpected reasons: {unexpected}"
        assert summary["passed"] + summary["skipped"] == summary["total"] and summary["passed"] >= 350
    finally:
        vol.close()  # unmounts (even after a failure), checks the daemon's exit and mmfsck
