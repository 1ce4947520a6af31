/*-------------------------------------------------------------------------
 *
 * ddl.h
 *		The DDL event triggers (ddl.c) and what they derive again (ddl_derive.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DOCSYNC_DDL_H
#define DOCSYNC_DDL_H

#include "nodes/pg_list.h"

/* What a DDL command touched, as far as derived watches care. */
typedef struct DdlTouched
{
	List	   *relids;			/* relations it made, changed or dropped */
	List	   *names;			/* names of the relations it made or renamed */
	bool		everything;		/* something else (a function, a type, …): every query may change */
} DdlTouched;

/*
 * Calls docsync.<name>(args) as the function's owner (the extension's); nothing when the helper is
 * missing (an extension being dropped or mid-update).
 */
extern void docsync_call_helper(const char *name, int nargs, Oid *types, Datum *args, bool *nulls);

/* Notes an object a DDL command touched; names: it made or renamed it. */
extern void docsync_ddl_touch(DdlTouched *touched, Oid classid, Oid objid, bool names);

/* Derives again the watches of the queries with derived watches that what was touched may change. */
extern void docsync_ddl_rederive(DdlTouched *touched);

#endif							/* DOCSYNC_DDL_H */
