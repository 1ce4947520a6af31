/*-------------------------------------------------------------------------
 *
 * derive.c
 *		docsync.derive_watches(): the watches docsync derives for a doc query, one row per table
 *		occurrence (deduplicated) with its cheapest sound kind (direct, keys or broadcast), the
 *		columns the query reads of the table, and one row per function the analysis cannot see
 *		into (uncovered). The query is parsed, analysed and rewritten as its definer under its
 *		search_path (definer.c, sqlapi.c's docsync_analyze_select), never planned or run; the walk is
 *		derive_walk.c's, the choice of kind derive_path.c's. Here: the entry point, the functions a
 *		query calls (a SQL function's body of SELECTs is analysed for the tables it reads; any other
 *		language outside pg_catalog, a SQL body running anything else, and the pg_catalog functions
 *		derive_cover.c lists are uncovered), the rows (an inheritance child gets its parent's watch;
 *		a relation whose changes are never decoded is uncovered; with anything uncovered every
 *		table's read columns are all), and the subtransactions that let an analysis fail without
 *		failing the derivation.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_language.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "definer.h"
#include "executor/functions.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "rewrite/rewriteHandler.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/resowner.h"
#include "utils/syscache.h"

#include "derive.h"

PG_FUNCTION_INFO_V1(docsync_derive_watches);

/* How deep SQL functions' bodies are followed into the functions they call. */
#define DERIVE_MAX_BODY_DEPTH 8

void
docsync_derive_add_uncovered(DeriveState *state, Oid funcid, const char *why)
{
	DeriveUncovered *u = palloc0(sizeof(DeriveUncovered));

	u->funcid = funcid;
	u->why = why;
	state->uncovered = lappend(state->uncovered, u);
}

/*
 * Whether an error raised while analysing a text says the text cannot be analysed (a name that
 * does not resolve, a construct the parser refuses, a malformed literal). Anything else — a cancel,
 * a statement or lock timeout, a deadlock, running out of memory, a shutdown, an internal error —
 * says nothing about the text and must reach the caller, whose own fallback then applies.
 */
static bool
error_is_about_text(int sqlerrcode)
{
	switch (ERRCODE_TO_CATEGORY(sqlerrcode))
	{
		case ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION:
		case ERRCODE_FEATURE_NOT_SUPPORTED:
		case ERRCODE_DATA_EXCEPTION:
			return true;
		default:
			return false;
	}
}

/*
 * Runs fn(arg) in a subtransaction: returns NULL, or the message of the error it raised (rolled
 * back, so the derivation goes on) when that error says the text cannot be analysed; any other
 * error is raised again.
 */
static char *
try_in_subtransaction(void (*fn) (void *), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	char	   *volatile message = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		if (!error_is_about_text(edata->sqlerrcode))
			ReThrowError(edata);
		message = edata->message;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return message;
}

typedef struct BodyWork
{
	DeriveState *state;
	Oid			funcid;
	const char *name;
	const char *refused;		/* set: a statement of the body that is not analysed */
} BodyWork;

/* Analyses a SQL function's body as the functions executor would, and walks what it reads. */
static void
walk_sql_body(void *arg)
{
	BodyWork   *work = (BodyWork *) arg;
	HeapTuple	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(work->funcid));
	Datum		datum;
	bool		isnull;
	List	   *queries = NIL;
	ListCell   *lc;
	int			guc_level = NewGUCNestLevel();

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for function %u", work->funcid);
	/*
	 * the body's names resolve under the function's own settings (SET search_path); its timeouts
	 * are for its own runs, not for the analysis, which keeps the caller's (the DDL's 100 ms)
	 */
	datum = SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_proconfig, &isnull);
	if (!isnull)
	{
		static const char *const kept[] = {"lock_timeout", "statement_timeout"};
		char	   *values[lengthof(kept)];
		size_t		i;

		for (i = 0; i < lengthof(kept); i++)
			values[i] = pstrdup(GetConfigOption(kept[i], false, false));
		ProcessGUCArray(DatumGetArrayTypeP(datum), PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE);
		for (i = 0; i < lengthof(kept); i++)
			(void) set_config_option(kept[i], values[i], PGC_USERSET, PGC_S_SESSION,
									 GUC_ACTION_SAVE, true, 0, false);
	}
	datum = SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_prosqlbody, &isnull);
	if (!isnull)
	{
		Node	   *body = stringToNode(TextDatumGetCString(datum));
		List	   *stored = IsA(body, List) ? linitial_node(List, (List *) body) : list_make1(body);

		foreach(lc, stored)
		{
			Query	   *parsetree = lfirst_node(Query, lc);

			AcquireRewriteLocks(parsetree, true, false);
			queries = list_concat(queries, pg_rewrite_query(parsetree));
		}
	}
	else
	{
		char	   *src;
		SQLFunctionParseInfoPtr pinfo = prepare_sql_fn_parse_info(tuple, NULL, InvalidOid);

		datum = SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_prosrc, &isnull);
		if (isnull)
			elog(ERROR, "null prosrc for function %u", work->funcid);
		src = TextDatumGetCString(datum);
		foreach(lc, pg_parse_query(src))
			queries = list_concat(queries,
								  pg_analyze_and_rewrite_withcb(lfirst_node(RawStmt, lc), src,
																(ParserSetupHook) sql_fn_parser_setup,
																pinfo, NULL));
	}
	ReleaseSysCache(tuple);
	foreach(lc, queries)
	{
		Query	   *body = lfirst_node(Query, lc);

		/* DO, CALL and the like run what no query tree shows; a write is no read to follow */
		if (body->commandType != CMD_SELECT)
			work->refused = psprintf("%s (language sql): its body runs %s, which docsync does not analyse",
									 work->name, GetCommandTagName(CreateCommandTag((Node *) body)));
		else
			docsync_derive_walk_body(work->state, body, work->name);
	}
	AtEOXact_GUC(true, guc_level);
}

/*
 * Checks one function the query calls (directly, through an operator, a type's I/O, a view, a
 * policy, or another SQL function's body).
 */
void
docsync_derive_check_function(DeriveState *state, Oid funcid)
{
	HeapTuple	tuple;
	Form_pg_proc proc;
	Oid			nsp,
				lang;
	char		kind;
	const char *name;
	int			i,
				nargs;

	if (!OidIsValid(funcid) || list_member_oid(state->functions_seen, funcid))
		return;
	state->functions_seen = lappend_oid(state->functions_seen, funcid);
	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	if (!HeapTupleIsValid(tuple))
		return;
	proc = (Form_pg_proc) GETSTRUCT(tuple);
	nsp = proc->pronamespace;
	lang = proc->prolang;
	kind = proc->prokind;
	nargs = proc->pronargs;
	ReleaseSysCache(tuple);
	name = format_procedure(funcid);

	if (nsp == PG_CATALOG_NAMESPACE)
	{
		const char *what = docsync_derive_catalog_uncovered(get_func_name(funcid), nargs);

		if (what != NULL)
			docsync_derive_add_uncovered(state, funcid, psprintf("%s (language %s) %s", name,
																 get_language_name(lang, false), what));
		return;
	}
	if (kind == PROKIND_AGGREGATE)
	{
		/* an aggregate runs its support functions */
		HeapTuple	agg = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(funcid));

		if (HeapTupleIsValid(agg))
		{
			Form_pg_aggregate form = (Form_pg_aggregate) GETSTRUCT(agg);
			Oid			support[] = {form->aggtransfn, form->aggfinalfn, form->aggcombinefn,
				form->aggserialfn, form->aggdeserialfn, form->aggmtransfn, form->aggminvtransfn,
			form->aggmfinalfn};

			ReleaseSysCache(agg);
			for (i = 0; i < (int) lengthof(support); i++)
				if (OidIsValid(support[i]))
					docsync_derive_check_function(state, support[i]);
		}
		return;
	}
	if (lang == SQLlanguageId)
	{
		BodyWork	work = {state, funcid, name, NULL};
		char	   *error;

		if (state->depth >= DERIVE_MAX_BODY_DEPTH)
		{
			docsync_derive_add_uncovered(state, funcid, psprintf("%s (language sql) is nested more than %d SQL functions deep",
												  name, DERIVE_MAX_BODY_DEPTH));
			return;
		}
		state->depth++;
		error = try_in_subtransaction(walk_sql_body, &work);
		state->depth--;
		if (error != NULL)
			docsync_derive_add_uncovered(state, funcid, psprintf("%s (language sql): its body does not analyse on its own: %s",
												  name, error));
		else if (work.refused != NULL)
			docsync_derive_add_uncovered(state, funcid, work.refused);
		return;
	}
	docsync_derive_add_uncovered(state, funcid, psprintf("%s (language %s): docsync cannot see what its body reads",
										  name, get_language_name(lang, false)));
}

typedef struct ParseWork
{
	const char *sql;
} ParseWork;

static void
parse_keys_sql(void *arg)
{
	Oid		   *types = NULL;
	int			ntypes = 0;

	(void) docsync_analyze_select(GetUserId(), ((ParseWork *) arg)->sql, NULL, &types, &ntypes, NULL);
}

/* Whether a generated keys query parses and analyses (as the current user, the definer). */
bool
docsync_derive_sql_parses(const char *sql)
{
	ParseWork	work = {sql};

	return try_in_subtransaction(parse_keys_sql, &work) == NULL;
}

static Datum
names_array(List *names)
{
	Datum	   *datums = palloc(sizeof(Datum) * Max(list_length(names), 1));
	ListCell   *lc;
	int			n = 0;

	foreach(lc, names)
	{
		Name		name = palloc0(NAMEDATALEN);

		namestrcpy(name, (char *) lfirst(lc));
		datums[n++] = NameGetDatum(name);
	}
	return PointerGetDatum(construct_array(datums, n, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR));
}

static bool
string_lists_equal(List *a, List *b)
{
	ListCell   *la,
			   *lb;

	if (list_length(a) != list_length(b))
		return false;
	forboth(la, a, lb, b)
		if (strcmp((char *) lfirst(la), (char *) lfirst(lb)) != 0)
		return false;
	return true;
}

static bool
rows_equal(DeriveRow *a, DeriveRow *b)
{
	return a->relid == b->relid && strcmp(a->kind, b->kind) == 0 &&
		string_lists_equal(a->columns, b->columns) && string_lists_equal(a->keys_args, b->keys_args) &&
		((a->keys_sql == NULL && b->keys_sql == NULL) ||
		 (a->keys_sql != NULL && b->keys_sql != NULL && strcmp(a->keys_sql, b->keys_sql) == 0));
}

/*
 * The names of the columns of a table the query reads, or NULL (all). A function the analysis
 * cannot see into may read any column of any table, those the query names included: then all.
 */
static List *
read_columns(DeriveState *state, Oid relid, bool *all)
{
	ListCell   *lc;
	List	   *names = NIL;

	*all = true;
	if (state->uncovered != NIL)
		return NIL;
	foreach(lc, state->reads)
	{
		DeriveRead *read = (DeriveRead *) lfirst(lc);
		int			m = -1;

		if (read->relid != relid)
			continue;
		*all = read->all;
		while ((m = bms_next_member(read->columns, m)) >= 0)
			names = lappend(names, get_attname(relid, m + FirstLowInvalidHeapAttributeNumber, false));
	}
	return names;
}

typedef struct MapEntry
{
	const void *key;
	void	   *value;
} MapEntry;

/* Whether map (NULL: empty) holds key; if so, *value is its value. */
bool
docsync_derive_map_find(HTAB *map, const void *key, void **value)
{
	MapEntry   *entry = map == NULL ? NULL : hash_search(map, &key, HASH_FIND, NULL);

	if (entry != NULL && value != NULL)
		*value = entry->value;
	return entry != NULL;
}

/* Stores value under key, making the map (in the current memory context) at the first store. */
void
docsync_derive_map_store(HTAB **map, const void *key, void *value)
{
	if (*map == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(void *);
		ctl.entrysize = sizeof(MapEntry);
		ctl.hcxt = CurrentMemoryContext;
		*map = hash_create("docsync derive map", 256, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	((MapEntry *) hash_search(*map, &key, HASH_ENTER, NULL))->value = value;
}

/* Derives the watches of one analysed query, as the current user (the definer). */
static List *
derive(DeriveState *state, Query *query)
{
	List	   *rows = NIL;
	List	   *undecoded = NIL;
	ListCell   *lc;

	docsync_derive_walk(state, query);
	/* a relation whose changes are never decoded is read like an uncovered function's tables */
	foreach(lc, state->occs)
	{
		Oid			relid = ((DeriveOcc *) lfirst(lc))->relid;
		const char *why = list_member_oid(undecoded, relid) ? NULL : docsync_derive_undecoded(relid);

		if (why != NULL)
		{
			undecoded = lappend_oid(undecoded, relid);
			docsync_derive_add_uncovered(state, InvalidOid, why);
		}
	}
	foreach(lc, state->occs)
	{
		DeriveOcc  *occ = (DeriveOcc *) lfirst(lc);
		DeriveRow  *row;
		ListCell   *seen;
		bool		dup = false;
		char		relkind = get_rel_relkind(occ->relid);

		CHECK_FOR_INTERRUPTS();
		/* what changes can be decoded: tables, partitioned tables, matviews */
		if (!occ->placed || list_member_oid(undecoded, occ->relid) ||
			(relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE && relkind != RELKIND_MATVIEW))
			continue;
		row = docsync_derive_classify(state, occ);
		row->read_relid = row->relid;
		foreach(seen, rows)
			dup = dup || rows_equal((DeriveRow *) lfirst(seen), row);
		if (!dup)
			rows = lappend(rows, row);

		/*
		 * The rows of a table's inheritance children are its rows too, but their changes are
		 * decoded as the child's (a partition's as its root's): each child gets the same watch,
		 * by column name.
		 */
		if (occ->rte->inh && relkind == RELKIND_RELATION && has_subclass(occ->relid))
		{
			ListCell   *lchild;

			foreach(lchild, find_all_inheritors(occ->relid, NoLock, NULL))
			{
				DeriveRow  *child;

				if (lfirst_oid(lchild) == occ->relid)
					continue;
				if (docsync_derive_undecoded(lfirst_oid(lchild)) != NULL &&
					!list_member_oid(undecoded, lfirst_oid(lchild)))
				{
					undecoded = lappend_oid(undecoded, lfirst_oid(lchild));
					docsync_derive_add_uncovered(state, InvalidOid, docsync_derive_undecoded(lfirst_oid(lchild)));
				}
				if (list_member_oid(undecoded, lfirst_oid(lchild)))
					continue;
				child = palloc(sizeof(DeriveRow));
				*child = *row;
				child->relid = lfirst_oid(lchild);
				child->why = psprintf("%s (it inherits from %s)", row->why,
									  quote_identifier(get_rel_name(occ->relid)));
				dup = false;
				foreach(seen, rows)
					dup = dup || rows_equal((DeriveRow *) lfirst(seen), child);
				if (!dup)
					rows = lappend(rows, child);
			}
		}
	}
	foreach(lc, state->uncovered)
	{
		DeriveUncovered *u = (DeriveUncovered *) lfirst(lc);
		DeriveRow  *row = palloc0(sizeof(DeriveRow));

		row->kind = "uncovered";
		row->why = (char *) u->why;
		rows = lappend(rows, row);
	}
	return rows;
}

/*
 * docsync.derive_watches(sql text, search_path text, definer regrole)
 *   RETURNS TABLE (table_schema name, table_name name, kind text, columns name[], keys_sql text,
 *                  keys_args name[], read_columns name[], why text)
 *
 * columns: the direct mapping (one column per param, in $n order), '{}' for broadcast, null for keys
 * and uncovered; keys_args: the changed row's columns a keys query takes as $1…; read_columns: the
 * table's columns the query reads anywhere, null for all of them.
 */
Datum
docsync_derive_watches(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			definer = docsync_text_role(fcinfo, 2);
	char	   *path;
	MemoryContext work,
				old;
	DeriveState state;
	Oid		   *param_types = NULL;
	int			nparams = 0;
	Query	   *query;
	DocsyncDefinerSave save;
	List	   *volatile rows = NIL;
	ListCell   *lc;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("query text must not be null"),
				 errdetail("A docsync doc query is one SELECT statement."),
				 errhint("Pass the query text.")));
	InitMaterializedSRF(fcinfo, 0);
	path = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	work = AllocSetContextCreate(CurrentMemoryContext, "docsync derive_watches", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(work);

	query = docsync_analyze_select(definer, text_to_cstring(PG_GETARG_TEXT_PP(0)), path,
								   &param_types, &nparams, NULL);
	memset(&state, 0, sizeof(state));
	state.nparams = nparams;
	state.param_types = param_types;
	docsync_definer_enter(definer, path, &save);
	PG_TRY();
	{
		rows = derive(&state, query);
	}
	PG_CATCH();
	{
		docsync_definer_leave(&save, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	docsync_definer_leave(&save, true);

	foreach(lc, rows)
	{
		DeriveRow  *row = (DeriveRow *) lfirst(lc);
		Datum		values[8];
		bool		nulls[8] = {true, true, false, true, true, true, true, false};

		values[2] = CStringGetTextDatum(row->kind);
		values[7] = CStringGetTextDatum(row->why);
		if (OidIsValid(row->relid))
		{
			bool		all;
			List	   *cols = read_columns(&state, row->read_relid, &all);

			values[0] = DirectFunctionCall1(namein, CStringGetDatum(get_namespace_name(get_rel_namespace(row->relid))));
			values[1] = DirectFunctionCall1(namein, CStringGetDatum(get_rel_name(row->relid)));
			nulls[0] = nulls[1] = false;
			if (!all)
			{
				values[6] = names_array(cols);
				nulls[6] = false;
			}
		}
		if (strcmp(row->kind, "direct") == 0 || strcmp(row->kind, "broadcast") == 0)
		{
			values[3] = names_array(row->columns);
			nulls[3] = false;
		}
		if (row->keys_sql != NULL)
		{
			values[4] = CStringGetTextDatum(row->keys_sql);
			values[5] = names_array(row->keys_args);
			nulls[4] = nulls[5] = false;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(work);
	return (Datum) 0;
}
