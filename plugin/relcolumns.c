/*-------------------------------------------------------------------------
 *
 * relcolumns.c
 *		The columns a watched relation emits, for relmap.c's cache entry: every live column of the
 *		watched (root) relation or the listed ones, in attnum order, then the listed ones it lacks;
 *		for each, its type's output function, whether it is in the root's and in the changed
 *		relation's replica identity, and its attnum in the changed relation (partitions map columns
 *		by name). Runs in the change callback under the historic snapshot, in the entry's context.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "catalog/pg_class.h"
#include "nodes/bitmapset.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "docsync_wire.h"
#include "plugin.h"

static Bitmapset *identity_columns(Relation relation);
static void warn_missing_once(DocsyncRelEntry *entry, const DocsyncTableColumn *listed);

/* Fills entry->columns: every live column, or the listed ones in attnum order, then missing ones. */
void
docsync_relmap_add_columns(DocsyncRelEntry *entry, Relation root, Relation leaf, bool all_columns, List *listed)
{
	TupleDesc	rdesc = RelationGetDescr(root);
	TupleDesc	ldesc = RelationGetDescr(leaf);
	bool	   *wanted = palloc0(sizeof(bool) * (rdesc->natts + 1));
	List	   *missing = NIL;
	Bitmapset  *root_identity = identity_columns(root);
	Bitmapset  *leaf_identity = identity_columns(leaf);
	ListCell   *lc;
	int			n = 0;
	int			i;

	foreach(lc, listed)
	{
		DocsyncTableColumn *c = lfirst(lc);
		AttrNumber	attnum = InvalidAttrNumber;

		if (c->name == NULL)
		{
			if (c->attnum <= rdesc->natts && !TupleDescAttr(rdesc, c->attnum - 1)->attisdropped)
				attnum = c->attnum;
		}
		else
		{
			for (i = 0; i < rdesc->natts; i++)
			{
				Form_pg_attribute att = TupleDescAttr(rdesc, i);

				if (!att->attisdropped && strcmp(NameStr(att->attname), c->name) == 0)
				{
					attnum = att->attnum;
					break;
				}
			}
		}
		if (attnum != InvalidAttrNumber)
			wanted[attnum] = true;
		else
		{
			ListCell   *m;
			bool		dup = false;

			foreach(m, missing)
			{
				DocsyncTableColumn *o = lfirst(m);

				if (o->attnum == c->attnum &&
					(o->name == NULL ? c->name == NULL : c->name != NULL && strcmp(o->name, c->name) == 0))
					dup = true;
			}
			if (!dup)
			{
				missing = lappend(missing, c);
				warn_missing_once(entry, c);
			}
		}
	}

	entry->columns = palloc0(sizeof(DocsyncColumn) * (rdesc->natts + list_length(missing) + 1));
	for (i = 0; i < rdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(rdesc, i);
		DocsyncColumn *col;
		Oid			outfunc;
		bool		isvarlena;
		int			j;

		if (att->attisdropped || !(all_columns || wanted[att->attnum]))
			continue;
		col = &entry->columns[n++];
		col->attnum = att->attnum;
		col->name = pstrdup(NameStr(att->attname));
		col->typid = att->atttypid;
		col->varlena = att->attlen == -1;
		col->byval = att->attbyval;
		col->typlen = att->attlen;
		if (bms_is_member(att->attnum - FirstLowInvalidHeapAttributeNumber, root_identity))
			col->flags |= DOCSYNC_COL_IDENTITY;
		if (leaf == root)
			col->leaf_attnum = att->attnum;
		else
		{
			/* Partitions may order their columns differently: map by name. */
			for (j = 0; j < ldesc->natts; j++)
			{
				Form_pg_attribute latt = TupleDescAttr(ldesc, j);

				if (!latt->attisdropped && strcmp(NameStr(latt->attname), col->name) == 0)
				{
					col->leaf_attnum = latt->attnum;
					break;
				}
			}
		}
		col->leaf_identity = col->leaf_attnum != InvalidAttrNumber &&
			bms_is_member(col->leaf_attnum - FirstLowInvalidHeapAttributeNumber, leaf_identity);
		getTypeOutputInfo(col->typid, &outfunc, &isvarlena);
		fmgr_info_cxt(outfunc, &col->output, entry->context);
	}
	foreach(lc, missing)
	{
		DocsyncTableColumn *c = lfirst(lc);
		DocsyncColumn *col = &entry->columns[n++];

		col->attnum = c->attnum;
		col->name = pstrdup(c->name ? c->name : "");
		col->typid = InvalidOid;
		col->flags = DOCSYNC_COL_MISSING;
	}
	entry->ncolumns = n;
}

/*
 * The columns whose old values the server logs for this relation, as a bitmap offset by
 * FirstLowInvalidHeapAttributeNumber: every column for REPLICA IDENTITY FULL, the key columns for
 * DEFAULT (primary key) and USING INDEX, none for NOTHING.
 */
static Bitmapset *
identity_columns(Relation relation)
{
	TupleDesc	desc = RelationGetDescr(relation);
	Bitmapset  *result = NULL;
	int			i;

	if (relation->rd_rel->relreplident == REPLICA_IDENTITY_FULL)
	{
		for (i = 0; i < desc->natts; i++)
			if (!TupleDescAttr(desc, i)->attisdropped)
				result = bms_add_member(result, i + 1 - FirstLowInvalidHeapAttributeNumber);
		return result;
	}
	if (relation->rd_rel->relreplident == REPLICA_IDENTITY_NOTHING)
		return NULL;
	return RelationGetIdentityKeyBitmap(relation);
}

/* Warns once per decoding session about a listed column the relation does not have. */
static void
warn_missing_once(DocsyncRelEntry *entry, const DocsyncTableColumn *listed)
{
	char	   *key;

	key = listed->name ? psprintf("%u/%s", entry->root_relid, listed->name)
		: psprintf("%u/#%d", entry->root_relid, listed->attnum);
	if (!docsync_relmap_first_warning(key))
		return;

	if (listed->name)
		ereport(WARNING,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("docsync: column \"%s\" of relation %s does not exist",
						listed->name, quote_qualified_identifier(entry->schema, entry->name)),
				 errdetail("Its values are emitted as unknown."),
				 errhint("Correct the \"tables\" option or the definitions that produced it.")));
	else
		ereport(WARNING,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("docsync: column number %d of relation %s does not exist",
						listed->attnum, quote_qualified_identifier(entry->schema, entry->name)),
				 errdetail("Its values are emitted as unknown."),
				 errhint("Correct the \"tables\" option or the definitions that produced it.")));
}
