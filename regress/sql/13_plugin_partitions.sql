-- docsync output plugin: partitions of a watched partitioned table are reported as the root
\set VERBOSITY terse
SET synchronous_commit = on;

CREATE TABLE part_root (id int, region text, v text, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE part_eu PARTITION OF part_root FOR VALUES IN ('eu');
-- a partition whose columns are in another order (and with a dropped column): mapped by name
CREATE TABLE part_us (dropme int, v text, region text NOT NULL, id int NOT NULL);
ALTER TABLE part_us DROP COLUMN dropme;
ALTER TABLE part_root ATTACH PARTITION part_us FOR VALUES IN ('us');
-- a sub-partitioned branch
CREATE TABLE part_asia PARTITION OF part_root FOR VALUES IN ('jp', 'kr') PARTITION BY LIST (region);
CREATE TABLE part_jp PARTITION OF part_asia FOR VALUES IN ('jp');
CREATE TABLE part_kr PARTITION OF part_asia FOR VALUES IN ('kr');
CREATE TABLE part_other (id int PRIMARY KEY);
SELECT format('%s(1,3)', 'part_root'::regclass::oid) AS root_entry \gset
SELECT 'init' FROM pg_create_logical_replication_slot('regress_partitions', 'docsync');

INSERT INTO part_root VALUES (1, 'eu', 'a'), (2, 'us', 'b'), (3, 'jp', 'c');
UPDATE part_root SET v = 'bb' WHERE id = 2;
UPDATE part_root SET region = 'kr' WHERE id = 3;   -- moves between partitions: DELETE + INSERT
DELETE FROM part_root WHERE id = 1;
INSERT INTO part_other VALUES (1);
TRUNCATE part_us;
TRUNCATE part_root;

-- the root, by OID with attnums of the root
SELECT data FROM pg_logical_slot_peek_changes('regress_partitions', NULL, NULL, 'format', 'text',
  'tables', :'root_entry');
-- a single partition, by name: reported as itself
SELECT data FROM pg_logical_slot_peek_changes('regress_partitions', NULL, NULL, 'format', 'text',
  'tables', 'part_us');
-- root and a partition both listed: the root wins
SELECT data FROM pg_logical_slot_get_changes('regress_partitions', NULL, NULL, 'format', 'text',
  'tables', 'part_kr(id), public.part_root(id, v)');

SELECT pg_drop_replication_slot('regress_partitions');
DROP TABLE part_root, part_other;
