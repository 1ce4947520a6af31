#!/usr/bin/env bash
# The shape of the extension's sources (docs/development.md, "The rooms of plugin/ and sql/"):
#   - no file of plugin/ or sql/parts/ is over 600 lines;
#   - every C file and header of plugin/ opens with a comment naming it, and every part of the install
#     script with "-- sql/parts/<its name>:", saying what it holds;
#   - the Makefile's OBJS lists every plugin/*.c and nothing else (a file left out would only fail
#     when the server loads the library);
#   - docs/development.md's map names every file of plugin/ and every part;
#   - encoding apart from deciding: decode.c reads the output format only in its startup callback,
#     which picks the writer of records.c, and records.c reads no option.
# Needs no server.
set -euo pipefail
src=${DOCSYNC_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
max_lines=600
problems=()
problem() { problems+=("$*"); }

shopt -s nullglob
plugin_files=("$src"/plugin/*.c "$src"/plugin/*.h)
parts=("$src"/sql/parts/*.sql)
[ "${#plugin_files[@]}" -gt 0 ] || problem "no files in plugin/"
[ "${#parts[@]}" -gt 0 ] || problem "no parts in sql/parts/: the install script is made of them"

for f in "${plugin_files[@]}" "${parts[@]}"; do
  rel=${f#"$src"/}
  n=$(wc -l <"$f")
  [ "$n" -le "$max_lines" ] || problem "$rel has $n lines (at most $max_lines): split it by concern"
done

for f in "${plugin_files[@]}"; do
  rel=${f#"$src"/}
  [ "$(sed -n 3p "$f")" = " * ${f##*/}" ] ||
    problem "$rel does not open with its header comment (line 3 \" * ${f##*/}\", then what it holds)"
done
for f in "${parts[@]}"; do
  rel=${f#"$src"/}
  head -n 1 "$f" | grep -q "^-- $rel: ." || problem "$rel does not open with \"-- $rel: <what it holds>\""
done

objs=$(sed -n '/^OBJS *=/,/^$/p' "$src/Makefile" | grep -o 'plugin/[A-Za-z0-9_]*\.o' | sort)
cfiles=$(cd "$src" && printf '%s\n' plugin/*.c | sed 's/\.c$/.o/' | sort)
while read -r o; do
  [ -n "$o" ] && problem "the Makefile's OBJS lacks $o"
done < <(comm -13 <(echo "$objs") <(echo "$cfiles"))
while read -r o; do
  [ -n "$o" ] && problem "the Makefile's OBJS lists $o, which has no source"
done < <(comm -23 <(echo "$objs") <(echo "$cfiles"))

map=$src/docs/development.md
for f in "${plugin_files[@]}" "${parts[@]}"; do
  grep -q "\`${f##*/}\`" "$map" || problem "docs/development.md's map of the rooms does not name ${f#"$src"/}"
done

# decode.c: code lines (not comments) that mention the format, outside docsync_startup
if [ -f "$src/plugin/decode.c" ]; then
  while read -r line; do
    problem "plugin/decode.c:$line reads the output format outside docsync_startup: let records.c's writer encode"
  done < <(awk '/^docsync_startup\(/ { in_startup = 1 }
                in_startup && /^}/ { in_startup = 0 }
                /^[ \t]*(\/?\*|\/\/)/ { next }
                /binary/ && !in_startup { print FNR ": " $0 }' "$src/plugin/decode.c")
fi
if [ -f "$src/plugin/records.c" ]; then
  ! grep -n 'options' "$src/plugin/records.c" | grep -v '^[0-9]*:[ \t]*\(/\?\*\|//\)' | grep -q . ||
    problem "plugin/records.c reads the plugin's options: it encodes, decode.c decides"
else
  problem "plugin/records.c (the record writers) is missing"
fi

if [ "${#problems[@]}" -gt 0 ]; then
  printf 'FAIL: %s\n' "${problems[@]}" >&2
  exit 1
fi
echo "source_rooms: ok (${#plugin_files[@]} plugin files, ${#parts[@]} sql parts, none over $max_lines lines)"
