/*-------------------------------------------------------------------------
 *
 * docsync.h
 *		Declarations shared by the docsync extension's C files.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DOCSYNC_H
#define DOCSYNC_H

#include "replication/output_plugin.h"

extern void _PG_output_plugin_init(OutputPluginCallbacks *cb);

#endif							/* DOCSYNC_H */
