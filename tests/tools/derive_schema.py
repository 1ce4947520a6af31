#!/usr/bin/env python3
"""The schema, seed rows and DML of the soundness test of derived watches: the half of
tests/tools/derive_gen.py that does not write queries. Standard library only; every value comes
from the random.Random the caller passes."""

D1 = 6  # $1 takes 1..D1
D2 = 3  # $2 takes 1..D2
KMAX = 6  # k columns hold 1..KMAX

# table -> its foreign-key-like columns (column, parent table)
CORE = {
    "customers": [],
    "products": [],
    "orders": [("customer_id", "customers")],
    "items": [("order_id", "orders"), ("product_id", "products")],
}
OPTIONAL = {
    "reviews": [("product_id", "products"), ("customer_id", "customers")],
    "payments": [("order_id", "orders")],
    "shipments": [("order_id", "orders"), ("customer_id", "customers")],
    "tags": [("item_id", "items")],
}
ORDER = ["customers", "products", "orders", "items", "reviews", "payments", "shipments", "tags"]
SEED_ROWS = {"customers": 8, "products": 8, "orders": 16, "items": 40, "reviews": 20, "payments": 16,
             "shipments": 14, "tags": 24}


class Schema:
    def __init__(self, rnd):
        opt = sorted(OPTIONAL)
        rnd.shuffle(opt)
        chosen = set(CORE) | set(opt[: rnd.randint(2, 4)])
        self.tables = [t for t in ORDER if t in chosen]
        self.fks = {t: CORE[t] if t in CORE else OPTIONAL[t] for t in self.tables}
        self.full = {t: rnd.random() < 0.5 for t in self.tables}
        self.children = {t: [] for t in self.tables}  # parent -> [(child, column)]
        for t in self.tables:
            for col, parent in self.fks[t]:
                self.children[parent].append((t, col))
        self.abbrev = {t: t[0] + t[1] for t in self.tables}

    def columns(self, t):
        return ["id"] + [c for c, _ in self.fks[t]] + ["k", "v", "s"]

    def int_columns(self, t):
        return ["id"] + [c for c, _ in self.fks[t]] + ["k"]

    def in_identity(self, t, cols):
        return self.full[t] or all(c == "id" for c in cols)


# Views: name -> (sql, {output column: (table, column)}, [(table, column of the table, joined table,
# its column)] the joins inside, which tie the second table to the first).
def views(schema):
    out = {}
    out["v_items"] = (
        "SELECT i.id, i.order_id, i.product_id, i.v, p.s AS product_s, p.v AS product_v "
        "FROM items i JOIN products p ON p.id = i.product_id",
        {"id": ("items", "id"), "order_id": ("items", "order_id"), "product_id": ("items", "product_id"),
         "v": ("items", "v"), "product_s": ("products", "s"), "product_v": ("products", "v")})
    out["v_top_items"] = (
        "SELECT i.id, i.order_id, i.v FROM items i ORDER BY i.v DESC NULLS LAST, i.id LIMIT 10",
        {"id": ("items", "id"), "order_id": ("items", "order_id"), "v": ("items", "v")})
    out["v_order_totals"] = (
        "SELECT o.customer_id, count(*) AS n, sum(o.v) AS total FROM orders o GROUP BY o.customer_id",
        {"customer_id": ("orders", "customer_id")})
    return out


def q(s):
    return "'" + s.replace("'", "''") + "'"


def schema_sql(schema, rnd):
    out = []
    for t in schema.tables:
        cols = ["id int PRIMARY KEY"] + ["%s int" % c for c, _ in schema.fks[t]] + ["k int NOT NULL", "v int", "s text NOT NULL"]
        out.append("CREATE TABLE %s (%s);" % (t, ", ".join(cols)))
        if schema.full[t]:
            out.append("ALTER TABLE %s REPLICA IDENTITY FULL;" % t)
    for name, (sql, _) in views(schema).items():
        out.append("CREATE VIEW %s AS %s;" % (name, sql))
    state = {}
    for t in schema.tables:
        rows = {}
        for i in range(1, SEED_ROWS[t] + 1):
            rows[i] = row(schema, t, i, rnd, state)
        state[t] = rows
        for i, r in rows.items():
            out.append("INSERT INTO %s VALUES (%s);" % (t, ", ".join(lit(x) for x in r)))
    for t in schema.tables:
        for c, _ in schema.fks[t]:
            out.append("CREATE INDEX ON %s (%s);" % (t, c))
    return "\n".join(out) + "\n", state


def lit(x):
    return "NULL" if x is None else (str(x) if isinstance(x, int) else q(x))


def row(schema, t, i, rnd, state):
    vals = [i]
    for _, parent in schema.fks[t]:
        top = max(state.get(parent, {1: None}).keys() or [1])
        vals.append(None if rnd.random() < 0.04 else rnd.randint(1, max(top, D1)))
    vals += [rnd.randint(1, KMAX), rnd.randint(0, 20), rnd.choice("abcd")]
    return vals


def txns(schema, rnd, state, n):
    """(the transactions' SQL, their report lines, the largest key any of them writes)"""
    out, meta = [], []
    top = max(max(rows) for rows in state.values())
    for k in range(1, n + 1):
        stmts, tabs = [], []
        for _ in range(rnd.randint(1, 5)):
            t = rnd.choice(schema.tables)
            tabs.append(t)
            rows = state[t]
            ids = sorted(rows)
            r = rnd.random()
            fks = schema.fks[t]
            if r < 0.004 and not schema.children[t]:  # TRUNCATE names no row: every live doc of its readers
                rows.clear()
                stmts.append("TRUNCATE %s" % t)
            elif r < 0.22 or not ids:
                i = max(ids or [0]) + 1
                rows[i] = row(schema, t, i, rnd, state)
                stmts.append("INSERT INTO %s VALUES (%s)" % (t, ", ".join(lit(x) for x in rows[i])))
            elif r < 0.36:
                i = rnd.choice(ids)
                del rows[i]
                stmts.append("DELETE FROM %s WHERE id = %d" % (t, i))
            elif r < 0.58 and fks:  # a move: another parent
                i = rnd.choice(ids)
                j = fks.index(rnd.choice(fks))
                col, parent = fks[j]
                val = None if rnd.random() < 0.06 else rnd.randint(1, max(max(state[parent] or [1]), D1))
                rows[i][1 + j] = val
                stmts.append("UPDATE %s SET %s = %s WHERE id = %d" % (t, col, lit(val), i))
            elif r < 0.68:  # a move: another k
                i = rnd.choice(ids)
                val = rnd.randint(1, KMAX)
                rows[i][-3] = val
                stmts.append("UPDATE %s SET k = %d WHERE id = %d" % (t, val, i))
            elif r < 0.71:  # a new key
                i = rnd.choice(ids)
                j = max(ids) + 1 if rnd.random() < 0.5 else rnd.randint(1, D1)
                if j in rows:
                    j = max(ids) + 1
                rows[j] = rows.pop(i)
                rows[j][0] = j
                stmts.append("UPDATE %s SET id = %d WHERE id = %d" % (t, j, i))
            elif r < 0.8 and fks:  # several rows at once
                col, _ = rnd.choice(fks)
                val = rnd.randint(1, D1)
                j = [c for c, _ in fks].index(col)
                for rr in rows.values():
                    if rr[1 + j] == val:
                        rr[-2] = (rr[-2] or 0) + 1
                stmts.append("UPDATE %s SET v = v + 1 WHERE %s = %d" % (t, col, val))
            else:
                i = rnd.choice(ids)
                v, s = None if rnd.random() < 0.05 else rnd.randint(0, 20), rnd.choice("abcd")
                rows[i][-2], rows[i][-1] = v, s
                stmts.append("UPDATE %s SET v = %s, s = %s WHERE id = %d" % (t, lit(v), q(s), i))
        top = max([top] + [max(rows) for rows in state.values() if rows])
        body = "BEGIN; " + "; ".join(stmts) + "; COMMIT;"
        out.append("-- txn %d\n%s" % (k, body))
        meta.append("%d\t%s\t%s" % (k, ",".join(sorted(set(tabs))), body))
    return "\n".join(out) + "\n", "\n".join(meta) + "\n", max(top, D1)
