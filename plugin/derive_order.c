/*-------------------------------------------------------------------------
 *
 * derive_order.c
 *		Which query blocks give a result that depends on the order their rows are read in. Such an
 *		order is the heap's: an UPDATE of any column, one no doc reads included, writes a new row
 *		version elsewhere and can change it. Below such a block every column of every table read
 *		counts as read (derive_walk.c), so that no change is filtered out by its columns. A block is
 *		order-dependent when it
 *		- computes an aggregate without an ORDER BY or DISTINCT of its own, other than those whose
 *		  result is the same in any order (count, bool_and, bool_or, every, bit_and, bit_or,
 *		  bit_xor, sum and avg of anything but floating point, whose rounding follows the order,
 *		  and min and max of a type whose equal values print alike), an aggregate of its level
 *		  inside a sublink included;
 *		- computes an ordered-set aggregate (mode, percentile_disc …) or an aggregate with DISTINCT
 *		  over a type whose equal values print differently (numeric 1.0 and 1.00: which of them
 *		  comes out depends on the order), or one not of pg_catalog;
 *		- computes a window function other than such an aggregate over a frame of whole peer groups
 *		  (RANGE or GROUPS, or ROWS over the whole partition), rank, dense_rank, percent_rank or
 *		  cume_dist (the last four: the same for rows that tie);
 *		- has a LIMIT, OFFSET or DISTINCT ON whose ORDER BY does not sort by every output column
 *		  (only then do rows that tie print the same).
 *		An ARRAY(SELECT …) sublink is order-dependent unless its ORDER BY sorts by every output
 *		column or it gives one row.
 *		Also the record of what the query reads of each table, which such a block makes whole.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "derive.h"

/* pg_catalog's aggregates whose result does not depend on the order of their input. */
static const char *const order_insensitive[] = {
	"count", "min", "max", "sum", "avg", "bool_and", "bool_or", "every", "bit_and", "bit_or",
	"bit_xor", NULL
};

/* Of those, the ones that give one of their input values: of several that tie, whichever came. */
static const char *const picks_a_value[] = {
	"min", "max", NULL
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

/*
 * Whether equal values of a type under a collation print alike: the rule for keys
 * (docsync.key_type_problem: numeric, floating point, interval, jsonb, citext, a nondeterministic
 * collation … at any depth). Without that function, no.
 */
static bool
prints_alike(Oid type, Oid collation)
{
	Oid			argtypes[2] = {REGTYPEOID, OIDOID};
	Oid			fn;
	FmgrInfo	flinfo;

	LOCAL_FCINFO(call, 2);

	fn = LookupFuncName(list_make2(makeString("docsync"), makeString("key_type_problem")), 2, argtypes, true);
	if (!OidIsValid(fn))
		return false;
	fmgr_info(fn, &flinfo);
	InitFunctionCallInfoData(*call, &flinfo, 2, InvalidOid, NULL, NULL);
	call->args[0].value = ObjectIdGetDatum(type);
	call->args[0].isnull = false;
	call->args[1].value = ObjectIdGetDatum(collation);
	call->args[1].isnull = false;
	(void) FunctionCallInvoke(call);
	return call->isnull;
}

/* Whether every argument of an aggregate (expressions or target entries) prints alike when equal. */
static bool
arguments_print_alike(List *args, Oid collation)
{
	ListCell   *lc;

	foreach(lc, args)
	{
		Node	   *arg = (Node *) lfirst(lc);

		if (IsA(arg, TargetEntry))
			arg = (Node *) ((TargetEntry *) arg)->expr;
		if (!prints_alike(exprType(arg), collation))
			return false;
	}
	return true;
}

/* Whether an aggregate over these arguments gives the same result in any input order. */
static bool
aggregate_insensitive(Oid funcid, List *args, Oid collation)
{
	const char *name;
	Oid			type;

	if (!named_in(funcid, order_insensitive))
		return false;
	if (named_in(funcid, picks_a_value))
		return arguments_print_alike(args, collation);
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
 * Whether an aggregate that sorts or deduplicates its input (an ordered-set one, ORDER BY or
 * DISTINCT) still depends on the order: when the values it keeps of several that tie print
 * differently. An ORDER BY's own ties are the query's to break (ending it with a unique column).
 */
static bool
sorted_aggregate_dependent(Aggref *agg)
{
	if (agg->aggkind == AGGKIND_HYPOTHETICAL)
		return get_func_namespace(agg->aggfnoid) != PG_CATALOG_NAMESPACE;	/* rank … of ties: alike */
	if (agg->aggkind == AGGKIND_ORDERED_SET)
		return get_func_namespace(agg->aggfnoid) != PG_CATALOG_NAMESPACE ||
			!arguments_print_alike(agg->args, agg->inputcollid);
	if (agg->aggdistinct != NIL)
		return !arguments_print_alike(agg->args, agg->inputcollid);
	return false;
}

typedef struct OrderWalk
{
	Query	   *query;			/* the block */
	int			levelsup;		/* how many sublink levels below it the walk is */
} OrderWalk;

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

/*
 * Finds an order-dependent aggregate or window function of the block: its own, and its aggregates
 * inside its sublinks ((SELECT jsonb_agg(t.x)) over the block's t).
 */
static bool
order_walker(Node *node, void *context)
{
	OrderWalk  *walk = (OrderWalk *) context;

	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		bool		found;

		walk->levelsup++;
		found = query_tree_walker((Query *) node, order_walker, context, 0);
		walk->levelsup--;
		return found;
	}
	if (IsA(node, Aggref))
	{
		Aggref	   *agg = (Aggref *) node;

		if (agg->agglevelsup == (Index) walk->levelsup)
		{
			if (agg->aggorder != NIL || agg->aggdistinct != NIL || agg->aggkind != AGGKIND_NORMAL)
			{
				if (sorted_aggregate_dependent(agg))
					return true;
			}
			else if (!aggregate_insensitive(agg->aggfnoid, agg->args, agg->inputcollid))
				return true;
		}
		return expression_tree_walker(node, order_walker, context);
	}
	if (IsA(node, WindowFunc) && walk->levelsup == 0)
	{
		WindowFunc *win = (WindowFunc *) node;

		if (!win->winagg)
			return !named_in(win->winfnoid, tie_stable);
		return !aggregate_insensitive(win->winfnoid, win->args, win->inputcollid) ||
			!frame_of_peers(walk->query, win->winref);
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
	OrderWalk	walk;

	if ((query->limitCount != NULL || query->limitOffset != NULL || query->hasDistinctOn) &&
		!sorted_by_every_output(query))
		return true;
	if (!query->hasAggs && !query->hasWindowFuncs)
		return false;
	walk.query = query;
	walk.levelsup = 0;
	return order_walker((Node *) query->targetList, &walk) || order_walker(query->havingQual, &walk);
}

/*
 * Whether the array an ARRAY(SELECT …) sublink collects depends on the order the rows are read in:
 * unless one row (an aggregate without GROUP BY) or sorted by every output column.
 */
bool
docsync_derive_array_order_dependent(Query *sub)
{
	if (sub->setOperations == NULL && sub->hasAggs && sub->groupClause == NIL &&
		sub->groupingSets == NIL && !sub->hasTargetSRFs)
		return false;
	return !sorted_by_every_output(sub);
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
