/*-------------------------------------------------------------------------
 *
 * derive_walk.c
 *		The walk behind derived watches: every table occurrence of a rewritten query (views expanded,
 *		subqueries, CTEs, sublinks, set operation branches, policies' quals, SQL functions' bodies),
 *		the columns the query reads of each table, the functions it calls (and what else it runs:
 *		derive_cover.c), and, per occurrence, which
 *		of the equalities derive_terms.c finds hold for every row it contributes:
 *		- WHERE and an inner join's ON hold for the relations below and beside them; a LEFT JOIN's
 *		  ON for its nullable side only (with what holds for every row of its preserved side), a
 *		  FULL JOIN's for neither;
 *		- a subquery in FROM (a view, a CTE referenced once) receives the conjuncts around it unless
 *		  a LIMIT/OFFSET, window function, DISTINCT ON or grouping sets decide which of its rows
 *		  count: then only those that do not go through its output columns (a LATERAL subquery's
 *		  outer references, say), besides its own;
 *		- a sublink's relations get its own conjuncts and what holds for every row of its block,
 *		  but not what goes through its output when, as above, its LIMIT … picks its rows;
 *		- set operation branches are walked each on its own; a CTE referenced more than once
 *		  with its own conjuncts only; a recursive CTE's tables and a SQL function body's are
 *		  marked broadcast;
 *		- last, a strict equality on another occurrence's column that holds for an occurrence's rows
 *		  brings what holds for that other one's (its row is there, not null-extended);
 *		- below a block whose result depends on row order (derive_order.c), every column of every
 *		  table read counts as read.
 *		derive_path.c turns the equalities into watches.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "derive.h"

static void walk_query(DeriveWalk *ctx, DeriveLevel *outer, Query *query, List *inherited);
static void walk_block(DeriveWalk *ctx, DeriveLevel *outer, Query *query, List *inherited);
static void place(DeriveWalk *ctx, DeriveLevel *stack, Node *jtnode, List *held);

/*
 * Whether the conjuncts around a subquery hold for its rows: none of its own clauses decides which
 * rows count by looking at others.
 */
static bool
subquery_passes(Query *sub)
{
	return sub->setOperations == NULL && sub->limitCount == NULL && sub->limitOffset == NULL &&
		!sub->hasWindowFuncs && !sub->hasDistinctOn && sub->groupingSets == NIL;
}

/* What keeps the conditions around a subquery from its rows, for why. */
static const char *
subquery_stop(Query *sub)
{
	if (sub->setOperations != NULL)
		return "is a set operation";
	if (sub->limitCount != NULL || sub->limitOffset != NULL)
		return "has LIMIT or OFFSET";
	if (sub->hasWindowFuncs)
		return "computes window functions";
	if (sub->hasDistinctOn)
		return "has DISTINCT ON";
	return "groups by grouping sets";
}

/* Places or walks with a reason (for why) that conditions around did not reach. */
static void
push_note(DeriveWalk *ctx, const char *note)
{
	ctx->notes = lappend(ctx->notes, (void *) note);
}

static void
pop_note(DeriveWalk *ctx)
{
	ctx->notes = list_delete_last(ctx->notes);
}

/* Walks a subquery in FROM (or a CTE reference) with what holds around it. */
static void
place_subquery(DeriveWalk *ctx, DeriveLevel *outer, Query *sub, RangeTblEntry *rte, List *held)
{
	List	   *kept;
	bool		dropped;

	if (subquery_passes(sub))
	{
		walk_query(ctx, outer, sub, held);
		return;
	}
	kept = docsync_derive_edges_not_via(held, rte);

	/*
	 * Its rows are picked even when nothing around holds through its output yet: an outer join's ON
	 * or a neighbour's edges can bring such an equality later, in the closure, which the picker
	 * keeps from its rows.
	 */
	dropped = list_length(kept) < list_length(held) || sub->setOperations != NULL;
	if (dropped)
		push_note(ctx, psprintf("the subquery %s %s, so the conditions on its output do not restrict its rows",
								quote_identifier(rte->eref != NULL ? rte->eref->aliasname : "?"), subquery_stop(sub)));
	ctx->pickers = lappend(ctx->pickers, sub);
	walk_query(ctx, outer, sub, kept);
	ctx->pickers = list_delete_last(ctx->pickers);
	if (dropped)
		pop_note(ctx);
}

/*
 * Walks a sublink's query with what holds for every row of the block around it. outer IN (SELECT
 * output …) holds for the rows its LIMIT, OFFSET, DISTINCT ON or window functions pick, but which
 * rows those are depends on all the others: then the equalities through its output do not reach
 * its rows (as for a subquery in FROM).
 */
static void
walk_sublink(DeriveWalk *ctx, Query *sub)
{
	List	   *kept = NIL;
	ListCell   *lc;
	bool		dropped;

	if (subquery_passes(sub))
	{
		walk_query(ctx, ctx->stack, sub, ctx->held);
		return;
	}
	foreach(lc, ctx->held)
	{
		DeriveEdge *edge = (DeriveEdge *) lfirst(lc);

		if (!docsync_derive_term_of_block(&edge->left, sub) && !docsync_derive_term_of_block(&edge->right, sub))
			kept = lappend(kept, edge);
	}

	/*
	 * A picker even when the block's held edges have none through its output: the IN equality of a
	 * sublink in an outer join's ON lives in the nullable side's edges, and the closure would bring
	 * it to the picked rows.
	 */
	dropped = list_length(kept) < list_length(ctx->held);
	if (dropped)
		push_note(ctx, psprintf("the subquery of a sublink %s, so the conditions on its output do not restrict its rows",
								subquery_stop(sub)));
	ctx->pickers = lappend(ctx->pickers, sub);
	walk_query(ctx, ctx->stack, sub, kept);
	ctx->pickers = list_delete_last(ctx->pickers);
	if (dropped)
		pop_note(ctx);
}

/* Places a join's side that its ON does not restrict, saying so when the ON had equalities. */
static void
place_unrestricted(DeriveWalk *ctx, DeriveLevel *stack, Node *side, List *held, List *on, const char *note)
{
	if (on != NIL)
		push_note(ctx, note);
	place(ctx, stack, side, held);
	if (on != NIL)
		pop_note(ctx);
}

/*
 * Beyond the bound on occurrences every one is broadcast: gathering the equalities (each join side
 * gets every other's) would only cost time and memory quadratic in the occurrences, or worse.
 */
static bool
beyond_bound(DeriveWalk *ctx)
{
	return list_length(ctx->state->occs) > DERIVE_MAX_OCCURRENCES;
}

/* What holds for every row of a join tree node, unless the query is beyond the bound. */
static List *
inner_edges(DeriveWalk *ctx, DeriveLevel *stack, Node *jtnode)
{
	return beyond_bound(ctx) ? NIL : docsync_derive_inner_edges(ctx, stack, jtnode);
}

/* Gives every occurrence under a join tree node what holds for its rows (held: around the node). */
static void
place(DeriveWalk *ctx, DeriveLevel *stack, Node *jtnode, List *held)
{
	Query	   *query = stack->query;

	check_stack_depth();
	if (jtnode == NULL)
		return;
	if (IsA(jtnode, RangeTblRef))
	{
		int			rtindex = ((RangeTblRef *) jtnode)->rtindex;
		RangeTblEntry *rte;

		if (rtindex < 1 || rtindex > list_length(query->rtable))
			return;
		rte = rt_fetch(rtindex, query->rtable);
		if (rte->rtekind == RTE_RELATION)
		{
			DeriveOcc  *occ = docsync_derive_occurrence(ctx->state, rte);

			if (!occ->placed)
			{
				occ->placed = true;
				occ->edges = list_copy(held);
				occ->notes = list_copy(ctx->notes);
				occ->picked_by = list_copy(ctx->pickers);
				occ->broadcast_why = ctx->broadcast_why;
			}
		}
		else if (rte->rtekind == RTE_SUBQUERY && rte->subquery != NULL)
			place_subquery(ctx, stack, rte->subquery, rte, held);
		else if (rte->rtekind == RTE_CTE)
		{
			DeriveLevel *owner = NULL;
			CommonTableExpr *cte = docsync_derive_find_cte(stack, rte, &owner);
			const char *save = ctx->broadcast_why;

			if (cte == NULL)
				return;
			if (list_member_ptr(ctx->ctes_walked, cte))
			{
				/* walked from another reference: read all the same below an order-dependent block */
				if (ctx->unordered_level > 0)
					docsync_derive_read_all(cte->ctequery, ctx->state);
				return;
			}
			ctx->ctes_walked = lappend(ctx->ctes_walked, cte);
			if (cte->cterecursive && ctx->broadcast_why == NULL)
				ctx->broadcast_why = psprintf("it is read by the recursive CTE %s", cte->ctename);
			if (docsync_derive_cte_transparent(cte))
				place_subquery(ctx, owner, (Query *) cte->ctequery, rte, held);
			else
			{
				push_note(ctx, psprintf("the CTE %s is %s, so the conditions around it do not restrict its rows",
										quote_identifier(cte->ctename),
										cte->cterecursive ? "recursive" : "referenced more than once"));
				walk_query(ctx, owner, (Query *) cte->ctequery, NIL);
				pop_note(ctx);
			}
			ctx->broadcast_why = save;
		}
		return;
	}
	if (IsA(jtnode, FromExpr))
	{
		FromExpr   *from = (FromExpr *) jtnode;
		List	   *where = NIL;
		ListCell   *lc;

		if (list_length(from->fromlist) > DERIVE_MAX_OCCURRENCES || beyond_bound(ctx))
		{
			foreach(lc, from->fromlist)
			{
				CHECK_FOR_INTERRUPTS();
				place(ctx, stack, (Node *) lfirst(lc), NIL);
			}
			return;
		}
		docsync_derive_conjunct_edges(ctx, stack, from->quals, NULL, &where);
		foreach(lc, from->fromlist)
		{
			List	   *mine = list_concat(list_copy(held), where);
			ListCell   *other;

			CHECK_FOR_INTERRUPTS();
			foreach(other, from->fromlist)
				if (other != lc)
					mine = list_concat(mine, inner_edges(ctx, stack, (Node *) lfirst(other)));
			place(ctx, stack, (Node *) lfirst(lc), mine);
		}
		return;
	}
	if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) jtnode;
		List	   *on = NIL;

		CHECK_FOR_INTERRUPTS();
		if (beyond_bound(ctx))
		{
			place(ctx, stack, join->larg, NIL);
			place(ctx, stack, join->rarg, NIL);
			return;
		}
		docsync_derive_conjunct_edges(ctx, stack, join->quals, NULL, &on);
		switch (join->jointype)
		{
			case JOIN_INNER:
				place(ctx, stack, join->larg,
					  list_concat(list_concat(list_copy(held), on), inner_edges(ctx, stack, join->rarg)));
				place(ctx, stack, join->rarg,
					  list_concat(list_concat(list_copy(held), on), inner_edges(ctx, stack, join->larg)));
				break;
			case JOIN_LEFT:
				place_unrestricted(ctx, stack, join->larg, held, on,
								   "it is on the preserved side of a LEFT JOIN, whose ON does not restrict its rows");
				place(ctx, stack, join->rarg,
					  list_concat(list_concat(list_copy(held), on), inner_edges(ctx, stack, join->larg)));
				break;
			case JOIN_RIGHT:
				place_unrestricted(ctx, stack, join->rarg, held, on,
								   "it is on the preserved side of a RIGHT JOIN, whose ON does not restrict its rows");
				place(ctx, stack, join->larg,
					  list_concat(list_concat(list_copy(held), on), inner_edges(ctx, stack, join->rarg)));
				break;
			default:
				place_unrestricted(ctx, stack, join->larg, held, on,
								   "it is on a side of a FULL JOIN, whose ON restricts neither side");
				place_unrestricted(ctx, stack, join->rarg, held, on,
								   "it is on a side of a FULL JOIN, whose ON restricts neither side");
				break;
		}
	}
}

/* The depth of a block: the top one's is 1. */
static int
depth_of(DeriveLevel *stack)
{
	int			depth = 0;

	for (; stack != NULL; stack = stack->up)
		depth++;
	return depth;
}

static bool
check_function_cb(Oid funcid, void *context)
{
	DeriveWalk *ctx = (DeriveWalk *) context;

	/* a body called below an order-dependent block: what it reads can move the rows */
	if (ctx->unordered_level > 0)
		ctx->state->unordered++;
	docsync_derive_check_function(ctx->state, funcid);
	if (ctx->unordered_level > 0)
		ctx->state->unordered--;
	return false;
}

/*
 * Scans the expressions of the block at the top of ctx->stack: columns read, functions called,
 * sublinks (walked as queries with what holds for every row of the block).
 */
static bool
scan_walker(Node *node, void *context)
{
	DeriveWalk    *ctx = (DeriveWalk *) context;

	if (node == NULL)
		return false;
	check_stack_depth();
	docsync_derive_cover_node(ctx->state, node);
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;
		Query	   *query = docsync_derive_level_query(ctx->stack, var->varlevelsup);
		RangeTblEntry *rte;

		if (query == NULL || var->varno < 1 || var->varno > list_length(query->rtable))
			return false;
		rte = rt_fetch(var->varno, query->rtable);
		if (rte->rtekind == RTE_RELATION)
			docsync_derive_record_read(ctx->state, rte->relid, true, var->varattno,
						ctx->unordered_level > 0 && depth_of(ctx->stack) - (int) var->varlevelsup >= ctx->unordered_level);
		else if (rte->rtekind == RTE_JOIN)
		{
			/* a join's column is a column of one of its sides (or a COALESCE of both) */
			DeriveLevel *save = ctx->stack;
			Node	   *what = (Node *) rte->joinaliasvars;

			if (var->varattno > 0 && var->varattno <= list_length(rte->joinaliasvars))
				what = (Node *) list_nth(rte->joinaliasvars, var->varattno - 1);
			ctx->stack = docsync_derive_stack_up(save, var->varlevelsup);
			(void) scan_walker(what, context);
			ctx->stack = save;
		}
		return false;
	}
	if (IsA(node, SubLink))
	{
		SubLink    *link = (SubLink *) node;

		(void) scan_walker(link->testexpr, context);
		if (link->subselect != NULL && IsA(link->subselect, Query))
		{
			/* ARRAY(SELECT …) collects its rows in the order they are read */
			bool		unordered = ctx->unordered_level == 0 && link->subLinkType == ARRAY_SUBLINK &&
				docsync_derive_array_order_dependent((Query *) link->subselect);

			if (unordered)
				ctx->unordered_level = depth_of(ctx->stack) + 1;
			walk_sublink(ctx, (Query *) link->subselect);
			if (unordered)
				ctx->unordered_level = 0;
		}
		return false;
	}
	if (IsA(node, Query))
		return false;			/* subqueries in FROM and CTEs are walked from the join tree */
	(void) check_functions_in_node(node, check_function_cb, context);
	return expression_tree_walker(node, scan_walker, context);
}

/* The functions behind the operators a block sorts, groups, partitions or deduplicates with. */
static void
check_clause_operators(DeriveWalk *ctx, List *clauses)
{
	ListCell   *lc;

	foreach(lc, clauses)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);

		if (OidIsValid(sgc->sortop))
			docsync_derive_check_function(ctx->state, get_opcode(sgc->sortop));
		if (OidIsValid(sgc->eqop))
			docsync_derive_check_function(ctx->state, get_opcode(sgc->eqop));
	}
}

static void
scan_query(DeriveWalk *ctx, DeriveLevel *stack, Query *query, List *held)
{
	DeriveLevel *save_stack = ctx->stack;
	List	   *save_held = ctx->held;
	ListCell   *lc;

	ctx->stack = stack;
	ctx->held = held;
	check_clause_operators(ctx, query->sortClause);
	check_clause_operators(ctx, query->groupClause);
	check_clause_operators(ctx, query->distinctClause);
	foreach(lc, query->windowClause)
	{
		check_clause_operators(ctx, lfirst_node(WindowClause, lc)->partitionClause);
		check_clause_operators(ctx, lfirst_node(WindowClause, lc)->orderClause);
	}
	(void) query_tree_walker(query, scan_walker, ctx,
							 QTW_IGNORE_RT_SUBQUERIES | QTW_IGNORE_CTE_SUBQUERIES | QTW_IGNORE_JOINALIASES);
	ctx->stack = save_stack;
	ctx->held = save_held;
}

/* Walks one query block below the levels outer, with what holds for all its rows from outside. */
static void
walk_query(DeriveWalk *ctx, DeriveLevel *outer, Query *query, List *inherited)
{
	bool		unordered;

	check_stack_depth();
	if (query == NULL)
		return;
	if (docsync_derive_map_find(ctx->walked, query, NULL))
	{
		/* walked from another place (a CTE's query): read all the same below an order-dependent one */
		if (ctx->unordered_level > 0)
			docsync_derive_read_all((Node *) query, ctx->state);
		return;
	}
	docsync_derive_map_store(&ctx->walked, query, query);
	CHECK_FOR_INTERRUPTS();
	unordered = ctx->unordered_level == 0 && docsync_derive_order_dependent(query);
	if (unordered)
		ctx->unordered_level = depth_of(outer) + 1;
	walk_block(ctx, outer, query, inherited);
	if (unordered)
		ctx->unordered_level = 0;
}

/* walk_query's work on one block. */
static void
walk_block(DeriveWalk *ctx, DeriveLevel *outer, Query *query, List *inherited)
{
	DeriveLevel *stack;
	List	   *held;
	ListCell   *lc;

	stack = docsync_derive_push(outer, query);
	if (query->setOperations != NULL)
	{
		/* each branch on its own; what holds from outside (correlation) holds for each */
		foreach(lc, query->rtable)
		{
			RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

			if (rte->rtekind == RTE_SUBQUERY && rte->subquery != NULL)
			{
				List	   *kept = docsync_derive_edges_not_via(inherited, rte);

				if (list_length(kept) < list_length(inherited))
					push_note(ctx, "it is read in a branch of a set operation, which the conditions on the operation's output do not reach");
				walk_query(ctx, stack, rte->subquery, kept);
				if (list_length(kept) < list_length(inherited))
					pop_note(ctx);
			}
		}
		scan_query(ctx, stack, query, inherited);
		return;
	}
	if (query->jointree != NULL)
		place(ctx, stack, (Node *) query->jointree, inherited);
	held = list_concat(list_copy(inherited), docsync_derive_inner_edges(ctx, stack, (Node *) query->jointree));
	scan_query(ctx, stack, query, held);

	/*
	 * A table, subquery or CTE in the range table that the join tree did not reach: read, but how is
	 * unknown (an unreferenced CTE is never run).
	 */
	foreach(lc, query->cteList)
	{
		CommonTableExpr *cte = lfirst_node(CommonTableExpr, lc);

		if (cte->cterefcount > 0 && IsA(cte->ctequery, Query))
			walk_query(ctx, stack, (Query *) cte->ctequery, NIL);
	}
	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);
		DeriveOcc  *occ;

		if (rte->rtekind == RTE_SUBQUERY)
			walk_query(ctx, stack, rte->subquery, NIL);
		if (rte->rtekind != RTE_RELATION || get_rel_relkind(rte->relid) == RELKIND_VIEW)
			continue;
		occ = docsync_derive_occurrence(ctx->state, rte);
		if (!occ->placed)
		{
			occ->placed = true;
			occ->broadcast_why = ctx->broadcast_why != NULL ? ctx->broadcast_why
				: "the analysis does not see how its rows are joined";
		}
		docsync_derive_record_read(ctx->state, rte->relid, false, InvalidAttrNumber, ctx->unordered_level > 0);
	}
}

void
docsync_derive_walk(DeriveState *state, Query *query)
{
	DeriveWalk	ctx;
	ListCell   *lc;

	memset(&ctx, 0, sizeof(ctx));
	ctx.state = state;
	walk_query(&ctx, NULL, query, NIL);
	if (list_length(state->occs) <= DERIVE_MAX_OCCURRENCES)
	{
		docsync_derive_close_over_neighbours(state);
		return;
	}
	foreach(lc, state->occs)
	{
		DeriveOcc  *occ = (DeriveOcc *) lfirst(lc);

		if (occ->broadcast_why == NULL)
			occ->broadcast_why = psprintf("the query reads more than %d table occurrences, more than the analysis follows",
										  DERIVE_MAX_OCCURRENCES);
	}
}

/* The body of a SQL function: what it reads is broadcast (its arguments are not traced). */
void
docsync_derive_walk_body(DeriveState *state, Query *query, const char *function)
{
	DeriveWalk	ctx;

	memset(&ctx, 0, sizeof(ctx));
	ctx.state = state;
	ctx.body = true;
	ctx.broadcast_why = psprintf("it is read by the function %s, whose arguments are not traced", function);
	walk_query(&ctx, NULL, query, NIL);
}
