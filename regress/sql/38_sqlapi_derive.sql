-- docsync.derive_watches: the watches derived for a doc query, from PostgreSQL's own analysis of it.
-- Per table occurrence the cheapest sound kind: direct (a chain of equalities that every
-- contributing row satisfies ties a column to each param), keys (a join path through such
-- equalities reaches a table that is direct), broadcast (no key path, saying why); plus one
-- uncovered row per function whose body the analysis cannot see into.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET synchronous_commit = on;

CREATE SCHEMA drv;
SET search_path = drv;
CREATE TABLE customers (id int PRIMARY KEY, name text, region text, referrer_id int);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, status text, placed_at timestamptz);
CREATE TABLE products (id int PRIMARY KEY, name text, price numeric);
CREATE TABLE order_items (id int PRIMARY KEY, order_id int NOT NULL, product_id int NOT NULL, qty int);
CREATE VIEW order_lines AS
  SELECT i.order_id, p.name, i.qty FROM order_items i JOIN products p ON p.id = i.product_id;
CREATE FUNCTION order_total(int) RETURNS numeric LANGUAGE plpgsql STABLE
  AS $$BEGIN RETURN (SELECT sum(i.qty * p.price) FROM order_items i JOIN products p ON p.id = i.product_id
                      WHERE i.order_id = $1); END$$;
CREATE FUNCTION product_name(int) RETURNS text LANGUAGE sql STABLE
  AS 'SELECT name FROM drv.products WHERE id = $1';
CREATE FUNCTION region_of(c int) RETURNS text LANGUAGE sql STABLE
  BEGIN ATOMIC SELECT region FROM drv.customers WHERE id = c; END;

-- d(sql): the derived rows, in a stable order
CREATE FUNCTION d(sql text) RETURNS TABLE (tbl name, kind text, columns name[], keys_sql text,
                                           keys_args name[], read_columns name[], why text)
LANGUAGE sql AS $$
  SELECT table_name, kind, columns, keys_sql, keys_args, read_columns, why
    FROM docsync.derive_watches(sql, 'drv', NULL)
   ORDER BY table_name NULLS LAST, kind, why
$$;

-- the order doc: orders and order_items direct, products through order_items (keys)
SELECT * FROM d($$SELECT jsonb_build_object('id', o.id, 'items',
    (SELECT jsonb_agg(jsonb_build_object('p', p.name, 'q', i.qty))
       FROM order_items i JOIN products p ON p.id = i.product_id WHERE i.order_id = o.id))
  FROM orders o WHERE o.id = $1$$);

-- a multi-hop reverse index: a customer's doc reads products through order_items and orders
SELECT * FROM d($$SELECT jsonb_build_object('name', c.name, 'bought',
    (SELECT jsonb_agg(p.name) FROM orders o JOIN order_items i ON i.order_id = o.id
       JOIN products p ON p.id = i.product_id WHERE o.customer_id = c.id))
  FROM customers c WHERE c.id = $1$$);

-- LEFT JOIN: its ON ties the nullable side to the preserved side, never the other way
SELECT * FROM d($$SELECT jsonb_agg(o.id) FROM customers c LEFT JOIN orders o ON o.customer_id = c.id
  WHERE c.id = $1$$);
SELECT * FROM d($$SELECT jsonb_agg(jsonb_build_object('c', c.name, 'o', o.id))
  FROM customers c LEFT JOIN orders o ON o.customer_id = c.id AND c.id = $1$$);
-- RIGHT JOIN is the mirror image
SELECT * FROM d($$SELECT jsonb_agg(jsonb_build_object('c', c.name, 'o', o.id))
  FROM orders o RIGHT JOIN customers c ON o.customer_id = c.id AND c.id = $1$$);
-- a strict equality on a nullable side's column means its row is there: the ON holds then too, for
-- the preserved side (WHERE on the nullable side) and for a sublink correlated with the nullable side
SELECT * FROM d($$SELECT jsonb_agg(c.name) FROM customers c LEFT JOIN orders o ON o.customer_id = c.id
  WHERE o.id = $1$$);
SELECT * FROM d($$SELECT jsonb_build_object('id', o.id, 'customer', c.name,
    'their_orders', (SELECT count(*) FROM orders o2 WHERE o2.customer_id = c.id))
  FROM orders o LEFT JOIN customers c ON c.id = o.customer_id WHERE o.id = $1$$);
-- FULL JOIN: its ON holds for neither side
SELECT * FROM d($$SELECT jsonb_agg(o.id) FROM customers c FULL JOIN orders o ON o.customer_id = c.id
  WHERE c.id = $1$$);

-- OR, a range predicate and a function of a column give nothing; another filter beside an equality
-- changes nothing
SELECT * FROM d($$SELECT jsonb_agg(o.id) FROM orders o WHERE o.id = $1 OR o.customer_id = $1$$);
SELECT * FROM d($$SELECT jsonb_agg(o.id) FROM orders o WHERE o.id >= $1$$);
SELECT * FROM d($$SELECT jsonb_agg(o.id) FROM orders o WHERE abs(o.customer_id) = $1$$);
SELECT * FROM d($$SELECT jsonb_agg(o.id) FROM orders o WHERE o.customer_id = $1 AND o.placed_at > now() - interval '1 day'$$);

-- an aggregate over a whole table; GROUP BY columns let the outer conjuncts through, aggregates do not
SELECT * FROM d($$SELECT jsonb_build_object('name', c.name, 'all_orders', (SELECT count(*) FROM orders))
  FROM customers c WHERE c.id = $1$$);
SELECT * FROM d($$SELECT to_jsonb(s) FROM (SELECT o.customer_id, count(*) AS n FROM orders o
  GROUP BY o.customer_id) s WHERE s.customer_id = $1$$);
SELECT * FROM d($$SELECT to_jsonb(s) FROM (SELECT o.status, count(*) AS n FROM orders o
  GROUP BY o.status) s WHERE s.n = $1$$);
-- a LATERAL count has a row even for a product without items of the order: every product is in every
-- doc, so nothing ties products to the order (while an item still reaches the doc of its order)
SELECT * FROM d($$SELECT jsonb_agg(jsonb_build_object('p', p.name, 'n', s.n)) FROM products p
  CROSS JOIN LATERAL (SELECT count(*) AS n FROM order_items i
                      WHERE i.product_id = p.id AND i.order_id = $1) s$$);
-- … whereas grouped, a row stands for items that exist
SELECT * FROM d($$SELECT jsonb_agg(jsonb_build_object('p', p.name, 'n', s.n)) FROM products p
  CROSS JOIN LATERAL (SELECT i.order_id, count(*) AS n FROM order_items i
                      WHERE i.product_id = p.id AND i.order_id = $1 GROUP BY i.order_id) s$$);

-- top-N: a LIMIT decides which rows count by looking at the others, unless it is per outer row
SELECT * FROM d($$SELECT jsonb_agg(s.id) FROM (SELECT o.id, o.customer_id FROM orders o
  ORDER BY o.placed_at DESC LIMIT 10) s WHERE s.customer_id = $1$$);
SELECT * FROM d($$SELECT jsonb_build_object('name', c.name, 'recent', jsonb_agg(r.id)) FROM customers c
  CROSS JOIN LATERAL (SELECT o.id FROM orders o WHERE o.customer_id = c.id
                      ORDER BY o.placed_at DESC LIMIT 3) r
  WHERE c.id = $1 GROUP BY c.name$$);
SELECT * FROM d($$SELECT jsonb_agg(s.id) FROM (SELECT DISTINCT ON (o.customer_id) o.id, o.customer_id
  FROM orders o ORDER BY o.customer_id, o.placed_at DESC) s WHERE s.customer_id = $1$$);

-- window functions and grouping sets choose rows by looking at others, like LIMIT
SELECT * FROM d($$SELECT jsonb_agg(x.id) FROM (SELECT o.id, o.customer_id, rank() OVER (ORDER BY o.placed_at) AS r
  FROM orders o) x WHERE x.customer_id = $1 AND x.r <= 3$$);
SELECT * FROM d($$SELECT jsonb_agg(x) FROM (SELECT o.customer_id, o.status, count(*) FROM orders o
  GROUP BY GROUPING SETS ((o.customer_id), (o.status))) x WHERE x.customer_id = $1$$);

-- sublinks whose rows stand for nothing: EXISTS over an aggregate is always true, an aggregate's IN
-- output is no row's column; a sublink under OR is no conjunct
SELECT * FROM d($$SELECT jsonb_agg(c.id) FROM customers c
  WHERE EXISTS (SELECT count(*) FROM orders o WHERE o.customer_id = c.id AND o.id = $1)$$);
SELECT * FROM d($$SELECT jsonb_agg(c.id) FROM customers c
  WHERE c.id IN (SELECT max(o.customer_id) FROM orders o WHERE o.id = $1)$$);
SELECT * FROM d($$SELECT jsonb_agg(c.id) FROM customers c
  WHERE c.region = 'north' OR EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id AND o.id = $1)$$);

-- sublinks: EXISTS, NOT EXISTS, IN (outer = output, and the sublink's conjuncts through its witness)
SELECT * FROM d($$SELECT to_jsonb(c.name) FROM customers c WHERE c.id = $1
  AND EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id AND o.status = 'open')$$);
SELECT * FROM d($$SELECT to_jsonb(c.name) FROM customers c WHERE c.id = $1
  AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id)$$);
SELECT * FROM d($$SELECT jsonb_agg(p.name) FROM products p
  WHERE p.id IN (SELECT i.product_id FROM order_items i WHERE i.order_id = $1)$$);
SELECT * FROM d($$SELECT jsonb_agg(p.name) FROM products p
  WHERE p.id NOT IN (SELECT i.product_id FROM order_items i WHERE i.order_id = $1)$$);
SELECT * FROM d($$SELECT jsonb_agg(p.name) FROM products p
  WHERE p.id IN (SELECT i.product_id FROM order_items i UNION SELECT o.id FROM orders o) AND p.id = $1$$);

-- CTEs: like subqueries; one referenced twice keeps its own conjuncts only; a recursive one: broadcast
SELECT * FROM d($$WITH open AS (SELECT o.id, o.customer_id FROM orders o WHERE o.status = 'open')
  SELECT jsonb_agg(x.id) FROM open x WHERE x.customer_id = $1$$);
SELECT * FROM d($$WITH mine AS (SELECT o.id, o.customer_id FROM orders o)
  SELECT jsonb_agg(a.id) FROM mine a, mine b WHERE a.customer_id = $1 AND b.id = a.id$$);
SELECT * FROM d($$WITH RECURSIVE chain(id) AS (SELECT c.id FROM customers c WHERE c.id = $1
    UNION SELECT c.id FROM customers c JOIN chain ON c.referrer_id = chain.id)
  SELECT jsonb_agg(id) FROM chain$$);

-- UNION branches each on their own; an outer conjunct on a UNION's output reaches no branch
SELECT * FROM d($$SELECT to_jsonb(c.name) FROM customers c WHERE c.id = $1
  UNION ALL SELECT to_jsonb(p.name) FROM products p WHERE p.id = $1$$);
SELECT * FROM d($$SELECT jsonb_agg(u.id) FROM (SELECT o.customer_id AS id FROM orders o
  UNION SELECT c.id FROM customers c) u WHERE u.id = $1$$);

-- a view is seen through: its tables and the join inside it
SELECT * FROM d($$SELECT jsonb_agg(l) FROM order_lines l WHERE l.order_id = $1$$);

-- an inheritance child's rows are its parent's, decoded as the child's: the same watch, by name
-- (not for ONLY)
CREATE TABLE notes (id int PRIMARY KEY, order_id int, body text);
CREATE TABLE urgent_notes (level int) INHERITS (notes);
SELECT * FROM d($$SELECT jsonb_agg(n.body) FROM notes n WHERE n.order_id = $1$$);
SELECT * FROM d($$SELECT jsonb_agg(n.body) FROM ONLY notes n WHERE n.order_id = $1$$);

-- no params: the one doc reads every row; whole-row references read every column (null)
SELECT * FROM d($$SELECT jsonb_agg(p) FROM products p$$);

-- two params: a table tied to both is direct on both, in $n order; one tied to a single param is not
SELECT * FROM d($$SELECT jsonb_agg(i.qty) FROM order_items i WHERE i.product_id = $2 AND i.order_id = $1$$);
SELECT * FROM d($$SELECT jsonb_build_object('o', o.status, 'p', p.name) FROM orders o, products p
  WHERE o.id = $1 AND p.id = $2$$);
-- … unless a join path reaches a table tied to both
SELECT * FROM d($$SELECT jsonb_build_object('o', o.status, 'q', i.qty) FROM orders o
  JOIN order_items i ON i.order_id = o.id WHERE o.id = $1 AND i.product_id = $2$$);

-- two occurrences with the same watch: one row
SELECT * FROM d($$SELECT to_jsonb(o.status) FROM orders o WHERE o.id = $1
  AND EXISTS (SELECT 1 FROM orders o2 WHERE o2.id = $1 AND o2.status = 'open')$$);

-- a self-join: one row per occurrence
SELECT * FROM d($$SELECT jsonb_agg(prev.id) FROM orders o JOIN orders prev
  ON prev.customer_id = o.customer_id AND prev.id <> o.id WHERE o.id = $1$$);

-- functions: a plpgsql body is uncovered; a SQL body is analysed and the tables it reads broadcast;
-- pg_catalog functions that run SQL text are uncovered. A function docsync cannot see into may read
-- any column: with one, every table's read_columns is null (all)
SELECT * FROM d($$SELECT jsonb_build_object('total', order_total(o.id)) FROM orders o WHERE o.id = $1$$);
SELECT * FROM d($$SELECT jsonb_build_object('p', product_name(i.product_id), 'r', region_of(1))
  FROM order_items i WHERE i.order_id = $1$$);
SELECT * FROM d($$SELECT to_jsonb(query_to_xml('SELECT 1', true, false, '')::text) FROM orders o WHERE o.id = $1$$);

-- equality under a nondeterministic collation ties nothing: 'Ann' = 'ann', yet they name two docs
CREATE COLLATION drv.ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE people (id int PRIMARY KEY, name text COLLATE ci, team int);
SELECT * FROM d($$SELECT jsonb_agg(p.id) FROM people p WHERE p.name = $1$$);
SELECT * FROM d($$SELECT jsonb_agg(p.id) FROM people p WHERE p.name = $1 AND p.team = $2$$);

-- a policy's quals are walked like the query's own: the tables and functions they use
CREATE TABLE members (team int, who name);
CREATE FUNCTION team_open(int) RETURNS boolean LANGUAGE plpgsql STABLE AS 'BEGIN RETURN true; END';
ALTER TABLE people ENABLE ROW LEVEL SECURITY;
CREATE POLICY mine ON people
  USING (EXISTS (SELECT 1 FROM members m WHERE m.team = people.team AND m.who = current_user) AND team_open(team));
CREATE ROLE regress_drv_rls;
GRANT docsync_admin TO regress_drv_rls;
GRANT USAGE ON SCHEMA drv TO regress_drv_rls;
GRANT SELECT ON people, members TO regress_drv_rls;
SET ROLE regress_drv_rls;
SELECT * FROM d($$SELECT jsonb_agg(p.name) FROM people p WHERE p.team = $1$$);
RESET ROLE;
REVOKE ALL ON people, members FROM regress_drv_rls;
REVOKE USAGE ON SCHEMA drv FROM regress_drv_rls;
DROP ROLE regress_drv_rls;

-- a user aggregate runs its support functions; a SQL body that does not analyse on its own (a
-- polymorphic argument) is uncovered, saying why
CREATE FUNCTION add_pl(int, int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN $1 + $2; END';
CREATE AGGREGATE total_pl(int) (sfunc = add_pl, stype = int, initcond = '0');
CREATE FUNCTION same(anyelement) RETURNS anyelement LANGUAGE sql IMMUTABLE AS 'SELECT $1';
SELECT * FROM d($$SELECT to_jsonb(total_pl(i.qty)) FROM order_items i WHERE i.order_id = same($1::int)$$);
SELECT * FROM d($$SELECT to_jsonb(total_pl(i.qty)) FROM order_items i WHERE i.order_id = $1$$);

-- the operator an ORDER BY … USING sorts with is a function the query calls
CREATE FUNCTION rev_lt(int, int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN $1 > $2; END';
CREATE FUNCTION rev_le(int, int) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT $1 >= $2';
CREATE FUNCTION rev_eq(int, int) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT $1 = $2';
CREATE FUNCTION rev_ge(int, int) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT $1 <= $2';
CREATE FUNCTION rev_gt(int, int) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT $1 < $2';
CREATE FUNCTION rev_cmp(int, int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT btint4cmp($2, $1)';
CREATE OPERATOR <<< (function = rev_lt, leftarg = int, rightarg = int);
CREATE OPERATOR <<= (function = rev_le, leftarg = int, rightarg = int);
CREATE OPERATOR === (function = rev_eq, leftarg = int, rightarg = int);
CREATE OPERATOR >>= (function = rev_ge, leftarg = int, rightarg = int);
CREATE OPERATOR >>> (function = rev_gt, leftarg = int, rightarg = int);
CREATE OPERATOR CLASS rev_ops FOR TYPE int USING btree AS
  OPERATOR 1 <<<, OPERATOR 2 <<=, OPERATOR 3 ===, OPERATOR 4 >>=, OPERATOR 5 >>>, FUNCTION 1 rev_cmp(int, int);
SELECT * FROM d($$SELECT jsonb_agg(i.qty ORDER BY i.qty) FROM (SELECT qty FROM order_items
  WHERE order_id = $1 ORDER BY qty USING <<< LIMIT 3) i$$);
-- an equality of the schema's own (a btree family's equality) joins the keys query by its name
SELECT * FROM d($$SELECT jsonb_agg(b.id) FROM order_items a JOIN order_items b ON b.order_id === a.order_id
  WHERE a.id = $1$$);

-- a join on two columns: a keys query with two args
SELECT * FROM d($$SELECT jsonb_agg(b.id) FROM order_items a JOIN order_items b
  ON b.order_id = a.order_id AND b.product_id = a.product_id WHERE a.id = $1$$);

-- a CTE no one references is never run: no row for it; a sequence's changes are never decoded: uncovered
CREATE SEQUENCE drv_seq;
SELECT * FROM d($$WITH unused AS (SELECT * FROM products) SELECT to_jsonb(s.last_value)
  FROM drv_seq s WHERE $1::int = 1$$);

-- deep nesting costs work about linear in the query's size
SET statement_timeout = '20s';
SELECT tbl, kind, columns FROM d(repeat('SELECT id, customer_id FROM (', 1500) ||
  'SELECT id, customer_id FROM orders WHERE customer_id = $1' || repeat(') x', 1500));
RESET statement_timeout;

-- the query is analysed as the definer: who may not act as it is refused, as by analyze_query
CREATE ROLE regress_drv;
GRANT docsync_admin TO regress_drv;
GRANT USAGE ON SCHEMA drv TO regress_drv;
SET ROLE regress_drv;
SELECT * FROM docsync.derive_watches('SELECT 1', 'drv', 'postgres');
-- its own text: what analyze_query refuses is refused
SELECT count(*) FROM docsync.derive_watches('SELECT 1 FROM no_such_table', 'drv', NULL);
SELECT count(*) FROM docsync.derive_watches('DELETE FROM orders', 'drv', NULL);
RESET ROLE;

RESET search_path;
DROP SCHEMA drv CASCADE;
DROP ROLE regress_drv;
