/*-------------------------------------------------------------------------
 *
 * docsync.c
 *		Module entry point of the docsync extension library: the module magic, the logical decoding
 *		output plugin's entry point (callbacks live in decode.c) and the library's initialisation.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "docsync.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* Library load: defines the library's settings and ends each compute with its transaction. */
void
_PG_init(void)
{
	docsync_status_init();
	docsync_reader_init();
}
