/*-------------------------------------------------------------------------
 *
 * relmap.c
 *		The docsync output plugin's per-relation decision cache: is a changed relation watched, which
 *		relation is it reported as (the root for partitions), and which of its columns are emitted.
 *
 * Entries are keyed by the changed relation's OID and built lazily in the change callback, under the
 * historic snapshot, so names and attnums are resolved as they were when the change was made. An
 * unwatched relation costs a bare entry that says so; a watched one owns a small memory context with
 * its names and columns. A second, smaller table holds one entry per watched (reported) relation:
 * whether its RELATION record was sent, and a generation that changes whenever that entry is
 * dropped and made anew, which is how partitions notice that their root changed.
 *
 * A relcache invalidation looks up only the relation it names (InvalidOid: every entry) and drops
 * its entries, so the cache holds nothing for dropped relations, whatever the churn. Invalidations
 * can arrive in the middle of a callback (whenever the catalogs are read), so an entry handed out to
 * the current callback is only marked invalid and is dropped when the callback releases it, and
 * memory an entry in use still points to is never freed before then.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "plugin.h"

/* One watched (reported) relation: the root of partitions, or the changed relation itself. */
typedef struct RelmapRoot
{
	Oid			relid;			/* hash key */
	uint64		generation;		/* unique to this entry: a later entry of the same relid differs */
	bool		relation_sent;	/* its RELATION record was written since the entry was made */
} RelmapRoot;

/* The cache of one decoding session (backend-local: a backend decodes one slot at a time). */
static MemoryContext relmap_context = NULL; /* owns the hashes, contexts and warnings */
static MemoryContext relmap_retired = NULL; /* contexts replaced while in use, freed on release */
static HTAB *relmap = NULL;		/* DocsyncRelEntry by changed relid */
static HTAB *relmap_roots = NULL;	/* RelmapRoot by watched (reported) relid */
static DocsyncRelEntry *relmap_in_use = NULL;	/* entries handed out since the last release */
static List *relmap_tables = NIL;	/* the parsed `tables` option */
static bool relmap_has_names = false;	/* some entry names its relation */
static List *relmap_warned = NIL;	/* "relid/column" keys already warned about */
static bool callbacks_registered = false;	/* invalidation callbacks are per backend, forever */

/* Counters of the backend: root generations handed out, and invalidation callbacks run. */
static uint64 relmap_generation = 0;
static uint64 relmap_invalidations = 0;

static void relmap_build(DocsyncRelEntry *entry, Relation relation);
static bool relmap_root_current(DocsyncRelEntry *entry);
static void relmap_drop(DocsyncRelEntry *entry);
static bool relmap_match(Oid relid, bool *all_columns, List **columns);
static void relmap_invalidate_relation(Datum arg, Oid relid);
static void relmap_invalidate_all(Datum arg, int cacheid, uint32 hashvalue);
static void relmap_forget(void *arg);

/* Sets up the cache for a decoding session; tables must live at least as long as the session. */
void
docsync_relmap_init(MemoryContext parent, List *tables)
{
	HASHCTL		ctl;
	ListCell   *lc;

	MemoryContextCallback *forget;

	docsync_relmap_reset();
	relmap_context = AllocSetContextCreate(parent, "docsync relation cache", ALLOCSET_DEFAULT_SIZES);
	relmap_retired = AllocSetContextCreate(relmap_context, "docsync retired relations",
										   ALLOCSET_SMALL_SIZES);

	/*
	 * The decoding context (and with it this cache) is freed without a shutdown callback when the
	 * session ends in an error: forget the pointers then, or the next session would use freed memory.
	 */
	forget = MemoryContextAlloc(relmap_context, sizeof(MemoryContextCallback));
	forget->func = relmap_forget;
	forget->arg = NULL;
	MemoryContextRegisterResetCallback(relmap_context, forget);
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(DocsyncRelEntry);
	ctl.hcxt = relmap_context;
	relmap = hash_create("docsync relations", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	ctl.entrysize = sizeof(RelmapRoot);
	relmap_roots = hash_create("docsync watched relations", 64, &ctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	relmap_in_use = NULL;
	relmap_tables = tables;
	relmap_has_names = false;
	foreach(lc, tables)
	{
		DocsyncTableEntry *t = lfirst(lc);

		if (t->name != NULL)
			relmap_has_names = true;
	}
	relmap_warned = NIL;

	if (!callbacks_registered)
	{
		CacheRegisterRelcacheCallback(relmap_invalidate_relation, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID, relmap_invalidate_all, (Datum) 0);
		callbacks_registered = true;
	}
}

/*
 * Forgets the session's cache (the callbacks stay registered and then do nothing). At session end
 * it reports at DEBUG1 what the cache still holds.
 */
void
docsync_relmap_reset(void)
{
	if (relmap != NULL && message_level_is_interesting(DEBUG1))
	{
		HASH_SEQ_STATUS status;
		DocsyncRelEntry *entry;
		long		watched = 0;

		hash_seq_init(&status, relmap);
		while ((entry = hash_seq_search(&status)) != NULL)
		{
			if (entry->watched)
				watched++;
		}
		elog(DEBUG1, "docsync: relation cache at session end: %ld relations, %ld of them watched, %ld reported relations",
			 (long) hash_get_num_entries(relmap), watched, (long) hash_get_num_entries(relmap_roots));
	}
	if (relmap_context != NULL)
		MemoryContextDelete(relmap_context);	/* runs relmap_forget */
	relmap_forget(NULL);
}

/* Clears the pointers into the cache's memory (reset callback of its context, and reset). */
static void
relmap_forget(void *arg)
{
	relmap_context = NULL;
	relmap_retired = NULL;
	relmap = NULL;
	relmap_roots = NULL;
	relmap_in_use = NULL;
	relmap_tables = NIL;
	relmap_warned = NIL;
}

/*
 * Does the entry's watched relation need a RELATION record first? Its description depends only on
 * the watched (root) relation, so partitions of one root share one record, sent again only after
 * the root's invalidation.
 */
bool
docsync_relmap_needs_relation(DocsyncRelEntry *entry)
{
	RelmapRoot *root = hash_search(relmap_roots, &entry->root_relid, HASH_FIND, NULL);

	return root == NULL || root->generation != entry->root_generation || !root->relation_sent;
}

/*
 * Notes that the entry's RELATION record was written. When the root was invalidated since the entry
 * was built, nothing is noted: the next change rebuilds the entry and writes the record again.
 */
void
docsync_relmap_relation_written(DocsyncRelEntry *entry)
{
	RelmapRoot *root = hash_search(relmap_roots, &entry->root_relid, HASH_FIND, NULL);

	if (root != NULL && root->generation == entry->root_generation)
		root->relation_sent = true;
}

/*
 * The decision for a changed relation, built or rebuilt as needed. The entry stays valid memory
 * until docsync_relmap_release, which every callback that gets entries calls when done with them.
 */
DocsyncRelEntry *
docsync_relmap_get(Relation relation)
{
	Oid			relid = RelationGetRelid(relation);
	DocsyncRelEntry *entry;
	bool		found;

	Assert(relmap != NULL);
	entry = hash_search(relmap, &relid, HASH_ENTER, &found);
	if (!found)
	{
		entry->valid = false;
		entry->watched = false;
		entry->in_use = false;
		entry->next_in_use = NULL;
		entry->context = NULL;
		entry->root_relid = InvalidOid;
		entry->root_generation = 0;
	}
	else if (entry->valid && !relmap_root_current(entry))
		entry->valid = false;
	if (!entry->in_use)
	{
		entry->in_use = true;
		entry->next_in_use = relmap_in_use;
		relmap_in_use = entry;
	}
	if (!entry->valid)
		relmap_build(entry, relation);
	return entry;
}

/*
 * Ends the use of the entries handed out: those invalidated meanwhile are dropped now, and contexts
 * replaced while in use are freed.
 */
void
docsync_relmap_release(void)
{
	while (relmap_in_use != NULL)
	{
		DocsyncRelEntry *entry = relmap_in_use;

		relmap_in_use = entry->next_in_use;
		entry->in_use = false;
		entry->next_in_use = NULL;
		if (!entry->valid)
			relmap_drop(entry);
	}
	if (relmap_retired != NULL)
		MemoryContextReset(relmap_retired);
}

/*
 * Is a watched partition's entry still built against its root's current cache entry? (An entry of
 * a relation reported as itself is invalidated directly, with the relation.)
 */
static bool
relmap_root_current(DocsyncRelEntry *entry)
{
	RelmapRoot *root;

	if (!entry->watched || entry->root_relid == entry->relid)
		return true;
	root = hash_search(relmap_roots, &entry->root_relid, HASH_FIND, NULL);
	return root != NULL && root->generation == entry->root_generation;
}

/* Removes an entry that is not in use, with its memory. */
static void
relmap_drop(DocsyncRelEntry *entry)
{
	Oid			relid = entry->relid;

	Assert(!entry->in_use);
	if (entry->context != NULL)
		MemoryContextDelete(entry->context);
	hash_search(relmap, &relid, HASH_REMOVE, NULL);
}

/* (Re)builds one entry, which is in use, from the catalogs as the historic snapshot sees them. */
static void
relmap_build(DocsyncRelEntry *entry, Relation relation)
{
	Oid			relid = RelationGetRelid(relation);
	Oid			root_relid = InvalidOid;
	bool		all_columns = false;
	List	   *listed = NIL;
	Relation	root;
	MemoryContext old;
	char	   *nspname;
	uint64		invalidations = relmap_invalidations;

	Assert(entry->in_use);

	/* The previous contents may still be used by the current callback: free them on release. */
	if (entry->context != NULL)
		MemoryContextSetParent(entry->context, relmap_retired);
	entry->context = NULL;
	entry->watched = false;
	entry->relation_sent = false;
	entry->root_relid = InvalidOid;
	entry->root_generation = 0;
	entry->schema = NULL;
	entry->name = NULL;
	entry->ncolumns = 0;
	entry->columns = NULL;

	/* What is read to decide is scratch, in the caller's (per-change) context. */
	nspname = get_namespace_name(RelationGetNamespace(relation));
	if (nspname != NULL && strcmp(nspname, DOCSYNC_SCHEMA) == 0)
	{
		/* The extension's own tables: always, every column. */
		root_relid = relid;
		all_columns = true;
	}
	else
	{
		/* The topmost watched ancestor wins, as with publish_via_partition_root. */
		if (relation->rd_rel->relispartition)
		{
			List	   *ancestors = get_partition_ancestors(relid);
			ListCell   *lc;

			foreach(lc, ancestors)
			{
				bool		a_all = false;
				List	   *a_listed = NIL;

				if (relmap_match(lfirst_oid(lc), &a_all, &a_listed))
				{
					root_relid = lfirst_oid(lc);
					all_columns = a_all;
					listed = a_listed;
				}
			}
		}
		if (!OidIsValid(root_relid) && relmap_match(relid, &all_columns, &listed))
			root_relid = relid;
	}

	if (OidIsValid(root_relid))
	{
		RelmapRoot *root_entry;
		bool		found;

		entry->context = AllocSetContextCreate(relmap_context, "docsync relation",
											   ALLOCSET_SMALL_SIZES);
		old = MemoryContextSwitchTo(entry->context);
		root = root_relid == relid ? relation : RelationIdGetRelation(root_relid);
		if (root == NULL)
			elog(ERROR, "could not open relation with OID %u", root_relid);
		entry->watched = true;
		entry->root_relid = root_relid;
		entry->schema = get_namespace_name(RelationGetNamespace(root));
		if (entry->schema == NULL)
			entry->schema = psprintf("%u", RelationGetNamespace(root));	/* cannot happen */
		entry->name = pstrdup(RelationGetRelationName(root));
		entry->replident = root->rd_rel->relreplident;
		entry->leaf_replident = relation->rd_rel->relreplident;
		docsync_relmap_add_columns(entry, root, relation, all_columns, listed);
		if (root != relation)
			RelationClose(root);
		MemoryContextSwitchTo(old);

		root_entry = hash_search(relmap_roots, &root_relid, HASH_ENTER, &found);
		if (!found)
		{
			root_entry->generation = ++relmap_generation;
			root_entry->relation_sent = false;
		}
		entry->root_generation = root_entry->generation;
	}

	/*
	 * An invalidation that arrived while the catalogs were read may have made what was read stale:
	 * the entry then serves the current change only, and the next change rebuilds it.
	 */
	entry->valid = relmap_invalidations == invalidations;
}

/*
 * Does some `tables` entry name this relation? The union of the matching entries' columns goes to
 * *columns; *all_columns is set when one of them lists no columns.
 */
static bool
relmap_match(Oid relid, bool *all_columns, List **columns)
{
	bool		matched = false;
	char	   *relname = NULL;
	char	   *nspname = NULL;
	ListCell   *lc;

	if (relmap_has_names)
	{
		relname = get_rel_name(relid);
		if (relname != NULL)
			nspname = get_namespace_name(get_rel_namespace(relid));
	}
	foreach(lc, relmap_tables)
	{
		DocsyncTableEntry *t = lfirst(lc);

		if (OidIsValid(t->relid))
		{
			if (t->relid != relid)
				continue;
		}
		else
		{
			if (relname == NULL || nspname == NULL || strcmp(t->name, relname) != 0)
				continue;
			if (t->schema != NULL ? strcmp(t->schema, nspname) != 0 : !RelationIsVisible(relid))
				continue;
		}
		matched = true;
		if (t->columns == NIL)
			*all_columns = true;
		else
			*columns = list_concat(*columns, t->columns);
	}
	return matched;
}

/*
 * Whether a warning keyed by key is the first of its kind in this decoding session; records it. The
 * keys live as long as the cache.
 */
bool
docsync_relmap_first_warning(const char *key)
{
	ListCell   *lc;
	MemoryContext old;

	foreach(lc, relmap_warned)
	{
		if (strcmp(lfirst(lc), key) == 0)
			return false;
	}
	old = MemoryContextSwitchTo(relmap_context);
	relmap_warned = lappend(relmap_warned, pstrdup(key));
	MemoryContextSwitchTo(old);
	return true;
}

/*
 * Relcache invalidation of one relation (InvalidOid: of all): drops its entry, or marks it invalid
 * while in use, and forgets the RELATION record sent for it as a watched relation. Partitions
 * reported as it notice on their next change, by the generation of its watched-relation entry.
 */
static void
relmap_invalidate_relation(Datum arg, Oid relid)
{
	DocsyncRelEntry *entry;

	if (relmap == NULL)
		return;
	relmap_invalidations++;
	if (OidIsValid(relid))
	{
		entry = hash_search(relmap, &relid, HASH_FIND, NULL);
		if (entry != NULL)
		{
			if (entry->in_use)
				entry->valid = false;
			else
				relmap_drop(entry);
		}
		hash_search(relmap_roots, &relid, HASH_REMOVE, NULL);
	}
	else
	{
		HASH_SEQ_STATUS status;
		RelmapRoot *root;

		hash_seq_init(&status, relmap);
		while ((entry = hash_seq_search(&status)) != NULL)
		{
			if (entry->in_use)
				entry->valid = false;
			else
				relmap_drop(entry);
		}
		hash_seq_init(&status, relmap_roots);
		while ((root = hash_seq_search(&status)) != NULL)
			hash_search(relmap_roots, &root->relid, HASH_REMOVE, NULL);
	}
}

/* Namespace changes (a renamed schema) can change what a named entry matches: rebuild everything. */
static void
relmap_invalidate_all(Datum arg, int cacheid, uint32 hashvalue)
{
	relmap_invalidate_relation(arg, InvalidOid);
}
