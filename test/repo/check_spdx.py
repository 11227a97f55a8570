#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every source file of Tally says its licence in its first lines.

Usage: check_spdx.py SOURCE_DIR [--self-test]

Looks at the files git tracks (or, outside a git checkout, every file under SOURCE_DIR but the
build folders): C and C++ sources and headers, Python, shell, CMake, Makefiles, Dockerfiles and
.ci/run. Each must carry "SPDX-License-Identifier: Apache-2.0" within its first three lines.
Prints each file that does not, and exits 1 if any.
"""
import os
import subprocess
import sys

LINE = "SPDX-License-Identifier: Apache-2.0"
SUFFIXES = (".cc", ".h", ".c", ".cpp", ".hpp", ".py", ".sh", ".cmake", ".Dockerfile")
NAMES = ("CMakeLists.txt", "Makefile", "Dockerfile")


def is_source(path):
    base = os.path.basename(path)
    return base in NAMES or base.endswith(SUFFIXES) or path == ".ci/run"


def files_of(root):
    try:
        out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                             check=True).stdout
        return [f for f in out.split("\n") if f]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for top, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(("build", ".git"))]
            found += [os.path.relpath(os.path.join(top, n), root) for n in names]
        return found


def missing(root, files):
    bad = []
    for f in files:
        path = os.path.join(root, f)
        if not is_source(f) or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as fh:
            head = [fh.readline() for _ in range(3)]
        if not any(LINE in line for line in head):
            bad.append(f)
    return bad


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        for name, text in {"a.cc": "// " + LINE + "\nint x;\n", "b.h": "#pragma once\n",
                           "run.sh": "#!/bin/sh\n# " + LINE + "\n", "notes.txt": "x\n",
                           "CMakeLists.txt": "project(x)\n"}.items():
            with open(os.path.join(d, name), "w") as fh:
                fh.write(text)
        got = sorted(missing(d, ["a.cc", "b.h", "run.sh", "notes.txt", "CMakeLists.txt"]))
        assert got == ["CMakeLists.txt", "b.h"], got
    print("self-test passed")


def main():
    if "--self-test" in sys.argv:
        return self_test()
    root = sys.argv[1]
    bad = missing(root, files_of(root))
    for f in bad:
        print(f"{f}: no '{LINE}' in its first three lines")
    print(f"{len(bad)} source files without the licence line")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
