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
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/nodeFuncs.h"
#include "nodes/primnodes.h"

#include "docsync.h"

/* Whether a node is an expression whose result type exprType() knows. */
static bool
typed_expression(Node *node)
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

	if (node == NULL || !typed_expression(node))
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
