#!/usr/bin/env python3
"""Checks the documentation's relative links: every link of README.md, CHANGELOG.md and docs/*.md
that is not a URL names a file that exists, and a link with an #anchor into a Markdown file names a
heading of that file (anchors as GitHub spells them: lower case, punctuation dropped, spaces as
hyphens, -1, -2 … for repeated headings). Also keeps README.md short: the user's path, at most
about 600 lines, with the rest in docs/.
    docs_links.py SOURCE_DIR
Exits non-zero naming each broken link (file:line: target, and why)."""
import glob
import os
import re
import sys

README_MAX_LINES = 620
LINK = re.compile(r"\]\(([^)\s]+)\)")


def lines_outside_fences(path):
    fence = None
    for number, line in enumerate(open(path, encoding="utf-8").read().split("\n"), 1):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1).startswith(fence):
                fence = None
            continue
        if fence is None:
            yield number, line


def slug(heading):
    text = re.sub(r"^#+\s+", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    found, seen = set(), {}
    for _, line in lines_outside_fences(path):
        if re.match(r"^#{1,6}\s", line):
            s = slug(line)
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else "%s-%d" % (s, n))
    return found


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    top = sys.argv[1]
    files = [os.path.join(top, "README.md"), os.path.join(top, "CHANGELOG.md")]
    files += sorted(glob.glob(os.path.join(top, "docs", "*.md")))
    cache = {}
    broken = []
    links = 0
    for md in files:
        if not os.path.exists(md):
            continue
        for number, line in lines_outside_fences(md):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue
                links += 1
                path, _, anchor = target.partition("#")
                dest = md if path == "" else os.path.normpath(os.path.join(os.path.dirname(md), path))
                where = "%s:%d: %s" % (os.path.relpath(md, top), number, target)
                if not os.path.exists(dest):
                    broken.append("%s: no file %s" % (where, os.path.relpath(dest, top)))
                    continue
                if anchor and dest.endswith(".md"):
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if anchor not in cache[dest]:
                        broken.append("%s: %s has no heading #%s" % (where, os.path.relpath(dest, top), anchor))
    readme_lines = open(files[0], encoding="utf-8").read().count("\n")
    if readme_lines > README_MAX_LINES:
        broken.append("README.md has %d lines, more than %d: move the detail of a topic into its page under "
                      "docs/ and link it from the README's summary" % (readme_lines, README_MAX_LINES))
    if links < 50:
        broken.append("only %d relative links found: the checker reads the wrong files" % links)
    if broken:
        print("%d broken documentation link(s):" % len(broken))
        for b in broken:
            print("  " + b)
        sys.exit(1)
    print("%d relative links in %d files resolve; README.md has %d lines" % (links, len(files), readme_lines))


if __name__ == "__main__":
    main()
