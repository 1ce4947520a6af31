/*-------------------------------------------------------------------------
 *
 * derive_terms.c
 *		The equalities behind derived watches: what a column reference is (a table occurrence's
 *		column, found through subqueries, CTEs referenced once and join aliases; a doc param; or
 *		something else), which conjuncts are btree equalities between such terms (mergejoinable,
 *		under a deterministic collation, through binary-compatible relabels only), and what holds
 *		for every row a join tree node or a query block outputs:
 *		- an inner join's ON and WHERE hold for all its rows; a LEFT JOIN's rows only satisfy what
 *		  holds for its preserved side's, a FULL JOIN's nothing;
 *		- an EXISTS / IN (SELECT …) conjunct has a witness row satisfying the sublink's own
 *		  conjuncts, so those hold too, and IN adds outer = output;
 *		- a block that aggregates without GROUP BY (or with grouping sets), or a set operation,
 *		  guarantees nothing about its tables' rows;
 *		- a strict equality on another occurrence's column brings what holds for that one's rows
 *		  (the closure derive_walk.c runs last), except through the output of a block whose LIMIT,
 *		  DISTINCT ON … picks the rows.
 *		derive_walk.c decides which of these hold for which occurrence.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"

#include "derive.h"

static void term_of(DeriveWalk *ctx, DeriveLevel *stack, Node *expr, Query *sublink, DeriveTerm *term);
static List *query_inner_edges(DeriveWalk *ctx, DeriveLevel *stack, Query *query);

Query *
docsync_derive_level_query(DeriveLevel *stack, Index levelsup)
{
	DeriveLevel *level = docsync_derive_stack_up(stack, levelsup);

	return level != NULL ? level->query : NULL;
}

/* The stack as seen from levelsup levels up. */
DeriveLevel *
docsync_derive_stack_up(DeriveLevel *stack, Index levelsup)
{
	while (stack != NULL && levelsup-- > 0)
		stack = stack->up;
	return stack;
}

/* One level more: query, below stack. */
DeriveLevel *
docsync_derive_push(DeriveLevel *stack, Query *query)
{
	DeriveLevel *level = palloc(sizeof(DeriveLevel));

	level->query = query;
	level->up = stack;
	return level;
}

DeriveOcc *
docsync_derive_occurrence(DeriveState *state, RangeTblEntry *rte)
{
	DeriveOcc  *occ;

	if (docsync_derive_map_find(state->occ_index, rte, (void **) &occ))
		return occ;
	CHECK_FOR_INTERRUPTS();
	occ = palloc0(sizeof(DeriveOcc));
	occ->id = list_length(state->occs);
	occ->rte = rte;
	occ->relid = rte->relid;
	occ->alias = (rte->eref != NULL && rte->eref->aliasname != NULL) ? rte->eref->aliasname
		: get_rel_name(rte->relid);
	state->occs = lappend(state->occs, occ);
	docsync_derive_map_store(&state->occ_index, rte, occ);
	return occ;
}

/* The CTE an RTE_CTE entry of the query at the top of stack names, with the stack of its owner. */
CommonTableExpr *
docsync_derive_find_cte(DeriveLevel *stack, RangeTblEntry *rte, DeriveLevel **owner_stack)
{
	Query	   *owner = docsync_derive_level_query(stack, rte->ctelevelsup);
	ListCell   *lc;

	if (owner == NULL)
		return NULL;
	foreach(lc, owner->cteList)
	{
		CommonTableExpr *cte = lfirst_node(CommonTableExpr, lc);

		if (strcmp(cte->ctename, rte->ctename) == 0)
		{
			*owner_stack = docsync_derive_stack_up(stack, rte->ctelevelsup);
			return IsA(cte->ctequery, Query) ? cte : NULL;
		}
	}
	return NULL;
}

/* A CTE whose output columns are its rows' columns: referenced once, not recursive. */
bool
docsync_derive_cte_transparent(CommonTableExpr *cte)
{
	return cte != NULL && !cte->cterecursive && cte->cterefcount == 1 &&
		((Query *) cte->ctequery)->commandType == CMD_SELECT &&
		((Query *) cte->ctequery)->setOperations == NULL;
}

/* Resolves a Var to the table column it is, through subqueries, CTEs and join aliases. */
static void
resolve_var(DeriveWalk *ctx, DeriveLevel *stack, Var *var, DeriveTerm *term)
{
	Query	   *query = docsync_derive_level_query(stack, var->varlevelsup);
	RangeTblEntry *rte;
	DeriveLevel *upper;

	check_stack_depth();
	term->kind = DERIVE_OPAQUE;
	if (query == NULL || var->varno < 1 || var->varno > list_length(query->rtable) || var->varattno <= 0)
		return;
	rte = rt_fetch(var->varno, query->rtable);
	upper = docsync_derive_stack_up(stack, var->varlevelsup);
	switch (rte->rtekind)
	{
		case RTE_RELATION:
			term->kind = DERIVE_COLUMN;
			term->occ = docsync_derive_occurrence(ctx->state, rte);
			term->attno = var->varattno;
			term->type = var->vartype;
			break;
		case RTE_SUBQUERY:
			if (rte->subquery != NULL && rte->subquery->setOperations == NULL)
			{
				TargetEntry *tle = get_tle_by_resno(rte->subquery->targetList, var->varattno);

				if (tle != NULL)
				{
					term_of(ctx, docsync_derive_push(upper, rte->subquery), (Node *) tle->expr, NULL, term);
					term->via = lappend(term->via, rte);
				}
			}
			break;
		case RTE_CTE:
			{
				DeriveLevel *owner = NULL;
				CommonTableExpr *cte = docsync_derive_find_cte(upper, rte, &owner);

				if (docsync_derive_cte_transparent(cte))
				{
					Query	   *cteq = (Query *) cte->ctequery;
					TargetEntry *tle = get_tle_by_resno(cteq->targetList, var->varattno);

					if (tle != NULL)
					{
						term_of(ctx, docsync_derive_push(owner, cteq), (Node *) tle->expr, NULL, term);
						term->via = lappend(term->via, rte);
					}
				}
				break;
			}
		case RTE_JOIN:
			if (var->varattno <= list_length(rte->joinaliasvars))
				term_of(ctx, upper, (Node *) list_nth(rte->joinaliasvars, var->varattno - 1), NULL, term);
			break;
		default:
			break;
	}
}

/*
 * The term an expression is: a column, a doc param, or (anything else) opaque. sublink: the query of
 * the sublink whose test this expression is part of (its PARAM_SUBLINK params are its output).
 */
static void
term_of(DeriveWalk *ctx, DeriveLevel *stack, Node *expr, Query *sublink, DeriveTerm *term)
{
	memset(term, 0, sizeof(DeriveTerm));
	term->kind = DERIVE_OPAQUE;
	while (expr != NULL && IsA(expr, RelabelType))
		expr = (Node *) ((RelabelType *) expr)->arg;
	if (expr == NULL)
		return;
	if (IsA(expr, Var))
		resolve_var(ctx, stack, (Var *) expr, term);
	else if (IsA(expr, Param))
	{
		Param	   *param = (Param *) expr;

		if (param->paramkind == PARAM_EXTERN && !ctx->body &&
			param->paramid >= 1 && param->paramid <= ctx->state->nparams)
		{
			term->kind = DERIVE_PARAM;
			term->param = param->paramid;
		}
		else if (param->paramkind == PARAM_SUBLINK && sublink != NULL)
		{
			TargetEntry *tle = get_tle_by_resno(sublink->targetList, param->paramid);

			/* a set operation's output columns are no one branch's */
			if (tle != NULL && !tle->resjunk && sublink->setOperations == NULL)
				term_of(ctx, docsync_derive_push(stack, sublink), (Node *) tle->expr, NULL, term);
		}
	}
}

/* Adds left = right when the operator is a btree equality under a deterministic collation. */
static void
add_equality(DeriveWalk *ctx, DeriveLevel *stack, OpExpr *op, Query *sublink, List **edges)
{
	DeriveEdge *edge;

	if (list_length(op->args) != 2 || get_mergejoin_opfamilies(op->opno) == NIL)
		return;
	if (OidIsValid(op->inputcollid) && !get_collation_isdeterministic(op->inputcollid))
		return;
	edge = palloc0(sizeof(DeriveEdge));
	term_of(ctx, stack, (Node *) linitial(op->args), sublink, &edge->left);
	term_of(ctx, stack, (Node *) lsecond(op->args), sublink, &edge->right);
	if (edge->left.kind == DERIVE_OPAQUE || edge->right.kind == DERIVE_OPAQUE ||
		(edge->left.kind == DERIVE_PARAM && edge->right.kind == DERIVE_PARAM))
		return;
	edge->opno = op->opno;
	edge->id = ctx->state->nedges++;
	*edges = lappend(*edges, edge);
}

/* The equalities among the top-level AND conjuncts of a qual (sublink: as in add_equality). */
void
docsync_derive_conjunct_edges(DeriveWalk *ctx, DeriveLevel *stack, Node *qual, Query *sublink, List **edges)
{
	check_stack_depth();
	if (qual == NULL || ctx->body)
		return;
	if (IsA(qual, List))
	{
		ListCell   *lc;

		foreach(lc, (List *) qual)
			docsync_derive_conjunct_edges(ctx, stack, (Node *) lfirst(lc), sublink, edges);
	}
	else if (is_andclause(qual))
		docsync_derive_conjunct_edges(ctx, stack, (Node *) ((BoolExpr *) qual)->args, sublink, edges);
	else if (IsA(qual, OpExpr))
		add_equality(ctx, stack, (OpExpr *) qual, sublink, edges);
	else if (IsA(qual, SubLink) && sublink == NULL)
	{
		SubLink    *link = (SubLink *) qual;
		Query	   *sub = (Query *) link->subselect;

		if (sub == NULL || !IsA(sub, Query) ||
			(link->subLinkType != ANY_SUBLINK && link->subLinkType != EXISTS_SUBLINK))
			return;
		/* outer IN (SELECT output …): outer = output holds on both sides */
		if (link->subLinkType == ANY_SUBLINK)
			docsync_derive_conjunct_edges(ctx, stack, link->testexpr, sub, edges);
		/*
		 * A row passes EXISTS / IN only with a row of the sublink as witness, and that row satisfies
		 * the sublink's own conjuncts: they hold for the outer rows too (as for an inner join).
		 */
		*edges = list_concat(*edges, query_inner_edges(ctx, stack, sub));
	}
}

/* The edges whose columns do not come out of a given subquery or CTE reference. */
List *
docsync_derive_edges_not_via(List *edges, RangeTblEntry *rte)
{
	List	   *kept = NIL;
	ListCell   *lc;

	foreach(lc, edges)
	{
		DeriveEdge *edge = (DeriveEdge *) lfirst(lc);

		if (!list_member_ptr(edge->left.via, rte) && !list_member_ptr(edge->right.via, rte))
			kept = lappend(kept, edge);
	}
	return kept;
}

/*
 * What holds for every row a query block outputs, each of which stands for rows of its tables that
 * satisfy its conjuncts. Not so for an aggregate without GROUP BY (its one row exists with no input
 * row) nor grouping sets (the empty set), nor a set operation.
 */
static List *
query_inner_edges(DeriveWalk *ctx, DeriveLevel *stack, Query *query)
{
	List	   *edges;

	if (query == NULL || query->setOperations != NULL || query->jointree == NULL ||
		query->groupingSets != NIL ||
		(query->groupClause == NIL && (query->hasAggs || query->havingQual != NULL)))
		return NIL;
	/* a block lies at one place of the tree: what holds for its rows is computed once */
	if (docsync_derive_map_find(ctx->inner_edges, query, (void **) &edges))
		return edges;
	CHECK_FOR_INTERRUPTS();
	edges = docsync_derive_inner_edges(ctx, docsync_derive_push(stack, query), (Node *) query->jointree);
	docsync_derive_map_store(&ctx->inner_edges, query, edges);
	return edges;
}

/* What holds for every row a join tree node outputs (the top of stack is its query). */
List *
docsync_derive_inner_edges(DeriveWalk *ctx, DeriveLevel *stack, Node *jtnode)
{
	List	   *edges = NIL;
	Query	   *query = stack->query;

	check_stack_depth();
	if (jtnode == NULL)
		return NIL;
	if (IsA(jtnode, RangeTblRef))
	{
		int			rtindex = ((RangeTblRef *) jtnode)->rtindex;
		RangeTblEntry *rte;

		if (rtindex < 1 || rtindex > list_length(query->rtable))
			return NIL;
		rte = rt_fetch(rtindex, query->rtable);
		if (rte->rtekind == RTE_SUBQUERY)
			return query_inner_edges(ctx, stack, rte->subquery);
		if (rte->rtekind == RTE_CTE)
		{
			DeriveLevel *owner = NULL;
			CommonTableExpr *cte = docsync_derive_find_cte(stack, rte, &owner);

			if (docsync_derive_cte_transparent(cte))
				return query_inner_edges(ctx, owner, (Query *) cte->ctequery);
		}
		return NIL;
	}
	if (IsA(jtnode, FromExpr))
	{
		FromExpr   *from = (FromExpr *) jtnode;
		ListCell   *lc;

		docsync_derive_conjunct_edges(ctx, stack, from->quals, NULL, &edges);
		foreach(lc, from->fromlist)
			edges = list_concat(edges, docsync_derive_inner_edges(ctx, stack, (Node *) lfirst(lc)));
		return edges;
	}
	if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) jtnode;

		switch (join->jointype)
		{
			case JOIN_INNER:
				docsync_derive_conjunct_edges(ctx, stack, join->quals, NULL, &edges);
				edges = list_concat(edges, docsync_derive_inner_edges(ctx, stack, join->larg));
				return list_concat(edges, docsync_derive_inner_edges(ctx, stack, join->rarg));
			case JOIN_LEFT:
				return docsync_derive_inner_edges(ctx, stack, join->larg);
			case JOIN_RIGHT:
				return docsync_derive_inner_edges(ctx, stack, join->rarg);
			default:
				return NIL;
		}
	}
	return NIL;
}

/* Whether a column term comes out of (a table, subquery or CTE in) a block's range table. */
bool
docsync_derive_term_of_block(const DeriveTerm *term, Query *block)
{
	ListCell   *lc;

	if (term->kind != DERIVE_COLUMN)
		return false;
	if (list_member_ptr(block->rtable, term->occ->rte))
		return true;
	foreach(lc, term->via)
		if (list_member_ptr(block->rtable, lfirst(lc)))
		return true;
	return false;
}

/*
 * Whether an edge goes through the output of a block whose LIMIT, DISTINCT ON … picks x's rows:
 * it holds for the picked rows, not for all that decide which are picked.
 */
static bool
through_picker(DeriveEdge *edge, DeriveOcc *x)
{
	ListCell   *lc;

	foreach(lc, x->picked_by)
		if (docsync_derive_term_of_block(&edge->left, (Query *) lfirst(lc)) || docsync_derive_term_of_block(&edge->right, (Query *) lfirst(lc)))
		return true;
	return false;
}

/*
 * A strict equality on a column of another occurrence Y that holds for X's rows means Y's row is
 * there, not null-extended, wherever X's row counts: what holds for Y's rows then holds for X's too.
 * So a WHERE on a column of a LEFT JOIN's nullable side brings that join's ON along for the
 * preserved side, and a sublink correlated with such a side gets its ON as well.
 */
void
docsync_derive_close_over_neighbours(DeriveState *state)
{
	int			n = list_length(state->occs);
	List	  **own = palloc(sizeof(List *) * Max(n, 1));
	ListCell   *lc;

	foreach(lc, state->occs)
		own[foreach_current_index(lc)] = ((DeriveOcc *) lfirst(lc))->edges;
	foreach(lc, state->occs)
	{
		DeriveOcc  *x = (DeriveOcc *) lfirst(lc);
		Bitmapset  *added = NULL;
		Bitmapset  *have = NULL;
		List	   *edges = NIL;
		ListCell   *le;

		if (!x->placed || x->broadcast_why != NULL)
			continue;
		CHECK_FOR_INTERRUPTS();
		/* its own edges, each once */
		foreach(le, own[x->id])
		{
			DeriveEdge *edge = (DeriveEdge *) lfirst(le);

			if (!bms_is_member(edge->id, have))
			{
				have = bms_add_member(have, edge->id);
				edges = lappend(edges, edge);
			}
		}
		foreach(le, own[x->id])
		{
			DeriveEdge *edge = (DeriveEdge *) lfirst(le);
			DeriveTerm *sides[2] = {&edge->left, &edge->right};
			ListCell   *ly;
			int			i;

			if (!op_strict(edge->opno))
				continue;
			for (i = 0; i < 2; i++)
			{
				DeriveOcc  *y = sides[i]->kind == DERIVE_COLUMN ? sides[i]->occ : NULL;

				if (y == NULL || y == x || !y->placed || y->broadcast_why != NULL || y->id >= n ||
					bms_is_member(y->id, added))
					continue;
				added = bms_add_member(added, y->id);
				foreach(ly, own[y->id])
				{
					DeriveEdge *theirs = (DeriveEdge *) lfirst(ly);

					if (through_picker(theirs, x))
						continue;
					if (!bms_is_member(theirs->id, have))
					{
						have = bms_add_member(have, theirs->id);
						edges = lappend(edges, theirs);
					}
				}
			}
		}
		x->edges = edges;
	}
}
