/*-------------------------------------------------------------------------
 *
 * status_file.c
 *		Reads the workers' status files (layout: shared/docsync_status.h) and what this server can see
 *		of their lock files, and defines the docsync.status_dir setting naming their directory. The
 *		SQL functions that make rows of them are in status.c; docsync.wait_published asks
 *		docsync_status_gap_open.
 *
 * Files are read with pread() only, never mapped: a file truncated under a mapping would kill this
 * backend with SIGBUS and make the postmaster restart the whole server. Each file is read as seq,
 * header and body, seq, with read barriers between, and trusted only when the two seq values are
 * equal and even and the body's CRC matches; an update in progress is retried a bounded number of
 * times. A file of another layout version is reported with its version, and nothing else of it is
 * read. Liveness is not decided here: the views combine the heartbeat with the slot's active_pid
 * (no pid probing: the worker may run in another container sharing the directory).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "commands/dbcommands.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/fd.h"
#include "utils/guc.h"

#include "docsync.h"
#include "status_file.h"

/* The directory the workers write their status files to (docsync.status_dir). */
static char *docsync_status_dir = NULL;

#define STATUS_DIR_DEFAULT "/run/docsync"
#define STATUS_MAX_ATTEMPTS 100		/* reads of one file while updates are in progress */
#define STATUS_SPIN_ATTEMPTS 10		/* attempts before sleeping between them */
#define STATUS_RETRY_SLEEP_US 100

/* Registers docsync.status_dir; called from _PG_init. */
void
docsync_status_init(void)
{
	DefineCustomStringVariable("docsync.status_dir",
							   "Directory where docsync workers write their status files.",
							   "Must be the directory given to docsync-worker --status-dir, on a host or volume "
							   "the server shares with the worker.",
							   &docsync_status_dir,
							   STATUS_DIR_DEFAULT,
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);
#if PG_VERSION_NUM >= 150000
	/* a misspelt docsync.* setting is an error, not a silently ignored placeholder */
	MarkGUCPrefixReserved("docsync");
#else
	EmitWarningsOnPlaceholders("docsync");
#endif
}

/* The directory docsync.status_dir names. */
const char *
docsync_status_directory_path(void)
{
	return docsync_status_dir ? docsync_status_dir : STATUS_DIR_DEFAULT;
}

/*
 * Reads one status file with pread: seq, everything, seq, with read barriers between, retried while
 * an update is in progress. Never errors for a bad file: the problem is described in result->error.
 */
void
docsync_status_read_file(const char *path, StatusRead *result)
{
	int			fd;
	struct stat st;
	DocsyncStatusCheck check = DOCSYNC_STATUS_SHORT;
	uint64		first_seq = 0;
	bool		seq_stuck_odd = true;
	int			attempt;

	result->error = NULL;
	result->missing = false;
	result->layout_version = 0;
	result->file = palloc0(sizeof(DocsyncStatusFile));

	/* O_NONBLOCK: a FIFO planted in the directory must not hang the backend. */
	fd = OpenTransientFile(path, O_RDONLY | O_NONBLOCK | PG_BINARY);
	if (fd < 0)
	{
		result->missing = (errno == ENOENT);
		result->error = psprintf("cannot open status file: %m");
		return;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
	{
		CloseTransientFile(fd);
		result->error = "not a regular file";
		return;
	}

	for (attempt = 1; attempt <= STATUS_MAX_ATTEMPTS; attempt++)
	{
		uint64		before = 0;
		uint64		after = 0;
		ssize_t		n0,
					n,
					n1;

		CHECK_FOR_INTERRUPTS();
		n0 = pread(fd, &before, sizeof(before), DOCSYNC_STATUS_SEQ_OFFSET);
		pg_read_barrier();
		n = pread(fd, result->file, sizeof(DocsyncStatusFile), 0);
		pg_read_barrier();
		n1 = pread(fd, &after, sizeof(after), DOCSYNC_STATUS_SEQ_OFFSET);
		if (n0 < 0 || n < 0 || n1 < 0)
		{
			result->error = psprintf("cannot read status file: %m");
			CloseTransientFile(fd);
			return;
		}
		if (n0 != (ssize_t) sizeof(before) || n1 != (ssize_t) sizeof(after))
			before = after = 1;
		check = docsync_status_check(result->file, (size_t) n, before, after);
		if (n >= 8 && result->file->magic == DOCSYNC_STATUS_MAGIC)
			result->layout_version = result->file->layout_version;
		if (attempt == 1)
			first_seq = before;
		if (before != first_seq || after != first_seq || (before & 1) == 0)
			seq_stuck_odd = false;
		if (check != DOCSYNC_STATUS_RETRY)
			break;
		if (attempt > STATUS_SPIN_ATTEMPTS)
			pg_usleep(STATUS_RETRY_SLEEP_US);
	}
	CloseTransientFile(fd);

	/* A writer that died inside an update leaves seq odd; its body counts only if its CRC matches. */
	if (check == DOCSYNC_STATUS_RETRY && seq_stuck_odd && docsync_status_abandoned_update_ok(result->file))
		check = DOCSYNC_STATUS_OK;

	switch (check)
	{
		case DOCSYNC_STATUS_OK:
			result->error = NULL;
			break;
		case DOCSYNC_STATUS_RETRY:
			result->error = "status file changed on every read, or its writer stopped in the middle of an update";
			break;
		case DOCSYNC_STATUS_SHORT:
			result->error = "status file is too short: being created, or truncated";
			break;
		case DOCSYNC_STATUS_BAD_MAGIC:
			result->error = "not a docsync status file (wrong magic number)";
			break;
		case DOCSYNC_STATUS_FOREIGN_VERSION:
			result->error = psprintf("status file has layout version %u, this extension reads version %u: "
									 "use a docsync-worker and an extension of the same release",
									 result->layout_version, DOCSYNC_STATUS_LAYOUT_VERSION);
			break;
		case DOCSYNC_STATUS_BAD_SIZE:
			result->error = "status file has the wrong size for its layout version: corrupt";
			break;
		case DOCSYNC_STATUS_BAD_CRC:
			result->error = "status file body fails its CRC check: corrupt";
			break;
	}
}

/*
 * Database and slot from a file name "<database>.<slot>.status" (database %XX-escaped), for files
 * whose body cannot be trusted.
 */
void
docsync_status_name_from_file(const char *file_name, char **database, char **slot)
{
	size_t		len = strlen(file_name) - strlen(STATUS_SUFFIX);
	char	   *stem = pnstrdup(file_name, len);
	char	   *dot = strrchr(stem, '.');
	StringInfoData db;
	const char *p;

	if (dot == NULL)
	{
		*database = NULL;
		*slot = stem;
		return;
	}
	*dot = '\0';
	*slot = dot + 1;
	initStringInfo(&db);
	for (p = stem; *p; p++)
	{
		if (p[0] == '%' && isxdigit((unsigned char) p[1]) && isxdigit((unsigned char) p[2]))
		{
			char		hex[3] = {p[1], p[2], '\0'};

			appendStringInfoChar(&db, (char) strtol(hex, NULL, 16));
			p += 2;
		}
		else
			appendStringInfoChar(&db, *p);
	}
	*database = db.data;
	if (!pg_verify_mbstr(PG_UTF8, *database, strlen(*database), true))
		*database = NULL;
	if (!pg_verify_mbstr(PG_UTF8, *slot, strlen(*slot), true))
		*slot = NULL;
}

/* The start of a small file, NUL-terminated; empty when it cannot be read. */
static void
read_small_file(const char *path, char *buf, size_t size)
{
	int			fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	ssize_t		n = fd >= 0 ? pread(fd, buf, size - 1, 0) : -1;

	if (fd >= 0)
		CloseTransientFile(fd);
	buf[n > 0 ? n : 0] = '\0';
}

/*
 * What this server can see of workers' locks, read once per scan of the status directory: its
 * kernel's boot id and the kernel's table of locks (/proc/locks).
 */
typedef struct LockView
{
	char		boot_id[64];
	bool		readable;		/* /proc/locks could be read */
	StringInfoData locks;		/* its contents: empty when no process holds a lock */
} LockView;

static void
load_lock_view(LockView *view)
{
	FILE	   *locks = AllocateFile("/proc/locks", "r");
	char		buf[1024];
	size_t		n;

	read_small_file("/proc/sys/kernel/random/boot_id", view->boot_id, sizeof(view->boot_id));
	view->boot_id[strcspn(view->boot_id, "\n")] = '\0';
	initStringInfo(&view->locks);
	view->readable = locks != NULL;
	while (locks != NULL && (n = fread(buf, 1, sizeof(buf), locks)) > 0)
		appendBinaryStringInfo(&view->locks, buf, (int) n);
	if (locks != NULL)
		FreeFile(locks);
}

/*
 * Whether the worker that wrote the lock file at `path` still holds its flock(): 1 held, 0 free, -1
 * unknown. A running worker holds its slot's lock file for its lifetime, and the kernel drops the
 * lock the moment the process dies, so a free lock proves the worker gone. Only the kernel that
 * holds a lock shows it: the worker writes its kernel's boot id under its pid ("<pid>\n<boot id>\n"),
 * and a lock file of another kernel (a worker on another host sharing the volume) or without one is
 * unknown. Read from /proc/locks, never by taking the lock: a lock held here even for a moment would
 * make a worker starting at that moment refuse to start.
 */
static int
flock_held(const char *path, LockView *view)
{
	struct stat st;
	char		contents[128];
	char	   *theirs;
	char		wanted[64];
	const char *at;

	if (stat(path, &st) != 0 || !view->readable)
		return -1;
	read_small_file(path, contents, sizeof(contents));
	theirs = strchr(contents, '\n');
	if (theirs == NULL)
		return -1;
	theirs++;
	theirs[strcspn(theirs, "\n")] = '\0';
	if (theirs[0] == '\0' || strcmp(theirs, view->boot_id) != 0)
		return -1;

	/* "1: FLOCK  ADVISORY  WRITE 4242 fe:00:10952835 0 EOF"; a waiter's line has "->" after the number */
	snprintf(wanted, sizeof(wanted), " %02x:%02x:%lu ", major(st.st_dev), minor(st.st_dev),
			 (unsigned long) st.st_ino);
	for (at = view->locks.data; (at = strstr(at, wanted)) != NULL; at += strlen(wanted))
	{
		const char *line = at;
		size_t		length;

		while (line > view->locks.data && line[-1] != '\n')
			line--;
		length = at - line;
		if (memmem(line, length, " FLOCK ", 7) != NULL && memmem(line, length, "->", 2) == NULL)
			return 1;
	}
	return 0;
}

/* Calls emit for every "*.status" file in docsync.status_dir, in directory order. */
void
docsync_status_for_each_file(DocsyncStatusEmit emit, void *arg)
{
	const char *dir_path = docsync_status_dir ? docsync_status_dir : STATUS_DIR_DEFAULT;
	DIR		   *dir;
	struct dirent *de;
	MemoryContext per_file;
	MemoryContext old;
	LockView	locks;

	dir = AllocateDir(dir_path);
	if (dir == NULL)
	{
		/* No directory: no worker writes here. The views still show what the server knows. */
		if (errno != ENOENT)
			ereport(WARNING,
					(errcode_for_file_access(),
					 errmsg("could not open docsync status directory \"%s\": %m", dir_path),
					 errhint("Make docsync.status_dir readable by the server's operating system user.")));
		return;
	}
	per_file = AllocSetContextCreate(CurrentMemoryContext, "docsync status file", ALLOCSET_DEFAULT_SIZES);
	load_lock_view(&locks);
	while ((de = ReadDirExtended(dir, dir_path, WARNING)) != NULL)
	{
		size_t		len = strlen(de->d_name);
		StatusRead read;
		char	   *path;

		if (de->d_name[0] == '.' || len <= strlen(STATUS_SUFFIX) ||
			strcmp(de->d_name + len - strlen(STATUS_SUFFIX), STATUS_SUFFIX) != 0)
			continue;
		old = MemoryContextSwitchTo(per_file);
		path = psprintf("%s/%s", dir_path, de->d_name);
		docsync_status_read_file(path, &read);
		read.lock_held = flock_held(psprintf("%s/%.*s.lock", dir_path, (int) (len - strlen(STATUS_SUFFIX)),
											 de->d_name), &locks);
		MemoryContextSwitchTo(old);
		if (!read.missing)
			emit(arg, de->d_name, &read);
		MemoryContextReset(per_file);
	}
	FreeDir(dir);
	MemoryContextDelete(per_file);
}

/* ---- docsync.forget_slot(slot, database) ---- */

/* The database name as the worker writes it in file names: '/', '%', control bytes and a leading '.' as %XX. */
static char *
escape_database(const char *database)
{
	StringInfoData out;
	const unsigned char *p;

	initStringInfo(&out);
	for (p = (const unsigned char *) database; *p; p++)
	{
		if (*p == '/' || *p == '%' || *p < 0x20 || *p == 0x7F || (p == (const unsigned char *) database && *p == '.'))
			appendStringInfo(&out, "%%%02X", *p);
		else
			appendStringInfoChar(&out, (char) *p);
	}
	return out.data;
}

/* The path of a slot's status or lock file without its suffix: "<dir>/<database, escaped>.<slot>". */
char *
docsync_status_slot_stem(const char *database, const char *slot)
{
	return psprintf("%s/%s.%s", docsync_status_dir ? docsync_status_dir : STATUS_DIR_DEFAULT,
					escape_database(database), slot);
}

/*
 * Whether the status file of `slot` (of this database) is trusted and shows a recompute of every live
 * doc that covers a gap in the stream (DOCSYNC_STATUS_RECOMPUTE_GAP) still running: docs may then
 * lack commits the slot has confirmed, and docsync.wait_published waits on; so it does while the
 * file says the sink's connection broke and was not checked since (DOCSYNC_STATUS_SINK_UNCHECKED),
 * as the sink may have lost docs. A missing or untrusted
 * file shows no gap. Frees what it allocates: a wait may ask every few milliseconds.
 */
bool
docsync_status_gap_open(const char *slot)
{
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext, "docsync status gap", ALLOCSET_DEFAULT_SIZES);
	MemoryContext caller = MemoryContextSwitchTo(context);
	char	   *database = get_database_name(MyDatabaseId);
	bool		open = false;

	if (database != NULL)
	{
		StatusRead	read;

		docsync_status_read_file(psprintf("%s%s", docsync_status_slot_stem(database, slot), STATUS_SUFFIX), &read);
		if (read.error == NULL)
		{
			const DocsyncStatusBody *b = &read.file->body;

			open = (b->recompute_reason != DOCSYNC_RECOMPUTE_NONE &&
					(b->recompute_flags & DOCSYNC_STATUS_RECOMPUTE_GAP) != 0 &&
					b->recompute_finished_us == 0) ||
				(b->recompute_flags & DOCSYNC_STATUS_SINK_UNCHECKED) != 0;
		}
	}
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(context);
	return open;
}
