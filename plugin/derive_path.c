/*-------------------------------------------------------------------------
 *
 * derive_path.c
 *		From the equalities that hold for an occurrence's rows (derive_walk.c) to its cheapest sound
 *		watch:
 *		- direct: the equalities, closed under transitivity, tie a column of the occurrence to every
 *		  doc param ($n in order; the lowest-numbered such column whose values print as the param's
 *		  do: a date tied to a timestamp param by a cross-type equality names no channel of its own);
 *		- keys: a shortest join path through those equalities leads to another occurrence tied so;
 *		  the keys query walks the path backwards: SELECT DISTINCT that occurrence's param columns
 *		  FROM the path's tables (schema-qualified, quoted, aliased t1…) WHERE the hops' equalities
 *		  AND t1's columns = the changed row's ($1::type…). Other filters are left out: a superset
 *		  of docs is sound. The text must analyse, or the occurrence is broadcast;
 *		- broadcast otherwise, saying which rule failed, or which bound of the analysis (derive.h) the
 *		  query exceeds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "derive.h"

/* The equalities of one occurrence as a graph over terms, with their equivalence classes. */
typedef struct Graph
{
	int			nnodes;
	DeriveTerm *nodes;
	int		   *parent;			/* union-find */
	int			nedges;
	DeriveEdge **edges;
	int		   *from;			/* node of each edge's left side */
	int		   *to;				/* node of each edge's right side */
} Graph;

static bool
same_term(const DeriveTerm *a, const DeriveTerm *b)
{
	if (a->kind != b->kind)
		return false;
	if (a->kind == DERIVE_PARAM)
		return a->param == b->param;
	return a->occ == b->occ && a->attno == b->attno;
}

static int
node_of(Graph *g, const DeriveTerm *term, bool add)
{
	int			i;

	for (i = 0; i < g->nnodes; i++)
		if (same_term(&g->nodes[i], term))
			return i;
	if (!add)
		return -1;
	g->nodes[g->nnodes] = *term;
	g->parent[g->nnodes] = g->nnodes;
	return g->nnodes++;
}

static int
find(Graph *g, int i)
{
	while (g->parent[i] != i)
		i = g->parent[i] = g->parent[g->parent[i]];
	return i;
}

static Graph *
build_graph(DeriveOcc *occ)
{
	Graph	   *g = palloc0(sizeof(Graph));
	int			n = list_length(occ->edges);
	ListCell   *lc;

	g->nodes = palloc0(sizeof(DeriveTerm) * (2 * n + 1));
	g->parent = palloc0(sizeof(int) * (2 * n + 1));
	g->edges = palloc0(sizeof(DeriveEdge *) * (n + 1));
	g->from = palloc0(sizeof(int) * (n + 1));
	g->to = palloc0(sizeof(int) * (n + 1));
	foreach(lc, occ->edges)
	{
		DeriveEdge *edge = (DeriveEdge *) lfirst(lc);
		int			a,
					b;

		CHECK_FOR_INTERRUPTS();
		a = node_of(g, &edge->left, true);
		b = node_of(g, &edge->right, true);

		g->edges[g->nedges] = edge;
		g->from[g->nedges] = a;
		g->to[g->nedges++] = b;
		g->parent[find(g, a)] = find(g, b);
	}
	return g;
}

static bool
integer_type(Oid type)
{
	return type == INT2OID || type == INT4OID || type == INT8OID;
}

/*
 * Whether a column's values print as a param's do, so that the column names the param's channel
 * (docsync.same_text_form, which define_query checks every watch against).
 */
static bool
same_text_form(Oid column, Oid param)
{
	Oid			a = getBaseType(column);
	Oid			b = getBaseType(param);

	return a == b || (integer_type(a) && integer_type(b)) ||
		((a == TEXTOID || a == VARCHAROID || a == NAMEOID) && (b == TEXTOID || b == VARCHAROID));
}

/* The node of occ's lowest-numbered column tied to $param that prints as it does, or -1. */
static int
column_for_param(Graph *g, DeriveState *state, DeriveOcc *occ, int param)
{
	DeriveTerm	p;
	int			pn;
	int			best = -1;
	int			i;

	memset(&p, 0, sizeof(p));
	p.kind = DERIVE_PARAM;
	p.param = param;
	pn = node_of(g, &p, false);
	if (pn < 0)
		return -1;
	for (i = 0; i < g->nnodes; i++)
		if (g->nodes[i].kind == DERIVE_COLUMN && g->nodes[i].occ == occ && find(g, i) == find(g, pn) &&
			same_text_form(g->nodes[i].type, state->param_types[param - 1]) &&
			(best < 0 || g->nodes[i].attno < g->nodes[best].attno))
			best = i;
	return best;
}

/* occ's columns for $1…$n (nodes), or NULL unless every param has one. */
static int *
direct_columns(Graph *g, DeriveState *state, DeriveOcc *occ)
{
	int		   *cols = palloc(sizeof(int) * state->nparams);
	int			p;

	for (p = 0; p < state->nparams; p++)
		if ((cols[p] = column_for_param(g, state, occ, p + 1)) < 0)
			return NULL;
	return cols;
}

static const char *
term_text(const DeriveTerm *term)
{
	if (term->kind == DERIVE_PARAM)
		return psprintf("$%d", term->param);
	return psprintf("%s.%s", quote_identifier(term->occ->alias),
					quote_identifier(get_attname(term->occ->relid, term->attno, false)));
}

/* Appends the shortest chain of equalities from node a to node b: "i.order_id = o.id = $1". */
static void
append_chain(StringInfo buf, Graph *g, int a, int b)
{
	int		   *prev = palloc(sizeof(int) * g->nnodes);
	int		   *queue = palloc(sizeof(int) * g->nnodes);
	int		   *path = palloc(sizeof(int) * g->nnodes);
	int			head = 0,
				tail = 0,
				len = 0,
				i,
				e;

	for (i = 0; i < g->nnodes; i++)
		prev[i] = -2;
	prev[a] = -1;
	queue[tail++] = a;
	while (head < tail && prev[b] == -2)
	{
		int			n = queue[head++];

		for (e = 0; e < g->nedges; e++)
		{
			int			next = g->from[e] == n ? g->to[e] : (g->to[e] == n ? g->from[e] : -1);

			if (next >= 0 && prev[next] == -2)
			{
				prev[next] = n;
				queue[tail++] = next;
			}
		}
	}
	for (i = b; i >= 0 && len < g->nnodes; i = prev[i])
		path[len++] = i;
	for (i = len - 1; i >= 0; i--)
		appendStringInfo(buf, "%s%s", i == len - 1 ? "" : " = ", term_text(&g->nodes[path[i]]));
}

static void
append_chains(StringInfo buf, Graph *g, DeriveOcc *occ, int *cols, int nparams)
{
	DeriveTerm	p;
	int			i;

	memset(&p, 0, sizeof(p));
	p.kind = DERIVE_PARAM;
	for (i = 0; i < nparams; i++)
	{
		p.param = i + 1;
		if (i > 0)
			appendStringInfoString(buf, "; ");
		append_chain(buf, g, cols[i], node_of(g, &p, false));
	}
}

/* Whether an operator is pg_catalog's "=" (which the keys query can spell so, either way round). */
static bool
catalog_equals(Oid opno)
{
	HeapTuple	tuple = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	bool		result;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	result = ((Form_pg_operator) GETSTRUCT(tuple))->oprnamespace == PG_CATALOG_NAMESPACE &&
		strcmp(NameStr(((Form_pg_operator) GETSTRUCT(tuple))->oprname), "=") == 0;
	ReleaseSysCache(tuple);
	return result;
}

/* "l = r", or "l OPERATOR(schema.op) r" for an operator that is not pg_catalog's "=". */
static char *
equality_text(const char *l, const char *r, Oid opno)
{
	HeapTuple	tuple = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	char	   *text;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	if (((Form_pg_operator) GETSTRUCT(tuple))->oprnamespace == PG_CATALOG_NAMESPACE &&
		strcmp(NameStr(((Form_pg_operator) GETSTRUCT(tuple))->oprname), "=") == 0)
		text = psprintf("%s = %s", l, r);
	else
		text = psprintf("%s OPERATOR(%s.%s) %s", l,
						quote_identifier(get_namespace_name(((Form_pg_operator) GETSTRUCT(tuple))->oprnamespace)),
						NameStr(((Form_pg_operator) GETSTRUCT(tuple))->oprname), r);
	ReleaseSysCache(tuple);
	return text;
}

static const char *
column_name(const DeriveTerm *term)
{
	return get_attname(term->occ->relid, term->attno, false);
}

/* The occurrence at the other end of an edge joining two occurrences, or NULL. */
static DeriveOcc *
hop_to(DeriveEdge *edge, DeriveOcc *from)
{
	if (edge->left.kind != DERIVE_COLUMN || edge->right.kind != DERIVE_COLUMN ||
		edge->left.occ == edge->right.occ)
		return NULL;
	if (edge->left.occ == from)
		return edge->right.occ;
	if (edge->right.occ == from)
		return edge->left.occ;
	return NULL;
}

/*
 * The keys watch of occ: a shortest path occ → t1 → … → tk where tk is tied to every param and k is
 * at most DERIVE_MAX_PATH. Returns NULL when there is none (*too_long: there may be a longer one).
 */
static DeriveRow *
keys_row(DeriveState *state, DeriveOcc *occ, Graph *g, bool *too_long)
{
	int			nocc = list_length(state->occs);
	int		   *prev = palloc(sizeof(int) * nocc);
	int		   *hops = palloc(sizeof(int) * nocc);
	int		   *queue = palloc(sizeof(int) * nocc);
	int		   *target_cols = NULL;
	DeriveOcc **path;
	int			head = 0,
				tail = 0,
				target = -1,
				len = 0,
				i,
				e;
	StringInfoData sql,
				why;
	List	   *conds = NIL;
	List	   *args = NIL;
	List	   *arg_attnos = NIL;
	ListCell   *lc;
	DeriveRow  *row;

	for (i = 0; i < nocc; i++)
		prev[i] = -2;
	prev[occ->id] = -1;
	hops[occ->id] = 0;
	queue[tail++] = occ->id;
	*too_long = false;
	while (head < tail && target < 0)
	{
		DeriveOcc  *cur = (DeriveOcc *) list_nth(state->occs, queue[head++]);

		CHECK_FOR_INTERRUPTS();
		if (hops[cur->id] >= DERIVE_MAX_PATH)
		{
			*too_long = true;
			break;
		}
		for (e = 0; e < g->nedges && target < 0; e++)
		{
			DeriveOcc  *next = hop_to(g->edges[e], cur);

			if (next == NULL || prev[next->id] != -2)
				continue;
			prev[next->id] = cur->id;
			hops[next->id] = hops[cur->id] + 1;
			queue[tail++] = next->id;
			if ((target_cols = direct_columns(g, state, next)) != NULL)
				target = next->id;
		}
	}
	if (target < 0)
		return NULL;

	/* path[0] = t1 … path[len-1] = tk */
	path = palloc(sizeof(DeriveOcc *) * nocc);
	for (i = target; i != occ->id; i = prev[i])
		len++;
	for (i = target, e = len - 1; i != occ->id; i = prev[i], e--)
		path[e] = (DeriveOcc *) list_nth(state->occs, i);

	initStringInfo(&sql);
	initStringInfo(&why);
	appendStringInfoString(&sql, "SELECT DISTINCT ");
	for (i = 0; i < state->nparams; i++)
		appendStringInfo(&sql, "%st%d.%s", i > 0 ? ", " : "", len,
						 quote_identifier(column_name(&g->nodes[target_cols[i]])));
	appendStringInfoString(&sql, " FROM ");
	for (i = 0; i < len; i++)
		appendStringInfo(&sql, "%s%s t%d", i > 0 ? ", " : "",
						 quote_qualified_identifier(get_namespace_name(get_rel_namespace(path[i]->relid)),
													get_rel_name(path[i]->relid)), i + 1);

	/* the hops: equalities between consecutive tables of the path */
	for (i = 0; i + 1 < len; i++)
	{
		for (e = 0; e < g->nedges; e++)
		{
			DeriveEdge *edge = g->edges[e];
			bool		fwd = edge->left.occ == path[i] && edge->right.occ == path[i + 1];
			bool		back = edge->left.occ == path[i + 1] && edge->right.occ == path[i];
			char	   *l,
					   *r,
					   *cond;

			if (hop_to(edge, path[i]) != path[i + 1] || (!fwd && !back))
				continue;
			l = psprintf("t%d.%s", fwd ? i + 1 : i + 2, quote_identifier(column_name(&edge->left)));
			r = psprintf("t%d.%s", fwd ? i + 2 : i + 1, quote_identifier(column_name(&edge->right)));
			cond = equality_text(l, r, edge->opno);
			if (!list_member(conds, makeString(cond)))
			{
				conds = lappend(conds, makeString(cond));
				appendStringInfo(&why, "%s%s = %s", why.len > 0 ? ", " : "", term_text(&edge->left),
								 term_text(&edge->right));
			}
		}
	}
	/* the changed row's columns against t1's */
	for (e = 0; e < g->nedges; e++)
	{
		DeriveEdge *edge = g->edges[e];
		bool		mine_left = edge->left.occ == occ;
		const DeriveTerm *mine = mine_left ? &edge->left : &edge->right;
		const DeriveTerm *theirs = mine_left ? &edge->right : &edge->left;
		char	   *arg,
				   *col,
				   *cond;
		int			n;

		if (hop_to(edge, occ) != path[0])
			continue;
		n = list_member_int(arg_attnos, mine->attno) ? 0 : list_length(arg_attnos) + 1;
		if (n == 0)
		{
			foreach(lc, arg_attnos)
				if (lfirst_int(lc) == mine->attno)
					n = foreach_current_index(lc) + 1;
		}
		else
		{
			arg_attnos = lappend_int(arg_attnos, mine->attno);
			args = lappend(args, pstrdup(column_name(mine)));
		}
		arg = psprintf("$%d::%s", n, format_type_be_qualified(mine->type));
		col = psprintf("t1.%s", quote_identifier(column_name(theirs)));
		if (catalog_equals(edge->opno))
			cond = psprintf("%s = %s", col, arg);
		else
			cond = equality_text(mine_left ? arg : col, mine_left ? col : arg, edge->opno);
		if (!list_member(conds, makeString(cond)))
		{
			conds = lappend(conds, makeString(cond));
			appendStringInfo(&why, "%s%s = %s", why.len > 0 ? ", " : "", term_text(&edge->left),
							 term_text(&edge->right));
		}
	}
	appendStringInfoString(&sql, " WHERE ");
	foreach(lc, conds)
		appendStringInfo(&sql, "%s%s", foreach_current_index(lc) > 0 ? " AND " : "", strVal(lfirst(lc)));

	{
		StringInfoData path_text;

		initStringInfo(&path_text);
		appendStringInfo(&path_text, "join path %s", quote_identifier(occ->alias));
		for (i = 0; i < len; i++)
			appendStringInfo(&path_text, " → %s", quote_identifier(path[i]->alias));
		appendStringInfo(&path_text, " (%s), where ", why.data);
		append_chains(&path_text, g, path[len - 1], target_cols, state->nparams);
		why = path_text;
	}

	row = palloc0(sizeof(DeriveRow));
	row->relid = occ->relid;
	row->kind = "keys";
	row->keys_sql = sql.data;
	row->keys_args = args;
	row->why = why.data;
	if (!docsync_derive_sql_parses(sql.data))
	{
		row->kind = "broadcast";
		row->keys_sql = NULL;
		row->keys_args = NIL;
		row->why = psprintf("the keys query of its join path does not analyse: %s", sql.data);
	}
	return row;
}

/* The cheapest sound watch of one occurrence. */
DeriveRow *
docsync_derive_classify(DeriveState *state, DeriveOcc *occ)
{
	DeriveRow  *row;
	Graph	   *g;
	int		   *cols;
	int			i;
	StringInfoData why;
	ListCell   *lc;
	List	   *seen = NIL;
	bool		too_long = false;

	if (occ->broadcast_why == NULL && state->nparams > 0 && list_length(occ->edges) > DERIVE_MAX_EDGES)
		occ->broadcast_why = psprintf("more than %d equalities hold for its rows, more than the analysis follows",
									  DERIVE_MAX_EDGES);
	if (occ->broadcast_why == NULL && state->nparams > 0)
	{
		g = build_graph(occ);
		if ((cols = direct_columns(g, state, occ)) != NULL)
		{
			row = palloc0(sizeof(DeriveRow));
			row->relid = occ->relid;
			row->kind = "direct";
			for (i = 0; i < state->nparams; i++)
				row->columns = lappend(row->columns, pstrdup(column_name(&g->nodes[cols[i]])));
			initStringInfo(&why);
			append_chains(&why, g, occ, cols, state->nparams);
			row->why = why.data;
			return row;
		}
		if ((row = keys_row(state, occ, g, &too_long)) != NULL)
			return row;
		initStringInfo(&why);
		appendStringInfo(&why, "no equality that holds for the rows of %s ties a column of it to",
						 quote_identifier(occ->alias));
		for (i = 0; i < state->nparams; i++)
			if (column_for_param(g, state, occ, i + 1) < 0)
				appendStringInfo(&why, " $%d", i + 1);
		if (too_long)
			appendStringInfo(&why, ", and no join path of at most %d tables through such equalities reaches a table tied to every param",
							 DERIVE_MAX_PATH);
		else
			appendStringInfoString(&why, ", and no join path through such equalities reaches a table tied to every param");
		foreach(lc, occ->notes)
		{
			if (!list_member(seen, makeString(lfirst(lc))))
			{
				appendStringInfo(&why, "; %s", (char *) lfirst(lc));
				seen = lappend(seen, makeString(lfirst(lc)));
			}
		}
	}
	row = palloc0(sizeof(DeriveRow));
	row->relid = occ->relid;
	row->kind = "broadcast";
	if (occ->broadcast_why != NULL)
		row->why = pstrdup(occ->broadcast_why);
	else if (state->nparams == 0)
		row->why = pstrdup("the query has no params: its one doc reads every row");
	else
		row->why = why.data;
	return row;
}
