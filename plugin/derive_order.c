/*-------------------------------------------------------------------------
 *
 * derive_order.c
 *		Which query blocks give a result that depends on the order their rows are read in. Such an
 *		order is the heap's: an UPDATE of any column, one no doc reads included, writes a new row
 *		version elsewhere and can change it. Below such a block every column of every table read
 *		counts as read (derive_walk.c), so that no change is filtered out by its columns. A block is
 *		order-dependent when it
 *		- computes an aggregate without an ORDER BY or DISTINCT of its own, other than those whose
 *		  result is the same in any order (count, min, max, bool_and, bool_or, every, bit_and,
 *		  bit_or, bit_xor, and sum and avg of anything but floating point, whose rounding follows
 *		  the order);
 *		- computes a window function other than such an aggregate over a frame of whole peer groups
 *		  (RANGE or GROUPS, or ROWS over the whole partition), rank, dense_rank, percent_rank or
 *		  cume_dist (the last four: the same for rows that tie);
 *		- has a LIMIT, OFFSET or DISTINCT ON whose ORDER BY does not sort by every output column
 *		  (only then do rows that tie print the same).
 *		Also the record of what the query reads of each table, which such a block makes whole.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "nodes/nodeFuncs.h"
#include "utils/lsyscache.h"

#include "derive.h"

/* pg_catalog's aggregates whose result does not depend on the order of their input. */
static const char *const order_insensitive[] = {
	"count", "min", "max", "sum", "avg", "bool_and", "bool_or", "every", "bit_and", "bit_or",
	"bit_xor", NULL
};

/* pg_catalog's window functions whose result is the same for rows that tie. */
static const char *const tie_stable[] = {
	"rank", "dense_rank", "percent_rank", "cume_dist", NULL
};

static bool
named_in(Oid funcid, const char *const *names)
{
	const char *name;
	int			i;

	if (get_func_namespace(funcid) != PG_CATALOG_NAMESPACE)
		return false;
	name = get_func_name(funcid);
	for (i = 0; names[i] != NULL; i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

/* Whether an aggregate over these arguments gives the same result in any input order. */
static bool
aggregate_insensitive(Oid funcid, List *args)
{
	const char *name;
	Oid			type;

	if (!named_in(funcid, order_insensitive))
		return false;
	name = get_func_name(funcid);
	if (strcmp(name, "sum") != 0 && strcmp(name, "avg") != 0)
		return true;
	if (args == NIL)
		return false;
	if (IsA(linitial(args), TargetEntry))
		type = exprType((Node *) ((TargetEntry *) linitial(args))->expr);
	else
		type = exprType((Node *) linitial(args));
	return type != FLOAT4OID && type != FLOAT8OID;
}

/*
 * Whether a window's frame is made of whole peer groups, so an aggregate over it is the same for
 * rows that tie: RANGE or GROUPS, or ROWS from the partition's start to its end.
 */
static bool
frame_of_peers(Query *query, Index winref)
{
	ListCell   *lc;

	foreach(lc, query->windowClause)
	{
		WindowClause *wc = lfirst_node(WindowClause, lc);

		if (wc->winref != winref)
			continue;
		if (!(wc->frameOptions & FRAMEOPTION_ROWS))
			return true;
		return (wc->frameOptions & FRAMEOPTION_START_UNBOUNDED_PRECEDING) &&
			(wc->frameOptions & FRAMEOPTION_END_UNBOUNDED_FOLLOWING);
	}
	return false;
}

/* Finds an order-dependent aggregate or window function of the block (not of its sublinks). */
static bool
order_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
		return false;			/* a sublink's query is a block of its own */
	if (IsA(node, Aggref))
	{
		Aggref	   *agg = (Aggref *) node;

		if (agg->agglevelsup == 0 && agg->aggorder == NIL && agg->aggdistinct == NIL &&
			agg->aggkind == AGGKIND_NORMAL && !aggregate_insensitive(agg->aggfnoid, agg->args))
			return true;
		return false;
	}
	if (IsA(node, WindowFunc))
	{
		WindowFunc *win = (WindowFunc *) node;

		if (!win->winagg)
			return !named_in(win->winfnoid, tie_stable);
		return !aggregate_insensitive(win->winfnoid, win->args) ||
			!frame_of_peers((Query *) context, win->winref);
	}
	return expression_tree_walker(node, order_walker, context);
}

/* Whether the block's ORDER BY sorts by every output column. */
static bool
sorted_by_every_output(Query *query)
{
	ListCell   *lc;

	if (query->sortClause == NIL)
		return false;
	foreach(lc, query->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		ListCell   *ls;
		bool		sorted = false;

		if (tle->resjunk)
			continue;
		foreach(ls, query->sortClause)
			sorted = sorted || (tle->ressortgroupref != 0 &&
								lfirst_node(SortGroupClause, ls)->tleSortGroupRef == tle->ressortgroupref);
		if (!sorted)
			return false;
	}
	return true;
}

/* Whether the result of a query block depends on the order its rows are read in. */
bool
docsync_derive_order_dependent(Query *query)
{
	if ((query->limitCount != NULL || query->limitOffset != NULL || query->hasDistinctOn) &&
		!sorted_by_every_output(query))
		return true;
	if (!query->hasAggs && !query->hasWindowFuncs)
		return false;
	return order_walker((Node *) query->targetList, query) || order_walker(query->havingQual, query);
}

/*
 * Records that the query reads a table and, when column, its column attno (0, a whole-row
 * reference, or a system column: all of them). whole: every column, as the table is read below a
 * block whose result depends on row order, which a change of any column can move.
 */
void
docsync_derive_record_read(DeriveState *state, Oid relid, bool column, AttrNumber attno, bool whole)
{
	DeriveRead *read = NULL;
	ListCell   *lc;

	foreach(lc, state->reads)
	{
		if (((DeriveRead *) lfirst(lc))->relid == relid)
			read = (DeriveRead *) lfirst(lc);
	}
	if (read == NULL)
	{
		read = palloc0(sizeof(DeriveRead));
		read->relid = relid;
		state->reads = lappend(state->reads, read);
	}
	if (whole || state->unordered > 0)
		read->all = true;
	if (!column)
		return;
	if (attno <= 0)
		read->all = true;
	else
		read->columns = bms_add_member(read->columns, attno - FirstLowInvalidHeapAttributeNumber);
}

static bool
read_all_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		if (((RangeTblEntry *) node)->rtekind == RTE_RELATION)
			docsync_derive_record_read((DeriveState *) context, ((RangeTblEntry *) node)->relid, false,
									   InvalidAttrNumber, true);
		return false;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, read_all_walker, context, QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, read_all_walker, context);
}

/* Records every table a query tree reads as read whole (it lies below an order-dependent block). */
void
docsync_derive_read_all(Node *node, DeriveState *state)
{
	(void) read_all_walker(node, state);
}
