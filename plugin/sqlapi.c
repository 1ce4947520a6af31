/*-------------------------------------------------------------------------
 *
 * sqlapi.c
 *		C helpers of the docsync SQL API, for what SQL cannot do on its own:
 *		- docsync.channel(): channel names, with the escaping the worker uses
 *		  (specified in worker/engine/channel.hpp, vectors in tests/channel_vectors.tsv);
 *		- docsync.analyze_query(): parse analysis of a doc or keys query with parameter types
 *		  inferred from use, reporting its parameter types, result column types and the tables it
 *		  reads (walking the rewritten query tree, so views and sublinks are seen through);
 *		- docsync.check_definer(): whether a role may run a doc or keys query, checked as the
 *		  executor would (table and column privileges, EXECUTE on functions) plus row-level security;
 *		- the API trampoline: docsync.define_query() and the other definition writers run their
 *		  implementation (docsync._define_query(), …) as the extension's owner, which alone may write
 *		  the definition tables, while docsync.api_caller() tells it who called.
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
#include "sqlapi.h"
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
PG_FUNCTION_INFO_V1(docsync_check_definer);
PG_FUNCTION_INFO_V1(docsync_query_depends);
PG_FUNCTION_INFO_V1(docsync_api_call);
PG_FUNCTION_INFO_V1(docsync_api_caller);

/* The role that called the innermost docsync API function now running; InvalidOid outside one. */
static Oid	api_caller = InvalidOid;

/* helpers */
static bool valid_segment_name(const char *name);
static void append_escaped_value(StringInfo buf, const char *value);
static bool collect_relations_walker(Node *node, List **relids);
static bool collect_checked_walker(Node *node, List **relids);
static ArrayType *oid_list_to_array(List *oids, Oid elemtype);
static bool definer_check_walker(Node *node, void *context);
static bool refuse_unexecutable(Oid funcid, void *context);
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
 * search_path (NULL: the current one), as the current user: names resolve as that user sees them.
 * Raises, naming the problem and the fix, for anything but one read-only SELECT. `parsed` (when not
 * NULL) receives the statement as parsed, with where it lies in `sql`.
 */
Query *
docsync_analyze_select(const char *sql, const char *search_path, Oid **param_types, int *nparams,
			   RawStmt **parsed)
{
	List	   *raw;
	RawStmt    *rawstmt;
	SelectStmt *select;
	List	   *queries;
	Query	   *query;
	int			save_nestlevel;

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

	save_nestlevel = NewGUCNestLevel();
	if (search_path != NULL)
		(void) set_config_option("search_path", search_path,
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	queries = pg_analyze_and_rewrite_varparams(rawstmt, sql, param_types, nparams, NULL);
	AtEOXact_GUC(true, save_nestlevel);

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
 *                       OUT checked regclass[])
 *
 * Parse-analyses and rewrites one SELECT with parameter types inferred from their use, under the
 * given search_path (NULL: the current one). relations lists the tables, partitioned tables,
 * partitions, materialized views and foreign tables read, views expanded; checked lists the relations
 * the role running the query needs SELECT on (views rather than the tables they read, which are
 * checked as the view's owner). Nothing is executed.
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
	ListCell   *lc;
	TupleDesc	tupdesc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
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
		Query	   *query = docsync_analyze_select(text_to_cstring(PG_GETARG_TEXT_PP(0)),
										   PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1)),
										   &param_types, &nparams, NULL);

		foreach(lc, query->targetList)
		{
			TargetEntry *tle = lfirst_node(TargetEntry, lc);

			if (!tle->resjunk)
				result_types = lappend_oid(result_types, exprType((Node *) tle->expr));
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

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}

/* check_functions_in_node callback: raises the server's own error unless the user may EXECUTE. */
static bool
refuse_unexecutable(Oid funcid, void *context)
{
	if (!docsync_may_execute(funcid, GetUserId()))
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_FUNCTION, get_func_name(funcid));
	return false;
}

/*
 * Checks every level of a rewritten query as the executor would for the current user: table and
 * column privileges (as the view owner where a view says so) and EXECUTE on each function called.
 * A table whose row-level security applies to the role reading it is refused: a doc is one value
 * shared by every subscriber, so it cannot honour per-row policies.
 */
static bool
definer_check_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		Query	   *query = (Query *) node;
		ListCell   *lc;

		docsync_check_query_permissions(query);
		foreach(lc, query->rtable)
		{
			RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);
			Oid			as_user = docsync_rte_check_as_user(query, rte);

			if (rte->rtekind != RTE_RELATION)
				continue;
			if (check_enable_rls(rte->relid, as_user, true) == RLS_ENABLED)
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("row-level security of table %s applies to role %s",
								quote_qualified_identifier(get_namespace_name(get_rel_namespace(rte->relid)),
														   get_rel_name(rte->relid)),
								GetUserNameFromId(OidIsValid(as_user) ? as_user : GetUserId(), false)),
						 errdetail("A doc is one value shared by every subscriber of its channel, so it cannot honour per-row policies."),
						 errhint("Read the rows every subscriber may see through a security_barrier view owned by a role the policies do not apply to, and grant SELECT on the view.")));
		}
		return query_tree_walker(query, definer_check_walker, context, 0);
	}
	(void) check_functions_in_node(node, refuse_unexecutable, NULL);
	return expression_tree_walker(node, definer_check_walker, context);
}

/*
 * docsync.check_definer(sql text, search_path text, definer regrole) RETURNS void
 *
 * Raises unless `definer` may run the doc or keys query `sql`: it must be one read-only SELECT whose
 * names resolve for the definer, which holds SELECT on every table and column and EXECUTE on every
 * function it uses, and no table it reads may have row-level security that applies to it. The query
 * is analysed and rewritten as the definer, never planned or run, so no user code executes. Only a
 * member of `definer` may ask (the API functions ask as the extension's owner).
 */
Datum
docsync_check_definer(PG_FUNCTION_ARGS)
{
	Oid			definer;
	Oid			save_userid;
	int			save_sec_context;
	Oid		   *param_types = NULL;
	int			nparams = 0;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("docsync.check_definer needs a query and a definer"),
				 errhint("Pass the query text and the role that defines it.")));
	definer = PG_GETARG_OID(2);
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	if (!is_member_of_role(save_userid, definer))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to check a query as role %s", GetUserNameFromId(definer, false)),
				 errdetail("Only members of a role may check what it can read."),
				 errhint("Check as yourself, or ask a member of that role.")));

	SetUserIdAndSecContext(definer, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		Query	   *query = docsync_analyze_select(text_to_cstring(PG_GETARG_TEXT_PP(0)),
										   PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1)),
										   &param_types, &nparams, NULL);

		(void) definer_check_walker((Node *) query, NULL);
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec_context);
	}
	PG_END_TRY();
	PG_RETURN_VOID();
}

/* The implementation an API function runs: docsync._<name>(same argument types), and its owner. */
typedef struct ApiTarget
{
	FmgrInfo	flinfo;
	Oid			owner;
} ApiTarget;

static ApiTarget *
api_target(FunctionCallInfo fcinfo)
{
	ApiTarget  *target = (ApiTarget *) fcinfo->flinfo->fn_extra;
	HeapTuple	tuple;
	Form_pg_proc proc;
	List	   *name;
	Oid			impl;

	if (target != NULL)
		return target;
	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for function %u", fcinfo->flinfo->fn_oid);
	proc = (Form_pg_proc) GETSTRUCT(tuple);
	name = list_make2(makeString(get_namespace_name(proc->pronamespace)),
					  makeString(psprintf("_%s", NameStr(proc->proname))));
	impl = LookupFuncName(name, proc->pronargs, proc->proargtypes.values, false);
	ReleaseSysCache(tuple);

	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(impl));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for function %u", impl);
	target = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(ApiTarget));
	target->owner = ((Form_pg_proc) GETSTRUCT(tuple))->proowner;
	ReleaseSysCache(tuple);
	fmgr_info_cxt(impl, &target->flinfo, fcinfo->flinfo->fn_mcxt);
	fcinfo->flinfo->fn_extra = target;
	return target;
}

/*
 * The body of every API function that writes definitions (docsync.define_query, watch, unwatch,
 * drop_query): calls docsync._<name> with the same arguments as that function's owner (the
 * extension's), like SECURITY DEFINER, but remembering the caller for docsync.api_caller(). The
 * implementation checks the caller's rights and records it as the definer; the caller itself needs
 * no privilege on the definition tables, so nothing else writes them.
 */
Datum
docsync_api_call(PG_FUNCTION_ARGS)
{
	ApiTarget  *target = api_target(fcinfo);
	Oid			save_userid;
	int			save_sec_context;
	Oid			outer_caller = api_caller;
	volatile Datum result = (Datum) 0;
	int			i;

	LOCAL_FCINFO(inner, FUNC_MAX_ARGS);

	InitFunctionCallInfoData(*inner, &target->flinfo, PG_NARGS(), fcinfo->fncollation, NULL, NULL);
	for (i = 0; i < PG_NARGS(); i++)
		inner->args[i] = fcinfo->args[i];

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	api_caller = save_userid;
	SetUserIdAndSecContext(target->owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		result = FunctionCallInvoke(inner);
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec_context);
		api_caller = outer_caller;
	}
	PG_END_TRY();
	fcinfo->isnull = inner->isnull;
	return result;
}

/* docsync.api_caller() RETURNS regrole: who called the docsync API function now running. */
Datum
docsync_api_caller(PG_FUNCTION_ARGS)
{
	if (!OidIsValid(api_caller))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("docsync.api_caller() is only defined inside a docsync API call"),
				 errhint("Call docsync.define_query(), docsync.watch(), docsync.unwatch() or docsync.drop_query().")));
	PG_RETURN_OID(api_caller);
}

/* What a query uses besides its rows: relations (views included) and functions. */
typedef struct Depends
{
	List	   *relations;
	List	   *functions;
} Depends;

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
		return query_tree_walker((Query *) node, collect_depends_walker, context, QTW_EXAMINE_RTES_BEFORE);
	(void) check_functions_in_node(node, collect_function, context);
	return expression_tree_walker(node, collect_depends_walker, context);
}

/*
 * docsync.query_depends(sql text, search_path text, OUT relations oid[], OUT functions oid[])
 *
 * Every relation (tables, partitioned tables, views seen through, materialized views, foreign
 * tables) and every function one SELECT uses, after rewriting, as the current user sees them. Nothing
 * is planned or run. docsync.fingerprint() hashes their catalog state.
 */
Datum
docsync_query_depends(PG_FUNCTION_ARGS)
{
	Depends		deps = {NIL, NIL};
	Oid		   *param_types = NULL;
	int			nparams = 0;
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	Query	   *query;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("query text must not be null"),
				 errhint("Pass the query text.")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "docsync.query_depends must be declared with OUT parameters");
	query = docsync_analyze_select(text_to_cstring(PG_GETARG_TEXT_PP(0)),
						   PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1)),
						   &param_types, &nparams, NULL);
	(void) collect_depends_walker((Node *) query, &deps);
	values[0] = PointerGetDatum(oid_list_to_array(deps.relations, OIDOID));
	values[1] = PointerGetDatum(oid_list_to_array(deps.functions, OIDOID));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}
