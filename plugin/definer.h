/*-------------------------------------------------------------------------
 *
 * definer.h
 *		In whose rights, and under which search_path, docsync parses and analyses the SQL a definer
 *		wrote (definer.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DOCSYNC_DEFINER_H
#define DOCSYNC_DEFINER_H

#include "fmgr.h"
#include "nodes/parsenodes.h"

/* What docsync_definer_enter changed, for docsync_definer_leave to put back. */
typedef struct DocsyncDefinerSave
{
	Oid			userid;			/* the user before */
	int			sec_context;	/* its security context */
	int			guc_level;		/* GUC nest level holding the search_path set */
} DocsyncDefinerSave;

/* The role whose text a call analyses: its argument argno, or by default the API caller or the user. */
extern Oid	docsync_text_role(FunctionCallInfo fcinfo, int argno);

/*
 * Becomes `role` under SECURITY_RESTRICTED_OPERATION with search_path (NULL: the current one)
 * until docsync_definer_leave (success false from a PG_CATCH); only a member of role may.
 */
extern void docsync_definer_enter(Oid role, const char *search_path, DocsyncDefinerSave *save);
extern void docsync_definer_leave(DocsyncDefinerSave *save, bool success);

/* sqlapi.c: parse analysis of one SELECT as role, under search_path (NULL: the current one). */
extern Query *docsync_analyze_select(Oid role, const char *sql, const char *search_path,
									 Oid **param_types, int *nparams, RawStmt **parsed);

/* Raises unless a rewritten query uses no temporary relation, type or function. */
extern void docsync_refuse_temporary(Query *query);

#endif							/* DOCSYNC_DEFINER_H */
