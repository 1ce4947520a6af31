/*-------------------------------------------------------------------------
 *
 * plugin.h
 *		Internal declarations of the docsync output plugin: the parsed options (options.c), the
 *		per-relation decision cache (relmap.c, its columns by relcolumns.c) and the state the
 *		callbacks share (decode.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DOCSYNC_PLUGIN_H
#define DOCSYNC_PLUGIN_H

#include "access/attnum.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "utils/relcache.h"

/* The schema of the extension's own tables: always emitted with every column. */
#define DOCSYNC_SCHEMA "docsync"

/* One column named in a `tables` entry: an attnum (OID entries) or an identifier (named entries). */
typedef struct DocsyncTableColumn
{
	AttrNumber	attnum;			/* OID entry: the listed attnum; named entry: 0 */
	char	   *name;			/* named entry: the identifier, case already folded; else NULL */
} DocsyncTableColumn;

/* One entry of the `tables` option. */
typedef struct DocsyncTableEntry
{
	Oid			relid;			/* OID entry: the relation; named entry: InvalidOid */
	char	   *schema;			/* named entry: schema, or NULL for "visible on search_path" */
	char	   *name;			/* named entry: relation name */
	List	   *columns;		/* DocsyncTableColumn *, or NIL for every column */
} DocsyncTableEntry;

/* The plugin's options, parsed once at slot start. */
typedef struct DocsyncOptions
{
	int			proto_version;	/* wire version the client speaks */
	bool		binary;			/* format binary (true) or text (false) */
	bool		messages;		/* pass through messages whose prefix starts with "docsync" */
	bool		origin_none;	/* skip changes that carry a replication origin */
	List	   *tables;			/* DocsyncTableEntry * */
} DocsyncOptions;

/* One emitted column of a watched relation. */
typedef struct DocsyncColumn
{
	AttrNumber	attnum;			/* in the watched (root) relation; 0 when unknown */
	AttrNumber	leaf_attnum;	/* in the changed relation; 0 when it has no such column */
	char	   *name;			/* column name ("" when unknown) */
	Oid			typid;			/* type, InvalidOid when the column is missing */
	uint8		flags;			/* DOCSYNC_COL_* */
	bool		leaf_identity;	/* part of the changed relation's replica identity */
	bool		varlena;		/* typlen -1: may be an unchanged out-of-line value */
	bool		byval;			/* the type's typbyval, for comparing old and new datums */
	int16		typlen;			/* the type's typlen, likewise */
	FmgrInfo	output;			/* the type's text output function */
} DocsyncColumn;

/*
 * What to do with changes of one relation (the cache key). An unwatched relation's entry records
 * only that (no memory context, no names or columns). Entries handed out by docsync_relmap_get stay
 * in place until docsync_relmap_release, whatever invalidations arrive in between.
 */
typedef struct DocsyncRelEntry
{
	Oid			relid;			/* hash key: the changed relation */
	bool		valid;			/* false once invalidated while in use: dropped on release */
	bool		watched;		/* emit its changes at all */
	bool		in_use;			/* handed out since the last docsync_relmap_release */
	bool		relation_sent;	/* the root's current RELATION is known sent (cleared on rebuild) */
	struct DocsyncRelEntry *next_in_use;	/* the other entries in use */
	MemoryContext context;		/* watched only: holds names and columns; else NULL */
	Oid			root_relid;		/* the watched relation reported (the root for partitions) */
	uint64		root_generation;	/* the root's cache generation this entry was built against */
	char	   *schema;			/* schema of root_relid */
	char	   *name;			/* name of root_relid */
	char		replident;		/* root's pg_class.relreplident */
	char		leaf_replident; /* changed relation's relreplident: what the server logs */
	int			ncolumns;		/* emitted columns */
	DocsyncColumn *columns;		/* emitted columns, in RELATION order */
} DocsyncRelEntry;

/* options.c */
extern void docsync_parse_options(DocsyncOptions *options, List *defelems);
extern List *docsync_parse_tables(const char *value);

/* relmap.c */
extern void docsync_relmap_init(MemoryContext parent, List *tables);
extern DocsyncRelEntry *docsync_relmap_get(Relation relation);
extern void docsync_relmap_release(void);
extern void docsync_relmap_reset(void);
extern bool docsync_relmap_needs_relation(DocsyncRelEntry *entry);
extern void docsync_relmap_relation_written(DocsyncRelEntry *entry);
extern bool docsync_relmap_first_warning(const char *key);

/* relcolumns.c */
extern void docsync_relmap_add_columns(DocsyncRelEntry *entry, Relation root, Relation leaf,
									   bool all_columns, List *listed);

#endif							/* DOCSYNC_PLUGIN_H */
