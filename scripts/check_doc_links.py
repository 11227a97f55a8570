#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the relative links of the documentation: every [text](target) and ![alt](target) in
README.md and docs/*.md (or the files given) must name a file or folder that exists, and a
#fragment must name a heading of the target page (GitHub's anchor rules) or an explicit
<a id="..."> / <a name="...">. Links inside code blocks and code spans are not links; http(s),
mailto and other schemes are not checked.

Usage: scripts/check_doc_links.py [FILE.md...]     exit status 1 when a link is broken
       scripts/check_doc_links.py --self-test"""
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)
FENCE = re.compile(r"^ {0,3}(```|~~~)")


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield number, line


def slug(heading):
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces
    turned into hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text)                          # inline HTML
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        seen = {}
        found = set(EXPLICIT.findall(text))
        for _, line in prose_lines(text):
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def check(path):
    """Messages for the broken links of one Markdown file."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    problems = []
    for number, line in prose_lines(text):
        line = re.sub(r"(`+)(?:(?!\1).)+\1", "", line)  # code spans
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                continue
            file_part, _, fragment = target.partition("#")
            resolved = (os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                        if file_part else path)
            where = f"{os.path.relpath(path, ROOT)}:{number}"
            if not os.path.exists(resolved):
                problems.append(f"{where}: {target}: no such file")
                continue
            if fragment and resolved.endswith(".md") and os.path.isfile(resolved):
                if fragment not in anchors(resolved):
                    problems.append(f"{where}: {target}: no heading #{fragment}")
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, "docs"))
        page = os.path.join(tmp, "docs", "a.md")
        with open(page, "w") as f:
            f.write("# Title\n\n## Which algorithm: `tally bench --algo auto`\n\n## Again\n## Again\n"
                    '<a id="kept"></a>\n'
                    "[ok](a.md#which-algorithm-tally-bench---algo-auto) [ok](#again-1) [ok](#kept)\n"
                    "[ok](../docs/) [web](https://example.com/x#y) `[code](missing.md)`\n"
                    "```\n[fenced](missing.md)\n```\n"
                    "[bad](missing.md) [bad](#nowhere) ![bad](img/none.png)\n")
        got = [p.split(": ", 1)[1] for p in check(page)]
        want = ["missing.md: no such file", "#nowhere: no heading #nowhere",
                "img/none.png: no such file"]
        if got != want:
            print(f"self-test failed: {got} != {want}", file=sys.stderr)
            return 1
    print("self-test passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    files = [os.path.abspath(a) for a in argv[1:]]
    if not files:
        docs = os.path.join(ROOT, "docs")
        files = [os.path.join(ROOT, "README.md")] + sorted(
            os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md"))
    problems = [p for path in files for p in check(path)]
    for p in problems:
        print(p)
    print(f"{len(files)} files, {len(problems)} broken links", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
