-- docsync output plugin: relations that come and go leave nothing behind in the relation cache
\set VERBOSITY terse
SET synchronous_commit = on;

CREATE TABLE churn_keep (id int PRIMARY KEY, v text);
CREATE TABLE churn_other (id int PRIMARY KEY);
CREATE TABLE churn_parts (id int, k int, v text, PRIMARY KEY (id, k)) PARTITION BY LIST (k);
-- made before the slot: a session's first temporary table creates its temporary schema, and a new
-- schema makes the plugin drop its whole relation cache
CREATE TEMP TABLE churn_out (line text);
SELECT 'init' FROM pg_create_logical_replication_slot('regress_churn', 'docsync');

-- 100 cycles of create, insert, drop (each its own transaction) of an unwatched table, of a table
-- watched by name (each one a new relation under the same name) and of a partition of a watched root
DO $$
BEGIN
  FOR i IN 1..100 LOOP
    CREATE TABLE churn_gone (id int PRIMARY KEY, v text);
    CREATE TABLE churn_named (id int PRIMARY KEY, v text);
    EXECUTE format('CREATE TABLE churn_part PARTITION OF churn_parts FOR VALUES IN (%s)', i);
    COMMIT;
    INSERT INTO churn_gone VALUES (i, 'gone');
    INSERT INTO churn_named VALUES (i, 'named');
    INSERT INTO churn_parts VALUES (i, i, 'part');
    COMMIT;
    DROP TABLE churn_gone, churn_named, churn_part;
    COMMIT;
  END LOOP;
END $$;
-- two relations that stay: one watched, one not
INSERT INTO churn_keep VALUES (1, 'kept');
INSERT INTO churn_other VALUES (1);

-- The plugin reports what its relation cache holds at session end at DEBUG1. Starting to decode
-- logs LSNs at LOG, which client_min_messages = debug1 shows too, so the slot is read by a second
-- session whose output (records and messages) is collected here and filtered.
\setenv PGDATABASE :DBNAME
\copy churn_out FROM PROGRAM 'psql -X -q -At -c "SET client_min_messages = debug1" -c "SELECT data FROM pg_logical_slot_get_changes(''regress_churn'', NULL, NULL, ''format'', ''text'', ''tables'', ''churn_keep, churn_named(v), churn_parts(v)'')" 2>&1'
\setenv PGDATABASE

-- every new relation under the watched name, and the root after each change of its partitions,
-- gets a fresh RELATION record
SELECT line, count(*) FROM churn_out
 WHERE line NOT LIKE 'LOG:%' AND line NOT LIKE 'DEBUG:%' AND line NOT LIKE 'DETAIL:%'
 GROUP BY line ORDER BY line;
-- the cache holds the two relations that stay, and the one watched relation among them
SELECT line FROM churn_out WHERE line LIKE 'DEBUG:  docsync:%';

SELECT pg_drop_replication_slot('regress_churn');
DROP TABLE churn_keep, churn_other, churn_parts;
