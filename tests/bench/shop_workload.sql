-- The shop schema and workload the plugin and slot-consumption benchmarks share, so both decode
-- the same WAL: orders and their items (watched), and an audit log nothing watches.
--   CALL bench_workload(n): n order transactions (an order, three items, two audit rows, a status
--   update) and n transactions that touch only the audit log.
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL,
                     total numeric(12,2), shipping_address text, notes text, created_at timestamptz,
                     updated_at timestamptz);
CREATE TABLE order_items (id int PRIMARY KEY, order_id int NOT NULL, product_id int NOT NULL,
                          qty int NOT NULL, unit_price numeric(12,2), description text);
CREATE TABLE audit_log (id bigserial PRIMARY KEY, at timestamptz, actor text, action text, payload text);
CREATE PROCEDURE bench_workload(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..n LOOP
    INSERT INTO orders VALUES (i, i % 97, 'new', i * 1.25, 'Street ' || i || ', Some City, Some Country',
                               repeat('note ', 20), now(), now());
    INSERT INTO order_items SELECT i * 10 + k, i, (i * 7 + k) % 501, k, 9.99,
                                   'item description for product ' || k FROM generate_series(1, 3) k;
    INSERT INTO audit_log (at, actor, action, payload)
      SELECT now(), 'app', 'order.created', repeat('{"k": "v"}', 10) FROM generate_series(1, 2);
    UPDATE orders SET status = 'paid', updated_at = now() WHERE id = i;
    COMMIT;
    -- unwatched-only traffic
    INSERT INTO audit_log (at, actor, action, payload) VALUES (now(), 'cron', 'heartbeat', repeat('x', 100));
    COMMIT;
  END LOOP;
END $$;
