/*-------------------------------------------------------------------------
 *
 * ddl_derive.c
 *		Which doc queries with derived watches a DDL command may change, so that the event triggers
 *		(ddl.c) derive only theirs again (docsync._rederive), and none while the command touched
 *		nothing they were derived from.
 *
 *		A query's watches were derived from the relations its analysis used, views included
 *		(query_defs.derived_from). A command may change them when it changes or drops one of those
 *		relations, or makes or renames a relation with the name of one (it may now win the query's
 *		name resolution); when it touches anything but relations and schemas (a function's body or
 *		language, a type, an operator), every query may change. A query whose watches could not be
 *		derived again at an earlier command (query_defs.derive_problem) is derived again at the next
 *		one that touches any object. Like the rest of the triggers' common path, this reads docsync.query_defs with SnapshotSelf (no predicate lock for a serializable
 *		migration) and runs no SQL unless a query matches.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "parser/parse_relation.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "ddl.h"

void
docsync_ddl_touch(DdlTouched *touched, Oid classid, Oid objid, bool names)
{
	if (classid == RelationRelationId && OidIsValid(objid))
	{
		char	   *name = get_rel_name(objid);

		touched->relids = list_append_unique_oid(touched->relids, objid);
		if (names && name != NULL)
			touched->names = lappend(touched->names, name);
	}
	else if (classid != NamespaceRelationId)
	{
		/* a schema made or renamed resolves no name by itself; its relations are reported apart */
		touched->everything = true;
	}
}

/* Whether a query derived from `from` (a regclass[], or null) may change by what was touched. */
static bool
may_change(DdlTouched *touched, Datum from, bool isnull)
{
	Datum	   *elems;
	int			n;

	if (touched->everything || isnull)
		return true;
	deconstruct_array(DatumGetArrayTypeP(from), REGCLASSOID, sizeof(Oid), true, TYPALIGN_INT, &elems, NULL, &n);
	for (int i = 0; i < n; i++)
	{
		Oid			relid = DatumGetObjectId(elems[i]);
		char	   *name = get_rel_name(relid);
		ListCell   *lc;

		/* gone (dropped now or before): the query no longer reads what it was derived from */
		if (name == NULL || list_member_oid(touched->relids, relid))
			return true;
		foreach(lc, touched->names)
		{
			if (strcmp(name, (char *) lfirst(lc)) == 0)
				return true;
		}
	}
	return false;
}

/*
 * Whether the query's watches could not be derived again at an earlier command (derive_problem):
 * its derived_from is that of the watches kept, not of what it reads now, so any command tries again.
 */
static bool
failed_before(TupleTableSlot *slot, AttrNumber problem_att)
{
	bool		isnull = true;

	if (problem_att != InvalidAttrNumber)
		(void) slot_getattr(slot, problem_att, &isnull);
	return !isnull;
}

void
docsync_ddl_rederive(DdlTouched *touched)
{
	Oid			nsp = get_namespace_oid("docsync", true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid("query_defs", nsp) : InvalidOid;
	Relation	rel;
	TableScanDesc scan;
	TupleTableSlot *slot;
	AttrNumber	name_att,
				watches_att,
				from_att,
				problem_att;
	List	   *queries = NIL;

	if (!OidIsValid(relid) || (!touched->everything && touched->relids == NIL))
		return;
	rel = table_open(relid, AccessShareLock);
	name_att = attnameAttNum(rel, "name", false);
	watches_att = attnameAttNum(rel, "watches", false);
	from_att = attnameAttNum(rel, "derived_from", false);
	problem_att = attnameAttNum(rel, "derive_problem", false);
	/* an older definition table, mid-update: it has no derived watches */
	if (watches_att == InvalidAttrNumber || from_att == InvalidAttrNumber)
	{
		table_close(rel, AccessShareLock);
		return;
	}
	slot = table_slot_create(rel, NULL);
	scan = table_beginscan(rel, SnapshotSelf, 0, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		Datum		watches = slot_getattr(slot, watches_att, &isnull);
		Datum		from;

		if (isnull || strcmp(TextDatumGetCString(watches), "derived") != 0)
			continue;
		from = slot_getattr(slot, from_att, &isnull);
		if (may_change(touched, from, isnull) || failed_before(slot, problem_att))
		{
			Datum		name = slot_getattr(slot, name_att, &isnull);

			if (!isnull)
				queries = lappend(queries, TextDatumGetCString(name));
		}
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, AccessShareLock);

	if (queries != NIL)
	{
		Datum	   *names = palloc(sizeof(Datum) * list_length(queries));
		Oid			types[1] = {TEXTARRAYOID};
		Datum		args[1];
		bool		nulls[1] = {false};
		int			n = 0;
		ListCell   *lc;

		foreach(lc, queries)
			names[n++] = CStringGetTextDatum((char *) lfirst(lc));
		args[0] = PointerGetDatum(construct_array(names, n, TEXTOID, -1, false, TYPALIGN_INT));
		docsync_call_helper("_rederive", 1, types, args, nulls);
	}
}
