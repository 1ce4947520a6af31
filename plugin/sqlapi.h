/*-------------------------------------------------------------------------
 *
 * sqlapi.h
 *		Declarations shared by the SQL API's C files: parse analysis of a doc or keys query
 *		(sqlapi.c), used by its batched form (batch.c) too.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DOCSYNC_SQLAPI_H
#define DOCSYNC_SQLAPI_H

#include "nodes/parsenodes.h"

extern Query *docsync_analyze_select(const char *sql, const char *search_path, Oid **param_types,
									 int *nparams, RawStmt **parsed);

#endif							/* DOCSYNC_SQLAPI_H */
