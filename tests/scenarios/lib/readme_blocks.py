#!/usr/bin/env python3
# Writes the code blocks of one README section whose info string names a TAG step (```sh TAG:NAME)
# to OUTDIR/NAME, one file each, and their names in the README's order to OUTDIR/ORDER, for the
# scenarios that run the README as written (readme_setup.sh, readme_webapp.sh).
#   readme_blocks.py README.md "SECTION TITLE" TAG OUTDIR
import re
import sys

readme, title, tag, outdir = sys.argv[1:5]
text = open(readme, encoding="utf-8").read()
m = re.search(r"^## " + re.escape(title) + r"\n(.*?)^## ", text, re.S | re.M)
if not m:
    sys.exit("README.md has no section '%s'" % title)
order = []
for fence in re.finditer(r"^( *)```\w+ " + re.escape(tag) + r":(\S+)\n(.*?)^\1```$", m.group(1), re.S | re.M):
    indent, name, body = fence.groups()
    lines = [line[len(indent):] if line.startswith(indent) else line for line in body.splitlines()]
    with open("%s/%s" % (outdir, name), "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    order.append(name)
with open("%s/ORDER" % outdir, "w", encoding="utf-8") as out:
    out.write(" ".join(order) + "\n")
