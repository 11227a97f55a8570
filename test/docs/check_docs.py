#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Holds README.md and docs/*.md to what the programs really do.

Five checks, each reported as FILE:LINE: what the page says, and what the program says instead:

  variables  every TALLY_ name the pages mention is one `tally env` knows (a variable, or one a
             scheduler sets for `tally launch`), or a CMake setting of this build;
  flags      every option the pages show on a `tally SUB` or `tally-reducer` command line, or in
             the option table of a command's own page, is in that program's `--help`;
  defaults   where such a table has a default column and `--help` prints a default, they agree;
  log lines  every log line the pages tell readers to look for is text a program writes: Tally's
             `NET/Tally : ...` lines are matched against Tally's sources, NCCL's against NCCL's
             sources (the release archives of --nccl-archive-dir, when they are there);
  numbers    the wire protocol's version where the pages quote the doctor's handshake line, and
             the range of table versions where they say which ncclNetPlugin_vN and
             ncclCollNetPlugin_vN the plugin exports (nm -D of --plugin).

A log line in a page may leave parts out with `...` or `<NAME>`; in the sources a printf
conversion (%s, %d, ...) stands for a word or two of the line, and text the program joins from
several string literals may be matched across them (Matcher has the rules).

Usage: check_docs.py --source-dir DIR --tally BIN --reducer BIN [--plugin SO]
                     [--nccl-archive-dir DIR]
Exit status 0 when the pages and programs agree, 1 with one line per disagreement.
"""

import argparse
import functools
import os
import re
import subprocess
import sys
import tarfile

# Names the pages spell wrong on purpose, to show the warning a typo gets.
DELIBERATE_TYPOS = {"TALLY_REDUCER"}

# A page about one command: the option tables on it are that command's.
COMMAND_PAGES = {"doctor.md": "doctor", "plan.md": "plan", "bench.md": "bench",
                 "launch.md": "launch"}

# Sections whose list items quote log lines (page, heading).
LOG_SECTIONS = {("nccl.md", "How to tell that CollNet runs through Tally")}

# Words before a quoted log line elsewhere: "the plugin logs `...`", "the line says `...`".
LOG_CUE = re.compile(r"(?:\blogs|\bline says|\blines say|\bat (?:INFO|WARN) \()\s*$")

# Folders whose C++ sources write Tally's output.
TALLY_SOURCE_DIRS = ["common", "transport", "protocol", "kernels", "worker_client", "reducer",
                     "plugin", "tools", "model"]


class Page:
    """One Markdown page: its lines, its fenced code, and its inline `code` spans."""

    def __init__(self, path, rel):
        self.rel = rel
        with open(path, encoding="utf-8") as f:
            self.text = f.read()
        self.lines = self.text.split("\n")
        self.code_lines = []  # (line number, text) inside ``` fences, continuations joined
        self.prose = []  # (line number, text) outside fences
        in_fence = False
        pending = None
        for number, line in enumerate(self.lines, 1):
            if line.lstrip().startswith("```"):
                in_fence = not in_fence
                continue
            if in_fence:
                if pending is not None:
                    pending = (pending[0], pending[1] + " " + line.strip())
                else:
                    pending = (number, line)
                if pending[1].rstrip().endswith("\\"):
                    pending = (pending[0], pending[1].rstrip()[:-1])
                    continue
                self.code_lines.append(pending)
                pending = None
            else:
                self.prose.append((number, line))

    def spans(self):
        """Inline code spans outside fences, with the line each starts on and the text before it
        on that line. A span may run over a line break, as Markdown allows."""
        out = []
        # Rebuild the prose with its line numbers; fences are blank lines here.
        numbered = {n: t for n, t in self.prose}
        text = "\n".join(numbered.get(n, "") for n in range(1, len(self.lines) + 1))
        line_starts = [0]
        for i, c in enumerate(text):
            if c == "\n":
                line_starts.append(i + 1)
        for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", text):
            # A span never crosses a blank line (a paragraph break).
            if "\n\n" in m.group(1):
                continue
            start = m.start()
            line = _line_of(line_starts, start)
            before = text[line_starts[line - 1]:start]
            out.append((line, re.sub(r"\s+", " ", m.group(1)), before))
        return out

    def sections(self):
        """(heading, first line, last line) of every heading."""
        heads = [(n, t.lstrip("#").strip()) for n, t in self.prose if re.match(r"#{1,6} ", t)]
        out = []
        for i, (n, title) in enumerate(heads):
            end = heads[i + 1][0] - 1 if i + 1 < len(heads) else len(self.lines)
            out.append((title, n, end))
        return out


def _line_of(line_starts, offset):
    lo, hi = 0, len(line_starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if line_starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo + 1


def run(argv, env=None):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                       universal_newlines=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


class HelpText:
    """The options, defaults and subcommands one program's --help lists."""

    def __init__(self, text):
        self.options = {}  # name -> default or None; both -b and --minbytes
        self.subcommands = []
        section = None
        for line in text.split("\n"):
            if re.match(r"^\S.*:$", line):
                section = line[:-1]
                continue
            m = re.match(r"^  (\S+)(?: (\S.*?))?(?:\s{2,}|$)", line)
            if not m:
                continue
            if section == "Subcommands":
                self.subcommands.append(m.group(1))
                continue
            if section != "Options" or not m.group(1).startswith("-"):
                continue
            default = None
            kind = m.group(2) or ""
            d = re.search(r"=(\S+)$", kind)
            if d:
                default = d.group(1)
            for name in m.group(1).split(","):
                name = re.sub(r"\{.*\}$", "", name)
                self.options[name] = default


def program_helps(tally, reducer):
    helps = {}
    _, out, _ = run([tally, "--help"])
    top = HelpText(out)
    helps["tally"] = top
    for sub in top.subcommands:
        if sub == "help":
            continue
        _, out, _ = run([tally, sub, "--help"])
        helps[sub] = HelpText(out)
    _, out, _ = run([reducer, "--help"])
    helps["tally-reducer"] = HelpText(out)
    return helps


# ---------------------------------------------------------------------------------------------
# variables


def cmake_names(source_dir):
    names = set()
    for root, dirs, files in os.walk(source_dir, followlinks=True):
        dirs[:] = [d for d in dirs if not d.startswith(("build", "."))]
        for f in files:
            if f == "CMakeLists.txt" or f.endswith((".cmake", ".in")):
                with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                names.update(re.findall(r"\boption\(\s*(TALLY_\w+)", text))
                names.update(re.findall(r"\bset\(\s*(TALLY_\w+)[^)]*\bCACHE\b", text))
                names.update(re.findall(r"#cmakedefine01\s+(TALLY_\w+)", text))
    return names


def check_variables(pages, tally, source_dir, problems):
    mentions = []
    for page in pages:
        for number, line in enumerate(page.lines, 1):
            for m in re.finditer(r"\bTALLY_[A-Z0-9_]*[A-Z0-9](_\*)?", line):
                mentions.append((page.rel, number, m.group(0)))
    names = sorted({n for _, _, n in mentions if not n.endswith("*")})
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALLY_")}
    for n in names:
        env[n] = "1"
    _, listed, err = run([tally, "env"], env=env)
    known_vars = {line.split()[0] for line in listed.split("\n") if line.strip()}
    unknown = set(re.findall(r"tally env: (TALLY_\w+) is not a Tally variable", err))
    cmake = cmake_names(source_dir)
    everything = known_vars | (set(names) - unknown) | cmake
    for rel, number, name in mentions:
        if name in DELIBERATE_TYPOS:
            continue
        if name.endswith("_*"):
            prefix = name[:-1]
            if not any(k.startswith(prefix) for k in everything):
                problems.append(f"{rel}:{number}: {name}: no variable starts with {prefix}")
            continue
        if name in unknown and name not in cmake:
            problems.append(f"{rel}:{number}: {name} is no variable: `tally env` does not know "
                            f"it, and it is no CMake setting")


# ---------------------------------------------------------------------------------------------
# flags and defaults

STOP_WORDS = {"|", "||", "&&", ";", "--", "#", ">", ">>", "2>", "2>&1", "<", "&"}


def command_flags(text, helps):
    """(program, flag) for every option on a `tally SUB` or `tally-reducer` command line in
    text."""
    out = []
    words = text.split()
    i = 0
    while i < len(words):
        word = words[i].strip("[(")
        base = word.rsplit("/", 1)[-1]
        program = None
        if base == "tally-reducer":
            program = "tally-reducer"
        elif base == "tally" and i + 1 < len(words):
            nxt = words[i + 1].strip("[(`")
            if nxt in helps["tally"].subcommands:
                program = nxt
                i += 1
            elif nxt.startswith("-"):
                program = "tally"
        i += 1
        if program is None:
            continue
        while i < len(words):
            w = words[i]
            if w in STOP_WORDS or w.startswith("#") or w.startswith("$("):
                break
            ended = w.endswith((";", "|"))
            w = w.strip("[](),;|`'\"")
            m = re.match(r"^(--?[A-Za-z][\w-]*)", w)
            if m and not re.match(r"^-\d", w):
                out.append((program, m.group(1)))
            i += 1
            if ended:
                break
    return out


def check_flags(pages, helps, problems):
    for page in pages:
        units = [(n, t) for n, t in page.code_lines] + [(n, s) for n, s, _ in page.spans()]
        for number, text in units:
            for program, flag in command_flags(text, helps):
                if program not in helps:
                    continue  # `tally help COMMAND`
                options = helps[program].options
                if flag in options or flag in ("-h", "--help"):
                    continue
                shown = "tally " + program if program not in ("tally", "tally-reducer") else program
                problems.append(f"{page.rel}:{number}: `{shown} {flag}`: {shown} --help lists no "
                                f"{flag}")
        command = COMMAND_PAGES.get(os.path.basename(page.rel))
        if command is None:
            continue
        check_option_tables(page, helps[command], "tally " + command, problems)


def check_option_tables(page, help_text, shown, problems):
    default_col = None
    for number, line in page.prose:
        if not line.startswith("|"):
            default_col = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] in ("option", "flag"):
            default_col = next((i for i, c in enumerate(cells) if c == "default"), None)
            continue
        if not cells or not cells[0].startswith("`-"):
            continue
        flags = re.findall(r"`(--?[A-Za-z][\w-]*)", cells[0])
        for flag in flags:
            if flag not in help_text.options:
                problems.append(f"{page.rel}:{number}: option table: {flag}: `{shown} --help` "
                                f"lists no {flag}")
        if default_col is None or default_col >= len(cells) or len(flags) == 0:
            continue
        m = re.fullmatch(r"`([^`]+)`", cells[default_col])
        given = help_text.options.get(flags[-1])
        if m and given is not None and m.group(1) != given:
            problems.append(f"{page.rel}:{number}: option table: {flags[-1]} defaults to "
                            f"`{m.group(1)}` here, `{shown} --help` says {given}")


# ---------------------------------------------------------------------------------------------
# log lines

WILD = None
PRINTF = re.compile(r"%[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|j|z|t|L|q)?"
                    r"[diouxXeEfFgGaAcsp]|%%")
TOKEN = re.compile(r"//[^\n]*|/\*.*?\*/|'(?:[^'\\\n]|\\.)+'|\"((?:[^\"\\\n]|\\.)*)\"", re.S)
ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "0": "\0"}


def literals_of(code):
    """The string literals of C or C++ source, adjacent ones joined as the compiler joins them
    (with a PRI* macro between them read as one conversion), each as a tuple of characters and
    WILD for a printf conversion."""
    out = []
    current = None
    last_end = 0
    for m in TOKEN.finditer(code):
        if m.group(1) is None:  # a comment or a character literal
            if current is not None:
                out.append(current)
                current = None
            continue
        between = code[last_end:m.start()]
        text = re.sub(r"\\(.)", lambda e: ESCAPES.get(e.group(1), e.group(1)), m.group(1))
        if current is not None and re.fullmatch(r"\s*(PRI[diuxX]\d+|PRI[diuxX]PTR)?\s*", between):
            if between.strip():
                text = "d" + text  # "%" PRIu64 "..." reads "%d..."
            current += text
        else:
            if current is not None:
                out.append(current)
            current = text
        last_end = m.end()
    if current is not None:
        out.append(current)
    result = []
    for text in out:
        items = []
        pos = 0
        for c in PRINTF.finditer(text):
            items.extend(text[pos:c.start()])
            items.append("%" if c.group(0) == "%%" else WILD)
            pos = c.end()
        items.extend(text[pos:])
        if any(item is not WILD for item in items) and len(items) >= 2:
            result.append(tuple(items))
    return result


def tally_literals(source_dir):
    out = set()
    for d in TALLY_SOURCE_DIRS:
        for root, _, files in os.walk(os.path.join(source_dir, d)):
            for f in files:
                if f.endswith((".cc", ".h")):
                    with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                        out.update(literals_of(fh.read()))
    return out


def nccl_literals(archive_dir):
    out = set()
    if not archive_dir or not os.path.isdir(archive_dir):
        return out
    for name in sorted(os.listdir(archive_dir)):
        if not name.endswith(".tar.gz"):
            continue
        with tarfile.open(os.path.join(archive_dir, name)) as tar:
            for member in tar:
                if member.isfile() and "/src/" in member.name and \
                        member.name.endswith((".cc", ".h", ".cu")):
                    code = tar.extractfile(member).read().decode("utf-8", "replace")
                    out.update(literals_of(code))
    return out


class Matcher:
    """Whether a piece of a log line can be text the program writes (see the module's note).

    The piece is walked through the sources' literals: its characters match a literal's, a
    printf conversion takes up to WORDS words, and at a literal's end (or at a conversion) the
    walk may go on in another literal, with up to WORDS inserted words between; a literal begins
    and ends at a word's edge in the piece (unless with punctuation). Each literal entered must
    match NEED letters or digits of its own (all it has, when fewer) before the walk leaves it, a
    literal with conversions must have NEED of its own ("%s: %s" would take anything), and the
    best walk must account for 95% of the letters of the piece's plain words (weights()) with
    the literals' text or the conversions inside it, not with inserted words."""

    NEED = 3
    WORDS = 2

    def __init__(self, literals):
        self.literals = [lit for lit in literals
                         if WILD not in lit or self.letters(lit) >= self.NEED]
        self.need = [min(self.NEED, self.letters(lit)) for lit in self.literals]
        self.by_first = {}
        self.wild_first = []
        self.positions = {}  # character -> [(literal, position)]
        for index, lit in enumerate(self.literals):
            if lit[0] is WILD:
                self.wild_first.append(index)
            else:
                self.by_first.setdefault(lit[0], []).append(index)
            for j, item in enumerate(lit):
                self.positions.setdefault(item if item is not WILD else "", []).append((index, j))
        # A conversion with words of the literal on both sides ("Algo %s proto") accounts for the
        # first word it takes; one with none on a side is glue ("%s: %s", "[%s %s]"), and does
        # not.
        self.inner = set()
        for index, lit in enumerate(self.literals):
            wilds = [j for j, item in enumerate(lit) if item is WILD]
            bounds = [-1] + wilds + [len(lit)]
            for k, j in enumerate(wilds, 1):
                left = lit[bounds[k - 1] + 1:j]
                right = lit[j + 1:bounds[k + 1]]
                if any(c.isalpha() for c in left) and any(c.isalpha() for c in right):
                    self.inner.add((index, j))

    def score(self, piece):
        """The most letters of piece (weights()) a walk accounts for with literal text or a
        conversion, or -1 when no walk gets through."""
        none = -1
        weight = self.weights(piece)

        @functools.lru_cache(maxsize=None)
        def go(i, li, j, need):
            if i == len(piece):
                return 0
            lit = self.literals[li]
            if j == len(lit):
                # A literal ends where a word of the piece does, unless it ends in punctuation.
                if need > 0 or lit[-1] is not WILD and lit[-1].isalnum() and piece[i].isalnum():
                    return none
                return jump(i)
            item = lit[j]
            if item is WILD:
                best = jump(i) if need == 0 else none
                inner = (li, j) in self.inner
                first = word_end(i, 1)
                for end in range(word_end(i, self.WORDS), i - 1, -1):
                    rest = go(end, li, j + 1, need)
                    if rest >= 0:
                        best = max(best, rest + (sum(weight[i:min(end, first)]) if inner else 0))
                return best
            if piece[i] != item:
                return none
            rest = go(i + 1, li, j + 1, max(0, need - 1) if item.isalnum() else need)
            return rest + weight[i] if rest >= 0 else none

        def word_end(i, words=self.WORDS):
            # The end of the next words from i: what a conversion or an inserted value may take
            # ("4 MiB", "18.15 KiB").
            end = i
            for _ in range(words):
                while end < len(piece) and piece[end].isspace():
                    end += 1
                while end < len(piece) and not piece[end].isspace():
                    end += 1
            return end

        @functools.lru_cache(maxsize=None)
        def jump(i):
            best = none
            for start in range(i, word_end(i) + 1):
                if start == len(piece):
                    return max(best, 0)
                inside_word = start > 0 and piece[start - 1].isalnum()
                for li in self.by_first.get(piece[start], []) + self.wild_first:
                    # A literal starts where a word of the piece does, unless with punctuation.
                    lit = self.literals[li]
                    if inside_word and lit[0] is not WILD and lit[0].isalnum():
                        continue
                    best = max(best, go(start, li, 0, self.need[li]))
            return best

        best = none
        for li, j in self.positions.get(piece[0], []) + self.positions.get("", []):
            lit = self.literals[li]
            if piece[0].isalnum() and j > 0 and lit[j - 1] is not WILD and lit[j - 1].isalnum():
                continue  # not in the middle of a word of the literal
            best = max(best, go(0, li, j, 0))
        return best

    @staticmethod
    def letters(lit):
        return sum(1 for c in lit if c is not WILD and c.isalnum())

    @staticmethod
    def weights(piece):
        """1 for each letter of a plain word of piece, 0 elsewhere: a word with a digit, `_`,
        `/`, `.` or `:` is a value (an address, a variable's name, a count) that the program
        may well insert."""
        weight = [0] * len(piece)
        for m in re.finditer(r"\S+", piece):
            if not re.search(r"[0-9_/.:@]", m.group(0)):
                for i in range(m.start(), m.end()):
                    weight[i] = 1 if piece[i].isalpha() else 0
        return weight

    def matches(self, piece):
        total = sum(self.weights(piece))
        score = self.score(piece)
        return score >= 0 and score * 20 >= total * 19


PLACEHOLDER = re.compile(r"\.\.\.|…|<[^<>]+>")


def log_phrases(pages):
    """(page, line, text) of every log line the pages quote."""
    out = []
    for page in pages:
        sections = [(t, a, b) for t, a, b in page.sections()
                    if (os.path.basename(page.rel), t) in LOG_SECTIONS]
        for number, span, before in page.spans():
            in_section = any(a <= number <= b for _, a, b in sections)
            in_item = in_section and re.match(r"^\s*[-*] ", _item_start(page, number))
            if span.startswith("NET/Tally :"):
                out.append((page.rel, number, span))
            elif in_item or LOG_CUE.search(before):
                if re.match(r"^[A-Z][A-Z0-9_]*=|^tally ", span) or len(span.split()) < 2 and \
                        "/" not in span:
                    continue  # a setting, a command, or a single word
                out.append((page.rel, number, span))
        # Fenced code, and indented code blocks (which the prose keeps).
        for number, line in page.code_lines + page.prose:
            if line.strip().startswith("NET/Tally :") and (line.startswith("    ") or
                                                          (number, line) in page.code_lines):
                out.append((page.rel, number, line.strip()))
    return out


def _item_start(page, number):
    """The first line of the list item (or paragraph) that holds line `number`."""
    n = number
    while n > 1:
        line = page.lines[n - 1]
        if re.match(r"^\s*[-*] ", line) or not line.strip():
            return line
        n -= 1
    return page.lines[0]


def check_log_lines(pages, source_dir, archive_dir, problems, notes):
    tally = Matcher(tally_literals(source_dir))
    nccl_lits = nccl_literals(archive_dir)
    both = Matcher(set(tally.literals) | nccl_lits) if nccl_lits else None
    if not nccl_lits:
        notes.append(f"no NCCL source archives in {archive_dir or '(none given)'}: lines that "
                     f"are not Tally's are checked against Tally's sources only, and pass")
    prefix_written = tally.matches("NET/Tally : ")
    for rel, number, text in log_phrases(pages):
        own = text.startswith("NET/Tally :")
        body = text[len("NET/Tally :"):].strip() if own else text
        if own and not prefix_written:
            problems.append(f"{rel}:{number}: `{text}`: no source writes the prefix 'NET/Tally : '")
            continue
        pieces = [p for p in PLACEHOLDER.split(body) if p.strip()]
        matcher = tally if own or both is None else both
        missing = [p for p in pieces if not matcher.matches(p)]
        if missing and both is None and not own:
            continue  # NCCL's line, and no NCCL sources to check it against
        if missing:
            whose = "Tally's" if own else "Tally's or NCCL's"
            problems.append(f"{rel}:{number}: log line `{text}`: {whose} sources write no "
                            f"'{missing[0]}'")


# ---------------------------------------------------------------------------------------------
# numbers the programs define


def exported_versions(plugin):
    """(lowest, highest) N of the ncclNetPlugin_vN and ncclCollNetPlugin_vN tables the plugin
    exports, or None when nm cannot list them."""
    try:
        p = subprocess.run(["nm", "-D", "--defined-only", plugin], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, universal_newlines=True, timeout=60)
    except OSError:
        return None
    versions = [int(v) for v in re.findall(r"\bnccl(?:Coll)?NetPlugin_v(\d+)\b", p.stdout)]
    return (min(versions), max(versions)) if versions else None


def check_constants(pages, source_dir, plugin, problems, notes):
    with open(os.path.join(source_dir, "protocol", "wire.h"), encoding="utf-8") as f:
        protocol = re.search(r"\bkVersion = (\d+);", f.read()).group(1)
    tables = exported_versions(plugin) if plugin else None
    if plugin and tables is None:
        notes.append(f"nm lists no plugin tables in {plugin}: table versions not checked")
    for page in pages:
        for number, line in enumerate(page.lines, 1):
            # The doctor's handshake line: "(protocol 8, ...", "we speak protocol 8".
            for m in re.finditer(r"(?:\(protocol|speak protocol) (\d+)\b", line):
                if m.group(1) != protocol:
                    problems.append(f"{page.rel}:{number}: protocol {m.group(1)}: the wire "
                                    f"protocol is {protocol} (protocol/wire.h kVersion)")
            if tables is None:
                continue
            ranges = []
            if "PluginN" in line.replace("Plugin_vN", "PluginN"):
                ranges += re.findall(r"\bN from (\d+) to (\d+)", line)
            ranges += re.findall(r"\bexports (?:net|CollNet) v(\d+)\.\.v(\d+)", line)
            ranges += re.findall(r"\bCollNet v(\d+)\.\.v(\d+)", line)
            for low, high in ranges:
                if (int(low), int(high)) != tables:
                    problems.append(f"{page.rel}:{number}: tables {low} to {high}: the plugin "
                                    f"exports ncclNetPlugin_vN and ncclCollNetPlugin_vN for N "
                                    f"from {tables[0]} to {tables[1]}")


# ---------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--tally", required=True)
    parser.add_argument("--reducer", required=True)
    parser.add_argument("--plugin", default="")
    parser.add_argument("--nccl-archive-dir", default="")
    args = parser.parse_args()

    src = os.path.abspath(args.source_dir)
    paths = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(src, "docs"))
                                   if f.endswith(".md"))
    pages = [Page(os.path.join(src, p), p) for p in paths]
    helps = program_helps(args.tally, args.reducer)
    problems, notes = [], []
    check_variables(pages, args.tally, src, problems)
    check_flags(pages, helps, problems)
    check_log_lines(pages, src, args.nccl_archive_dir, problems, notes)
    check_constants(pages, src, args.plugin, problems, notes)
    for note in notes:
        print("note: " + note)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} place(s) where the docs and the programs disagree")
        return 1
    print(f"{len(pages)} pages agree with tally, tally-reducer and the sources")
    return 0


if __name__ == "__main__":
    sys.exit(main())
