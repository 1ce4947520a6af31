#!/usr/bin/env python3
"""Checks that every message README.md's Troubleshooting section quotes is one docsync or PostgreSQL
really emits, so the table cannot drift from the code.

    readme_messages.py README.md SOURCE_DIR BINARY...

A quoted message is a code span in the first column of the Troubleshooting table. In it, `…` and a
lone capital N or M stand for any text (a name, a number, an elided part); everything else must be
spelt as the code spells it. The messages the code can emit are read from the sources (string
literals of plugin/*.c, shared/*.h and worker/**/*.cpp, *.hpp, with the pieces of one concatenation
`"a" + x + "b"` joined; quoted literals of the SQL sources, sql/parts/*.sql and the update scripts
sql/docsync--A--B.sql, with `'a' || x || 'b'` joined) and from the
BINARY files given (the PostgreSQL server and libpq, whose own messages the README quotes), with
printf, format() and RAISE placeholders standing for any text.

A quoted message comes from a template when some text fits both and the template's own literal
text makes up a quarter of the message (10 characters at least); each part of the message the
template does not spell must be a value (no white space: a name, a number) or be made of whole
literal runs (text between two placeholders) of other templates, for a message composed in several
places (a worker message naming a role, a prefix before the server's message). Code spans that are bare names are checked differently:
a dotted name (`docsync.status`) must be a view, function or table the SQL creates, and a plain word
must be a quoted literal of the SQL (`stopped`, a health of docsync.status) or a name the server
knows (`wal_sender_timeout`).

Prints each message with where it was found; exits 1 when any is not found.
"""
import bisect
import glob
import os
import re
import sys

WILD = None  # one "any text" token in a pattern
PRINTF = re.compile(r"%(?:%|[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t|L)?[diouxXeEfgGcspm])")


def printf_template(text):
    """A C format string as a pattern: printf conversions are WILD, %% is %."""
    out = []
    pos = 0
    for m in PRINTF.finditer(text):
        out.extend(text[pos:m.start()])
        out.append("%" if m.group() == "%%" else WILD)
        pos = m.end()
    out.extend(text[pos:])
    return out


def sql_sources(source_dir):
    """The SQL the extension is made of: the parts of the install script (the Makefile concatenates
    them into sql/docsync--X.Y.sql, a build product left out here) and the update scripts."""
    return (sorted(glob.glob(os.path.join(source_dir, "sql", "parts", "*.sql")))
            + sorted(glob.glob(os.path.join(source_dir, "sql", "docsync--*--*.sql"))))


def sql_template(text):
    """A SQL literal as a pattern: format()'s %s %I %L and RAISE's lone % are WILD, %% is %."""
    out = []
    i = 0
    while i < len(text):
        if text[i] == "%":
            if text[i + 1:i + 2] == "%":
                out.append("%")
                i += 2
                continue
            out.append(WILD)
            i += 2 if text[i + 1:i + 2] in ("s", "I", "L") else 1
            continue
        out.append(text[i])
        i += 1
    return out


C_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'", "?": "?"}


def c_unescape(body):
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            out.append(C_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def joins_as_concatenation(between, op):
    """How the code between two literals joins them: nothing between (adjacent literals), or an
    operand of one concatenation `op ... op`, with literals inside parentheses (`+ (x ? "a" : y) +`)
    counted as part of it; None when they belong to different expressions."""
    text = between.strip()
    if not text:
        return "direct"
    if not (text.startswith(op) or text.endswith(op)):
        return None
    depth = 0
    for c in text:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c in ";{}" or (c == "," and depth <= 0):
            return None
    return "wild"


def chains(literals, source, op, to_pattern):
    """Joins literals [(start, end, text)] that one expression concatenates into one pattern each."""
    patterns = []
    current = None
    previous_end = None
    for start, end, text in literals:
        how = joins_as_concatenation(source[previous_end:start], op) if current is not None else None
        if how == "direct":
            current[-1] += text
        elif how == "wild":
            current.append(WILD)
            current.append(text)
        else:
            if current is not None:
                patterns.append(current)
            current = [text]
        previous_end = end
    if current is not None:
        patterns.append(current)
    result = []
    for pieces in patterns:
        pattern = []
        for piece in pieces:
            if piece is WILD:
                pattern.append(WILD)
            else:
                pattern.extend(to_pattern(piece))
        result.append(pattern)
    return result


def c_literals(source):
    """String literals of C or C++ source, skipping comments and character literals."""
    found = []
    i = 0
    n = len(source)
    while i < n:
        c = source[i]
        if source.startswith("//", i):
            i = source.find("\n", i)
            i = n if i < 0 else i
        elif source.startswith("/*", i):
            i = source.find("*/", i + 2)
            i = n if i < 0 else i + 2
        elif c == "R" and source.startswith('R"', i) and (i == 0 or not (source[i - 1].isalnum() or source[i - 1] == "_")):
            open_paren = source.find("(", i + 2)
            delim = source[i + 2:open_paren]
            close = source.find(")" + delim + '"', open_paren)
            found.append((i, close + len(delim) + 2, source[open_paren + 1:close]))
            i = close + len(delim) + 2
        elif c == '"':
            j = i + 1
            while j < n and source[j] != '"':
                j += 2 if source[j] == "\\" else 1
            found.append((i, j + 1, c_unescape(source[i + 1:j])))
            i = j + 1
        elif c == "'":
            j = i + 1
            while j < n and source[j] != "'":
                j += 2 if source[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return found


DOLLAR_QUOTE = re.compile(r"\$[A-Za-z_]*\$")


def sql_literals(source):
    """Quoted literals of SQL source; dollar-quoted bodies are scanned as SQL too (PL/pgSQL)."""
    found = []
    i = 0
    n = len(source)
    while i < n:
        c = source[i]
        if source.startswith("--", i):
            i = source.find("\n", i)
            i = n if i < 0 else i
        elif c == "'":
            j = i + 1
            text = []
            while j < n:
                if source[j] == "'":
                    if source.startswith("''", j):
                        text.append("'")
                        j += 2
                        continue
                    break
                text.append(source[j])
                j += 1
            found.append((i, j + 1, "".join(text)))
            i = j + 1
        elif c == "$":
            m = DOLLAR_QUOTE.match(source, i)
            i = m.end() if m else i + 1
        else:
            i += 1
    return found


def binary_strings(path, minimum=8):
    with open(path, "rb") as f:
        data = f.read()
    return [m.group().decode("ascii") for m in re.finditer(rb"[\x20-\x7e]{%d,}" % minimum, data)]


def templates(source_dir, binaries):
    result = []  # (where, pattern)
    for path in sorted(glob.glob(os.path.join(source_dir, "shared", "*.h"))):
        text = open(path, encoding="utf-8").read()
        rel = os.path.relpath(path, source_dir)
        result += [(rel, p) for p in chains(c_literals(text), text, "+", printf_template)]
    for path in sorted(glob.glob(os.path.join(source_dir, "plugin", "*.c"))):
        text = open(path, encoding="utf-8").read()
        rel = os.path.relpath(path, source_dir)
        result += [(rel, p) for p in chains(c_literals(text), text, "+", printf_template)]
    for ext in ("cpp", "hpp"):
        for path in sorted(glob.glob(os.path.join(source_dir, "worker", "**", "*." + ext), recursive=True)):
            text = open(path, encoding="utf-8").read()
            rel = os.path.relpath(path, source_dir)
            result += [(rel, p) for p in chains(c_literals(text), text, "+", list)]
    for path in sql_sources(source_dir):
        text = open(path, encoding="utf-8").read()
        rel = os.path.relpath(path, source_dir)
        result += [(rel, p) for p in chains(sql_literals(text), text, "||", sql_template)]
    for path in binaries:
        result += [(os.path.basename(path), printf_template(s)) for s in binary_strings(path)]
    return result


def normalise(pattern):
    """Runs of white space as one space."""
    out = []
    for tok in pattern:
        if tok is not WILD and tok.isspace():
            if out and out[-1] == " ":
                continue
            tok = " "
        out.append(tok)
    return out


def readme_pattern(message):
    """`…` and a lone capital N or M are WILD; the message may be part of a longer one."""
    pattern = [WILD]
    i = 0
    while i < len(message):
        c = message[i]
        lone = c in "NM" and (i == 0 or not message[i - 1].isalnum()) and (i + 1 == len(message) or not message[i + 1].isalnum())
        if c == "…" or lone:
            if pattern[-1] is not WILD:
                pattern.append(WILD)
        else:
            pattern.append(c)
        i += 1
    if pattern[-1] is not WILD:
        pattern.append(WILD)
    return normalise(pattern)


NEG = -10 ** 9


def align(r, t):
    """The alignment of pattern r with pattern t (t may be part of a longer message: it is matched as
    if wrapped in WILDs) that matches the most literal characters of r with literal characters of t.
    Returns (score, matched): how many, and which positions of r."""
    t = [WILD] + list(t) + [WILD]
    rn, tn = len(r), len(t)
    best = [[NEG] * (tn + 1) for _ in range(rn + 1)]
    move = [[0] * (tn + 1) for _ in range(rn + 1)]
    best[rn][tn] = 0
    for i in range(rn, -1, -1):
        bi = best[i]
        bn = best[i + 1] if i < rn else None
        mi = move[i]
        ri = r[i] if i < rn else ""
        for j in range(tn, -1, -1):
            if i == rn and j == tn:
                continue
            tj = t[j] if j < tn else ""
            score, how = NEG, 0
            if i < rn and j < tn and ri is not WILD and tj is not WILD and ri == tj and bn[j + 1] + 1 > score:
                score, how = bn[j + 1] + 1, 1          # a literal of r matches a literal of t
            if (ri is WILD or tj is WILD) and i < rn and bn[j] > score:
                score, how = bn[j], 3                  # a WILD takes r[i]
            if (ri is WILD or tj is WILD) and j < tn and bi[j + 1] > score:
                score, how = bi[j + 1], 2              # a WILD takes t[j]
            bi[j], mi[j] = score, how
    matched = set()
    i = j = 0
    while (i < rn or j < tn) and move[i][j]:
        how = move[i][j]
        if how == 1:
            matched.add(i)
            i, j = i + 1, j + 1
        elif how == 2:
            j += 1
        else:
            i += 1
    return best[0][0], matched


def literal_runs(pattern):
    """[(first position, text)] of the runs of literal characters of pattern."""
    runs, cur, first = [], [], 0
    for k, tok in enumerate(pattern + [WILD]):
        if tok is WILD:
            if cur:
                runs.append((first, "".join(cur)))
            cur = []
        else:
            if not cur:
                first = k
            cur.append(tok)
    return runs


class Corpus:
    """The templates, with their literal text in one string to find candidates quickly, and every
    literal run of every template (the text between two placeholders)."""

    def __init__(self, templates):
        self.templates = templates  # (where, pattern)
        texts = ["".join(tok for tok in t if tok is not WILD) for _, t in templates]
        self.text = "\0".join(texts)
        self.starts = []
        pos = 0
        for t in texts:
            self.starts.append(pos)
            pos += len(t) + 1
        self.runs = {run for _, t in templates for _, run in literal_runs(t)}

    def sharing(self, gram):
        """Indexes of the templates whose literal text contains gram."""
        found = set()
        pos = self.text.find(gram)
        while pos >= 0:
            found.add(bisect.bisect_right(self.starts, pos) - 1)
            pos = self.text.find(gram, pos + 1)
        return found

    def composed(self, text):
        """Whether text is one value (no white space), or is made of whole literal runs of
        templates, each of 3 characters or more (a message built from several pieces)."""
        if not any(c.isspace() for c in text) and len(text) <= 64:
            return True
        ok = [True] + [False] * len(text)
        for i in range(len(text)):
            if ok[i]:
                for j in range(i + 3, len(text) + 1):
                    if text[i:j] in self.runs:
                        ok[j] = True
        return ok[-1]


GRAM = 8        # characters a candidate template shares with the message
CANDIDATES = 48  # templates aligned with the message, those sharing the most first


def find(message, corpus):
    """Where the message comes from, or None. One template must match, with its own literal text,
    at least 10 characters and a quarter of the message's literal text; each part of the message
    it leaves unmatched (between README wildcards) must be a value (no white space: a name, a
    number) or be made of whole literal runs of other templates (a message composed in several
    places: a worker message naming a role, a prefix before the server's message)."""
    pattern = readme_pattern(message)
    literal = [k for k, tok in enumerate(pattern) if tok is not WILD]
    hits = {}
    for first, run in literal_runs(pattern):
        for k in range(0, max(1, len(run) - GRAM + 1)):
            for index in corpus.sharing(run[k:k + GRAM]):
                hits[index] = hits.get(index, 0) + 1
    for index in sorted(hits, key=lambda x: (-hits[x], x))[:CANDIDATES]:
        score, matched = align(pattern, corpus.templates[index][1])
        if score < 10 or score * 4 < len(literal):
            continue
        rest, segments = [], []
        for k, tok in enumerate(pattern + [WILD]):
            if tok is not WILD and k not in matched:
                rest.append(tok)
            elif rest:
                segments.append("".join(rest))
                rest = []
        if all(corpus.composed(segment) for segment in segments):
            return corpus.templates[index][0]
    return None


NAME = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$")


def troubleshooting_spans(readme):
    text = open(readme, encoding="utf-8").read()
    m = re.search(r"^## Troubleshooting\n(.*?)(?=^#{1,2} )", text, re.S | re.M)
    if not m:
        sys.exit("README has no '## Troubleshooting' section")
    rows = []
    for line in m.group(1).splitlines():
        if not line.startswith("| ") or line.startswith("| message") or line.startswith("| ---"):
            continue
        first = line[2:].split(" | ", 1)[0]
        spans = re.findall(r"`([^`]+)`", first)
        if spans:
            rows.append((first, spans))
    return rows


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    readme, source_dir, binaries = sys.argv[1], sys.argv[2], sys.argv[3:]
    corpus = Corpus([(w, normalise(p)) for w, p in templates(source_dir, binaries)])
    names = {s for b in binaries for s in binary_strings(b, 3)}
    sql = "".join(open(p, encoding="utf-8").read() for p in sql_sources(source_dir))
    rows = troubleshooting_spans(readme)
    if len(rows) < 10:
        sys.exit("README's Troubleshooting table has only %d rows with quoted messages" % len(rows))
    missing = []
    checked = 0
    for first, spans in rows:
        for span in spans:
            if NAME.match(span):
                if "." in span:
                    ok = re.search(r"CREATE (?:OR REPLACE )?(?:VIEW|FUNCTION|TABLE) %s\b" % re.escape(span), sql)
                    where = "sql" if ok else None
                elif "'%s'" % span in sql:
                    where = "sql"
                else:
                    where = "server setting" if span in names else None
            else:
                where = find(span, corpus)
            checked += 1
            print("%-60s %s" % (span[:60], where or "NOT FOUND"))
            if where is None:
                missing.append(span)
    if missing:
        print("\nREADME.md quotes %d message(s) in Troubleshooting that nothing in the code emits "
              "(fix the README, or the code it describes):" % len(missing))
        for span in missing:
            print("  " + span)
        sys.exit(1)
    print("\nall %d quoted messages found" % checked)


if __name__ == "__main__":
    main()
