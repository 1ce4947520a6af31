#!/usr/bin/env python3
"""Writes docsync-portable.sql: the install script of sql/parts/ for servers that load no docsync
library (managed PostgreSQL), run with psql by a database owner without superuser.

Usage: build.py OUTPUT PART... [--forms DIR]

Each part is split into statements (quotes, dollar quotes and comments respected). A statement that
needs the C library or superuser is replaced, where it stood, by its portable form: a block of a file
in sql/portable/ that opens with a line `-- portable: KEY`:
  - `function docsync.NAME/N`: a LANGUAGE c function or procedure with N input arguments;
  - `event trigger NAME`: a CREATE EVENT TRIGGER;
  - `config_dump`: the pg_extension_config_dump calls (ordinary tables are dumped anyway);
  - `psql guard`: the \\echo … \\quit line that keeps psql from running the extension script;
  - `replaces /REGEX/`: the statement whose text matches REGEX (Python syntax), exactly one;
  - `append`: text added at the end of the script.
In a form, @ORIGINAL@ stands for the statement it replaces (without its ';').
A C function without a portable form, or a form that replaces nothing, fails the build, naming it.
"""
import os
import re
import sys


def split_statements(text):
    """Statements of text, each with the comments and blank lines before it; psql meta-commands
    (a line starting with a backslash) are statements of their own."""
    out, start, i, n = [], 0, 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == '\\' and not _open_statement(text[start:i]):
            end = text.find('\n', i)
            end = n if end < 0 else end + 1
            out.append(text[start:end])
            start = i = end
            at_line_start = True
            continue
        at_line_start = False
        if c == '-' and text.startswith('--', i):
            end = text.find('\n', i)
            i = n if end < 0 else end
        elif c == '/' and text.startswith('/*', i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith('/*', i):
                    depth, i = depth + 1, i + 2
                elif text.startswith('*/', i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c in ("'", '"'):
            i += 1
            while i < n:
                if text[i] == c:
                    if i + 1 < n and text[i + 1] == c:
                        i += 2
                        continue
                    break
                i += 1
            i += 1
        elif c == '$':
            m = re.match(r'\$([A-Za-z_][A-Za-z_0-9]*)?\$', text[i:])
            if m and not (i > 0 and re.match(r'[A-Za-z_0-9]', text[i - 1])):
                tag = m.group(0)
                end = text.find(tag, i + len(tag))
                if end < 0:
                    raise SystemExit('unterminated dollar quote %s' % tag)
                i = end + len(tag)
            else:
                i += 1
        elif c == ';':
            i += 1
            if i < n and text[i] == '\n':
                i += 1
            out.append(text[start:i])
            start = i
            at_line_start = True
        else:
            if c == '\n':
                at_line_start = True
            i += 1
    if text[start:].strip():
        out.append(text[start:])
    elif text[start:]:
        out.append(text[start:])
    return out


def _open_statement(prefix):
    """Whether prefix holds statement text (not only comments and blank lines)."""
    return code_of(prefix).strip() != ''


def code_of(stmt):
    """The statement without its leading comments."""
    return re.sub(r'\A(?:\s*(?:--[^\n]*\n|/\*.*?\*/))*\s*', '', stmt, flags=re.S)


def input_args(code):
    """How many input arguments the CREATE FUNCTION/PROCEDURE statement declares."""
    open_at = code.index('(')
    depth, i, args, cur = 0, open_at, [], ''
    for i in range(open_at, len(code)):
        ch = code[i]
        if ch == '(':
            depth += 1
            if depth == 1:
                continue
        elif ch == ')':
            depth -= 1
            if depth == 0:
                break
        if ch == ',' and depth == 1:
            args.append(cur)
            cur = ''
        else:
            cur += ch
    if cur.strip():
        args.append(cur)
    return sum(1 for a in args if not re.match(r'\s*OUT\s', a, re.I))


def key_of(stmt):
    code = code_of(stmt)
    if re.match(r'\\echo\s+Use "CREATE EXTENSION', code):
        return 'psql guard'
    m = re.match(r'CREATE\s+(?:OR\s+REPLACE\s+)?(?:FUNCTION|PROCEDURE)\s+(docsync\.\w+)\s*\(', code, re.I)
    if m and re.search(r"MODULE_PATHNAME|LANGUAGE\s+c\b", code, re.I):
        return 'function %s/%d' % (m.group(1), input_args(code))
    m = re.match(r'CREATE\s+EVENT\s+TRIGGER\s+(\w+)', code, re.I)
    if m:
        return 'event trigger ' + m.group(1)
    if 'pg_extension_config_dump' in code:
        return 'config_dump'
    return None


def read_forms(directory):
    forms, order = {}, []
    for fname in sorted(os.listdir(directory)):
        if not fname.endswith('.sql'):
            continue
        path = os.path.join(directory, fname)
        key, lines = None, []
        with open(path, encoding='utf-8') as f:
            for line in f:
                m = re.match(r'-- portable: (.+?)\s*$', line)
                if m:
                    if key is not None:
                        add_form(forms, order, key, ''.join(lines), path)
                    key, lines = m.group(1), [line]
                elif key is not None:
                    lines.append(line)
        if key is not None:
            add_form(forms, order, key, ''.join(lines), path)
    return forms, order


def add_form(forms, order, key, text, path):
    if key in forms and key not in ('append',):
        raise SystemExit('%s: a second portable form for "%s"' % (path, key))
    if key == 'append':
        forms.setdefault('append', []).append(text)
    else:
        forms[key] = text
        order.append(key)


def main(argv):
    if len(argv) < 3 or '--forms' not in argv:
        raise SystemExit('usage: build.py OUTPUT --forms DIR PART...')
    k = argv.index('--forms')
    forms_dir = argv[k + 1]
    rest = argv[1:k] + argv[k + 2:]
    output, parts = rest[0], rest[1:]
    forms, _ = read_forms(forms_dir)
    replaces = [(k, re.compile(k[len('replaces '):].strip()[1:-1], re.S)) for k in forms if k.startswith('replaces ')]
    used, missing, out = set(), [], []
    out.append('-- docsync-portable.sql: generated by sql/portable/build.py from sql/parts/ and sql/portable/; do not edit.\n')
    for part in parts:
        with open(part, encoding='utf-8') as f:
            text = f.read()
        for stmt in split_statements(text):
            key = key_of(stmt)
            hits = [k for k, rx in replaces if rx.search(code_of(stmt))]
            if len(hits) > 1:
                raise SystemExit('%s: portable forms %s all match one statement' % (part, hits))
            if hits and key is None:
                key = hits[0]
            if key is None:
                out.append(stmt)
                continue
            if key == 'config_dump' and key in forms:
                used.add(key)
                # the comment before it is kept; the call itself is dropped
                lead = stmt[:len(stmt) - len(code_of(stmt))]
                out.append(lead)
                continue
            if key not in forms:
                missing.append('%s (in %s)' % (key, part))
                continue
            if key in used and not key.startswith('replaces '):
                raise SystemExit('%s: "%s" appears twice in the parts' % (part, key))
            used.add(key)
            lead = stmt[:len(stmt) - len(code_of(stmt))]
            original = code_of(stmt).rstrip().rstrip(';')
            out.append(lead + forms[key].rstrip('\n').replace('@ORIGINAL@', original) + '\n')
    for text in forms.get('append', []):
        out.append('\n' + text)
    if missing:
        raise SystemExit('docsync-portable.sql: no portable form for:\n  ' + '\n  '.join(missing) +
                         '\nWrite one in sql/portable/*.sql (a block opening with "-- portable: KEY") '
                         'that does the same in plpgsql or SQL, or says clearly why it cannot.')
    stale = [k for k in forms if k != 'append' and k not in used]
    if stale:
        raise SystemExit('docsync-portable.sql: portable forms that replace nothing in sql/parts/: ' + ', '.join(stale))
    tmp = output + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as f:
        f.write(''.join(out))
    os.replace(tmp, output)


if __name__ == '__main__':
    main(sys.argv)
