/*-------------------------------------------------------------------------
 *
 * status_file.h
 *		The status-file reader (status_file.c) as the SQL functions of status.c use it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DOCSYNC_STATUS_FILE_H
#define DOCSYNC_STATUS_FILE_H

#include "docsync_status.h"

#define STATUS_SUFFIX ".status"

/* One read of one status file. */
typedef struct StatusRead
{
	const char *error;			/* why the file is not trusted, NULL when it is */
	uint32		layout_version; /* the file's layout version, 0 when unknown */
	DocsyncStatusFile *file;	/* the file's contents; valid only when error is NULL */
	bool		missing;		/* removed between listing and opening: skip it */
	int			lock_held;		/* the slot's lock file: 1 held, 0 free, -1 unknown */
} StatusRead;

/* What docsync_status_for_each_file calls for each status file. */
typedef void (*DocsyncStatusEmit) (void *arg, const char *file_name, StatusRead *read);

extern const char *docsync_status_directory_path(void);
extern void docsync_status_read_file(const char *path, StatusRead *result);
extern void docsync_status_name_from_file(const char *file_name, char **database, char **slot);
extern void docsync_status_for_each_file(DocsyncStatusEmit emit, void *arg);
extern char *docsync_status_slot_stem(const char *database, const char *slot);

#endif							/* DOCSYNC_STATUS_FILE_H */
