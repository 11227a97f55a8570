#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every program has a man page, and each page lists every option its program's --help lists.

The pages are the ones the build makes (cmake/manpages.cmake, into BUILD/man): tally.1.gz,
tally-reducer.1.gz and tally-COMMAND.1.gz for each command `tally --help` lists (but `help`).
Each must also have the sections a reader looks for: OPTIONS, ENVIRONMENT, EXIT STATUS and
EXAMPLES.

Usage: check_man_pages.py --man-dir DIR --tally BIN --reducer BIN
Exit status 0 when every page is there and complete, 1 with one line per gap.
"""

import argparse
import gzip
import os
import re
import subprocess
import sys

SECTIONS = ["OPTIONS", "ENVIRONMENT", "EXIT STATUS", "EXAMPLES"]


def help_of(argv):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=60, env={})
    return p.stdout


def options_in(help_text):
    """Every option name --help lists: "-b", "--minbytes", ..."""
    names = []
    section = None
    for line in help_text.split("\n"):
        if re.match(r"^\S.*:$", line):
            section = line[:-1]
            continue
        m = re.match(r"^  (-\S+)", line)
        if section == "Options" and m:
            for name in m.group(1).split(","):
                names.append(re.sub(r"[{=\[].*$", "", name))
    return names


def commands_in(help_text):
    out = []
    section = None
    for line in help_text.split("\n"):
        if re.match(r"^\S.*:$", line):
            section = line[:-1]
            continue
        m = re.match(r"^  (\S+)", line)
        if section == "Subcommands" and m and m.group(1) != "help":
            out.append(m.group(1))
    return out


def page_text(path):
    """The page's words with roff's markup taken out: fonts, escapes, and request names."""
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        roff = f.read()
    text = re.sub(r"\\f[BIRP]|\\f\(..|\\&|\\\(..", "", roff)
    text = text.replace("\\-", "-").replace("\\e", "\\")
    lines = []
    for line in text.split("\n"):
        if line.startswith(".\\\""):
            continue
        m = re.match(r"^\.(\S+)\s*(.*)$", line)
        if m:
            lines.append((m.group(1), m.group(2).strip('"')))
        else:
            lines.append(("", line))
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--man-dir", required=True)
    parser.add_argument("--tally", required=True)
    parser.add_argument("--reducer", required=True)
    args = parser.parse_args()

    top = help_of([args.tally, "--help"])
    programs = [("tally", [args.tally, "--help"]),
                ("tally-reducer", [args.reducer, "--help"])]
    programs += [("tally-" + c, [args.tally, c, "--help"]) for c in commands_in(top)]
    problems = []
    for page, argv in programs:
        path = os.path.join(args.man_dir, page + ".1.gz")
        if not os.path.exists(path):
            problems.append(f"{path}: missing: `{' '.join(['tally'] + argv[1:])}` has no man page")
            continue
        lines = page_text(path)
        words = "\n".join(text for _, text in lines)
        heads = [text for request, text in lines if request == "SH"]
        for section in SECTIONS:
            if section not in heads:
                problems.append(f"{path}: no {section} section (has {', '.join(heads)})")
        for name in options_in(help_of(argv)):
            if not re.search(r"(?<![\w-])" + re.escape(name) + r"(?![\w-])", words):
                problems.append(f"{path}: {name} is in `{' '.join(['tally'] + argv[1:])}` but "
                                f"not on the page")
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} gap(s) in the man pages")
        return 1
    print(f"{len(programs)} man pages, each with every option of its --help")
    return 0


if __name__ == "__main__":
    sys.exit(main())
