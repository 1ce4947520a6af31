/*-------------------------------------------------------------------------
 *
 * derive_cover.c
 *		What a query runs besides the functions its expressions name, for derived watches: the
 *		executor calls more than check_functions_in_node() sees, and each of these is checked like
 *		a function the query calls (docsync_derive_check_function), so that a body docsync cannot
 *		see into is reported uncovered:
 *		- a cast to json or jsonb of a type: to_json(b), json(b)_agg, json(b)_build_object,
 *		  row_to_json and the rest call it for a value of that type (jsonb_categorize_type), and
 *		  for one inside an array or a composite value (a column of a row, at any depth);
 *		- a domain's CHECK constraints, run wherever a value is coerced to the domain, directly
 *		  or as a column of a row json(b)_populate_record(set) or json(b)_to_record(set) fills;
 *		- the default expressions of a call's omitted arguments, which the planner adds;
 *		so every expression's type (and every column of a function in FROM) is followed through
 *		domains, arrays, ranges, multiranges and composite types. Also what no watch can follow: pg_catalog's functions
 *		that run SQL text or work on large objects or sequences, and the relations whose changes
 *		are never decoded.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/catalog.h"
#include "catalog/namespace.h"
#include "catalog/pg_cast.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/fmgroids.h"
#include "utils/typcache.h"

#include "derive.h"
#include "docsync.h"

/* How deep types are followed into arrays, domains and composite types' columns. */
#define DERIVE_MAX_TYPE_DEPTH 16

static void check_type(DeriveState *state, Oid typid, int depth);

static bool
check_function_cb(Oid funcid, void *context)
{
	docsync_derive_check_function((DeriveState *) context, funcid);
	return false;
}

/* The function behind a cast of typid to target (none: InvalidOid). */
static Oid
cast_function(Oid typid, Oid target)
{
	HeapTuple	tuple = SearchSysCache2(CASTSOURCETARGET, ObjectIdGetDatum(typid), ObjectIdGetDatum(target));
	Oid			func = InvalidOid;

	if (HeapTupleIsValid(tuple))
	{
		func = ((Form_pg_cast) GETSTRUCT(tuple))->castfunc;
		ReleaseSysCache(tuple);
	}
	return func;
}

static bool
cover_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	check_stack_depth();
	docsync_derive_cover_node((DeriveState *) context, node);
	(void) check_functions_in_node(node, check_function_cb, context);
	return expression_tree_walker(node, cover_walker, context);
}

/*
 * A domain's CHECK constraints run what a query's expression would: their functions, types,
 * defaults. Read as stored (pg_constraint.conbin), not through the type cache, which plans them.
 * A parent domain's come with its base type.
 */
static void
check_domain(DeriveState *state, Oid typid)
{
	Relation	rel = table_open(ConstraintRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	List	   *exprs = NIL;
	ListCell   *lc;

	ScanKeyInit(&key, Anum_pg_constraint_contypid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(typid));
	scan = systable_beginscan(rel, ConstraintTypidIndexId, true, NULL, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		bool		isnull;
		Datum		bin;

		if (((Form_pg_constraint) GETSTRUCT(tuple))->contype != CONSTRAINT_CHECK)
			continue;
		bin = heap_getattr(tuple, Anum_pg_constraint_conbin, RelationGetDescr(rel), &isnull);
		if (!isnull)
			exprs = lappend(exprs, stringToNode(TextDatumGetCString(bin)));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	foreach(lc, exprs)
		(void) cover_walker((Node *) lfirst(lc), state);
}

/*
 * Checks what a value of type typid may run: its casts to json and jsonb, its constraints if a
 * domain, and the same for its base type, its element type and its columns.
 */
static void
check_type(DeriveState *state, Oid typid, int depth)
{
	HeapTuple	tuple;
	Form_pg_type type;
	char		typtype;
	Oid			elem,
				base,
				relid;

	if (!OidIsValid(typid) || typid == RECORDOID || list_member_oid(state->types_seen, typid))
		return;
	if (depth > DERIVE_MAX_TYPE_DEPTH)
	{
		docsync_derive_add_uncovered(state, InvalidOid,
									 psprintf("the type %s is reached more than %d levels deep (through domains, arrays, columns) and not followed",
											  format_type_be(typid), DERIVE_MAX_TYPE_DEPTH));
		return;
	}
	state->types_seen = lappend_oid(state->types_seen, typid);
	CHECK_FOR_INTERRUPTS();
	tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	if (!HeapTupleIsValid(tuple))
		return;
	type = (Form_pg_type) GETSTRUCT(tuple);
	typtype = type->typtype;
	elem = type->typelem;
	base = type->typbasetype;
	relid = type->typrelid;
	ReleaseSysCache(tuple);

	docsync_derive_check_function(state, cast_function(typid, JSONOID));
	docsync_derive_check_function(state, cast_function(typid, JSONBOID));
	if (typtype == TYPTYPE_DOMAIN)
	{
		check_domain(state, typid);
		check_type(state, base, depth + 1);
	}
	else if (OidIsValid(elem) && type_is_array(typid))
		check_type(state, elem, depth + 1);
	else if (typtype == TYPTYPE_RANGE)
		check_type(state, get_range_subtype(typid), depth + 1);	/* range_in checks a domain's */
	else if (typtype == TYPTYPE_MULTIRANGE)
		check_type(state, get_multirange_range(typid), depth + 1);
	else if (typtype == TYPTYPE_COMPOSITE && OidIsValid(relid))
	{
		TupleDesc	desc = lookup_rowtype_tupdesc_copy(typid, -1);
		int			i;

		for (i = 0; i < desc->natts; i++)
			if (!TupleDescAttr(desc, i)->attisdropped)
				check_type(state, TupleDescAttr(desc, i)->atttypid, depth + 1);
	}
}

typedef struct DefaultsSeen
{
	Oid			funcid;
	Bitmapset  *positions;
} DefaultsSeen;

/* Walks the default expressions the planner adds for a call's omitted arguments (each once). */
static void
check_defaults(DeriveState *state, FuncExpr *call)
{
	HeapTuple	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(call->funcid));
	Form_pg_proc proc;
	int			nargs,
				ndefaults,
				pos = 0;
	Bitmapset  *given = NULL;
	List	   *defaults;
	ListCell   *lc;
	DefaultsSeen *seen = NULL;
	Datum		datum;
	bool		isnull;

	if (!HeapTupleIsValid(tuple))
		return;
	proc = (Form_pg_proc) GETSTRUCT(tuple);
	nargs = proc->pronargs;
	ndefaults = proc->pronargdefaults;
	if (ndefaults <= 0 || list_length(call->args) >= nargs)
	{
		ReleaseSysCache(tuple);
		return;
	}
	datum = SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_proargdefaults, &isnull);
	defaults = isnull ? NIL : castNode(List, stringToNode(TextDatumGetCString(datum)));
	ReleaseSysCache(tuple);

	/* positional arguments first, then named ones (the planner reorders them) */
	foreach(lc, call->args)
	{
		if (IsA(lfirst(lc), NamedArgExpr))
			given = bms_add_member(given, ((NamedArgExpr *) lfirst(lc))->argnumber);
		else
			given = bms_add_member(given, pos);
		pos++;
	}
	foreach(lc, state->defaults_seen)
		if (((DefaultsSeen *) lfirst(lc))->funcid == call->funcid)
			seen = (DefaultsSeen *) lfirst(lc);
	if (seen == NULL)
	{
		seen = palloc0(sizeof(DefaultsSeen));
		seen->funcid = call->funcid;
		state->defaults_seen = lappend(state->defaults_seen, seen);
	}
	foreach(lc, defaults)
	{
		int			position = nargs - list_length(defaults) + foreach_current_index(lc);

		if (position < 0 || bms_is_member(position, given) || bms_is_member(position, seen->positions))
			continue;
		seen->positions = bms_add_member(seen->positions, position);
		(void) cover_walker((Node *) lfirst(lc), state);
	}
}

/*
 * Checks what one node of a query's expressions runs beyond the functions it names: the casts
 * and constraints of its type, the defaults of a call's omitted arguments, and the column types
 * of a function in FROM with a column definition list (json(b)_to_record(set) fills them).
 */
void
docsync_derive_cover_node(DeriveState *state, Node *node)
{
	if (docsync_typed_expression(node))
		check_type(state, exprType(node), 0);
	if (IsA(node, FuncExpr))
		check_defaults(state, (FuncExpr *) node);
	else if (IsA(node, RangeTblFunction))
	{
		ListCell   *lc;

		foreach(lc, ((RangeTblFunction *) node)->funccoltypes)
			check_type(state, lfirst_oid(lc), 0);
	}
}

/*
 * pg_catalog's functions whose reads no watch can follow (nargs -1: any overload). Those that run
 * SQL text given as an argument are the backend's SPI callers taking a query or a name: the XML
 * exports (xml.c), ts_stat (tsvector_op.c) and ts_rewrite(tsquery, text) (tsquery_rewrite.c); the
 * other SPI callers run fixed queries on catalogs (ruleutils.c) or are triggers (ri_triggers.c).
 * Large objects and sequences change without any change logical decoding reports. set_config
 * changes a setting for what runs after it: under another search_path a SQL function's text body,
 * parsed at its first call, reads other tables than those analysed under the definer's path.
 */
static const struct
{
	const char *name;
	int			nargs;
	const char *what;
}			uncovered_catalog[] = {
	{"query_to_xml", -1, "runs SQL text docsync cannot see"},
	{"query_to_xmlschema", -1, "runs SQL text docsync cannot see"},
	{"query_to_xml_and_xmlschema", -1, "runs SQL text docsync cannot see"},
	{"cursor_to_xml", -1, "runs SQL text docsync cannot see"},
	{"cursor_to_xmlschema", -1, "runs SQL text docsync cannot see"},
	{"table_to_xml", -1, "runs SQL text docsync cannot see"},
	{"table_to_xmlschema", -1, "runs SQL text docsync cannot see"},
	{"table_to_xml_and_xmlschema", -1, "runs SQL text docsync cannot see"},
	{"database_to_xml", -1, "runs SQL text docsync cannot see"},
	{"database_to_xmlschema", -1, "runs SQL text docsync cannot see"},
	{"database_to_xml_and_xmlschema", -1, "runs SQL text docsync cannot see"},
	{"schema_to_xml", -1, "runs SQL text docsync cannot see"},
	{"schema_to_xmlschema", -1, "runs SQL text docsync cannot see"},
	{"schema_to_xml_and_xmlschema", -1, "runs SQL text docsync cannot see"},
	{"ts_stat", -1, "runs SQL text docsync cannot see"},
	{"ts_rewrite", 2, "runs SQL text docsync cannot see"},
	{"set_config", -1, "changes a setting (search_path among them) the rest of the query resolves names and runs under"},
#define LARGE_OBJECT "works on large objects, whose changes logical decoding never reports"
	{"lo_open", -1, LARGE_OBJECT}, {"lo_close", -1, LARGE_OBJECT}, {"loread", -1, LARGE_OBJECT},
	{"lowrite", -1, LARGE_OBJECT}, {"lo_lseek", -1, LARGE_OBJECT}, {"lo_lseek64", -1, LARGE_OBJECT},
	{"lo_tell", -1, LARGE_OBJECT}, {"lo_tell64", -1, LARGE_OBJECT}, {"lo_truncate", -1, LARGE_OBJECT},
	{"lo_truncate64", -1, LARGE_OBJECT}, {"lo_creat", -1, LARGE_OBJECT}, {"lo_create", -1, LARGE_OBJECT},
	{"lo_unlink", -1, LARGE_OBJECT}, {"lo_import", -1, LARGE_OBJECT}, {"lo_export", -1, LARGE_OBJECT},
	{"lo_get", -1, LARGE_OBJECT}, {"lo_put", -1, LARGE_OBJECT}, {"lo_from_bytea", -1, LARGE_OBJECT},
#define SEQUENCE "reads a sequence, whose changes logical decoding never reports"
	{"currval", -1, SEQUENCE}, {"lastval", -1, SEQUENCE}, {"nextval", -1, SEQUENCE},
	{"setval", -1, SEQUENCE}, {"pg_sequence_last_value", -1, SEQUENCE},
	{"pg_sequence_parameters", -1, SEQUENCE},
	{NULL, 0, NULL}
};

/* What a pg_catalog function does that no watch can follow, or NULL. */
const char *
docsync_derive_catalog_uncovered(const char *proname, int nargs)
{
	int			i;

	for (i = 0; uncovered_catalog[i].name != NULL; i++)
		if (strcmp(proname, uncovered_catalog[i].name) == 0 &&
			(uncovered_catalog[i].nargs < 0 || uncovered_catalog[i].nargs == nargs))
			return uncovered_catalog[i].what;
	return NULL;
}

/*
 * Why logical decoding never reports a change of a relation a query reads, or NULL: system
 * catalogs (pg_catalog, information_schema, TOAST), sequences and foreign tables. Tables,
 * partitioned tables (as their partitions) and materialized views (their refresh is DDL, which
 * recomputes) are decoded.
 */
const char *
docsync_derive_undecoded(Oid relid)
{
	char		relkind = get_rel_relkind(relid);
	Oid			nsp = get_rel_namespace(relid);
	char	   *name = quote_qualified_identifier(get_namespace_name(nsp), get_rel_name(relid));

	if (IsCatalogRelationOid(relid) || IsCatalogNamespace(nsp) || IsToastNamespace(nsp) ||
		nsp == get_namespace_oid("information_schema", true))
		return psprintf("%s is a system catalog: logical decoding never reports its changes", name);
	if (relkind == RELKIND_SEQUENCE)
		return psprintf("%s is a sequence: logical decoding never reports its changes", name);
	if (relkind == RELKIND_FOREIGN_TABLE)
		return psprintf("%s is a foreign table: its rows change on another server, which logical decoding never reports", name);
	return NULL;
}
