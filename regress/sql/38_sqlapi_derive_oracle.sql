-- docsync.derive_watches against the data: for each query below and each row of each table it reads,
-- deleting the row, or inserting a copy with one column changed, must change only docs that the
-- derived watches map that row to (a direct watch by its columns, a keys watch by running its keys
-- query after the change, a broadcast watch always). Every doc of params 1..3 is compared before and
-- after each change; a change that alters a doc its watches miss is listed. None may be.
\set VERBOSITY terse
SET synchronous_commit = on;

CREATE SCHEMA orc;
SET search_path = orc;
CREATE TABLE customers (id int PRIMARY KEY, k int, v int);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int, k int, v int);
CREATE TABLE products (id int PRIMARY KEY, k int, v int);
CREATE TABLE items (id int PRIMARY KEY, order_id int, product_id int, k int, v int);
CREATE VIEW lines AS SELECT i.order_id, p.v AS price, i.v AS qty FROM items i JOIN products p ON p.id = i.product_id;
INSERT INTO customers SELECT g, g % 3 + 1, g * 7 % 5 FROM generate_series(1, 4) g;
INSERT INTO orders VALUES (1, 1, 1, 3), (2, 1, 2, 1), (3, 2, 3, 2), (4, 3, 1, NULL), (5, NULL, 2, 5);
INSERT INTO products SELECT g, g % 2 + 1, g * 3 % 7 FROM generate_series(1, 4) g;
INSERT INTO items VALUES (1, 1, 1, 1, 2), (2, 1, 2, 2, 1), (3, 2, 2, 3, 4), (4, 3, 3, 1, 1), (5, 3, 1, 2, 3),
  (6, 5, 4, 3, 2), (7, NULL, 3, 1, 5);

-- the docs of a query for params 1..3 (and 1..3 × 1..3 for two params), in order
CREATE FUNCTION docs(q text, np int) RETURNS text[] LANGUAGE plpgsql AS $f$
DECLARE out text[] := '{}'; d text; a int; b int;
BEGIN
  FOR a IN 1..CASE WHEN np = 0 THEN 1 ELSE 3 END LOOP
    FOR b IN 1..CASE WHEN np = 2 THEN 3 ELSE 1 END LOOP
      IF np = 0 THEN EXECUTE q INTO d; ELSIF np = 1 THEN EXECUTE q INTO d USING a; ELSE EXECUTE q INTO d USING a, b; END IF;
      out := out || coalesce(d, 'null');
    END LOOP;
  END LOOP;
  RETURN out;
END $f$;
CREATE FUNCTION params(np int, i int) RETURNS text[] LANGUAGE sql AS $f$
  SELECT CASE np WHEN 0 THEN '{}'::text[] WHEN 1 THEN ARRAY[i::text]
         ELSE ARRAY[((i - 1) / 3 + 1)::text, ((i - 1) % 3 + 1)::text] END $f$;
-- whether one of the watches w maps row r to the doc of params p
CREATE FUNCTION covered(w jsonb, r jsonb, p text[]) RETURNS boolean LANGUAGE plpgsql AS $f$
DECLARE x jsonb; ok boolean; k text[]; args text[];
BEGIN
  FOR x IN SELECT * FROM jsonb_array_elements(w) LOOP
    IF x->>'kind' = 'broadcast' THEN RETURN true; END IF;
    IF x->>'kind' = 'direct' THEN
      SELECT bool_and(r->>c = p[n]) INTO ok FROM jsonb_array_elements_text(x->'columns') WITH ORDINALITY a(c, n);
      IF ok THEN RETURN true; END IF;
    ELSIF x->>'kind' = 'keys' THEN
      args := ARRAY(SELECT r->>c FROM jsonb_array_elements_text(x->'keys_args') c);
      FOR k IN EXECUTE format('SELECT ARRAY[%s] FROM (%s) s(%s)',
                              CASE cardinality(p) WHEN 2 THEN 's.a::text, s.b::text' ELSE 's.a::text' END,
                              x->>'keys_sql', CASE cardinality(p) WHEN 2 THEN 'a, b' ELSE 'a' END)
                 USING args[1], args[2] LOOP
        IF k = p THEN RETURN true; END IF;
      END LOOP;
    END IF;
  END LOOP;
  RETURN false;
END $f$;
-- the changes to the rows q reads whose effect on its docs its derived watches miss
CREATE FUNCTION misses(q text) RETURNS SETOF text LANGUAGE plpgsql AS $f$
DECLARE np int; before text[]; after text[]; t record; r jsonb; m jsonb; c text; i int; found text[] := '{}';
BEGIN
  np := cardinality((docsync.analyze_query(q, 'orc')).param_types);
  before := docs(q, np);
  FOR t IN SELECT table_name, jsonb_agg(to_jsonb(d)) AS w FROM docsync.derive_watches(q, 'orc', NULL) d
            WHERE kind <> 'uncovered' GROUP BY table_name LOOP
    FOR r IN EXECUTE format('SELECT to_jsonb(x) FROM %I x ORDER BY id', t.table_name) LOOP
      BEGIN
        EXECUTE format('DELETE FROM %I WHERE id = $1', t.table_name) USING (r->>'id')::int;
        after := docs(q, np);
        FOR i IN 1..cardinality(before) LOOP
          IF before[i] IS DISTINCT FROM after[i] AND NOT covered(t.w, r, params(np, i)) THEN
            found := found || format('delete from %s %s misses the doc of %s', t.table_name, r, params(np, i));
          END IF;
        END LOOP;
        RAISE EXCEPTION 'undo';
      EXCEPTION WHEN raise_exception THEN NULL;
      END;
      FOR c IN SELECT key FROM jsonb_each(r) WHERE key <> 'id' LOOP
        m := r || jsonb_build_object('id', 100 + (r->>'id')::int, c, coalesce((r->>c)::int, 0) % 3 + 1);
        BEGIN
          EXECUTE format('INSERT INTO %I SELECT * FROM jsonb_populate_record(null::%I, $1)', t.table_name, t.table_name) USING m;
          after := docs(q, np);
          FOR i IN 1..cardinality(before) LOOP
            IF before[i] IS DISTINCT FROM after[i] AND NOT covered(t.w, m, params(np, i)) THEN
              found := found || format('insert into %s %s misses the doc of %s', t.table_name, m, params(np, i));
            END IF;
          END LOOP;
          RAISE EXCEPTION 'undo';
        EXCEPTION WHEN raise_exception THEN NULL;
        END;
      END LOOP;
    END LOOP;
  END LOOP;
  RETURN QUERY SELECT unnest(found);
END $f$;
-- each query: its derived kinds (so that a change of analysis shows), then what its watches miss
CREATE FUNCTION check_query(q text) RETURNS TABLE (kinds text, misses text) LANGUAGE sql AS $f$
  SELECT (SELECT string_agg(table_name || ':' || kind, ' ' ORDER BY table_name, kind)
            FROM docsync.derive_watches(q, 'orc', NULL)), (SELECT string_agg(m, E'\n') FROM misses(q) m)
$f$;

SELECT * FROM check_query($$SELECT jsonb_build_object('o', o.v, 'items', (SELECT jsonb_agg(p.v ORDER BY i.id)
  FROM items i JOIN products p ON p.id = i.product_id WHERE i.order_id = o.id)) FROM orders o WHERE o.id = $1$$);
SELECT * FROM check_query($$SELECT jsonb_build_object('c', c.v, 'bought', (SELECT jsonb_agg(p.v ORDER BY i.id)
  FROM orders o JOIN items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id
  WHERE o.customer_id = c.id)) FROM customers c WHERE c.id = $1$$);
SELECT * FROM check_query($$SELECT jsonb_agg(jsonb_build_object('c', c.id, 'o', o.id) ORDER BY c.id, o.id)
  FROM customers c LEFT JOIN orders o ON o.customer_id = c.id AND c.id = $1$$);
SELECT * FROM check_query($$SELECT jsonb_agg(c.v ORDER BY c.id) FROM customers c
  LEFT JOIN orders o ON o.customer_id = c.id WHERE o.id = $1$$);
SELECT * FROM check_query($$SELECT jsonb_build_object('o', o.v, 'c', c.v,
    'theirs', (SELECT jsonb_agg(o2.v ORDER BY o2.id) FROM orders o2 WHERE o2.customer_id = c.id))
  FROM orders o LEFT JOIN customers c ON c.id = o.customer_id WHERE o.id = $1$$);
SELECT * FROM check_query($$SELECT jsonb_agg(jsonb_build_object('c', c.id, 'o', o.id) ORDER BY c.id, o.id)
  FROM customers c FULL JOIN orders o ON o.customer_id = c.id WHERE c.k = $1 OR o.k = $1$$);
SELECT * FROM check_query($$SELECT jsonb_agg(o.id ORDER BY o.id) FROM orders o WHERE o.id = $1 OR o.customer_id = $1$$);
SELECT * FROM check_query($$SELECT jsonb_agg(s.id ORDER BY s.id) FROM (SELECT o.id, o.customer_id FROM orders o
  ORDER BY o.v DESC NULLS LAST, o.id LIMIT 2) s WHERE s.customer_id = $1$$);
SELECT * FROM check_query($$SELECT jsonb_agg(r.id ORDER BY r.id) FROM customers c
  CROSS JOIN LATERAL (SELECT o.id FROM orders o WHERE o.customer_id = c.id ORDER BY o.v, o.id LIMIT 1) r
  WHERE c.id = $1$$);
SELECT * FROM check_query($$SELECT jsonb_agg(s.id ORDER BY s.id) FROM (SELECT DISTINCT ON (o.k) o.id, o.customer_id
  FROM orders o ORDER BY o.k, o.v, o.id) s WHERE s.customer_id = $1$$);
SELECT * FROM check_query($$SELECT jsonb_agg(jsonb_build_object('p', p.id, 'n', s.n) ORDER BY p.id) FROM products p
  CROSS JOIN LATERAL (SELECT count(*) AS n FROM items i WHERE i.product_id = p.id AND i.order_id = $1) s$$);
SELECT * FROM check_query($$SELECT jsonb_agg(s ORDER BY s.customer_id) FROM (SELECT o.customer_id, count(*) AS n
  FROM orders o GROUP BY o.customer_id) s WHERE s.customer_id = $1 OR s.n = $1$$);
SELECT * FROM check_query($$SELECT jsonb_agg(c.id ORDER BY c.id) FROM customers c WHERE c.k = $1
  AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id)$$);
SELECT * FROM check_query($$SELECT jsonb_agg(p.id ORDER BY p.id) FROM products p
  WHERE p.id IN (SELECT i.product_id FROM items i WHERE i.order_id = $1)$$);
SELECT * FROM check_query($$SELECT jsonb_agg(p.id ORDER BY p.id) FROM products p
  WHERE p.id NOT IN (SELECT i.product_id FROM items i WHERE i.order_id = $1 AND i.product_id IS NOT NULL)$$);
SELECT * FROM check_query($$WITH mine AS (SELECT o.id, o.customer_id FROM orders o)
  SELECT jsonb_agg(a.id ORDER BY a.id) FROM mine a, mine b WHERE a.customer_id = $1 AND b.id = a.customer_id$$);
SELECT * FROM check_query($$SELECT jsonb_agg(u.id ORDER BY u.id) FROM (SELECT o.customer_id AS id FROM orders o
  UNION SELECT c.k FROM customers c) u WHERE u.id = $1$$);
SELECT * FROM check_query($$SELECT jsonb_agg(l.price * l.qty ORDER BY l.price, l.qty) FROM lines l WHERE l.order_id = $1$$);
SELECT * FROM check_query($$SELECT jsonb_build_object('o', o.v, 'q', (SELECT jsonb_agg(i.v ORDER BY i.id) FROM items i
  WHERE i.order_id = o.id AND i.product_id = $2)) FROM orders o WHERE o.id = $1$$);
SELECT * FROM check_query($$SELECT jsonb_agg(prev.id ORDER BY prev.id) FROM orders o JOIN orders prev
  ON prev.customer_id = o.customer_id AND prev.id <> o.id WHERE o.id = $1$$);
SELECT * FROM check_query($$SELECT jsonb_agg(p.v ORDER BY p.id) FROM products p$$);

RESET search_path;
DROP SCHEMA orc CASCADE;
