-- definitions and the plugin together: plugin_tables() is a tables option the plugin accepts, and
-- every definition change (and DDL on a watched table) arrives in-stream; unrelated DDL does not
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

CREATE TABLE st_orders (id int PRIMARY KEY, status text, note text, customer_id int);
CREATE TABLE st_other (id int PRIMARY KEY);
SELECT 'init' FROM pg_create_logical_replication_slot('regress_sqlapi_stream', 'docsync');

SELECT docsync.define_query('st', 'SELECT to_jsonb(o) FROM st_orders o WHERE id = $1', params => ARRAY['id'], watches => 'manual');
SELECT docsync.watch('st', 'st_orders', params => ARRAY['id']) > 0;
SELECT docsync.define_query('st.count', 'SELECT jsonb_build_object(''n'', count(*)) FROM st_orders', watches => 'manual');
SELECT docsync.watch('st.count', 'st_orders', params => ARRAY[]::text[]) > 0;
INSERT INTO st_orders VALUES (1, 'new', 'x', 7);
INSERT INTO st_other VALUES (1);

-- the definition changes, then the watched row with only the mapped column; nothing of st_other
SELECT regexp_replace(regexp_replace(data, '(defined_at|generation|id|relid)=''[^'']*''', '\1=…', 'g'),
                      '(docsync\.definitions'') ''[0-9]+''', '\1 ''…''') AS data
  FROM pg_logical_slot_get_changes('regress_sqlapi_stream', NULL, NULL,
                                   'format', 'text', 'tables', docsync.plugin_tables())
 WHERE data NOT LIKE 'RELATION docsync.%';

-- DDL on the watched table reaches the stream as a generation message
ALTER TABLE st_orders RENAME COLUMN note TO remark;
SELECT bool_and(data LIKE 'MESSAGE transactional ''docsync.definitions'' %') AS only_generation_changes, count(*) > 0 AS some
  FROM pg_logical_slot_get_changes('regress_sqlapi_stream', NULL, NULL,
                                   'format', 'text', 'tables', docsync.plugin_tables())
 WHERE data NOT IN ('BEGIN', 'COMMIT') AND data NOT LIKE 'RELATION %';
-- DDL elsewhere, drops included, reaches it as generation messages only (a doc query may read those
-- tables); DDL on temporary tables, and GRANT, not at all
CREATE TABLE st_scratch (id int);
DROP TABLE st_scratch;
ALTER TABLE st_other ADD COLUMN v text;
ALTER TABLE st_other DROP COLUMN v;
CREATE TEMP TABLE st_temp (id int);
DROP TABLE st_temp;
GRANT SELECT ON st_other TO PUBLIC;
SELECT count(*) FILTER (WHERE data LIKE 'MESSAGE transactional ''docsync.definitions'' %') AS messages,
       count(*) FILTER (WHERE data NOT IN ('BEGIN', 'COMMIT') AND data NOT LIKE 'MESSAGE %') AS other_records
  FROM pg_logical_slot_get_changes('regress_sqlapi_stream', NULL, NULL,
                                   'format', 'text', 'tables', docsync.plugin_tables());

-- dropping the queries empties the option; the plugin still takes it and emits only definitions
SELECT docsync.drop_query('st');
SELECT docsync.drop_query('st.count');
SELECT docsync.plugin_tables() = '' AS empty_option;
INSERT INTO st_orders VALUES (2, 'new', 'y', 8);
SELECT count(*) FILTER (WHERE data LIKE 'DELETE docsync.query_defs %') AS query_deletes,
       count(*) FILTER (WHERE data LIKE 'DELETE docsync.watch_defs %') AS watch_deletes,
       count(*) FILTER (WHERE data LIKE '%public.st_orders%') AS row_changes
  FROM pg_logical_slot_get_changes('regress_sqlapi_stream', NULL, NULL,
                                   'format', 'text', 'tables', docsync.plugin_tables());

SELECT pg_drop_replication_slot('regress_sqlapi_stream');
DROP TABLE st_orders, st_other;
