/*-------------------------------------------------------------------------
 *
 * closure.c
 *		What a doc query's docs depend on besides its rows, beyond the relations and functions it
 *		names: the types and collations its expressions produce and compare with. An enum label
 *		renamed, a composite type's attribute added or renamed, a domain's constraint changed or a
 *		collation swapped under an ORDER BY all change a doc without changing a row;
 *		docsync.fingerprint() hashes the catalog state of what this collects (with
 *		docsync.closure_state(), which follows types, inheritance trees and function bodies to
 *		their ends), so DDL on any of it recomputes the query's live docs.
 *		Also the nondeterministic collations a query compares each of its params under, which make
 *		the param unfit to name docs (docsync.analyze_query's param_collations).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/primnodes.h"
#include "utils/lsyscache.h"

#include "docsync.h"

/* Whether a node is an expression whose result type exprType() knows. */
bool
docsync_typed_expression(Node *node)
{
	switch (nodeTag(node))
	{
		case T_Var:
		case T_Const:
		case T_Param:
		case T_Aggref:
		case T_GroupingFunc:
		case T_WindowFunc:
		case T_SubscriptingRef:
		case T_FuncExpr:
		case T_NamedArgExpr:
		case T_OpExpr:
		case T_DistinctExpr:
		case T_NullIfExpr:
		case T_ScalarArrayOpExpr:
		case T_BoolExpr:
		case T_SubLink:
		case T_FieldSelect:
		case T_FieldStore:
		case T_RelabelType:
		case T_CoerceViaIO:
		case T_ArrayCoerceExpr:
		case T_ConvertRowtypeExpr:
		case T_CollateExpr:
		case T_CaseExpr:
		case T_CaseTestExpr:
		case T_ArrayExpr:
		case T_RowExpr:
		case T_RowCompareExpr:
		case T_CoalesceExpr:
		case T_MinMaxExpr:
		case T_SQLValueFunction:
		case T_XmlExpr:
		case T_NullTest:
		case T_BooleanTest:
		case T_CoerceToDomain:
		case T_CoerceToDomainValue:
		case T_SetToDefault:
			return true;
		default:
			return false;
	}
}

/*
 * Adds the result type of an expression node, the collation it yields and the collation it compares
 * or sorts its inputs with (an ORDER BY inside an aggregate sorts by its argument's collation, which
 * the argument node yields). Nodes that are no expression (target entries, join trees, range table
 * entries) add nothing; the caller walks into them.
 */
void
docsync_collect_expression_types(Node *node, List **types, List **collations)
{
	Oid			collation;

	if (node == NULL || !docsync_typed_expression(node))
		return;
	*types = list_append_unique_oid(*types, exprType(node));
	if (IsA(node, RowCompareExpr))
	{
		ListCell   *lc;

		foreach(lc, ((RowCompareExpr *) node)->inputcollids)
			if (OidIsValid(lfirst_oid(lc)))
				*collations = list_append_unique_oid(*collations, lfirst_oid(lc));
		return;
	}
	if (IsA(node, CollateExpr))
	{
		*collations = list_append_unique_oid(*collations, ((CollateExpr *) node)->collOid);
		return;
	}
	collation = exprCollation(node);
	if (OidIsValid(collation))
		*collations = list_append_unique_oid(*collations, collation);
	collation = exprInputCollation(node);
	if (OidIsValid(collation))
		*collations = list_append_unique_oid(*collations, collation);
}

/* The collations the params of one query are compared under (docsync_param_collations). */
typedef struct ParamCollations
{
	int			nparams;
	Oid		   *collations;		/* per param: a nondeterministic collation, or InvalidOid */
	Oid			marking;		/* while marking: the collation to record */
} ParamCollations;

static bool
nondeterministic_collation(Oid collation)
{
	return OidIsValid(collation) && !get_collation_isdeterministic(collation);
}

/* Records pc->marking for every $n anywhere under node, subqueries included. */
static bool
mark_params_walker(Node *node, void *context)
{
	ParamCollations *pc = (ParamCollations *) context;

	if (node == NULL)
		return false;
	check_stack_depth();
	if (IsA(node, Param))
	{
		Param	   *param = (Param *) node;

		if (param->paramkind == PARAM_EXTERN && param->paramid >= 1 && param->paramid <= pc->nparams &&
			!OidIsValid(pc->collations[param->paramid - 1]))
			pc->collations[param->paramid - 1] = pc->marking;
		return false;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, mark_params_walker, context, 0);
	return expression_tree_walker(node, mark_params_walker, context);
}

static void
mark_params(Node *node, Oid collation, ParamCollations *pc)
{
	pc->marking = collation;
	(void) mark_params_walker(node, pc);
}

/* The first nondeterministic collation an expression compares its inputs under, or InvalidOid. */
static bool
first_nondeterministic_walker(Node *node, void *context)
{
	Oid		   *found = (Oid *) context;

	if (node == NULL || IsA(node, Query))
		return false;
	if (nondeterministic_collation(exprInputCollation(node)))
	{
		*found = exprInputCollation(node);
		return true;
	}
	return expression_tree_walker(node, first_nondeterministic_walker, context);
}

/*
 * Finds each expression that compares (or otherwise applies a collation to) its inputs under a
 * nondeterministic collation and marks every param among those inputs with it: name = $1 on a
 * column declared COLLATE ci, $1 COLLATE ci = name, $1 IN (…), a row comparison, a sublink's test
 * (name IN (SELECT $1)), in subqueries, sublinks and CTEs alike.
 */
static bool
param_collations_walker(Node *node, void *context)
{
	ParamCollations *pc = (ParamCollations *) context;

	if (node == NULL)
		return false;
	check_stack_depth();
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, param_collations_walker, context, 0);
	if (IsA(node, RowCompareExpr))
	{
		RowCompareExpr *rc = (RowCompareExpr *) node;
		ListCell   *l,
				   *r,
				   *c;

		forthree(l, rc->largs, r, rc->rargs, c, rc->inputcollids)
		{
			if (nondeterministic_collation(lfirst_oid(c)))
			{
				mark_params((Node *) lfirst(l), lfirst_oid(c), pc);
				mark_params((Node *) lfirst(r), lfirst_oid(c), pc);
			}
		}
	}
	else if (IsA(node, SubLink))
	{
		SubLink    *sublink = (SubLink *) node;
		Oid			collation = InvalidOid;

		/* the test compares the outer side with the subquery's columns, seen as PARAM_SUBLINK */
		if (sublink->testexpr != NULL &&
			first_nondeterministic_walker(sublink->testexpr, &collation) &&
			sublink->subselect != NULL && IsA(sublink->subselect, Query))
			mark_params((Node *) ((Query *) sublink->subselect)->targetList, collation, pc);
	}
	if (nondeterministic_collation(exprInputCollation(node)))
		mark_params(node, exprInputCollation(node), pc);
	return expression_tree_walker(node, param_collations_walker, context);
}

/*
 * For each of a query's nparams params, a nondeterministic collation it is compared under, or
 * InvalidOid: equal values of such a param may print differently ('abc' and 'ABC' under a
 * case-insensitive collation), so it cannot name docs (docsync.key_part_problem).
 */
void
docsync_param_collations(Query *query, int nparams, Oid *collations)
{
	ParamCollations pc;
	int			i;

	for (i = 0; i < nparams; i++)
		collations[i] = InvalidOid;
	pc.nparams = nparams;
	pc.collations = collations;
	pc.marking = InvalidOid;
	(void) param_collations_walker((Node *) query, &pc);
}
