-- docsync.derive_watches: the rules that keep a derived watch sound where rows are picked by their
-- order, where a query's result depends on row order, where types differ, and where a query is too
-- big to analyse in a fraction of a second.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

CREATE SCHEMA drr;
SET search_path = drr;
CREATE TABLE orders (id int PRIMARY KEY, x int NOT NULL, note text);
CREATE TABLE items (id int PRIMARY KEY, order_id int, x int NOT NULL, ts int NOT NULL, note text, w float8);
CREATE FUNCTION d(sql text) RETURNS TABLE (tbl name, kind text, keys_sql text, read_columns name[], why text)
LANGUAGE sql AS $$
  SELECT table_name, kind, keys_sql, read_columns, why
    FROM docsync.derive_watches(sql, 'drr', NULL)
   ORDER BY table_name NULLS LAST, kind, why
$$;

-- IN / = ANY through a sublink whose LIMIT, OFFSET, DISTINCT ON or window functions pick its rows:
-- which rows are picked depends on every row of items, so the IN equality does not restrict them
SELECT tbl, kind, why FROM d($$SELECT coalesce(jsonb_agg(o.id ORDER BY o.id), '[]') FROM orders o
  WHERE o.id = $1 AND o.x IN (SELECT i.x FROM items i ORDER BY i.ts DESC LIMIT 1)$$);
SELECT tbl, kind, why FROM d($$SELECT coalesce(jsonb_agg(o.id ORDER BY o.id), '[]') FROM orders o
  WHERE o.id = $1 AND o.x IN (SELECT DISTINCT ON (i.ts > -1) i.x FROM items i ORDER BY i.ts > -1, i.ts DESC)$$);
SELECT tbl, kind, why FROM d($$SELECT coalesce(jsonb_agg(o.id ORDER BY o.id), '[]') FROM orders o
  WHERE o.id = $1 AND (o.x, 1::bigint) IN (SELECT i.x, rank() OVER (ORDER BY i.ts DESC) FROM items i)$$);
SELECT tbl, kind, why FROM d($$SELECT coalesce(jsonb_agg(o.id ORDER BY o.id), '[]') FROM orders o
  WHERE o.id = $1 AND o.x = ANY (SELECT i.x FROM items i ORDER BY i.ts DESC OFFSET 0 LIMIT 1)$$);
-- without them the IN equality holds for every row that counts: a keys watch
SELECT tbl, kind, keys_sql FROM d($$SELECT coalesce(jsonb_agg(o.id ORDER BY o.id), '[]') FROM orders o
  WHERE o.id = $1 AND o.x IN (SELECT i.x FROM items i)$$);
-- a sublink's own correlation still restricts its rows
SELECT tbl, kind, why FROM d($$SELECT coalesce(jsonb_agg(o.id ORDER BY o.id), '[]') FROM orders o
  WHERE o.id = $1 AND o.x IN (SELECT i.x FROM items i WHERE i.order_id = o.id ORDER BY i.ts DESC LIMIT 1)$$);
-- the same through a LATERAL subquery: its output equality does not come back through o's
SELECT tbl, kind, why FROM d($$SELECT jsonb_agg(s.x ORDER BY s.x) FROM orders o,
  LATERAL (SELECT i.x FROM items i ORDER BY i.ts LIMIT 1) s WHERE s.x = o.x AND o.id = $1$$);
-- the same where the pick sits in an outer join's ON or on its preserved side: the equality through
-- the picked output reaches the picked table through no other occurrence's edges either
CREATE TABLE lines (id int PRIMARY KEY, order_id int NOT NULL, c int NOT NULL, x int NOT NULL);
SELECT tbl, kind, keys_sql FROM d($$SELECT jsonb_agg(l.id ORDER BY l.id) FROM orders o LEFT JOIN lines l
  ON l.order_id = o.id AND l.x IN (SELECT i.x FROM items i WHERE i.order_id = l.c ORDER BY i.ts DESC LIMIT 1)
  WHERE o.id = $1$$);
SELECT tbl, kind, keys_sql FROM d($$SELECT jsonb_agg(l.id ORDER BY l.id) FROM orders o LEFT JOIN (lines l
  JOIN orders o2 ON o2.id = l.order_id AND l.x IN (SELECT i.x FROM items i WHERE i.order_id = l.c
  ORDER BY i.ts DESC LIMIT 1)) ON l.order_id = o.id WHERE o.id = $1$$);
SELECT tbl, kind, keys_sql FROM d($$SELECT coalesce(jsonb_agg(l.id ORDER BY l.id), '[]')
  FROM (SELECT i.x FROM items i ORDER BY i.ts DESC LIMIT 1) s LEFT JOIN lines l ON l.x = s.x
  WHERE l.order_id = $1$$);
SELECT tbl, kind, keys_sql FROM d($$SELECT coalesce(jsonb_agg(l.id ORDER BY l.id), '[]')
  FROM lines l RIGHT JOIN (SELECT i.x FROM items i ORDER BY i.ts DESC LIMIT 1) s ON l.x = s.x
  WHERE l.order_id = $1$$);
SELECT tbl, kind, keys_sql FROM d($$SELECT coalesce(jsonb_agg(l.id ORDER BY l.id), '[]')
  FROM (SELECT i.x, row_number() OVER (ORDER BY i.ts DESC) rn FROM items i) s LEFT JOIN lines l ON l.x = s.x
  WHERE l.order_id = $1 AND s.rn = 1$$);
SELECT tbl, kind, keys_sql FROM d($$SELECT coalesce(jsonb_agg(l.id ORDER BY l.id), '[]')
  FROM (SELECT DISTINCT ON (i.order_id) i.order_id, i.x FROM items i ORDER BY i.order_id, i.ts DESC) s
  LEFT JOIN lines l ON l.x = s.x WHERE l.order_id = $1$$);
-- without the pick the equality through the output holds for every row: a keys watch
SELECT tbl, kind, keys_sql FROM d($$SELECT coalesce(jsonb_agg(l.id ORDER BY l.id), '[]')
  FROM (SELECT i.x FROM items i) s LEFT JOIN lines l ON l.x = s.x WHERE l.order_id = $1$$);

-- a result that depends on row order: every column of the tables read below it counts as read
-- (an UPDATE of any column moves the row)
SELECT tbl, kind, read_columns FROM d($$SELECT jsonb_agg(i.x) FROM items i WHERE i.order_id = $1$$);
SELECT tbl, kind, read_columns FROM d($$SELECT jsonb_agg(i.x ORDER BY i.ts, i.id) FROM items i WHERE i.order_id = $1$$);
SELECT tbl, kind, read_columns FROM d($$SELECT jsonb_agg(DISTINCT i.x) FROM items i WHERE i.order_id = $1$$);
SELECT tbl, kind, read_columns FROM d($$SELECT jsonb_build_object('n', count(*), 's', sum(i.x), 'm', max(i.ts),
  'a', avg(i.x), 'b', bool_and(i.x > 0)) FROM items i WHERE i.order_id = $1$$);
-- floating point sums round in the order they add
SELECT tbl, kind, read_columns FROM d($$SELECT sum(i.w) FROM items i WHERE i.order_id = $1$$);
SELECT tbl, kind, read_columns FROM d($$SELECT string_agg(i.note, ',') FROM items i WHERE i.order_id = $1$$);
-- the outer table a correlated order-dependent sublink reads keeps its columns
SELECT tbl, kind, read_columns FROM d($$SELECT jsonb_build_object('id', o.id,
  'xs', (SELECT jsonb_agg(i.x) FROM items i WHERE i.order_id = o.id)) FROM orders o WHERE o.id = $1$$);
-- LIMIT, OFFSET, DISTINCT ON: decided only by an ORDER BY over every output column
SELECT tbl, kind, read_columns FROM d($$SELECT jsonb_agg(t.x ORDER BY t.x) FROM
  (SELECT i.x FROM items i WHERE i.order_id = $1 ORDER BY i.ts LIMIT 3) t$$);
SELECT tbl, kind, read_columns FROM d($$SELECT jsonb_agg(t.x ORDER BY t.x) FROM
  (SELECT i.x FROM items i WHERE i.order_id = $1 ORDER BY i.x LIMIT 3) t$$);
SELECT tbl, kind, read_columns FROM d($$SELECT jsonb_agg(t.x ORDER BY t.x) FROM
  (SELECT DISTINCT ON (i.ts) i.x FROM items i WHERE i.order_id = $1 ORDER BY i.ts) t$$);
-- window functions: rank is the same for rows that tie, row_number is not
SELECT tbl, kind, read_columns FROM d($$SELECT jsonb_agg(t.r ORDER BY t.r) FROM
  (SELECT rank() OVER (ORDER BY i.ts) AS r FROM items i WHERE i.order_id = $1) t$$);
SELECT tbl, kind, read_columns FROM d($$SELECT jsonb_agg(t.r ORDER BY t.r) FROM
  (SELECT row_number() OVER (ORDER BY i.ts) AS r FROM items i WHERE i.order_id = $1) t$$);
-- a running count over ROWS gives rows that tie other counts; over RANGE (the default) their peers'
SELECT tbl, kind, read_columns FROM d($$SELECT jsonb_agg(t.n ORDER BY t.n) FROM
  (SELECT count(*) OVER (ORDER BY i.ts ROWS UNBOUNDED PRECEDING) AS n FROM items i WHERE i.order_id = $1) t$$);
SELECT tbl, kind, read_columns FROM d($$SELECT jsonb_agg(t.n ORDER BY t.n) FROM
  (SELECT count(*) OVER (ORDER BY i.ts) AS n FROM items i WHERE i.order_id = $1) t$$);
-- a CTE read by an order-dependent block and by another: read whole, whichever comes first
SELECT tbl, kind, read_columns FROM d($$WITH c AS MATERIALIZED (SELECT i.x FROM items i WHERE i.order_id = $1)
  SELECT jsonb_build_object('n', (SELECT count(*) FROM c), 'xs', (SELECT jsonb_agg(c.x) FROM c))$$);
-- ARRAY(SELECT …) collects its rows in the order they are read, unless sorted by every output
-- column or one row
SELECT tbl, kind, read_columns FROM d($$SELECT to_jsonb(ARRAY(SELECT i.x FROM items i WHERE i.order_id = $1))$$);
SELECT tbl, kind, read_columns FROM d($$SELECT to_jsonb(ARRAY(SELECT i.x FROM items i WHERE i.order_id = $1 ORDER BY i.x))$$);
SELECT tbl, kind, read_columns FROM d($$SELECT to_jsonb(ARRAY(SELECT count(*) FROM items i WHERE i.order_id = $1))$$);
-- an aggregate of the outer block written inside a sublink
SELECT tbl, kind, read_columns FROM d($$SELECT (SELECT jsonb_agg(i.x)) FROM items i WHERE i.order_id = $1$$);
SELECT tbl, kind, read_columns FROM d($$SELECT (SELECT count(i.x)) FROM items i WHERE i.order_id = $1$$);
-- min, max, DISTINCT and ordered-set aggregates keep one of several values that tie: order-dependent
-- when equal values print differently (numeric 1.0 and 1.00), not otherwise
CREATE TABLE prices (id int PRIMARY KEY, order_id int NOT NULL, amount numeric NOT NULL, n int NOT NULL, note text);
SELECT tbl, kind, read_columns FROM d($$SELECT jsonb_build_object('m', mode() WITHIN GROUP (ORDER BY p.amount))
  FROM prices p WHERE p.order_id = $1$$);
SELECT tbl, kind, read_columns FROM d($$SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY p.amount)
  FROM prices p WHERE p.order_id = $1$$);
SELECT tbl, kind, read_columns FROM d($$SELECT max(p.amount) FROM prices p WHERE p.order_id = $1$$);
SELECT tbl, kind, read_columns FROM d($$SELECT min(p.amount) OVER () FROM prices p WHERE p.order_id = $1$$);
SELECT tbl, kind, read_columns FROM d($$SELECT jsonb_agg(DISTINCT p.amount) FROM prices p WHERE p.order_id = $1$$);
SELECT tbl, kind, read_columns FROM d($$SELECT jsonb_build_object('m', mode() WITHIN GROUP (ORDER BY p.n),
  'x', max(p.n), 'r', rank(3) WITHIN GROUP (ORDER BY p.amount), 'd', jsonb_agg(DISTINCT p.n))
  FROM prices p WHERE p.order_id = $1$$);

-- a cross-type equality: a date column tied to a timestamp param prints otherwise, so it is not
-- the param's direct key; the keys query reaches the timestamp column instead
CREATE TABLE days (d date PRIMARY KEY, note text);
CREATE TABLE slots (ts timestamp PRIMARY KEY, n int);
SELECT tbl, kind, keys_sql FROM d($$SELECT jsonb_build_object('n', s.n, 'note', d.note)
  FROM slots s JOIN days d ON d.d = s.ts WHERE s.ts = $1$$);
SELECT docsync.define_query('slot', $$SELECT jsonb_build_object('n', s.n, 'note', d.note)
  FROM slots s JOIN days d ON d.d = s.ts WHERE s.ts = $1$$, params => ARRAY['ts'], search_path => 'drr');
SELECT table_name, columns, keys_sql IS NOT NULL AS keys FROM docsync.watch_defs WHERE query = 'slot'
 ORDER BY table_name;
SELECT docsync.drop_query('slot');

-- bounds of the analysis: beyond them broadcast, the why naming the bound
CREATE TABLE chain (a int PRIMARY KEY, b int);
CREATE FUNCTION chain_sql(n int) RETURNS text LANGUAGE sql AS $$
  SELECT 'SELECT count(*) FROM ' || string_agg(format('chain t%s', k), ', ') || ' WHERE '
         || (SELECT coalesce(string_agg(format('t%s.b = t%s.a', k, k + 1), ' AND ') || ' AND ', '')
               FROM generate_series(0, n - 2) k)
         || format('t%s.a = $1', n - 1)
    FROM generate_series(0, n - 1) k
$$;
-- 200 occurrences are analysed; a keys path is at most 12 tables long
SELECT kind, count(*) FROM docsync.derive_watches(chain_sql(200), 'drr', NULL) GROUP BY kind ORDER BY kind;
SELECT why FROM docsync.derive_watches(chain_sql(200), 'drr', NULL) WHERE kind = 'broadcast';
SELECT kind, why FROM docsync.derive_watches(chain_sql(201), 'drr', NULL);
-- more than 400 equalities holding for one occurrence's rows
SELECT kind, why FROM docsync.derive_watches(
  'SELECT count(*) FROM chain a, chain b WHERE a.a = $1 AND ' ||
  (SELECT string_agg('a.b = b.a', ' AND ') FROM generate_series(1, 400)), 'drr', NULL) ORDER BY why;
SELECT kind, why FROM docsync.derive_watches(
  'SELECT count(*) FROM chain a, chain b WHERE a.a = $1 AND ' ||
  (SELECT string_agg('a.b = b.a', ' AND ') FROM generate_series(1, 398)), 'drr', NULL) ORDER BY why;
-- views that each join the previous one twice: 2^15 occurrences of chain once rewritten, analysed
-- in time linear in them (each occurrence and block is looked up in a hash, not a list)
CREATE VIEW dbl0 AS SELECT a, b FROM chain;
DO $$BEGIN FOR i IN 1..15 LOOP
  EXECUTE format('CREATE VIEW drr.dbl%s AS SELECT x.a, x.b FROM drr.dbl%s x, drr.dbl%s y WHERE x.a = y.a',
                 i, i - 1, i - 1);
END LOOP; END$$;
SET statement_timeout = '5s';
SELECT kind, why FROM docsync.derive_watches('SELECT to_jsonb(v) FROM dbl15 v WHERE v.a = $1', 'drr', NULL);
RESET statement_timeout;
SET client_min_messages = warning;
DROP VIEW dbl0 CASCADE;
RESET client_min_messages;

DROP SCHEMA drr CASCADE;
