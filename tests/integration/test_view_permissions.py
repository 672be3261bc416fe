"""Views obey their array's permissions (docs/daemon.md, "Permissions").

Every node under `A@` (`D@`) carries A's (D's) owner, group and mode with the
write bits cleared (directories get x where they have r), so the kernel
(default_permissions, on with allow_other) refuses another user exactly what
it would refuse on A. Conditions that name other arrays, and a directory's
table views, are checked by the daemon against the caller's uid, gid and
supplementary groups. `/.mmfs/errors` and `/.mmfs/audit` show each user only
the lines of its own requests; `/.mmfs/scrub` is root's.

The other user is `tests` (made by scripts/install-deps.sh); its operations
run in a child python process that drops to it and reports each result as
"OK..." or the errno's name.
"""
import errno
import hashlib
import json
import os
import pwd
import stat
import subprocess
import sys

import numpy as np
import pytest

from mmfs_mount import Volume, expect_errno, getx, make_array, read_bytes, read_json, setx, view
import query_oracle as qo

NOBODY = 65534

# Runs a list of operations as the user it was started as; prints one JSON
# result per operation.
CHILD = r"""
import errno, hashlib, json, os, sys
ops = json.loads(sys.stdin.readline())
def err(e):
    return errno.errorcode.get(e.errno, str(e.errno))
def run(op):
    kind, path = op[0], op[1]
    try:
        if kind == "read":
            with open(path, "rb") as f:
                return "OK:" + hashlib.sha256(f.read()).hexdigest()
        if kind == "text":
            with open(path) as f:
                return "OK:" + f.read()
        if kind == "stat":
            st = os.stat(path)
            return "OK:%o:%d:%d" % (st.st_mode, st.st_uid, st.st_gid)
        if kind == "list":
            return "OK:" + ",".join(sorted(os.listdir(path)))
        if kind == "getx":
            return "OK:" + os.getxattr(path, op[2]).decode()
        if kind == "setx":
            os.setxattr(path, op[2], op[3].encode())
            return "OK"
        if kind == "write":
            with open(path, "r+b") as f:
                f.write(b"x")
            return "OK"
        if kind == "check":
            # [check, view, dirs that must be searchable, arrays that must be readable]:
            # what access() says of the real nodes against what the view answers.
            allowed = all(os.access(d, os.X_OK) for d in op[2]) and all(os.access(a, os.R_OK) for a in op[3])
            try:
                with open(path, "rb") as f:
                    f.read()
                got = "OK"
            except OSError as e:
                got = err(e)
            return ("allowed" if allowed else "denied") + ":" + got
        if kind == "hold":
            # Opens the view, waits for the parent's go (a line on stdin), then
            # reads through the open descriptor and opens the view afresh.
            fd = os.open(path, os.O_RDONLY)
            print(json.dumps("opened"), flush=True)
            sys.stdin.readline()
            first = hashlib.sha256(os.read(fd, 1 << 20)).hexdigest()
            os.close(fd)
            try:
                with open(path, "rb") as f:
                    again = "OK:" + hashlib.sha256(f.read()).hexdigest()
            except OSError as e:
                again = err(e)
            return ["OK:" + first, again]
        raise ValueError(kind)
    except OSError as e:
        return err(e)
for op in ops:
    print(json.dumps(run(op)), flush=True)
"""


def other_user():
    try:
        pw = pwd.getpwnam("tests")
    except KeyError:
        pytest.fail("the user 'tests' is missing: scripts/install-deps.sh creates it", pytrace=False)
    return pw.pw_uid, pw.pw_gid


def python_for(uid, gid):
    """An interpreter the other user can run (sys.executable may live under /root)."""
    for candidate in ("/usr/bin/python3", sys.executable):
        try:
            proc = subprocess.run([candidate, "-c", "print('OK')"], preexec_fn=dropper(uid, gid), cwd="/",
                                  capture_output=True, text=True, timeout=60)
        except OSError:
            continue
        if proc.stdout.strip() == "OK":
            return candidate
    pytest.fail(f"no python interpreter that uid {uid} can run", pytrace=False)


def dropper(uid, gid, groups=()):
    def drop():
        os.setgroups(list(groups))
        os.setgid(gid)
        os.setuid(uid)
    return drop


class As:
    """Runs operations as another user: `as_user(("read", path), ...)` -> results."""

    def __init__(self, uid, gid, groups=()):
        self.uid, self.gid, self.groups = uid, gid, tuple(groups)
        self.python = python_for(uid, gid)

    def popen(self):
        return subprocess.Popen([self.python, "-c", CHILD], preexec_fn=dropper(self.uid, self.gid, self.groups),
                                cwd="/", stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def __call__(self, *ops):
        proc = self.popen()
        out, err = proc.communicate(json.dumps([[str(x) for x in op] for op in ops]) + "\n", timeout=120)
        assert proc.returncode == 0, err
        return [json.loads(line) for line in out.splitlines()]

    def one(self, *op):
        return self(op)[0]


def sha(data) -> str:
    if isinstance(data, np.ndarray):
        data = np.ascontiguousarray(data).tobytes()
    return "OK:" + hashlib.sha256(data).hexdigest()


SHAPE = (4, 5, 6)


@pytest.fixture(scope="module")
def world():
    """A volume mounted with allow_other and its tree, made by root."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run a process as another user")
    uid, gid = other_user()
    vol = Volume(options=("allow_other",))
    try:
        rng = np.random.default_rng(52)
        d = vol.mnt / "d"
        os.mkdir(d)
        os.chmod(d, 0o755)
        data = {}

        def array(path, mode, owner=(0, 0), values=None, shape=SHAPE):
            arr = values if values is not None else (rng.integers(1, 9000, size=shape)).astype("float64")
            make_array(path, shape, "float64", layout="naive", data=arr)
            os.chown(path, *owner)
            os.chmod(path, mode)
            data[path.name] = arr
            return path

        array(d / "secret", 0o600)
        array(d / "pub", 0o644)
        array(d / "grp", 0o640, owner=(0, gid))      # the group's: readable by it
        array(d / "theirs", 0o600, owner=(uid, gid))  # the other user's own
        array(d / "nobodys", 0o600, owner=(NOBODY, NOBODY))
        priv = d / "priv"
        os.mkdir(priv)
        os.chmod(priv, 0o700)
        array(priv / "x", 0o644)
        for name, modes in (("tbl", (0o644, 0o600)), ("tpub", (0o644, 0o644))):
            t = d / name
            os.mkdir(t)
            os.chmod(t, 0o755)
            for i, mode in enumerate(modes):
                array(t / f"c{i}", mode, values=np.arange(1, 65, dtype="float64") * (i + 1), shape=(64,))
        yield vol, As(uid, gid), data, (uid, gid)
    finally:
        vol.close()


def test_the_issue_table(world):
    vol, as_user, data, _ = world
    d = vol.mnt / "d"
    secret, pub = d / "secret", d / "pub"
    refused = [("read", secret), ("read", view(secret, "slice", 0, 0)), ("read", view(secret, "box", "0:2,0:2,:")),
               ("read", view(secret, "plod", 2)), ("read", view(secret, "info")),
               ("read", view(secret, "lbn", "0,0,0")), ("read", view(secret, "plan", "slice", 0, 0)),
               ("read", view(secret, "query", ">1", "count")), ("read", view(secret, "plod", "3@", "slice", 1, 2)),
               ("read", view(secret, "box", "0:2,:,:@", "query", ">1", "count")),
               ("stat", view(secret, "slice", 0, 0)), ("list", view(secret)),
               ("read", view(pub, "query", "secret>6.5&>4000", "values")),
               ("read", view(pub, "query", "secret>0", "count")),
               ("read", view(pub, "plan", "query", "secret>0", "count")),
               ("read", view(d / "priv" / "x", "slice", 0, 0)), ("read", view(d / "priv" / "x", "info")),
               ("read", view(d / "nobodys", "slice", 0, 0))]
    got = as_user(*refused)
    for op, result in zip(refused, got):
        assert result == "EACCES", f"{op}: {result}"
    # What the user may read, it reads, and equal to numpy.
    allowed = [(("read", view(pub, "slice", 0, 1)), sha(data["pub"][1])),
               (("read", view(pub, "box", "1:3,:,2")), sha(data["pub"][1:3, :, 2])),
               (("read", view(d / "grp", "slice", 2, 3)), sha(data["grp"][:, :, 3])),
               (("read", view(d / "theirs", "slice", 1, 4)), sha(data["theirs"][:, 4, :])),
               (("read", d / "theirs"), sha(data["theirs"]))]
    got = as_user(*[op for op, _ in allowed])
    for (op, expected), result in zip(allowed, got):
        assert result == expected, f"{op}: {result}"
    # A condition naming only readable arrays is answered.
    mask = (data["grp"] > 4000) & (data["pub"] > 100)
    assert as_user.one("text", view(pub, "query", "grp>4000&>100", "count")) == f"OK:{int(mask.sum())}\n"
    # Root reads it all, unchanged.
    assert read_bytes(view(secret, "slice", 0, 0)) == data["secret"][0].tobytes()
    assert read_bytes(secret) == data["secret"].tobytes()


def test_view_nodes_carry_the_arrays_owner_and_mode(world):
    vol, _, _, (uid, gid) = world
    d = vol.mnt / "d"
    for name, mode, owner in (("secret", 0o600, (0, 0)), ("pub", 0o644, (0, 0)), ("grp", 0o640, (0, gid)),
                              ("theirs", 0o600, (uid, gid))):
        a = d / name
        read_mode = mode & 0o444
        for p, is_dir in ((view(a), True), (view(a, "slice"), True), (view(a, "slice", 0), True),
                          (view(a, "slice", 0, 1), False), (view(a, "info"), False),
                          (view(a, "query", ">1"), True), (view(a, "query", ">1", "count"), False),
                          (view(a, "plod", "2@", "slice", 0), True)):
            st = os.stat(p)
            assert (st.st_uid, st.st_gid) == owner, p
            expected = (stat.S_IFDIR | read_mode | read_mode >> 2) if is_dir else (stat.S_IFREG | read_mode)
            assert st.st_mode == expected, f"{p}: {st.st_mode:o} != {expected:o}"
    # A directory's views carry the directory's.
    st = os.stat(view(d / "priv"))
    assert (st.st_mode, st.st_uid) == (stat.S_IFDIR | 0o500, 0)
    st = os.stat(view(d / "tbl", "info"))
    assert st.st_mode == stat.S_IFREG | 0o444


def test_chmod_and_chown_show_at_once(world):
    vol, as_user, data, (uid, gid) = world
    d = vol.mnt / "d"
    a = d / "pub"
    v = view(a, "slice", 0, 2)
    try:
        assert as_user.one("read", v) == sha(data["pub"][2])
        # A view opened before the chmod keeps reading (the check is at open,
        # as for any file); a fresh open is refused at once.
        proc = as_user.popen()
        proc.stdin.write(json.dumps([["hold", str(v)]]) + "\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline()) == "opened"
        os.chmod(a, 0o600)
        out, err = proc.communicate("go\n", timeout=60)
        assert proc.returncode == 0, err
        first, again = json.loads(out.splitlines()[-1])
        assert first == sha(data["pub"][2]) and again == "EACCES"
        assert as_user.one("stat", v) == "EACCES"  # the walk stops at pub@
        assert os.stat(v).st_mode == stat.S_IFREG | 0o400
        os.chown(a, uid, gid)
        assert as_user.one("read", v) == sha(data["pub"][2])
        assert as_user.one("stat", v) == f"OK:{stat.S_IFREG | 0o400:o}:{uid}:{gid}"
        os.chown(a, 0, 0)
        os.chmod(a, 0o640)
        assert as_user.one("read", v) == "EACCES"
        os.chown(a, 0, gid)
        assert as_user.one("read", v) == sha(data["pub"][2])
        # A condition on the array follows its mode too.
        os.chmod(a, 0o600)
        assert as_user.one("read", view(d / "grp", "query", "pub>0", "count")) == "EACCES"
    finally:
        os.chown(a, 0, 0)
        os.chmod(a, 0o644)
    assert as_user.one("read", v) == sha(data["pub"][2])
    assert as_user.one("text", view(d / "grp", "query", "pub>0", "count")) == f"OK:{data['pub'].size}\n"


def test_supplementary_groups_count_for_conditions(world):
    vol, _, data, (uid, gid) = world
    d = vol.mnt / "d"
    # A user whose primary group is nogroup but who is in the group of `grp`.
    member = As(NOBODY, NOBODY, groups=(gid,))
    assert member.one("read", view(d / "grp", "slice", 0, 0)) == sha(data["grp"][0])  # the kernel's check
    mask = (data["grp"] > 10) & (data["pub"] > 10)
    assert member.one("text", view(d / "pub", "query", "grp>10&>10", "count")) == f"OK:{int(mask.sum())}\n"
    outsider = As(NOBODY, NOBODY)
    assert outsider.one("read", view(d / "pub", "query", "grp>10&>10", "count")) == "EACCES"


def test_table_views_need_every_column(world):
    vol, as_user, data, _ = world
    d = vol.mnt / "d"
    tbl, tpub = d / "tbl", d / "tpub"
    assert as_user.one("read", view(tbl, "rows", "0:4")) == "EACCES"    # c1 is root's 0600
    assert as_user.one("read", view(tbl, "info")) == "EACCES"
    assert as_user.one("read", view(tbl, "query", "c1>3", "count")) == "EACCES"
    assert as_user.one("read", view(tbl, "query", "c0>3&c1>3", "count")) == "EACCES"
    assert as_user.one("text", view(tbl, "query", "c0>3", "count")) == f"OK:{int((data['c0'] > 3).sum())}\n"
    rows = np.empty(4, dtype=[("c0", "f8"), ("c1", "f8")])
    rows["c0"], rows["c1"] = np.arange(1, 5) * 1.0, np.arange(1, 5) * 2.0
    assert as_user.one("read", view(tpub, "rows", "0:4")) == sha(rows.tobytes())
    # Moving a table's arrays (into capsules) changes each of them: refused
    # when the caller may not write one, even in a directory it may write.
    os.chmod(tpub, 0o777)
    try:
        assert as_user.one("setx", tpub, "user.mmfs.layout", "capsule") == "EACCES"
    finally:
        os.chmod(tpub, 0o755)
    assert read_bytes(tpub / "c0") == data["c0"].tobytes()
    assert getx(tpub / "c0", "layout") == "naive"


def test_xattrs_follow_the_file_mode(world):
    vol, as_user, _, (uid, _gid) = world
    d = vol.mnt / "d"
    assert as_user.one("getx", d / "secret", "user.mmfs.shape") == "EACCES"
    assert as_user.one("getx", d / "pub", "user.mmfs.shape") == "OK:4,5,6"
    assert as_user.one("setx", d / "pub", "user.mmfs.layout", "hilbert") == "EACCES"
    assert as_user.one("setx", d / "pub", "user.note", "x") == "EACCES"
    assert getx(d / "pub", "layout") == "naive"
    # The owner changes its own array; the relayout runs as the daemon, and
    # the audit log names the user who asked.
    theirs = d / "theirs"
    before = read_bytes(theirs)
    assert as_user.one("setx", theirs, "user.mmfs.layout", "hilbert") == "OK"
    assert getx(theirs, "layout") == "hilbert" and read_bytes(theirs) == before
    audit = (vol.mnt / ".mmfs" / "audit").read_text().splitlines()
    assert any(f"uid {uid} " in line and "/d/theirs" in line and "user.mmfs.layout=hilbert" in line
               for line in audit), audit
    own = as_user.one("text", vol.mnt / ".mmfs" / "audit")
    assert own.startswith("OK:") and "user.mmfs.layout=hilbert" in own
    assert all(f"uid {uid} " in line for line in own[3:].splitlines())
    setx(theirs, "layout", "naive")


def test_control_files(world):
    vol, as_user, _, (uid, _) = world
    d = vol.mnt / "d"
    ctl = vol.mnt / ".mmfs"
    # Root's failures that name a path the user cannot look up stay root's.
    hidden = view(d / "priv" / "x", "slice", 9)
    expect_errno((errno.ERANGE, errno.EINVAL), os.stat, hidden)
    assert "/d/priv/x@/slice/9" in (ctl / "errors").read_text()
    assert as_user.one("read", view(d / "pub", "query", "secret>0", "count")) == "EACCES"
    mine = as_user.one("text", ctl / "errors")
    assert mine.startswith("OK:")
    lines = mine[3:].splitlines()
    assert any("secret" in line and line.startswith("EACCES") for line in lines), lines
    assert not any("/d/priv/" in line for line in lines), lines
    root_view = (ctl / "errors").read_text()
    assert "/d/priv/x@/slice/9" in root_view and "is not readable by uid" in root_view
    # The geometry and counters are the machine's, readable by all; the scrub is root's.
    for name in ("geometry", "stats", "boundaries/0", "adjacent/0/1"):
        assert as_user.one("read", ctl / name).startswith("OK:"), name
    assert as_user.one("read", ctl / "scrub") == "EACCES"
    assert as_user.one("write", ctl / "scrub") == "EACCES"
    assert os.stat(ctl / "scrub").st_mode == stat.S_IFREG | 0o600
    assert read_json(ctl / "scrub")["state"] in ("idle", "done", "running")


def test_views_are_read_only_for_everyone(world):
    vol, as_user, data, _ = world
    theirs = vol.mnt / "d" / "theirs"
    assert as_user.one("write", view(theirs, "slice", 0, 0)) == "EACCES"  # no write bit on a view
    assert as_user.one("setx", view(theirs), "user.x", "1") in ("EACCES", "EPERM", "EROFS")
    assert read_bytes(theirs) == data["theirs"].tobytes()


def test_random_modes_against_access(world):
    """Random modes and owners over a small tree, random view paths: the view
    answers exactly when access() on the array, the arrays a condition names
    and their directories allows it."""
    vol, as_user, _, (uid, gid) = world
    rng = np.random.default_rng(5252)
    top = vol.mnt / "rand"
    os.mkdir(top)
    os.chmod(top, 0o755)
    owners = [(0, 0), (uid, gid), (NOBODY, NOBODY), (0, gid)]
    file_modes = [0o600, 0o640, 0o644, 0o604, 0o400, 0o440, 0o000, 0o444]
    dir_modes = [0o755, 0o711, 0o700, 0o750, 0o705, 0o775]
    shape = (6, 5)
    dirs = []
    for i in range(3):
        sub = top / f"s{i}"
        os.mkdir(sub)
        names = []
        for j in range(3):
            a = sub / f"a{j}"
            make_array(a, shape, "float64", layout="naive", data=rng.integers(1, 100, size=shape) * 1.0)
            names.append(a)
        dirs.append((sub, names))
    consts = {"": ["10", "50.5", "90"], "a0": ["20", "60"], "a1": ["30"], "a2": ["5", "95"]}
    for _ in range(6):
        for sub, names in dirs:
            os.chown(sub, *owners[rng.integers(len(owners))])
            os.chmod(sub, dir_modes[rng.integers(len(dir_modes))])
            for a in names:
                os.chown(a, *owners[rng.integers(len(owners))])
                os.chmod(a, file_modes[rng.integers(len(file_modes))])
        batch = []
        for _ in range(40):
            sub, names = dirs[rng.integers(len(dirs))]
            a = names[rng.integers(len(names))]
            kind = rng.integers(5)
            named = []
            if kind == 0:
                path = view(a, "slice", int(rng.integers(2)), 0)
            elif kind == 1:
                lo = int(rng.integers(0, 5))
                path = view(a, "box", f"{lo}:{lo + 1},:")
            elif kind == 2:
                path = view(a, "info")
            elif kind == 3:
                path = view(a, "plod", int(rng.integers(1, 9)))
            else:
                others = [n.name for n in names]
                tree, cond = qo.random_condition(rng, consts, names=("", *others), max_len=80, depth=2)
                named = sorted(n for n in qo.tree_names(tree) if n)
                path = view(a, "query", cond, "count")
            # The walk needs x on every directory down to the array, r on
            # it and on each array the condition names.
            batch.append((path, [str(top), str(sub)], [str(a), *(str(sub / n) for n in named)]))
        payload = [["check", str(p), searched, readable] for p, searched, readable in batch]
        proc = as_user.popen()
        out, err = proc.communicate(json.dumps(payload) + "\n", timeout=120)
        assert proc.returncode == 0, err
        assert len(out.splitlines()) == len(batch), out
        for (p, _, _), line in zip(batch, out.splitlines()):
            verdict = json.loads(line)
            expected, got = verdict.split(":")
            assert (got == "OK") == (expected == "allowed"), f"{p}: access() says {expected}, the view {got}"
            assert got in ("OK", "EACCES"), f"{p}: {got}"
