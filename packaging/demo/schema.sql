-- The demo shop: products, orders and their items, and one doc per order.
CREATE EXTENSION docsync;

CREATE TABLE products (id int PRIMARY KEY, name text NOT NULL, price numeric(10,2) NOT NULL);
CREATE TABLE orders (id int PRIMARY KEY, customer text NOT NULL, status text NOT NULL DEFAULT 'open');
CREATE TABLE order_items (
  id int PRIMARY KEY,
  order_id int NOT NULL REFERENCES orders,
  product_id int NOT NULL REFERENCES products,
  qty int NOT NULL);
-- An item can move between orders: its old order must be named too, so log the whole old row.
ALTER TABLE order_items REPLICA IDENTITY FULL;

-- "order 42 with its items": one JSON doc per order, channel db:order:<id>. Its watches are derived
-- from the query: orders.id and order_items.order_id name the order directly, and a product change
-- reaches every order that contains it through a generated reverse index (docsync.explain('order')).
SELECT docsync.define_query('order', $$
  SELECT jsonb_build_object(
           'id', o.id, 'customer', o.customer, 'status', o.status,
           'items', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                              'product', p.name, 'qty', i.qty, 'price', p.price) ORDER BY i.id), '[]')
                       FROM order_items i JOIN products p ON p.id = i.product_id
                      WHERE i.order_id = o.id),
           'total', (SELECT coalesce(sum(i.qty * p.price), 0)
                       FROM order_items i JOIN products p ON p.id = i.product_id
                      WHERE i.order_id = o.id))
    FROM orders o WHERE o.id = $1 $$,
  params => ARRAY['order_id']);

-- Roles, least privilege: one role streams the slot and reads definitions, one runs doc queries.
CREATE ROLE docsync_repl LOGIN REPLICATION;
SELECT docsync.grant_replication('docsync_repl');
CREATE ROLE docsync_reader LOGIN;
SELECT docsync.grant_reader('docsync_reader');

INSERT INTO products VALUES (1, 'espresso beans', 12.50), (2, 'grinder', 89.00), (3, 'filter papers', 3.20);
INSERT INTO orders VALUES (1, 'ada'), (2, 'grace');
INSERT INTO order_items VALUES (1, 1, 1, 2), (2, 1, 3, 1), (3, 2, 2, 1);
