/*-------------------------------------------------------------------------
 *
 * docsync.h
 *		Declarations shared by the docsync extension's C files.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DOCSYNC_H
#define DOCSYNC_H

#include "nodes/parsenodes.h"
#include "replication/output_plugin.h"

extern void _PG_output_plugin_init(OutputPluginCallbacks *cb);

/* status_file.c: the workers' status files */
extern void docsync_status_init(void);
extern bool docsync_status_gap_open(const char *slot);

/* closure.c: the types and collations a doc query's expressions use */
extern bool docsync_typed_expression(Node *node);
extern void docsync_collect_expression_types(Node *node, List **types, List **collations);
extern void docsync_param_collations(Query *query, int nparams, Oid *collations);

/* reader.c: the role a worker's compute runs as */
extern void docsync_reader_init(void);

#endif							/* DOCSYNC_H */
