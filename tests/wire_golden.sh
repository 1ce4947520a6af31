#!/usr/bin/env bash
# Regenerates tests/wire_golden.txt (the golden wire bytes) from the real plugin:
#   dir=$(packaging/dev-cluster.sh start); . "$dir/cluster.env"; tests/wire_golden.sh > tests/wire_golden.txt
# One record per line: <hex of the binary record><TAB><the same record in format 'text'>. The workload
# covers every record type, value kind, column flag and TRUNCATE flag. Both formats are read from the
# same slot (peek, then get), so the lines pair up record for record.
set -euo pipefail
db=${PGDATABASE:-postgres}
psql() { command psql -X -q -v ON_ERROR_STOP=1 -d "$db" "$@"; }

psql >/dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS docsync;
DROP TABLE IF EXISTS golden_kinds, golden_full, golden_other, "Golden ""Odd"" Name" CASCADE;
CREATE TABLE golden_kinds (id int PRIMARY KEY, b bigint, n numeric, t text, flag bool, ts timestamptz,
                           u uuid, j jsonb, arr int[], raw bytea, big text);
ALTER TABLE golden_kinds ALTER big SET STORAGE EXTERNAL;
CREATE TABLE golden_full (id int, v text);
ALTER TABLE golden_full REPLICA IDENTITY FULL;
CREATE TABLE golden_other (id int PRIMARY KEY);
CREATE TABLE "Golden ""Odd"" Name" ("Mixed Case" int PRIMARY KEY, "ünï" text);
SQL
slot=golden_$$
psql -c "SELECT 'init' FROM pg_create_logical_replication_slot('$slot', 'docsync')" >/dev/null
trap 'psql -c "SELECT pg_drop_replication_slot('"'"'$slot'"'"')" >/dev/null 2>&1 || true' EXIT

psql >/dev/null <<'SQL'
SET TIME ZONE 'UTC';
INSERT INTO golden_kinds VALUES
  (1, 9007199254740993, 12345.678901234567890, E'quote '' backslash \\ newline \n tab \t ünicode ✓', true,
   '2024-02-29 12:34:56.789+00', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"k": [1, "two", null]}',
   '{1,NULL,3}', '\x00ff10', repeat('x', 3000));
INSERT INTO golden_kinds (id) VALUES (2);
UPDATE golden_kinds SET t = 'changed', b = NULL WHERE id = 1;
UPDATE golden_kinds SET id = 3 WHERE id = 2;
DELETE FROM golden_kinds WHERE id = 3;
INSERT INTO golden_full VALUES (1, 'one');
UPDATE golden_full SET v = 'uno';
UPDATE golden_full SET v = NULL;
UPDATE golden_full SET v = 'again';
DELETE FROM golden_full;
INSERT INTO "Golden ""Odd"" Name" VALUES (1, 'ü');
BEGIN;
INSERT INTO golden_other VALUES (1);
SELECT pg_logical_emit_message(true, 'docsync.golden', E'transactional\nmessage');
COMMIT;
SELECT pg_logical_emit_message(false, 'docsync.golden', 'non-transactional');
TRUNCATE golden_kinds, golden_full RESTART IDENTITY CASCADE;
TRUNCATE golden_full;
SQL

oid() { psql -At -c "SELECT '$1'::regclass::oid"; }
tables="$(oid golden_kinds),$(oid golden_full),$(oid '"Golden ""Odd"" Name"')(1,2,99),golden_kinds(id,b,t,big,no_such_column)"
# golden_kinds appears twice: OID entry (all columns) and named entry; the union is all columns plus
# the missing one. Column 99 of the odd-named table does not exist either.
# One after the other: a slot serves one session at a time.
bin=$(mktemp) txt=$(mktemp)
psql -At -c "SELECT encode(data, 'hex') FROM pg_logical_slot_peek_binary_changes('$slot', NULL, NULL, 'tables', '$tables')" >"$bin" 2>/dev/null
psql -At -c "SELECT data FROM pg_logical_slot_get_changes('$slot', NULL, NULL, 'format', 'text', 'tables', '$tables')" >"$txt" 2>/dev/null
[ "$(wc -l <"$bin")" -eq "$(wc -l <"$txt")" ] && [ -s "$bin" ] || { echo "binary and text outputs differ in length" >&2; exit 1; }
paste "$bin" "$txt"
rm -f "$bin" "$txt"
