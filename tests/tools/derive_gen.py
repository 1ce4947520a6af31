#!/usr/bin/env python3
"""Random schemas, doc queries and DML for the soundness test of derived watches
(tests/scenarios/derive_soundness.sh). Standard library only; everything it writes is a function of
--seed, --queries and --txns.

  derive_gen.py --seed S --queries N --txns T --out DIR [--broadcast watch|keys] [--api derived|manual]

Besides the shapes the analysis ties (equalities through joins, sublinks, LATERAL, CTEs, views),
the queries hold shapes whose equalities do not hold for every row that changes the doc: outer
conjuncts over LIMIT (in a subquery, two levels down, a CTE, a view, a LATERAL subquery), OFFSET,
DISTINCT ON, window functions and aggregate outputs; LEFT and FULL joins' preserved sides; OR; an
equality with an expression of the param or with a scalar subquery; NOT IN and <> ALL over nullable
columns; and shapes where they do hold through a set operation. For each query the generator knows a
sound hand-written watch set: it built the query, so it knows the key path of every table it reads,
and it broadcasts where there is none.

It writes into DIR:
  schema.sql          6-8 tables with foreign-key-like columns (no constraints, so no DML can fail),
                      some with REPLICA IDENTITY FULL, three views, seed rows;
  check.sql           chk.q<i>(params): each query as a SQL function, and chk.fresh(i, a, b) calling it;
  define_derived.sql  d<i>: each query with the watches define_query derives (the default);
  define_manual.sql   m<i>: each query again with watches => 'manual' and its hand-written watches;
  queries.tsv         name, i, sql (one line each);
  domain.tsv          name, the number of values of each param warmed (1..n): the docs made live;
  manual.tsv          name, table, kind (direct/keys/broadcast), columns or keys query;
  tables.tsv          table, replica identity (full/default);
  txns.sql            T transactions of 1-5 statements, each a line after "-- txn N";
  txns.tsv            N, the tables it writes, its text (for reports).

--broadcast keys writes a hand-written broadcast as a keys query naming every key the workload can
write; --api manual writes no d<i> and no watches argument (a server without derived watches), which
checks the harness and the hand-written sets alone.
"""

import argparse
import os
import random

from derive_schema import D1, D2, KMAX, Schema, q, schema_sql, txns, views


class Occ:
    """One occurrence of a table in a query: its alias, the columns equal to each param for every
    row it contributes (eq), and the tied hop to the occurrence it was joined from."""

    def __init__(self, table, alias, parent=None, from_col=None, to_col=None):
        self.table, self.alias = table, alias
        self.parent, self.from_col, self.to_col = parent, from_col, to_col  # self.to_col = parent.from_col
        self.eq = {}
        if parent is not None:
            for p, cols in parent.eq.items():
                if from_col in cols:
                    self.eq.setdefault(p, set()).add(to_col)


class Gen:
    def __init__(self, rnd, schema, nparams):
        self.rnd, self.schema, self.nparams = rnd, schema, nparams
        self.occs = []
        self.n = 0
        self.p2_used = False

    def alias(self, t):
        self.n += 1
        return "%s%d" % (self.schema.abbrev[t], self.n)

    def occ(self, t, parent=None, from_col=None, to_col=None):
        o = Occ(t, self.alias(t), parent, from_col, to_col)
        self.occs.append(o)
        return o

    def untied(self, t):
        return self.occ(t)

    def tie(self, o, p, col):
        o.eq.setdefault(p, set()).add(col)

    # --- building blocks -------------------------------------------------------------------------
    def hop(self, frm):
        """A new occurrence joined to frm by one foreign-key equality: (occ, equality text)."""
        s = self.schema
        opts = [("child", c, col) for c, col in s.children[frm.table]]
        opts += [("parent", p, col) for col, p in s.fks[frm.table]]
        kind, t, col = self.rnd.choice(opts)
        if kind == "child":  # t.col = frm.id
            o = self.occ(t, frm, "id", col)
            return o, "%s.%s = %s.id" % (o.alias, col, frm.alias)
        o = self.occ(t, frm, col, "id")
        return o, "%s.id = %s.%s" % (o.alias, frm.alias, col)

    def filt(self, o):
        r = self.rnd.random()
        a = o.alias
        return self.rnd.choice(["%s.v > %d" % (a, self.rnd.randint(0, 12)), "%s.s <> '%s'" % (a, self.rnd.choice("abcd")),
                                "(%s.k = %d OR %s.v < %d)" % (a, self.rnd.randint(1, KMAX), a, self.rnd.randint(3, 15)),
                                "%s.v IS NOT NULL" % a]) if r < 0.9 else "NOT (%s.k = %d)" % (a, self.rnd.randint(1, KMAX))

    def root(self, tie_to=None):
        """The first occurrence of a piece and the conjunct that ties it: to a param, to an
        occurrence of the enclosing block (tie_to), or to nothing (a range, or none)."""
        s = self.schema
        if tie_to is not None and self.rnd.random() < 0.6:
            return self.hop(tie_to)
        t = self.rnd.choice(s.tables)
        r = self.rnd.random()
        if r < 0.8:
            col = self.rnd.choice(s.int_columns(t))
            o = self.occ(t)
            self.tie(o, 1, col)
            return o, "%s.%s = $1" % (o.alias, col)
        o = self.untied(t)
        if r < 0.9:
            return o, "%s.v BETWEEN $1 AND $1 + %d" % (o.alias, self.rnd.randint(1, 6))
        return o, "%s.k >= $1" % o.alias

    def second_param(self, occs):
        if self.nparams < 2 or self.rnd.random() < 0.3:
            return []
        o = self.rnd.choice(occs)
        self.p2_used = True
        if self.rnd.random() < 0.85:
            self.tie(o, 2, "k")
            return ["%s.k = $2" % o.alias]
        return ["%s.v >= $2" % o.alias]

    def sublink(self, o):
        """An EXISTS / NOT EXISTS / IN conjunct over occurrence o: its relations are tied to o."""
        r = self.rnd.random()
        s = self.schema
        if r < 0.6 or not s.fks[o.table]:
            sub, eq = self.hop(o)
            word = "EXISTS" if r < 0.4 else "NOT EXISTS"
            return "%s (SELECT 1 FROM %s %s WHERE %s AND %s)" % (word, sub.table, sub.alias, eq, self.filt(sub))
        col, parent = self.rnd.choice(s.fks[o.table])
        sub = self.occ(parent, o, col, "id")
        return "%s.%s IN (SELECT %s.id FROM %s %s WHERE %s)" % (o.alias, col, sub.alias, parent, sub.alias, self.filt(sub))

    def chain(self, tie_to=None):
        """FROM text, WHERE conjuncts and occurrences of a block of 1-3 tables."""
        o, tie = self.root(tie_to)
        frm = "%s %s" % (o.table, o.alias)
        conds = [tie]
        occs = [o]
        for _ in range(self.rnd.choice([0, 1, 1, 2])):
            base = self.rnd.choice(occs)
            n, eq = self.hop(base)
            if self.rnd.random() < 0.35:
                frm += " LEFT JOIN %s %s ON %s" % (n.table, n.alias, eq)  # n is the nullable side: tied
            else:
                frm += " JOIN %s %s ON %s" % (n.table, n.alias, eq)
            occs.append(n)
        if self.rnd.random() < 0.5:
            conds.append(self.filt(self.rnd.choice(occs)))
        if self.rnd.random() < 0.35:
            conds.append(self.sublink(self.rnd.choice(occs)))
        conds += self.second_param(occs)
        return frm, conds, occs

    def obj(self, occs):
        parts = []
        for o in occs:
            parts.append("'%s', %s.v" % (o.alias, o.alias))
        if self.rnd.random() < 0.25:  # a scalar subquery in the select list
            o = self.rnd.choice(occs)
            sub, eq = self.hop(o)
            parts.append("'sub', (SELECT max(%s.v) FROM %s %s WHERE %s)" % (sub.alias, sub.table, sub.alias, eq))
        return "jsonb_build_object(%s)" % ", ".join(["'id', %s.id" % occs[0].alias] + parts)

    @staticmethod
    def ids(occs):
        return ", ".join("%s.id" % o.alias for o in occs)

    # --- pieces: each an expression giving jsonb ------------------------------------------------
    def piece(self, tie_to=None):
        r = self.rnd.randrange(19)
        if r >= 15:
            return self.trap()
        if r <= 2:  # a list, of some columns or of whole rows
            frm, conds, occs = self.chain(tie_to)
            obj = "to_jsonb(%s)" % occs[-1].alias if self.rnd.random() < 0.25 else self.obj(occs)
            return "(SELECT coalesce(jsonb_agg(%s ORDER BY %s), '[]'::jsonb) FROM %s WHERE %s)" % (
                obj, self.ids(occs), frm, " AND ".join(conds))
        if r == 3:  # aggregates without GROUP BY
            frm, conds, occs = self.chain(tie_to)
            return "(SELECT jsonb_build_object('n', count(*), 's', sum(%s.v), 'm', max(%s.k)) FROM %s WHERE %s)" % (
                occs[0].alias, occs[-1].alias, frm, " AND ".join(conds))
        if r == 4:  # GROUP BY
            frm, conds, occs = self.chain(tie_to)
            return ("(SELECT coalesce(jsonb_object_agg(g.k, g.n), '{}'::jsonb) FROM (SELECT %s.k AS k, count(*) AS n, sum(%s.v) AS t "
                    "FROM %s WHERE %s GROUP BY %s.k) g)") % (occs[0].alias, occs[-1].alias, frm, " AND ".join(conds), occs[0].alias)
        if r == 5:  # ORDER BY ... LIMIT over a tied block
            frm, conds, occs = self.chain(tie_to)
            a = occs[0].alias
            if self.rnd.random() < 0.4:  # a column read only by the ORDER BY
                return ("(SELECT coalesce(jsonb_agg(t.id ORDER BY t.id), '[]'::jsonb) FROM (SELECT %s.id FROM %s WHERE %s "
                        "ORDER BY %s.s DESC, %s.id LIMIT %d) t)") % (a, frm, " AND ".join(conds), a, a, self.rnd.randint(1, 4))
            return ("(SELECT coalesce(jsonb_agg(t.id ORDER BY t.v DESC, t.id), '[]'::jsonb) FROM (SELECT %s.id, %s.v FROM %s WHERE %s "
                    "ORDER BY %s.v DESC, %s.id LIMIT %d) t)") % (a, a, frm, " AND ".join(conds), a, a, self.rnd.randint(1, 4))
        if r == 6:  # top-N without a param, or an outer conjunct over a LIMIT: no key path
            t = self.rnd.choice(self.schema.tables)
            o = self.untied(t)
            if self.rnd.random() < 0.5:
                return "(SELECT jsonb_agg(t.id ORDER BY t.v DESC, t.id) FROM (SELECT %s.id, %s.v FROM %s %s ORDER BY %s.v DESC, %s.id LIMIT 3) t)" % (
                    o.alias, o.alias, t, o.alias, o.alias, o.alias)
            col = self.rnd.choice(self.schema.int_columns(t))
            return ("(SELECT coalesce(jsonb_agg(t.id ORDER BY t.id), '[]'::jsonb) FROM (SELECT %s.id, %s.%s AS c FROM %s %s "
                    "ORDER BY %s.v, %s.id LIMIT 6) t WHERE t.c = $1)") % (o.alias, o.alias, col, t, o.alias, o.alias, o.alias)
        if r == 7:  # an aggregate over a whole table
            t = self.rnd.choice(self.schema.tables)
            o = self.untied(t)
            return "(SELECT jsonb_build_object('max', max(%s.v), 'n', count(*)) FROM %s %s)" % (o.alias, t, o.alias)
        if r == 8:  # a subquery in FROM without LIMIT: the outer conjunct reaches its rows
            t = self.rnd.choice(self.schema.tables)
            col = self.rnd.choice(self.schema.int_columns(t))
            o = self.occ(t)
            self.tie(o, 1, col)
            return ("(SELECT coalesce(jsonb_agg(x.id ORDER BY x.id), '[]'::jsonb) FROM (SELECT %s.id, %s.%s AS c, %s.v FROM %s %s WHERE %s) x "
                    "WHERE x.c = $1)") % (o.alias, o.alias, col, o.alias, t, o.alias, self.filt(o))
        if r == 9:  # a CTE filtered outside
            t = self.rnd.choice(self.schema.tables)
            col = self.rnd.choice(self.schema.int_columns(t))
            o = self.occ(t)
            self.tie(o, 1, col)
            return ("(WITH c AS (SELECT %s.id, %s.%s AS c, %s.v FROM %s %s) "
                    "SELECT jsonb_build_object('n', count(*), 'v', sum(c.v)) FROM c WHERE c.c = $1)") % (
                o.alias, o.alias, col, o.alias, t, o.alias)
        if r == 10:  # UNION of two tied blocks
            f1, c1, o1 = self.chain(tie_to)
            f2, c2, o2 = self.chain(tie_to)
            return ("(SELECT coalesce(jsonb_agg(u.id ORDER BY u.id), '[]'::jsonb) FROM (SELECT %s.id FROM %s WHERE %s "
                    "UNION SELECT %s.id FROM %s WHERE %s) u)") % (o1[0].alias, f1, " AND ".join(c1), o2[0].alias, f2, " AND ".join(c2))
        if r == 11:  # LATERAL with a LIMIT: its own correlated conjunct ties it
            frm, conds, occs = self.chain(tie_to)
            base = self.rnd.choice(occs)
            l, eq = self.hop(base)
            return ("(SELECT coalesce(jsonb_agg(jsonb_build_object('id', %s.id, 'l', lat.v) ORDER BY %s.id, lat.id), '[]'::jsonb) "
                    "FROM %s LEFT JOIN LATERAL (SELECT %s.id, %s.v FROM %s %s WHERE %s ORDER BY %s.v DESC, %s.id LIMIT 2) lat ON true WHERE %s)") % (
                base.alias, base.alias, frm, l.alias, l.alias, l.table, l.alias, eq, l.alias, l.alias, " AND ".join(conds))
        if r == 12:  # the preserved side of a LEFT JOIN tied only through its ON: nothing ties it
            t = self.rnd.choice([t for t in self.schema.tables if self.schema.children[t]])
            p = self.untied(t)
            child, col = self.rnd.choice(self.schema.children[t])
            c = self.occ(child, p, "id", col)
            self.tie(c, 1, col)
            return ("(SELECT jsonb_build_object('n', count(*), 'm', count(%s.id)) FROM %s %s LEFT JOIN %s %s ON %s.%s = %s.id AND %s.%s = $1)") % (
                c.alias, t, p.alias, child, c.alias, c.alias, col, p.alias, c.alias, col)
        if r == 13:  # a view
            return self.view_piece()
        # an IN over a tied block's key
        frm, conds, occs = self.chain(tie_to)
        o = occs[0]
        sub, eq = self.hop(o)
        # o.x IN (SELECT sub.y ...) ties sub to o (and o to sub): eq is "sub.a = o.b"
        lhs, rhs = eq.split(" = ")
        return "(SELECT count(*) FROM %s WHERE %s AND %s IN (SELECT %s FROM %s %s WHERE %s))" % (
            frm, " AND ".join(conds), rhs, lhs, sub.table, sub.alias, self.filt(sub))

    def trap(self):
        """Shapes where an equality does not hold for every row that changes the doc, or holds through
        what the rules leave out: each gets the watches the semantics need, broadcast where no key
        path exists."""
        s, rnd = self.schema, self.rnd
        t = rnd.choice(s.tables)
        fks = s.fks[t]
        col = rnd.choice(s.int_columns(t))
        r = rnd.randrange(16)
        if r == 11:  # a LIMIT two levels down, filtered at the top
            o = self.untied(t)
            return ("(SELECT jsonb_agg(b.id ORDER BY b.id) FROM (SELECT a.id, a.c FROM (SELECT %s.id, %s.%s AS c FROM %s %s "
                    "ORDER BY %s.v, %s.id LIMIT 8) a) b WHERE b.c = $1)") % (o.alias, o.alias, col, t, o.alias, o.alias, o.alias)
        if r == 12 and s.children[t]:  # LATERAL under LIMIT filtered by the outer block, not by its own conjuncts
            child, ccol = rnd.choice(s.children[t])
            a, c = self.occ(t), self.untied(child)
            self.tie(a, 1, "id")
            return ("(SELECT jsonb_agg(l.id ORDER BY l.id) FROM %s %s, LATERAL (SELECT %s.id, %s.%s AS c FROM %s %s ORDER BY %s.v, %s.id LIMIT 5) l "
                    "WHERE l.c = %s.id AND %s.id = $1)") % (t, a.alias, c.alias, c.alias, ccol, child, c.alias, c.alias, c.alias, a.alias, a.alias)
        if r == 13:  # OFFSET
            o = self.untied(t)
            return ("(SELECT jsonb_agg(x.id ORDER BY x.id) FROM (SELECT %s.id, %s.%s AS c FROM %s %s ORDER BY %s.v, %s.id OFFSET 3) x "
                    "WHERE x.c = $1)") % (o.alias, o.alias, col, t, o.alias, o.alias, o.alias)
        if r == 14:  # a CTE with LIMIT, filtered outside
            o = self.untied(t)
            return ("(WITH c AS (SELECT %s.id, %s.%s AS c FROM %s %s ORDER BY %s.v DESC, %s.id LIMIT 6) "
                    "SELECT jsonb_agg(c.id ORDER BY c.id) FROM c WHERE c.c = $1)") % (o.alias, o.alias, col, t, o.alias, o.alias, o.alias)
        if r == 15:  # the view with LIMIT, filtered outside
            self.untied("items")
            return "(SELECT jsonb_agg(w.id ORDER BY w.id) FROM v_top_items w WHERE w.order_id = $1)"
        if r == 0:  # an outer conjunct on an aggregate's output, not a GROUP BY column
            o = self.untied(t)
            return ("(SELECT coalesce(jsonb_agg(g.c ORDER BY g.c), '[]'::jsonb) FROM (SELECT %s.%s AS c, count(*) AS n FROM %s %s "
                    "GROUP BY %s.%s) g WHERE g.n = $1)") % (o.alias, col, t, o.alias, o.alias, col)
        if r == 1:  # OR of equalities
            o = self.untied(t)
            return "(SELECT count(*) FROM %s %s WHERE (%s.%s = $1 OR %s.k = $1 + 1))" % (t, o.alias, o.alias, col, o.alias)
        if r == 2:  # an equality with an expression of the param
            o = self.untied(t)
            return "(SELECT jsonb_agg(%s.id ORDER BY %s.id) FROM %s %s WHERE %s.%s = $1 + 1)" % (o.alias, o.alias, t, o.alias, o.alias, col)
        if r == 3:  # UNION / EXCEPT in FROM, filtered outside: the filter holds for each branch's rows
            t2 = rnd.choice(s.tables)
            col2 = rnd.choice(s.int_columns(t2))
            a, b = self.occ(t), self.occ(t2)
            self.tie(a, 1, col)
            self.tie(b, 1, col2)
            op = rnd.choice(["UNION", "UNION ALL", "EXCEPT", "INTERSECT"])
            return ("(SELECT jsonb_agg(u.v ORDER BY u.v) FROM (SELECT %s.%s AS c, %s.v FROM %s %s %s SELECT %s.%s, %s.v FROM %s %s) u "
                    "WHERE u.c = $1)") % (a.alias, col, a.alias, t, a.alias, op, b.alias, col2, b.alias, t2, b.alias)
        if r == 4:  # DISTINCT ON, filtered outside on another column: which row survives depends on all of them
            o = self.untied(t)
            return ("(SELECT jsonb_agg(d.id ORDER BY d.id) FROM (SELECT DISTINCT ON (%s.k) %s.id, %s.%s AS c FROM %s %s "
                    "ORDER BY %s.k, %s.v DESC, %s.id) d WHERE d.c = $1)") % (o.alias, o.alias, o.alias, col, t, o.alias, o.alias, o.alias, o.alias)
        if r == 5:  # a window function, filtered outside
            o = self.untied(t)
            return ("(SELECT jsonb_agg(w.rn ORDER BY w.id) FROM (SELECT %s.id, %s.%s AS c, row_number() OVER (ORDER BY %s.v, %s.id) AS rn "
                    "FROM %s %s) w WHERE w.c = $1)") % (o.alias, o.alias, col, o.alias, o.alias, t, o.alias)
        if r == 6 and fks:  # NOT IN over a column that may be NULL: one NULL empties every doc
            fcol, parent = rnd.choice(fks)
            o = self.occ(parent)
            self.tie(o, 1, "k")
            sub = self.untied(t)
            return "(SELECT count(*) FROM %s %s WHERE %s.k = $1 AND %s.id NOT IN (SELECT %s.%s FROM %s %s WHERE %s.v > 2))" % (
                parent, o.alias, o.alias, o.alias, sub.alias, fcol, t, sub.alias, sub.alias)
        if r == 7 and s.children[t]:  # FULL JOIN: its ON holds for neither side
            child, ccol = rnd.choice(s.children[t])
            a, c = self.untied(t), self.untied(child)
            return "(SELECT count(*) FROM %s %s FULL JOIN %s %s ON %s.%s = %s.id WHERE coalesce(%s.k, %s.k) = $1)" % (
                t, a.alias, child, c.alias, c.alias, ccol, a.alias, a.alias, c.alias)
        if r == 8:  # a column equal to a scalar subquery: nothing ties it
            t2 = rnd.choice(s.tables)
            col2 = rnd.choice(s.int_columns(t2))
            o, y = self.untied(t), self.occ(t2)
            self.tie(y, 1, col2)
            return "(SELECT count(*) FROM %s %s WHERE %s.v = (SELECT max(%s.v) FROM %s %s WHERE %s.%s = $1))" % (
                t, o.alias, o.alias, y.alias, t2, y.alias, y.alias, col2)
        if r == 9 and fks:  # two rows of one table joined on a shared key
            fcol, _ = rnd.choice(fks)
            a = self.occ(t)
            self.tie(a, 1, "id")
            b = self.occ(t, a, fcol, fcol)
            return "(SELECT jsonb_agg(%s.id ORDER BY %s.id) FROM %s %s JOIN %s %s ON %s.%s = %s.%s WHERE %s.id = $1)" % (
                b.alias, b.alias, t, a.alias, t, b.alias, b.alias, fcol, a.alias, fcol, a.alias)
        # <> ALL over a nullable column, as NOT IN
        o = self.occ(t)
        self.tie(o, 1, col)
        c = self.untied(t)
        return "(SELECT count(*) FROM %s %s WHERE %s.%s = $1 AND %s.k <> ALL (SELECT %s.v FROM %s %s WHERE %s.s = 'a'))" % (
            t, o.alias, o.alias, col, o.alias, c.alias, t, c.alias, c.alias)

    def view_piece(self):
        if self.rnd.random() < 0.6:
            i = self.occ("items")
            col = self.rnd.choice(["order_id", "product_id", "id"])
            self.tie(i, 1, col)
            self.occ("products", i, "product_id", "id")  # the view's join: tied to items
            return "(SELECT coalesce(jsonb_agg(jsonb_build_object('id', w.id, 's', w.product_s, 'pv', w.product_v) ORDER BY w.id), '[]'::jsonb) FROM v_items w WHERE w.%s = $1)" % col
        o = self.occ("orders")
        self.tie(o, 1, "customer_id")
        return "(SELECT jsonb_build_object('n', w.n, 't', w.total) FROM v_order_totals w WHERE w.customer_id = $1)"

    def query(self):
        r = self.rnd.random()
        s = self.schema
        if r < 0.45:  # anchored on one row
            t = self.rnd.choice(s.tables)
            a = self.occ(t)
            self.tie(a, 1, "id")
            pieces = [self.piece(tie_to=a) for _ in range(self.rnd.randint(1, 3))]
            conds = ["%s.id = $1" % a.alias]
            if self.nparams == 2 and not self.p2_used:
                conds.append("%s.k <= $2 + 3" % a.alias)  # a range on $2
                self.p2_used = True
            body = ", ".join("'p%d', %s" % (i, p) for i, p in enumerate(pieces))
            return "SELECT jsonb_build_object('id', %s.id, 'v', %s.v, %s) FROM %s %s WHERE %s" % (
                a.alias, a.alias, body, t, a.alias, " AND ".join(conds))
        if r < 0.6:  # an aggregate at the top
            frm, conds, occs = self.chain()
            q = "SELECT jsonb_build_object('n', count(*), 'list', coalesce(jsonb_agg(%s ORDER BY %s), '[]'::jsonb)) FROM %s WHERE %s" % (
                self.obj(occs), self.ids(occs), frm, " AND ".join(conds))
        elif r < 0.7:  # a CTE at the top
            frm, conds, occs = self.chain()
            o = occs[0]
            nxt, eq = self.hop(o)
            eq = eq.replace(o.alias + ".", "b.")
            q = ("WITH b AS (SELECT %s.* FROM %s WHERE %s) SELECT jsonb_build_object('n', (SELECT count(*) FROM b), "
                 "'j', (SELECT coalesce(jsonb_agg(%s.v ORDER BY %s.id, b.id), '[]'::jsonb) FROM b JOIN %s %s ON %s))") % (
                o.alias, frm, " AND ".join(conds), nxt.alias, nxt.alias, nxt.table, nxt.alias, eq)
        else:
            pieces = [self.piece() for _ in range(self.rnd.randint(1, 3))]
            q = "SELECT jsonb_build_object(%s)" % ", ".join("'p%d', %s" % (i, p) for i, p in enumerate(pieces))
        if self.nparams == 2 and not self.p2_used:
            q = "SELECT jsonb_build_object('d', (%s), 'p2', $2::int)" % q  # $2 names the doc, reads no table
            self.p2_used = True
        if "$1" not in q:
            q = "SELECT jsonb_build_object('d', (%s), 'p1', $1::int)" % q  # $1 names the doc, reads no table
        return q

    # --- the hand-written watches ---------------------------------------------------------------
    def watches(self):
        """{table: [(kind, columns, keys_sql, keys_args, allow_broadcast)]}: a sound set."""
        s = self.schema
        per = {}
        for o in self.occs:
            per.setdefault(o.table, []).append(self.watch_of(o))
        out = {}
        for t, ws in per.items():
            if any(w[0] == "broadcast" for w in ws):
                out[t] = [("broadcast", [], None, ["id"], False)]
                continue
            seen = []
            for w in ws:
                kind, cols, keys_sql, args = w
                ab = not s.in_identity(t, cols if kind == "direct" else args)
                w2 = (kind, cols, keys_sql, args, ab)
                if w2 not in seen:
                    seen.append(w2)
            out[t] = seen
        return out

    def watch_of(self, o):
        """(kind, columns, keys_sql, keys_args) for occurrence o."""
        params = list(range(1, self.nparams + 1))
        direct = {p: sorted(o.eq[p])[0] for p in params if o.eq.get(p)}
        if len(direct) == self.nparams:
            return ("direct", [direct[p] for p in params], None, [])
        # the chain of tied hops upward, to the nearest occurrence that knows each param
        chain = []
        need = {}
        cur = o
        while cur.parent is not None and len(need) + len(direct) < self.nparams:
            chain.append(cur)
            cur = cur.parent
            for p in params:
                if p not in direct and p not in need and cur.eq.get(p):
                    need[p] = (cur, sorted(cur.eq[p])[0])
        if not need and not direct:
            return ("broadcast", [], None, [])
        if 1 not in need and 1 not in direct:  # $1 can be any key: only a broadcast names every doc
            return ("broadcast", [], None, [])
        sel, args = [], []
        for p in params:
            if p in direct:
                args.append(direct[p])
                sel.append("$%d::int" % len(args))
            elif p in need:
                anc, col = need[p]
                sel.append("%s.%s" % (anc.alias, col))
            else:
                sel.append("g%d.g" % p)
        frm, where = [], []
        if need:
            # the hops from o's parent up to the farthest ancestor needed
            depth = max(self.depth_to(o, anc) for anc, _ in need.values())
            node = o
            for i in range(depth):
                par = node.parent
                frm.append("public.%s %s" % (par.table, par.alias))
                if i == 0:
                    args.append(node.to_col)
                    where.append("%s.%s = $%d" % (par.alias, node.from_col, len(args)))
                else:
                    where.append("%s.%s = %s.%s" % (node.alias, node.to_col, par.alias, node.from_col))
                node = par
        for p in params:
            if p not in direct and p not in need:
                frm.append("generate_series(1, %d) g%d(g)" % (KMAX, p))  # $2 only ties to k columns
        if not args:  # nothing of the row feeds the keys: name the whole domain
            return ("broadcast", [], None, [])
        # args feed $n; a direct param is read from the changed row itself
        sql = "SELECT DISTINCT %s FROM %s" % (", ".join(sel), ", ".join(frm)) if frm else "SELECT %s" % ", ".join(sel)
        if where:
            sql += " WHERE " + " AND ".join(where)
        return ("keys", [], sql, args)

    @staticmethod
    def depth_to(o, anc):
        d, cur = 0, o
        while cur is not anc:
            cur = cur.parent
            d += 1
        return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--txns", type=int, default=300)
    ap.add_argument("--out", required=True)
    ap.add_argument("--broadcast", choices=["watch", "keys"], default="watch")
    ap.add_argument("--api", choices=["derived", "manual"], default="derived")
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    schema = Schema(rnd)
    os.makedirs(a.out, exist_ok=True)
    text, state = schema_sql(schema, rnd)
    with open(os.path.join(a.out, "schema.sql"), "w") as f:
        f.write(text)
    t_sql, t_meta, maxkey = txns(schema, random.Random(a.seed * 7 + 1), state, a.txns)
    derived, define, qtsv, dom, man, chk = [], [], [], [], [], ["CREATE SCHEMA chk;"]
    nparams_of = []
    for i in range(1, a.queries + 1):
        nparams = 2 if rnd.random() < 0.3 else 1
        g = Gen(rnd, schema, nparams)
        sql = g.query()
        params = ["a", "b"][:nparams]
        parr = "ARRAY[%s]" % ", ".join(q(p) for p in params)
        sizes = " ".join(str(d) for d in [D1, D2][:nparams])
        if a.api == "derived":
            derived.append("SELECT docsync.define_query('d%d', %s, params => %s);" % (i, q(sql), parr))
            qtsv.append("d%d\t%d\t%s" % (i, i, sql))
            dom.append("d%d\t%s" % (i, sizes))
        define.append("SELECT docsync.define_query('m%d', %s, params => %s%s);" % (
            i, q(sql), parr, ", watches => 'manual'" if a.api == "derived" else ""))
        qtsv.append("m%d\t%d\t%s" % (i, i, sql))
        dom.append("m%d\t%s" % (i, sizes))
        for t, ws in sorted(g.watches().items()):
            for kind, cols, keys_sql, args, ab in ws:
                if kind == "broadcast" and a.broadcast == "watch":
                    define.append("SELECT docsync.watch('m%d', %s, broadcast => true);" % (i, q(t)))
                    how = "every change"
                elif kind == "broadcast":
                    # every key a doc can have: $1 any key the workload ever writes, $2 a k
                    how = "SELECT DISTINCT %s FROM %s" % (
                        ", ".join("g%d.g" % p for p in range(1, nparams + 1)),
                        ", ".join("generate_series(1, %d) g%d(g)" % (maxkey if p == 1 else KMAX, p) for p in range(1, nparams + 1)))
                    how += " WHERE $1::int IS NOT NULL"  # the changed row's id: never null
                    define.append("SELECT docsync.watch('m%d', %s, keys_sql => %s, keys_args => ARRAY['id']);" % (i, q(t), q(how)))
                elif kind == "direct":
                    define.append("SELECT docsync.watch('m%d', %s, params => ARRAY[%s]%s);" % (
                        i, q(t), ", ".join(q(c) for c in cols), ", allow_broadcast => true" if ab else ""))
                    how = ",".join(cols)
                else:
                    define.append("SELECT docsync.watch('m%d', %s, keys_sql => %s, keys_args => ARRAY[%s]%s);" % (
                        i, q(t), q(keys_sql), ", ".join(q(c) for c in args), ", allow_broadcast => true" if ab else ""))
                    how = "%s <- %s" % (keys_sql, ",".join(args))
                man.append("m%d\t%s\t%s\t%s%s" % (i, t, kind, how, " (allow_broadcast)" if ab else ""))
        chk.append("CREATE FUNCTION chk.q%d(%s) RETURNS jsonb LANGUAGE sql STABLE AS %s;" % (
            i, ", ".join(["int"] * nparams), q(sql)))
        nparams_of.append(nparams)
    # chk.fresh(i, a, b): a fresh run of query i for params (a[, b])
    chk.append("CREATE FUNCTION chk.fresh(i int, a int, b int) RETURNS jsonb LANGUAGE plpgsql STABLE AS $f$\nBEGIN\n  CASE i\n%s\n  END CASE;\nEND\n$f$;" % "\n".join(
        "    WHEN %d THEN RETURN chk.q%d(%s);" % (i, i, "a" if n == 1 else "a, b") for i, n in enumerate(nparams_of, 1)))
    with open(os.path.join(a.out, "define_derived.sql"), "w") as f:
        f.write("\n".join(derived) + "\n")
    with open(os.path.join(a.out, "define_manual.sql"), "w") as f:
        f.write("\n".join(define) + "\n")
    with open(os.path.join(a.out, "check.sql"), "w") as f:
        f.write("\n".join(chk) + "\n")
    with open(os.path.join(a.out, "queries.tsv"), "w") as f:
        f.write("\n".join(qtsv) + "\n")
    with open(os.path.join(a.out, "domain.tsv"), "w") as f:
        f.write("\n".join(dom) + "\n")
    with open(os.path.join(a.out, "manual.tsv"), "w") as f:
        f.write("\n".join(man) + "\n")
    with open(os.path.join(a.out, "txns.sql"), "w") as f:
        f.write(t_sql)
    with open(os.path.join(a.out, "txns.tsv"), "w") as f:
        f.write(t_meta)
    with open(os.path.join(a.out, "tables.tsv"), "w") as f:
        f.write("".join("%s\t%s\n" % (t, "full" if schema.full[t] else "default") for t in schema.tables))


if __name__ == "__main__":
    main()
