/*-------------------------------------------------------------------------
 *
 * definer.c
 *		The privilege boundary of the docsync SQL API: no text a definer wrote is parsed, analysed,
 *		rewritten or checked with anyone's rights but the definer's.
 *		- docsync_definer_enter/leave: become the definer, under SECURITY_RESTRICTED_OPERATION and
 *		  the definition's search_path, for as long as its text is analysed (parse analysis runs
 *		  type input functions, so a literal of a domain type runs the domain's CHECK expression);
 *		- docsync.pin_search_path(): the search_path a definition is stored with, as the definer
 *		  resolves it ("$user" spelled out, schemas it may not use left out, pg_temp last), so that
 *		  what is checked is what runs;
 *		- docsync.resolve_relation(): a watched table's name, looked up as the caller;
 *		- docsync.check_definer(): whether a role may run a doc or keys query, checked as the
 *		  executor would (table and column privileges, EXECUTE on functions) plus row-level security,
 *		  and no temporary object;
 *		- the API trampoline: docsync.define_query() and the other definition writers run their
 *		  implementation (docsync._define_query(), …) as the extension's owner, which alone may write
 *		  the definition tables, while docsync.api_caller() tells it who called, and analysis inside
 *		  it runs as that caller.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "compat.h"
#include "definer.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rls.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

PG_FUNCTION_INFO_V1(docsync_check_definer);
PG_FUNCTION_INFO_V1(docsync_pin_search_path);
PG_FUNCTION_INFO_V1(docsync_resolve_relation);
PG_FUNCTION_INFO_V1(docsync_api_call);
PG_FUNCTION_INFO_V1(docsync_api_caller);

/* The role that called the innermost docsync API function now running; InvalidOid outside one. */
static Oid	api_caller = InvalidOid;

static bool refuse_unexecutable(Oid funcid, void *context);
static bool definer_check_walker(Node *node, void *context);
static bool refuse_temporary_function(Oid funcid, void *context);
static bool temporary_walker(Node *node, void *context);
static void refuse_temporary_type(Oid type);

Oid
docsync_text_role(FunctionCallInfo fcinfo, int argno)
{
	if (PG_NARGS() > argno && !PG_ARGISNULL(argno))
		return PG_GETARG_OID(argno);
	/* inside an API call the current user is the extension's owner: the text is the caller's */
	if (OidIsValid(api_caller))
		return api_caller;
	/*
	 * Inside a security-definer function (docsync's stored_*, refusal, fingerprint) the current user
	 * is the function's owner, never the text's: stored text must name its definer, and a call that
	 * forgot it fails closed rather than analyse a definer's text with the owner's rights.
	 */
	if (InLocalUserIdChange())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("docsync cannot analyse a query without its definer here"),
				 errdetail("Inside a security-definer function the current user is not the role that wrote the text."),
				 errhint("Pass the definition's definer (docsync.definer_role(defined_by)).")));
	return GetUserId();
}

void
docsync_definer_enter(Oid role, const char *search_path, DocsyncDefinerSave *save)
{
	GetUserIdAndSecContext(&save->userid, &save->sec_context);
	if (!OidIsValid(role) || !SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role with OID %u does not exist", role),
				 errdetail("A docsync definition is analysed as the role that defined it."),
				 errhint("Redefine the definition as an existing role.")));
	if (role != save->userid && !is_member_of_role(save->userid, role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to analyse a query as role %s", GetUserNameFromId(role, false)),
				 errdetail("Only members of a role may run its text with its rights."),
				 errhint("Analyse the query as yourself, or ask a member of that role.")));
	save->guc_level = NewGUCNestLevel();
	SetUserIdAndSecContext(role, save->sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	if (search_path != NULL)
		(void) set_config_option("search_path", search_path,
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

void
docsync_definer_leave(DocsyncDefinerSave *save, bool success)
{
	/* on error the (sub)transaction's abort pops the GUC level */
	if (success)
		AtEOXact_GUC(true, save->guc_level);
	SetUserIdAndSecContext(save->userid, save->sec_context);
}

/* The error for a temporary object in a definition: it resolves in no other session. */
static void
refuse_temporary_object(const char *kind, const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("query uses temporary %s %s", kind, name),
			 errdetail("A docsync definition is run by the worker in its own sessions, where another session's temporary objects do not exist."),
			 errhint("Use a permanent %s, in a schema of the definition's search_path.", kind)));
}

static void
refuse_temporary_type(Oid type)
{
	HeapTuple	tuple;
	Oid			nsp;

	if (!OidIsValid(type))
		return;
	tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(type));
	if (!HeapTupleIsValid(tuple))
		return;
	nsp = ((Form_pg_type) GETSTRUCT(tuple))->typnamespace;
	ReleaseSysCache(tuple);
	if (isAnyTempNamespace(nsp))
		refuse_temporary_object("type", format_type_be_qualified(type));
}

static bool
refuse_temporary_function(Oid funcid, void *context)
{
	if (isAnyTempNamespace(get_func_namespace(funcid)))
		refuse_temporary_object("function", format_procedure_qualified(funcid));
	return false;
}

static bool
temporary_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		Query	   *query = (Query *) node;
		ListCell   *lc;

		foreach(lc, query->rtable)
		{
			RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

			if (rte->rtekind == RTE_RELATION && isAnyTempNamespace(get_rel_namespace(rte->relid)))
				refuse_temporary_object("relation",
										quote_qualified_identifier(get_namespace_name(get_rel_namespace(rte->relid)),
																   get_rel_name(rte->relid)));
		}
		return query_tree_walker(query, temporary_walker, context, 0);
	}
	switch (nodeTag(node))
	{
		case T_Const:
		case T_Var:
		case T_Param:
		case T_FuncExpr:
		case T_RelabelType:
		case T_CoerceViaIO:
		case T_ArrayCoerceExpr:
		case T_CoerceToDomain:
		case T_ArrayExpr:
		case T_RowExpr:
		case T_ConvertRowtypeExpr:
			refuse_temporary_type(exprType(node));
			break;
		default:
			break;
	}
	(void) check_functions_in_node(node, refuse_temporary_function, NULL);
	return expression_tree_walker(node, temporary_walker, context);
}

void
docsync_refuse_temporary(Query *query)
{
	(void) temporary_walker((Node *) query, NULL);
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
 * Whether a table has row-level security enabled. Docs are computed as the definer's reader role
 * (docsync.ensure_reader_role: NOINHERIT, NOBYPASSRLS, member of nothing, owner of nothing), to which
 * the policies of such a table apply whenever it is read as the current user, even where they exempt
 * the definer as the table's owner.
 */
static bool
rel_has_row_security(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	bool		result;

	if (!HeapTupleIsValid(tuple))
		return false;
	result = ((Form_pg_class) GETSTRUCT(tuple))->relrowsecurity;
	ReleaseSysCache(tuple);
	return result;
}

/*
 * Checks every level of a rewritten query as the executor would for the current user: table and
 * column privileges (as the view owner where a view says so) and EXECUTE on each function called.
 * A table whose row-level security applies to the role reading it is refused: a doc is one value
 * shared by every subscriber, so it cannot honour per-row policies. A table read as the current
 * user is read, when the docs are computed, as the definer's reader role: its row-level security is
 * refused even where its policies exempt the definer as its owner.
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
			if (*(bool *) context && !OidIsValid(as_user) && rel_has_row_security(rte->relid))
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("row-level security of table %s applies to the reader role of %s, as which its docs are computed",
								quote_qualified_identifier(get_namespace_name(get_rel_namespace(rte->relid)),
														   get_rel_name(rte->relid)),
								GetUserNameFromId(GetUserId(), false)),
						 errdetail("Its policies exempt its owner, but the docs of %s are computed as its reader role, which owns nothing and bypasses no policy: they would not be what %s reads.",
								   GetUserNameFromId(GetUserId(), false), GetUserNameFromId(GetUserId(), false)),
						 errhint("Read the table through a security_barrier view owned by %s (the view reads it as its owner, whom the policies exempt), or disable row-level security on %s.",
								 GetUserNameFromId(GetUserId(), false),
								 quote_qualified_identifier(get_namespace_name(get_rel_namespace(rte->relid)),
															get_rel_name(rte->relid)))));
		}
		return query_tree_walker(query, definer_check_walker, context, 0);
	}
	(void) check_functions_in_node(node, refuse_unexecutable, NULL);
	return expression_tree_walker(node, definer_check_walker, context);
}

/*
 * docsync.check_definer(sql text, search_path text, definer regrole[, computed boolean]) RETURNS void
 *
 * Raises unless `definer` may run the doc or keys query `sql`: it must be one read-only SELECT whose
 * names resolve for the definer, which holds SELECT on every table and column and EXECUTE on every
 * function it uses; no table it reads may have row-level security that applies to it (or, unless
 * computed is false, to its reader role, as which docs and keys queries run), and it may use
 * no temporary relation, type or function. The query is parsed, analysed and rewritten as the
 * definer under SECURITY_RESTRICTED_OPERATION, never planned or run. Only a member of `definer` may
 * ask (the API functions ask as the extension's owner).
 */
Datum
docsync_check_definer(PG_FUNCTION_ARGS)
{
	Oid			definer;
	DocsyncDefinerSave save;
	Oid		   *param_types = NULL;
	int			nparams = 0;
	Query	   *query;
	int			i;
	bool		computed = PG_NARGS() < 4 || PG_ARGISNULL(3) || PG_GETARG_BOOL(3);

	if (PG_ARGISNULL(0) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("docsync.check_definer needs a query and a definer"),
				 errhint("Pass the query text and the role that defines it.")));
	definer = PG_GETARG_OID(2);
	query = docsync_analyze_select(definer, text_to_cstring(PG_GETARG_TEXT_PP(0)),
								   PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1)),
								   &param_types, &nparams, NULL);
	for (i = 0; i < nparams; i++)
		refuse_temporary_type(param_types[i]);
	docsync_refuse_temporary(query);

	/* the privileges are the definer's; nothing runs, so no restriction is needed for the check */
	docsync_definer_enter(definer, NULL, &save);
	PG_TRY();
	{
		(void) definer_check_walker((Node *) query, &computed);
	}
	PG_CATCH();
	{
		docsync_definer_leave(&save, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	docsync_definer_leave(&save, true);
	PG_RETURN_VOID();
}

/*
 * docsync.pin_search_path(search_path text, definer regrole DEFAULT NULL, usable_only boolean DEFAULT true)
 *   RETURNS text
 *
 * The search_path a definition is stored with: the schemas of search_path that exist and that the
 * role (by default the API caller, or the current user) may use, in order, "$user" spelled as the
 * role's own schema, each quoted, then pg_temp, so that temporary relations come last (functions and
 * operators are never looked up there). Naming pg_temp anywhere but last is refused. The worker
 * computes under the pinned path with a reader role that may use no schema the definer may not, so
 * every name resolves as it did when the definer was checked; a schema of a stored path that the
 * definer may no longer use (usable_only false keeps those) makes the definition refused.
 */
Datum
docsync_pin_search_path(PG_FUNCTION_ARGS)
{
	Oid			role = docsync_text_role(fcinfo, 1);
	bool		usable_only = PG_NARGS() < 3 || PG_ARGISNULL(2) || PG_GETARG_BOOL(2);
	char	   *raw;
	List	   *names;
	List	   *seen = NIL;
	ListCell   *lc;
	StringInfoData buf;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("search_path must not be null"),
				 errhint("Pass the schemas the query's names are looked up in, e.g. search_path => 'app'.")));
	raw = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (!SplitIdentifierString(pstrdup(raw), ',', &names))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid search_path \"%s\"", raw),
				 errdetail("A search_path is a comma-separated list of schema names."),
				 errhint("Double-quote a schema name that holds other characters than letters, digits and _.")));

	initStringInfo(&buf);
	foreach(lc, names)
	{
		char	   *name = (char *) lfirst(lc);
		Oid			nsp;

		if (strcmp(name, "$user") == 0)
			name = GetUserNameFromId(role, false);
		else if (strcmp(name, "pg_temp") == 0 || strncmp(name, "pg_temp_", 8) == 0 ||
				 strncmp(name, "pg_toast_temp_", 14) == 0)
		{
			if (lnext(names, lc) == NULL)
				continue;
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("search_path \"%s\" names the temporary schema %s before others", raw, name),
					 errdetail("The worker runs a definition in its own sessions, where another session's temporary objects do not exist; a temporary object could hide the one the query was checked against."),
					 errhint("Leave pg_temp out of the search_path (docsync puts it last), and use permanent objects.")));
		}
		nsp = get_namespace_oid(name, true);
		if (!OidIsValid(nsp) || isAnyTempNamespace(nsp) || list_member_oid(seen, nsp) ||
			(usable_only && !docsync_may_use_schema(nsp, role)))
			continue;
		seen = lappend_oid(seen, nsp);
		appendStringInfo(&buf, "%s, ", quote_identifier(name));
	}
	appendStringInfoString(&buf, "pg_temp");
	PG_RETURN_TEXT_P(cstring_to_text_with_len(buf.data, buf.len));
}

/*
 * docsync.resolve_relation(name text, search_path text) RETURNS regclass
 *
 * The relation a watch names, looked up as the API caller (or the current user) under search_path,
 * or NULL when there is none. A temporary relation is refused: its changes are never decoded.
 */
Datum
docsync_resolve_relation(PG_FUNCTION_ARGS)
{
	Oid			role = docsync_text_role(fcinfo, 2);
	DocsyncDefinerSave save;
	List	   *names;
	volatile Oid relid = InvalidOid;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	names = stringToQualifiedNameList(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	docsync_definer_enter(role, PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1)), &save);
	PG_TRY();
	{
		relid = RangeVarGetRelid(makeRangeVarFromNameList(names), NoLock, true);
	}
	PG_CATCH();
	{
		docsync_definer_leave(&save, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	docsync_definer_leave(&save, true);
	if (!OidIsValid(relid))
		PG_RETURN_NULL();
	if (isAnyTempNamespace(get_rel_namespace(relid)))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("table \"%s\" is temporary", text_to_cstring(PG_GETARG_TEXT_PP(0))),
				 errdetail("Changes to temporary tables are never decoded, and no other session sees them."),
				 errhint("Watch a permanent table.")));
	PG_RETURN_OID(relid);
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

