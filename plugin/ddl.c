/*-------------------------------------------------------------------------
 *
 * ddl.c
 *		docsync as a guest in the customer's DDL: the event triggers that keep watches named right and
 *		raise the definitions generation, the generation itself, the DROP EXTENSION clean-up, and the
 *		row trigger that keeps docsync's tables out of logical replication's apply.
 *
 *		A customer's migration must never wait on, deadlock with or fail because of docsync, and should
 *		cost it next to nothing. So the common path here is C that reads no table but docsync's own
 *		(with a non-MVCC snapshot, so a serializable migration takes no predicate lock on it), locks no
 *		row, and runs no SQL: it bumps a sequence and writes a transactional logical message. SQL runs
 *		only when the DDL renames or drops something a watch may name, or refreshes a matview
 *		CONCURRENTLY (counted, one row per matview), through docsync's helper functions, called as
 *		their owner (the extension's).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_class.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "nodes/value.h"
#include "parser/parse_relation.h"
#include "replication/message.h"
#include "replication/worker_internal.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

#include "compat.h"
#include "ddl.h"

PG_FUNCTION_INFO_V1(docsync_next_generation);
PG_FUNCTION_INFO_V1(docsync_on_ddl_command_end);
PG_FUNCTION_INFO_V1(docsync_on_sql_drop);
PG_FUNCTION_INFO_V1(docsync_on_drop_extension);
PG_FUNCTION_INFO_V1(docsync_skip_replicated);

/* The in-stream signal's prefix; the worker's decoder knows it (DESIGN: definitions generation). */
#define GENERATION_MESSAGE_PREFIX "docsync.definitions"

/* A relation of the docsync schema, or InvalidOid while the extension is being created or dropped. */
static Oid
docsync_relation(const char *name)
{
	Oid			nsp = get_namespace_oid("docsync", true);

	return OidIsValid(nsp) ? get_relname_relid(name, nsp) : InvalidOid;
}

/*
 * Raises the definitions generation and tells the stream: nextval on docsync.def_generation_seq (no
 * row lock; a sequence never makes a transaction wait or fail to serialise) and a transactional
 * logical message carrying the new value, decoded at the commit.
 */
static int64
bump_generation(void)
{
	Oid			seq = docsync_relation("def_generation_seq");
	int64		generation;
	char	   *text;

	if (!OidIsValid(seq))
		return 0;
	generation = nextval_internal(seq, false);
	text = psprintf(INT64_FORMAT, generation);
	DOCSYNC_LOG_LOGICAL_MESSAGE(GENERATION_MESSAGE_PREFIX, text, strlen(text), true);
	pfree(text);
	return generation;
}

/* docsync.next_generation() RETURNS bigint: raise the definitions generation; returns it. */
Datum
docsync_next_generation(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(bump_generation());
}

/*
 * Whether a docsync table has a row that `match` accepts (any row when NULL). Read with SnapshotSelf:
 * committed rows and this transaction's own, without an MVCC snapshot, so a serializable migration
 * takes no predicate lock on docsync's tables and cannot fail to serialise with a definition change.
 */
static bool
any_row(const char *table, bool (*match) (Relation rel, TupleTableSlot *slot, const void *arg), const void *arg)
{
	Oid			relid = docsync_relation(table);
	Relation	rel;
	TableScanDesc scan;
	TupleTableSlot *slot;
	bool		found = false;

	if (!OidIsValid(relid))
		return false;
	rel = table_open(relid, AccessShareLock);
	slot = table_slot_create(rel, NULL);
	scan = table_beginscan(rel, SnapshotSelf, 0, NULL);
	while (!found && table_scan_getnextslot(scan, ForwardScanDirection, slot))
		found = match == NULL || match(rel, slot, arg);
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, AccessShareLock);
	return found;
}

/* Whether docsync has any doc query. */
static bool
has_doc_queries(void)
{
	return any_row("query_defs", NULL, NULL);
}

/* A table's schema and name; either NULL matches any. */
typedef struct TableName
{
	const char *schema;
	const char *table;
} TableName;

static bool
watch_names(Relation rel, TupleTableSlot *slot, const void *arg)
{
	const TableName *name = (const TableName *) arg;
	AttrNumber	schema_att = attnameAttNum(rel, "table_schema", false);
	AttrNumber	table_att = attnameAttNum(rel, "table_name", false);
	bool		isnull;

	if (schema_att == InvalidAttrNumber || table_att == InvalidAttrNumber)
		elog(ERROR, "docsync.watch_defs has no table_schema or table_name column");
	return (name->schema == NULL ||
			strcmp(NameStr(*DatumGetName(slot_getattr(slot, schema_att, &isnull))), name->schema) == 0) &&
		(name->table == NULL ||
		 strcmp(NameStr(*DatumGetName(slot_getattr(slot, table_att, &isnull))), name->table) == 0);
}

/*
 * Whether a watch names a table of this schema and name (either NULL: any). Keeps DDL on tables no
 * watch names from running any SQL.
 */
static bool
any_watch(const char *schema, const char *table)
{
	TableName	name = {schema, table};

	return any_row("watch_defs", watch_names, &name);
}

/* Whether a watch names this relation, or (it has inheritance children) may name one of them. */
static bool
may_watch_relation(Oid relid)
{
	char	   *schema;
	char	   *name;

	if (!OidIsValid(relid))
		return false;
	schema = get_namespace_name(get_rel_namespace(relid));
	name = get_rel_name(relid);
	return schema == NULL || name == NULL || has_subclass(relid) || any_watch(schema, name);
}

/* Whether this is docsync's own CREATE or ALTER EXTENSION script running. */
static bool
in_own_extension_script(void)
{
	return creating_extension && CurrentExtensionObject == get_extension_oid("docsync", true);
}

/*
 * The rows of an event trigger's set-returning function (pg_event_trigger_ddl_commands or
 * pg_event_trigger_dropped_objects), materialised, called directly rather than through SQL.
 */
typedef struct EventObjects
{
	ExprContext *econtext;
	Tuplestorestate *store;
	TupleDesc	desc;
	TupleTableSlot *slot;
} EventObjects;

static void
event_objects_open(EventObjects *objects, Oid fnoid)
{
	FmgrInfo	flinfo;
	ReturnSetInfo rsinfo;

	LOCAL_FCINFO(fcinfo, 0);

	fmgr_info(fnoid, &flinfo);
	MemSet(&rsinfo, 0, sizeof(rsinfo));
	rsinfo.type = T_ReturnSetInfo;
	objects->econtext = CreateStandaloneExprContext();
	rsinfo.econtext = objects->econtext;
	rsinfo.allowedModes = SFRM_Materialize;
	rsinfo.returnMode = SFRM_Materialize;
	InitFunctionCallInfoData(*fcinfo, &flinfo, 0, InvalidOid, NULL, (Node *) &rsinfo);
	(void) FunctionCallInvoke(fcinfo);
	if (rsinfo.returnMode != SFRM_Materialize || rsinfo.setDesc == NULL)
		elog(ERROR, "event trigger function %u did not return a materialised set", fnoid);
	objects->desc = rsinfo.setDesc;
	objects->store = rsinfo.setResult;
	objects->slot = MakeSingleTupleTableSlot(objects->desc, &TTSOpsMinimalTuple);
	if (objects->store != NULL)
		tuplestore_rescan(objects->store);
}

static bool
event_objects_next(EventObjects *objects)
{
	return objects->store != NULL &&
		tuplestore_gettupleslot(objects->store, true, false, objects->slot);
}

/* Column `name` of the current row; isnull set. */
static Datum
event_objects_get(EventObjects *objects, const char *name, bool *isnull)
{
	int			i;

	for (i = 0; i < objects->desc->natts; i++)
	{
		if (strcmp(NameStr(TupleDescAttr(objects->desc, i)->attname), name) == 0)
			return slot_getattr(objects->slot, i + 1, isnull);
	}
	elog(ERROR, "event trigger row has no column \"%s\"", name);
	return (Datum) 0;			/* keep the compiler quiet */
}

static char *
event_objects_text(EventObjects *objects, const char *name)
{
	bool		isnull;
	Datum		value = event_objects_get(objects, name, &isnull);

	return isnull ? NULL : TextDatumGetCString(value);
}

static void
event_objects_close(EventObjects *objects)
{
	ExecDropSingleTupleTableSlot(objects->slot);
	if (objects->store != NULL)
		tuplestore_end(objects->store);
	FreeExprContext(objects->econtext, true);
}

/*
 * Whether a schema, as pg_event_trigger_ddl_commands names it (NULL for objects outside schemas;
 * "pg_temp" for this session's temporary schema), holds only temporary objects.
 */
static bool
temporary_schema(const char *schema)
{
	return schema != NULL &&
		(strcmp(schema, "pg_temp") == 0 || isAnyTempNamespace(get_namespace_oid(schema, true)));
}

/*
 * Calls docsync.<name>(args) as the function's owner (the extension's), like SECURITY DEFINER: the
 * DDL's author needs no right on docsync's tables. Missing helper (an extension being dropped or
 * mid-update): nothing to do.
 */
void
docsync_call_helper(const char *name, int nargs, Oid *types, Datum *args, bool *nulls)
{
	Oid			nsp = get_namespace_oid("docsync", true);
	HeapTuple	tuple;
	Oid			fn;
	Oid			owner;
	Oid			save_userid;
	int			save_sec_context;
	FmgrInfo	flinfo;
	int			i;

	LOCAL_FCINFO(fcinfo, FUNC_MAX_ARGS);

	/* by the catalog, not by a name lookup, which would need USAGE on the schema */
	if (!OidIsValid(nsp))
		return;
	tuple = SearchSysCache3(PROCNAMEARGSNSP, CStringGetDatum(name),
							PointerGetDatum(buildoidvector(types, nargs)), ObjectIdGetDatum(nsp));
	if (!HeapTupleIsValid(tuple))
		return;
	fn = ((Form_pg_proc) GETSTRUCT(tuple))->oid;
	owner = ((Form_pg_proc) GETSTRUCT(tuple))->proowner;
	ReleaseSysCache(tuple);

	fmgr_info(fn, &flinfo);
	InitFunctionCallInfoData(*fcinfo, &flinfo, nargs, InvalidOid, NULL, NULL);
	for (i = 0; i < nargs; i++)
	{
		fcinfo->args[i].value = args[i];
		fcinfo->args[i].isnull = nulls[i];
	}
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		(void) FunctionCallInvoke(fcinfo);
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec_context);
	}
	PG_END_TRY();
}

/* Raises unless called by the event trigger `trigger`: the function is no one's to call directly. */
static void
require_event_trigger(FunctionCallInfo fcinfo, const char *function, const char *trigger)
{
	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("docsync.%s() is an event trigger function", function),
				 errhint("It runs from the event trigger %s; do not call it.", trigger)));
}

/*
 * docsync._follow_rename(kind, relid, old_schema, old_name, new_name, path): watches name their
 * table and columns, so a rename the DDL just made is followed by name, from the statement itself.
 * path is the search_path the statement resolved its names with (schema OIDs, in order).
 */
static void
follow_rename(const char *kind, Oid relid, const char *old_schema, const char *old_name, const char *new_name)
{
	Oid			types[6] = {TEXTOID, OIDOID, TEXTOID, TEXTOID, TEXTOID, OIDARRAYOID};
	const char *texts[5] = {kind, NULL, old_schema, old_name, new_name};
	Datum		args[6];
	bool		nulls[6] = {false};
	List	   *path = fetch_search_path(false);
	Datum	   *schemas = palloc(sizeof(Datum) * (list_length(path) + 1));
	int			n = 0;
	ListCell   *lc;

	for (int i = 0; i < 5; i++)
	{
		nulls[i] = i == 1 ? !OidIsValid(relid) : texts[i] == NULL;
		args[i] = i == 1 ? ObjectIdGetDatum(relid) : nulls[i] ? (Datum) 0 : CStringGetTextDatum(texts[i]);
	}
	foreach(lc, path)
		schemas[n++] = ObjectIdGetDatum(lfirst_oid(lc));
	args[5] = PointerGetDatum(construct_array(schemas, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT));
	docsync_call_helper("_follow_rename", 6, types, args, nulls);
}

/*
 * ddl_command_end, for the commands that can change what the plugin emits or a doc reads (the
 * event trigger's WHEN TAG list): follows renames of watched tables, columns and schemas, and raises
 * the generation, unless docsync has no doc query or the DDL touched only temporary objects. A
 * REFRESH MATERIALIZED VIEW CONCURRENTLY is also counted (docsync._refreshed): it changes rows in
 * place, leaving nothing in the catalog that would change a fingerprint.
 */
Datum
docsync_on_ddl_command_end(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigger;
	EventObjects objects;
	Oid			relid = InvalidOid;
	bool		persistent = false;
	DdlTouched	touched = {0};
	bool		names;

	require_event_trigger(fcinfo, "on_ddl_command_end", "docsync_ddl_command_end");
	trigger = (EventTriggerData *) fcinfo->context;
	if (in_own_extension_script() || !has_doc_queries())
		PG_RETURN_NULL();
	/* a relation made or renamed may take the name a query resolves */
	names = strncmp(GetCommandTagName(trigger->tag), "CREATE", 6) == 0 || trigger->tag == CMDTAG_SELECT_INTO ||
		IsA(trigger->parsetree, RenameStmt) || IsA(trigger->parsetree, AlterObjectSchemaStmt);

	event_objects_open(&objects, F_PG_EVENT_TRIGGER_DDL_COMMANDS);
	while (event_objects_next(&objects))
	{
		bool		isnull;
		Oid			classid = DatumGetObjectId(event_objects_get(&objects, "classid", &isnull));

		if (temporary_schema(event_objects_text(&objects, "schema_name")))
			continue;
		persistent = true;
		docsync_ddl_touch(&touched, classid, DatumGetObjectId(event_objects_get(&objects, "objid", &isnull)), names);
		if (classid == RelationRelationId && !OidIsValid(relid))
			relid = DatumGetObjectId(event_objects_get(&objects, "objid", &isnull));
	}
	event_objects_close(&objects);
	if (!persistent)
		PG_RETURN_NULL();

	if (IsA(trigger->parsetree, RenameStmt))
	{
		RenameStmt *stmt = (RenameStmt *) trigger->parsetree;

		switch (stmt->renameType)
		{
			case OBJECT_COLUMN:
				if (may_watch_relation(relid))
					follow_rename("column", relid, NULL, stmt->subname, stmt->newname);
				break;
			case OBJECT_TABLE:
			case OBJECT_FOREIGN_TABLE:
				if (OidIsValid(relid) &&
					any_watch(get_namespace_name(get_rel_namespace(relid)), stmt->relation->relname))
					follow_rename("table", relid, NULL, stmt->relation->relname, stmt->newname);
				break;
			case OBJECT_SCHEMA:
				if (any_watch(stmt->subname, NULL))
					follow_rename("schema", InvalidOid, NULL, stmt->subname, stmt->newname);
				break;
			default:
				break;
		}
	}
	else if (IsA(trigger->parsetree, AlterObjectSchemaStmt))
	{
		AlterObjectSchemaStmt *stmt = (AlterObjectSchemaStmt *) trigger->parsetree;

		if ((stmt->objectType == OBJECT_TABLE || stmt->objectType == OBJECT_FOREIGN_TABLE) &&
			any_watch(NULL, stmt->relation->relname))
			follow_rename("set schema", relid, stmt->relation->schemaname, stmt->relation->relname, stmt->newschema);
	}
	else if (IsA(trigger->parsetree, RefreshMatViewStmt) &&
			 ((RefreshMatViewStmt *) trigger->parsetree)->concurrent && OidIsValid(relid))
	{
		/* its storage stays: count the refresh, which docsync.closure_state() hashes */
		Oid			types[1] = {OIDOID};
		Datum		args[1] = {ObjectIdGetDatum(relid)};
		bool		nulls[1] = {false};

		docsync_call_helper("_refreshed", 1, types, args, nulls);
	}
	/* a refresh changes rows, never what a query reads or how */
	if (!IsA(trigger->parsetree, RefreshMatViewStmt))
		docsync_ddl_rederive(&touched);
	bump_generation();
	PG_RETURN_NULL();
}

/* Whether a watch names the table of a dropped object's address ({schema, table[, column]}). */
static bool
dropped_watched(Datum address)
{
	Datum	   *names;
	bool	   *nulls;
	int			n;

	deconstruct_array(DatumGetArrayTypeP(address), TEXTOID, -1, false, TYPALIGN_INT, &names, &nulls, &n);
	return n >= 2 && !nulls[0] && !nulls[1] &&
		any_watch(TextDatumGetCString(names[0]), TextDatumGetCString(names[1]));
}

/*
 * sql_drop: a dropped table, or a dropped column, that a watch names can never fire again:
 * docsync._forget_dropped removes those watches with a WARNING naming each. Any drop of a persistent
 * object in the trigger's WHEN TAG list raises the generation (a view or function a doc query uses).
 */
Datum
docsync_on_sql_drop(PG_FUNCTION_ARGS)
{
	EventObjects objects;
	bool		persistent = false;
	DdlTouched	touched = {0};

	require_event_trigger(fcinfo, "on_sql_drop", "docsync_sql_drop");
	if (in_own_extension_script() || !has_doc_queries())
		PG_RETURN_NULL();

	event_objects_open(&objects, F_PG_EVENT_TRIGGER_DROPPED_OBJECTS);
	while (event_objects_next(&objects))
	{
		bool		isnull;
		bool		temporary = DatumGetBool(event_objects_get(&objects, "is_temporary", &isnull));
		char	   *type = event_objects_text(&objects, "object_type");
		Datum		names = event_objects_get(&objects, "address_names", &isnull);

		if (temporary)
			continue;
		persistent = true;
		docsync_ddl_touch(&touched, DatumGetObjectId(event_objects_get(&objects, "classid", &isnull)),
						  DatumGetObjectId(event_objects_get(&objects, "objid", &isnull)), false);
		if (!isnull && type != NULL &&
			(strcmp(type, "table") == 0 || strcmp(type, "table column") == 0 ||
			 strcmp(type, "foreign table") == 0 || strcmp(type, "foreign table column") == 0) &&
			dropped_watched(names))
		{
			Oid			types[2] = {TEXTARRAYOID, TEXTOID};
			Datum		args[2] = {names, CStringGetTextDatum(event_objects_text(&objects, "object_identity"))};
			bool		nulls[2] = {false, false};

			docsync_call_helper("_forget_dropped", 2, types, args, nulls);
		}
	}
	event_objects_close(&objects);
	if (persistent)
	{
		docsync_ddl_rederive(&touched);
		bump_generation();
	}
	PG_RETURN_NULL();
}

/*
 * ddl_command_start of DROP EXTENSION: when docsync itself is dropped, docsync._before_drop revokes
 * the grants docsync.grant_reader made and warns about each docsync slot of the database, which
 * keeps holding WAL until it is dropped. Runs before the drop, while docsync's functions exist.
 */
Datum
docsync_on_drop_extension(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigger;
	DropStmt   *stmt;
	ListCell   *lc;

	require_event_trigger(fcinfo, "on_drop_extension", "docsync_drop_extension");
	trigger = (EventTriggerData *) fcinfo->context;
	if (!IsA(trigger->parsetree, DropStmt))
		PG_RETURN_NULL();
	stmt = (DropStmt *) trigger->parsetree;
	if (stmt->removeType != OBJECT_EXTENSION)
		PG_RETURN_NULL();
	foreach(lc, stmt->objects)
	{
		Node	   *object = lfirst(lc);

		if (IsA(object, String) && strcmp(strVal(object), "docsync") == 0 &&
			OidIsValid(get_extension_oid("docsync", true)))
		{
			docsync_call_helper("_before_drop", 0, NULL, NULL, NULL);
			break;
		}
	}
	PG_RETURN_NULL();
}

/*
 * A REPLICA row trigger on docsync's tables (it fires only under session_replication_role =
 * replica): inside a logical replication apply or table-sync worker it skips the row, so a FOR ALL
 * TABLES publication never copies another database's definitions, generations or grants into this
 * one. Anything else under that role (an operator's session) writes as usual.
 */
Datum
docsync_skip_replicated(PG_FUNCTION_ARGS)
{
	TriggerData *data;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("docsync.skip_replicated() is a trigger function"),
				 errhint("It runs from the skip_replicated triggers on docsync's tables; do not call it.")));
	data = (TriggerData *) fcinfo->context;
	if (MyLogicalRepWorker != NULL)
		return PointerGetDatum(NULL);
	if (TRIGGER_FIRED_BY_UPDATE(data->tg_event))
		return PointerGetDatum(data->tg_newtuple);
	return PointerGetDatum(data->tg_trigtuple);
}
