/*-------------------------------------------------------------------------
 *
 * sqlapi.c
 *		C helpers of the docsync SQL API, for what SQL cannot do on its own:
 *		- docsync.channel(): channel names, with the escaping the worker uses
 *		  (specified in worker/engine/channel.hpp, vectors in tests/channel_vectors.tsv);
 *		- docsync.analyze_query(): parse analysis of a doc or keys query with parameter types
 *		  inferred from use, reporting its parameter types, result column types and the tables it
 *		  reads (walking the rewritten query tree, so views and sublinks are seen through);
 *		- docsync.query_depends(): what a query uses besides its rows, for its fingerprint.
 *		The batched form of a query is batch.c's. Every analysis runs as the role whose text it is (definer.c holds that boundary, the definer
 *		check and the API trampoline).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "compat.h"
#include "docsync.h"
#include "definer.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "parser/parser.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(docsync_channel);
PG_FUNCTION_INFO_V1(docsync_analyze_query);
PG_FUNCTION_INFO_V1(docsync_query_depends);

/* helpers */
static bool valid_segment_name(const char *name);
static void append_escaped_value(StringInfo buf, const char *value);
static bool collect_relations_walker(Node *node, List **relids);
static bool collect_checked_walker(Node *node, List **relids);
static ArrayType *oid_list_to_array(List *oids, Oid elemtype);
static Query *analyze_select_as_current(const char *sql, Oid **param_types, int *nparams,
										RawStmt **parsed);
static bool collect_function(Oid funcid, void *context);
static bool collect_depends_walker(Node *node, void *context);

/*
 * A query name is a channel segment as it is: [A-Za-z0-9_] first, then also '.' and '-', at most 63
 * bytes. The same rule is the CHECK constraint on docsync.query_defs.name.
 */
static bool
valid_segment_name(const char *name)
{
	const char *p;

	if (name[0] == '\0' || strlen(name) > 63)
		return false;
	for (p = name; *p; p++)
	{
		unsigned char c = (unsigned char) *p;
		bool		ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(c >= '0' && c <= '9') || c == '_' || (p != name && (c == '.' || c == '-'));

		if (!ok)
			return false;
	}
	return true;
}

/* Appends one value: '%' -> %25, ':' -> %3A, control bytes 0x00-0x1F and 0x7F -> %XX. */
static void
append_escaped_value(StringInfo buf, const char *value)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p;

	for (p = (const unsigned char *) value; *p; p++)
	{
		if (*p == '%' || *p == ':' || *p < 0x20 || *p == 0x7F)
		{
			appendStringInfoChar(buf, '%');
			appendStringInfoChar(buf, hex[*p >> 4]);
			appendStringInfoChar(buf, hex[*p & 0x0F]);
		}
		else
			appendStringInfoChar(buf, (char) *p);
	}
}

/*
 * docsync.channel(query text, VARIADIC values text[]) and docsync.channel(query text):
 * "db:<query>:<v1>:…", NULL values spelled %00.
 */
Datum
docsync_channel(PG_FUNCTION_ARGS)
{
	char	   *query;
	StringInfoData buf;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("docsync channel query name must not be null"),
				 errdetail("Every channel starts with the name of a doc query."),
				 errhint("Pass the name given to docsync.define_query().")));
	query = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (!valid_segment_name(query))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid docsync query name \"%s\"", query),
				 errdetail("Query names are 1 to 63 ASCII letters, digits and '_', and also '.' and '-' after the first character."),
				 errhint("Pass the name given to docsync.define_query().")));

	initStringInfo(&buf);
	appendStringInfoString(&buf, "db:");
	appendStringInfoString(&buf, query);

	if (PG_NARGS() > 1)
	{
		ArrayType  *values;
		Datum	   *elems;
		bool	   *nulls;
		int			n;
		int			i;

		if (PG_ARGISNULL(1))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("docsync channel values must not be a null array"),
					 errdetail("A NULL array names no doc; a NULL value inside the array is spelled %%00."),
					 errhint("Pass the values one by one, or VARIADIC ARRAY[...]::text[].")));
		values = PG_GETARG_ARRAYTYPE_P(1);
		if (ARR_NDIM(values) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("docsync channel values must be a one-dimensional array"),
					 errdetail("The array has %d dimensions.", ARR_NDIM(values)),
					 errhint("Pass the values one by one, or VARIADIC ARRAY[...]::text[].")));
		deconstruct_array(values, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
		for (i = 0; i < n; i++)
		{
			appendStringInfoChar(&buf, ':');
			if (nulls[i])
				appendStringInfoString(&buf, "%00");
			else
				append_escaped_value(&buf, TextDatumGetCString(elems[i]));
		}
	}

	PG_RETURN_TEXT_P(cstring_to_text_with_len(buf.data, buf.len));
}

/* Adds the OID of every table-like relation a query tree reads, views seen through. */
static bool
collect_relations_walker(Node *node, List **relids)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind == RTE_RELATION)
			*relids = list_append_unique_oid(*relids, rte->relid);
		return false;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, collect_relations_walker, (void *) relids,
								 QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, collect_relations_walker, (void *) relids);
}

/* Adds the OID of every relation a query tree checks SELECT on as the user running it. */
static bool
collect_checked_walker(Node *node, List **relids)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		*relids = docsync_query_checked_relations((Query *) node, *relids);
		return query_tree_walker((Query *) node, collect_checked_walker, (void *) relids, 0);
	}
	return expression_tree_walker(node, collect_checked_walker, (void *) relids);
}

static ArrayType *
oid_list_to_array(List *oids, Oid elemtype)
{
	Datum	   *datums = palloc(sizeof(Datum) * Max(list_length(oids), 1));
	ListCell   *lc;
	int			n = 0;

	foreach(lc, oids)
		datums[n++] = ObjectIdGetDatum(lfirst_oid(lc));
	return construct_array(datums, n, elemtype, sizeof(Oid), true, TYPALIGN_INT);
}

/*
 * Parse-analyses and rewrites one SELECT with parameter types inferred from their use, under
 * search_path (NULL: the current one), as `role` under SECURITY_RESTRICTED_OPERATION (definer.c):
 * names resolve as that role sees them, and whatever analysis runs (a domain's CHECK expression,
 * say) runs with its rights only. Raises, naming the problem and the fix, for anything but one
 * read-only SELECT. `parsed` (when not NULL) receives the statement as parsed, with where it lies in
 * `sql`.
 */
Query *
docsync_analyze_select(Oid role, const char *sql, const char *search_path, Oid **param_types,
					   int *nparams, RawStmt **parsed)
{
	DocsyncDefinerSave save;
	Query	   *volatile query = NULL;
	RawStmt    *volatile rawstmt = NULL;

	docsync_definer_enter(role, search_path, &save);
	PG_TRY();
	{
		query = analyze_select_as_current(sql, param_types, nparams, (RawStmt **) &rawstmt);
	}
	PG_CATCH();
	{
		docsync_definer_leave(&save, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	docsync_definer_leave(&save, true);
	if (parsed != NULL)
		*parsed = rawstmt;
	return query;
}

/* docsync_analyze_select's work, as the current user under the current search_path. */
static Query *
analyze_select_as_current(const char *sql, Oid **param_types, int *nparams, RawStmt **parsed)
{
	List	   *raw;
	RawStmt    *rawstmt;
	SelectStmt *select;
	List	   *queries;
	Query	   *query;

	raw = pg_parse_query(sql);
	if (list_length(raw) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("query must be exactly one statement, not %d", list_length(raw)),
				 errdetail("A docsync doc or keys query is one SELECT statement."),
				 errhint("Remove the other statements (and any stray semicolon between them).")));
	rawstmt = linitial_node(RawStmt, raw);
	if (!IsA(rawstmt->stmt, SelectStmt))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("query must be a SELECT"),
				 errdetail("docsync runs doc and keys queries in read-only transactions."),
				 errhint("Write the query as a SELECT (VALUES and WITH … SELECT are fine too).")));
	select = (SelectStmt *) rawstmt->stmt;
	if (select->intoClause != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("query must not be SELECT INTO"),
				 errdetail("docsync runs doc and keys queries in read-only transactions."),
				 errhint("Remove the INTO clause.")));
	if (select->lockingClause != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("query must not lock rows (FOR UPDATE/SHARE)"),
				 errdetail("docsync runs doc and keys queries in read-only transactions, possibly on a standby."),
				 errhint("Remove the locking clause.")));

	queries = pg_analyze_and_rewrite_varparams(rawstmt, sql, param_types, nparams, NULL);

	if (list_length(queries) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("query rewrites into %d statements", list_length(queries)),
				 errdetail("A rule turned the SELECT into several statements."),
				 errhint("Query the underlying tables directly.")));
	query = linitial_node(Query, queries);
	if (query->commandType != CMD_SELECT || query->hasModifyingCTE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("query must only read: it contains a data-modifying statement"),
				 errdetail("docsync runs doc and keys queries in read-only transactions."),
				 errhint("Remove the INSERT, UPDATE or DELETE from the WITH clause.")));
	if (parsed != NULL)
		*parsed = rawstmt;
	return query;
}

/*
 * docsync.analyze_query(sql text, search_path text,
 *                       OUT param_types regtype[], OUT result_types regtype[], OUT relations regclass[],
 *                       OUT checked regclass[], OUT param_collations regcollation[],
 *                       OUT result_collations regcollation[])
 *
 * Parse-analyses and rewrites one SELECT with parameter types inferred from their use, under the
 * given search_path (NULL: the current one). relations lists the tables, partitioned tables,
 * partitions, materialized views and foreign tables read, views expanded; checked lists the relations
 * the role running the query needs SELECT on (views rather than the tables they read, which are
 * checked as the view's owner). param_collations gives, per param, a nondeterministic collation it
 * is compared under (closure.c), or 0 ('-'); result_collations the collation of each result column,
 * or 0 for a type without one. Nothing is executed.
 */
Datum
docsync_analyze_query(PG_FUNCTION_ARGS)
{
	Oid		   *param_types = NULL;
	int			nparams = 0;
	List	   *result_types = NIL;
	List	   *relids = NIL;
	List	   *tables = NIL;
	List	   *checked = NIL;
	List	   *result_collations = NIL;
	List	   *param_collations = NIL;
	ListCell   *lc;
	TupleDesc	tupdesc;
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, false, false};
	int			i;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("query text must not be null"),
				 errdetail("A docsync doc or keys query is one SELECT statement."),
				 errhint("Pass the query text.")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "docsync.analyze_query must be declared with OUT parameters");

	{
		Query	   *query = docsync_analyze_select(docsync_text_role(fcinfo, 2),
												   text_to_cstring(PG_GETARG_TEXT_PP(0)),
												   PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1)),
												   &param_types, &nparams, NULL);

		foreach(lc, query->targetList)
		{
			TargetEntry *tle = lfirst_node(TargetEntry, lc);

			if (!tle->resjunk)
			{
				result_types = lappend_oid(result_types, exprType((Node *) tle->expr));
				result_collations = lappend_oid(result_collations, exprCollation((Node *) tle->expr));
			}
		}
		if (nparams > 0)
		{
			Oid		   *collations = palloc(sizeof(Oid) * nparams);

			docsync_param_collations(query, nparams, collations);
			for (i = 0; i < nparams; i++)
				param_collations = lappend_oid(param_collations, collations[i]);
		}
		(void) collect_relations_walker((Node *) query, &relids);
		(void) collect_checked_walker((Node *) query, &checked);
	}

	foreach(lc, relids)
	{
		char		relkind = get_rel_relkind(lfirst_oid(lc));

		if (relkind == RELKIND_RELATION || relkind == RELKIND_PARTITIONED_TABLE ||
			relkind == RELKIND_MATVIEW || relkind == RELKIND_FOREIGN_TABLE)
			tables = lappend_oid(tables, lfirst_oid(lc));
	}

	{
		List	   *params = NIL;

		for (i = 0; i < nparams; i++)
			params = lappend_oid(params, param_types[i]);
		values[0] = PointerGetDatum(oid_list_to_array(params, REGTYPEOID));
	}
	values[1] = PointerGetDatum(oid_list_to_array(result_types, REGTYPEOID));
	values[2] = PointerGetDatum(oid_list_to_array(tables, REGCLASSOID));
	values[3] = PointerGetDatum(oid_list_to_array(checked, REGCLASSOID));
	values[4] = PointerGetDatum(oid_list_to_array(param_collations, REGCOLLATIONOID));
	values[5] = PointerGetDatum(oid_list_to_array(result_collations, REGCOLLATIONOID));

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}

/* What a query uses besides its rows: relations (views included), functions, types, collations. */
typedef struct Depends
{
	List	   *relations;
	List	   *functions;
	List	   *types;			/* result types of its expressions (closure.c) */
	List	   *collations;		/* collations they yield or compare with (closure.c) */
	List	   *operators;		/* operators it applies, compares, sorts or groups with */
} Depends;

/* The operators of the sort, group and distinct clauses of a query (ORDER BY … USING ops.<). */
static void
collect_clause_operators(List *clauses, Depends *deps)
{
	ListCell   *lc;

	foreach(lc, clauses)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);

		if (OidIsValid(sgc->sortop))
			deps->operators = list_append_unique_oid(deps->operators, sgc->sortop);
		if (OidIsValid(sgc->eqop))
			deps->operators = list_append_unique_oid(deps->operators, sgc->eqop);
	}
}

static bool
collect_function(Oid funcid, void *context)
{
	Depends    *deps = (Depends *) context;

	deps->functions = list_append_unique_oid(deps->functions, funcid);
	return false;
}

static bool
collect_depends_walker(Node *node, void *context)
{
	Depends    *deps = (Depends *) context;

	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		/* a view expanded by the rewriter keeps its OID on its subquery's entry from PostgreSQL 16 */
		if (OidIsValid(rte->relid) && (rte->rtekind == RTE_RELATION || rte->rtekind == RTE_SUBQUERY))
			deps->relations = list_append_unique_oid(deps->relations, rte->relid);
		return false;
	}
	if (IsA(node, Query))
	{
		Query	   *q = (Query *) node;

		collect_clause_operators(q->sortClause, deps);
		collect_clause_operators(q->groupClause, deps);
		collect_clause_operators(q->distinctClause, deps);
		return query_tree_walker(q, collect_depends_walker, context, QTW_EXAMINE_RTES_BEFORE);
	}
	if (IsA(node, OpExpr) || IsA(node, DistinctExpr) || IsA(node, NullIfExpr))
		deps->operators = list_append_unique_oid(deps->operators, ((OpExpr *) node)->opno);
	else if (IsA(node, ScalarArrayOpExpr))
		deps->operators = list_append_unique_oid(deps->operators, ((ScalarArrayOpExpr *) node)->opno);
	else if (IsA(node, RowCompareExpr))
		deps->operators = list_concat_unique_oid(deps->operators, ((RowCompareExpr *) node)->opnos);
	(void) check_functions_in_node(node, collect_function, context);
	docsync_collect_expression_types(node, &deps->types, &deps->collations);
	return expression_tree_walker(node, collect_depends_walker, context);
}

/*
 * docsync.query_depends(sql text, search_path text, OUT relations oid[], OUT functions oid[],
 *						 OUT types oid[], OUT collations oid[], OUT operators oid[])
 *
 * Every relation (tables, partitioned tables, views seen through, materialized views, foreign
 * tables), every function, operator, and every type and collation of an expression one SELECT uses, after
 * rewriting, as the current user sees them. Nothing is planned or run. docsync.fingerprint() hashes
 * their catalog state.
 */
Datum
docsync_query_depends(PG_FUNCTION_ARGS)
{
	Depends		deps = {NIL, NIL, NIL, NIL, NIL};
	Oid		   *param_types = NULL;
	int			nparams = 0;
	TupleDesc	tupdesc;
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};
	Query	   *query;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("query text must not be null"),
				 errhint("Pass the query text.")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "docsync.query_depends must be declared with OUT parameters");
	query = docsync_analyze_select(docsync_text_role(fcinfo, 2), text_to_cstring(PG_GETARG_TEXT_PP(0)),
								   PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1)),
								   &param_types, &nparams, NULL);
	(void) collect_depends_walker((Node *) query, &deps);
	values[0] = PointerGetDatum(oid_list_to_array(deps.relations, OIDOID));
	values[1] = PointerGetDatum(oid_list_to_array(deps.functions, OIDOID));
	values[2] = PointerGetDatum(oid_list_to_array(deps.types, OIDOID));
	values[3] = PointerGetDatum(oid_list_to_array(deps.collations, OIDOID));
	values[4] = PointerGetDatum(oid_list_to_array(deps.operators, OIDOID));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}
