#!/usr/bin/env python3
"""Checks that every #include "X/..." of the project's own code points down the
layer order (docs/architecture.md): a library may include itself and the
libraries below it, never one above; that tests/unit/ mirrors the source
folders; and that every library file D/x.cc has its tests in
tests/unit/D/test_x.cc (unless UNTESTED_OK exempts it, with a reason). Exits 1
and names each upward include, misplaced test or untested file.

    scripts/check-layers.py              check the tree
    scripts/check-layers.py --list       print the order and what each may use
    scripts/check-layers.py --untested   list the library files without a test file of their name
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Each library (a folder) and the libraries it may include besides itself.
# Listed bottom-up: util (byte encodings, rounding, stats; headers only)
# uses nothing and every other library may use it; the pure libraries use
# nothing else of ours (layouts only geometry), the fs/ layers build on them
# and on each other in this order.
BOTTOM = ["util"]
ORDER = [
    ("util", []),
    ("geometry", []),
    ("indexes", []),
    ("layouts", ["geometry"]),
    ("fs/util", []),
    ("fs/device", ["fs/util", "geometry"]),
    ("fs/meta", ["fs/device", "fs/util", "geometry", "layouts"]),
    ("fs/volume", ["fs/meta", "fs/device", "fs/util", "geometry", "layouts"]),
    ("fs/file", ["fs/meta", "fs/device", "fs/util", "geometry", "layouts"]),
    ("fs/mloc", ["fs/meta", "fs/device", "fs/util", "geometry", "layouts", "indexes"]),
    ("fs/array", ["fs/file", "fs/mloc", "fs/meta", "fs/device", "fs/util", "geometry", "layouts", "indexes"]),
    ("fs/table", ["fs/array", "fs/file", "fs/mloc", "fs/meta", "fs/device", "fs/util", "geometry", "layouts",
                  "indexes"]),
    ("fs/paths", ["fs/array", "fs/util", "geometry", "layouts", "indexes"]),
    ("fs/scrub", ["fs/volume", "fs/array", "fs/file", "fs/mloc", "fs/meta", "fs/device", "fs/util", "geometry",
                  "layouts", "indexes"]),
]
ORDER = ORDER[:1] + [(name, uses + BOTTOM) for name, uses in ORDER[1:]]
FS_ALL = [name for name, _ in ORDER]
# Above fs/: the FUSE glue, the measurement probes, the programs. The probes
# may use the daemon (the read-path probe serves a volume through its core, in
# an executable of its own, probes/meson.build); the daemon uses no probe. The
# programs reach the daemon only through the probes, whose library links none
# of it: mkfs.mmfs and mmfs-geom link no daemon code. The benchmarks (bench/)
# may use everything below them; nothing includes them.
ORDER += [
    ("daemon", FS_ALL),
    ("probes", FS_ALL + ["daemon"]),
    ("mkfs", FS_ALL + ["probes"]),
    ("tools", FS_ALL + ["probes", "tools"]),
    ("bench", FS_ALL + ["probes", "daemon"]),
]
SOURCES = (".h", ".cc", ".cpp")
# The libraries whose files must each have a test file of their name (above
# them, the daemon, probes and programs are tested by the integration tests).
TESTED = ["util", "geometry", "layouts", "indexes"] + [name for name, _ in ORDER if name.startswith("fs/")]
# Library .cc files allowed no tests/unit/<dir>/test_<name>.cc, each with why
# (a file of declarations or generated tables, say). None at present.
UNTESTED_OK = {
    # "fs/util/example.cc": "declarations only: nothing to test",
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def library_of(path: str):
    """The most specific library a repository path belongs to (or None)."""
    best = None
    for name, _ in ORDER:
        if path == name or path.startswith(name + "/"):
            if best is None or len(name) > len(best):
                best = name
    return best


def main(argv):
    allowed = {name: set(uses) | {name} for name, uses in ORDER}
    if "--list" in argv:
        for name, uses in ORDER:
            print(f"{name}: {' '.join(uses) or '(nothing of ours)'}")
        return 0
    problems = []
    checked = 0
    for name, _ in ORDER:
        folder = ROOT / name
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if path.suffix not in SOURCES:
                continue
            rel = path.relative_to(ROOT).as_posix()
            own = library_of(rel)
            if own != name:
                continue  # a deeper library's file: checked under it
            checked += 1
            for included in INCLUDE.findall(path.read_text(errors="replace")):
                target = library_of(included)
                if target is None or target in allowed[own]:
                    continue
                problems.append(f"{rel}: includes {included} ({target} is not below {own})")
    # fs/ holds only layer folders (and its meson.build).
    strays = [p.name for p in (ROOT / "fs").iterdir() if p.is_file() and p.suffix in SOURCES]
    problems += [f"fs/{s}: a source file outside the layer folders" for s in strays]
    # tests/unit/ mirrors the source tree: a test file sits in the folder of
    # the code it tests (helpers in tests/unit/support/, the main at the top).
    unit = ROOT / "tests" / "unit"
    if unit.is_dir():
        for path in sorted(unit.rglob("test_*.cc")):
            folder = path.parent.relative_to(unit).as_posix()
            if folder == "." and path.name == "test_main.cc":
                continue
            if folder == "." or library_of(folder) is None or not (ROOT / folder).is_dir():
                problems.append(f"tests/unit/{path.relative_to(unit).as_posix()}: not in a folder that mirrors "
                                "a source folder")
    untested = untested_files()
    if "--untested" in argv:
        for rel in untested:
            print(rel)
        return 0
    problems += [f"{rel}: no tests/unit/{Path(rel).parent.as_posix()}/test_{Path(rel).stem}.cc "
                 "(add one, or exempt the file in UNTESTED_OK with a reason)" for rel in untested]
    for rel, why in sorted(UNTESTED_OK.items()):
        if not (ROOT / rel).is_file():
            problems.append(f"UNTESTED_OK names {rel}, which does not exist")
        elif (ROOT / "tests" / "unit" / Path(rel).parent / f"test_{Path(rel).stem}.cc").is_file():
            problems.append(f"UNTESTED_OK exempts {rel}, which has a test file: drop the exemption")
        elif not why.strip():
            problems.append(f"UNTESTED_OK exempts {rel} without a reason")
    for p in problems:
        print(p)
    print(f"check-layers: {checked} files, {len(problems)} problems" if problems
          else f"check-layers: {checked} files, every include points down the layer order, every library file "
               "has its test file")
    return 1 if problems else 0


def untested_files():
    """The library .cc files (directly in a TESTED folder) with neither a
    tests/unit/<folder>/test_<name>.cc nor an exemption."""
    out = []
    for name in TESTED:
        folder = ROOT / name
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.cc")):
            rel = path.relative_to(ROOT).as_posix()
            test = ROOT / "tests" / "unit" / name / f"test_{path.stem}.cc"
            if not test.is_file() and rel not in UNTESTED_OK:
                out.append(rel)
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
