/*-------------------------------------------------------------------------
 *
 * status.c
 *		Reads the workers' status files (layout: shared/docsync_status.h) for the docsync.status and
 *		docsync.query_stats views, and defines the docsync.status_dir setting. Also removes the files
 *		of a slot no worker serves any more (docsync.forget_slot), and says what is wrong with the
 *		server's output_plugin_libraries for docsync (docsync.output_plugin_problem).
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
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "replication/slot.h"
#include "storage/fd.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "docsync.h"
#include "docsync_status.h"

/* The directory the workers write their status files to (docsync.status_dir). */
static char *docsync_status_dir = NULL;

#define STATUS_DIR_DEFAULT "/run/docsync"
#define STATUS_SUFFIX ".status"
#define STATUS_MAX_ATTEMPTS 100		/* reads of one file while updates are in progress */
#define STATUS_SPIN_ATTEMPTS 10		/* attempts before sleeping between them */
#define STATUS_RETRY_SLEEP_US 100

/* One read of one status file. */
typedef struct StatusRead
{
	const char *error;			/* why the file is not trusted, NULL when it is */
	uint32		layout_version; /* the file's layout version, 0 when unknown */
	DocsyncStatusFile *file;	/* the file's contents; valid only when error is NULL */
	bool		missing;		/* removed between listing and opening: skip it */
	int			lock_held;		/* the slot's lock file: 1 held, 0 free, -1 unknown */
} StatusRead;

PG_FUNCTION_INFO_V1(docsync_status_files);
PG_FUNCTION_INFO_V1(docsync_status_file_queries);
PG_FUNCTION_INFO_V1(docsync_status_directory);
PG_FUNCTION_INFO_V1(docsync_forget_slot);
PG_FUNCTION_INFO_V1(docsync_output_plugin_problem);

/* ---- helpers ---- */

static void read_status_file(const char *path, StatusRead *result);
static Datum field_text(const char *field, size_t size);
static Datum time_datum(int64 us, bool *isnull);
static Datum count_datum(uint64 value);
static void name_from_file(const char *file_name, char **database, char **slot);
static void for_each_status_file(void (*emit) (void *arg, const char *file_name, StatusRead *read), void *arg);

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

/*
 * Reads one status file with pread: seq, everything, seq, with read barriers between, retried while
 * an update is in progress. Never errors for a bad file: the problem is described in result->error.
 */
static void
read_status_file(const char *path, StatusRead *result)
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
 * A fixed-size string field as text: bounded by the field even without a NUL, and valid in the
 * database encoding (invalid UTF-8 is not shown; non-ASCII becomes '?' in a non-UTF-8 database).
 */
static Datum
field_text(const char *field, size_t size)
{
	size_t		len = strnlen(field, size);
	char	   *copy;
	size_t		i;

	if (!pg_verify_mbstr(PG_UTF8, field, (int) len, true))
		return CStringGetTextDatum("(invalid UTF-8 in status file)");
	copy = pnstrdup(field, len);
	if (GetDatabaseEncoding() != PG_UTF8 && GetDatabaseEncoding() != PG_SQL_ASCII)
	{
		for (i = 0; i < len; i++)
			if ((unsigned char) copy[i] >= 0x80)
				copy[i] = '?';
	}
	return CStringGetTextDatum(copy);
}

/* Microseconds since the Unix epoch as timestamptz; 0 (never) as NULL. */
static Datum
time_datum(int64 us, bool *isnull)
{
	const int64 shift = (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;

	if (us <= 0 || us > PG_INT64_MAX / 2)
	{
		*isnull = true;
		return (Datum) 0;
	}
	*isnull = false;
	return TimestampTzGetDatum((TimestampTz) (us - shift));
}

/* A counter as bigint, clamped. */
static Datum
count_datum(uint64 value)
{
	return Int64GetDatum(value > (uint64) PG_INT64_MAX ? PG_INT64_MAX : (int64) value);
}

/*
 * Database and slot from a file name "<database>.<slot>.status" (database %XX-escaped), for files
 * whose body cannot be trusted.
 */
static void
name_from_file(const char *file_name, char **database, char **slot)
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
static void
for_each_status_file(void (*emit) (void *arg, const char *file_name, StatusRead *read), void *arg)
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
		read_status_file(path, &read);
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

/* ---- docsync.status_files() ---- */

#define STATUS_FILES_COLS 35

static void
emit_status_file(void *arg, const char *file_name, StatusRead *read)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	Datum		values[STATUS_FILES_COLS];
	bool		nulls[STATUS_FILES_COLS];
	int			i = 0;

	memset(values, 0, sizeof(values));
	memset(nulls, 0, sizeof(nulls));
	values[i++] = CStringGetTextDatum(pg_verify_mbstr(PG_UTF8, file_name, strlen(file_name), true)
									  ? file_name : "(file name not UTF-8)");
	if (read->error != NULL)
	{
		char	   *database;
		char	   *slot;

		name_from_file(file_name, &database, &slot);
		if (database)
			values[i] = CStringGetTextDatum(database);
		else
			nulls[i] = true;
		i++;
		if (slot)
			values[i] = CStringGetTextDatum(slot);
		else
			nulls[i] = true;
		i++;
		values[i++] = CStringGetTextDatum(read->error);
		if (read->layout_version != 0)
			values[i] = UInt32GetDatum(read->layout_version);
		else
			nulls[i] = true;
		i++;
		for (; i < STATUS_FILES_COLS; i++)
			nulls[i] = true;
	}
	else
	{
		const DocsyncStatusBody *b = &read->file->body;
		const char *state = docsync_status_state_name(b->state);

		values[i++] = field_text(b->database, sizeof(b->database));
		values[i++] = field_text(b->slot, sizeof(b->slot));
		nulls[i++] = true;		/* read_error */
		values[i++] = Int32GetDatum((int32) read->file->layout_version);
		values[i++] = Int32GetDatum(b->pid);
		values[i++] = CStringGetTextDatum(state ? state : psprintf("unknown (%u)", b->state));
		values[i] = time_datum(b->started_us, &nulls[i]);
		i++;
		values[i] = time_datum(b->heartbeat_us, &nulls[i]);
		i++;
		values[i++] = count_datum(b->generation);
		if (b->received_lsn != 0)
			values[i] = LSNGetDatum((XLogRecPtr) b->received_lsn);
		else
			nulls[i] = true;
		i++;
		if (b->acked_lsn != 0)
			values[i] = LSNGetDatum((XLogRecPtr) b->acked_lsn);
		else
			nulls[i] = true;
		i++;
		values[i] = time_datum(b->acked_us, &nulls[i]);
		i++;
		values[i++] = count_datum(b->open_txns);
		values[i++] = count_datum(b->dirty_depth);
		values[i++] = count_datum(b->in_flight);
		values[i++] = count_datum(b->live_docs);
		values[i++] = count_datum(b->changes);
		values[i++] = count_datum(b->recomputes);
		values[i++] = count_datum(b->publishes);
		values[i++] = count_datum(b->permanent_failures);
		values[i++] = count_datum(b->transient_retries);
		values[i++] = count_datum(b->valve_resets);
		values[i++] = count_datum(b->not_visible_retries);
		values[i++] = count_datum(b->audit_samples);
		values[i++] = count_datum(b->audit_divergences);
		if (b->recompute_reason == DOCSYNC_RECOMPUTE_NONE)
		{
			/* no recompute of every live doc since start: reason, counts and times are NULL */
			for (int k = 0; k < 5; k++)
				nulls[i++] = true;
		}
		else
		{
			const char *reason = docsync_status_recompute_name(b->recompute_reason);

			values[i++] = CStringGetTextDatum(reason ? reason : psprintf("unknown (%u)", b->recompute_reason));
			values[i++] = count_datum(b->recompute_done);
			values[i++] = count_datum(b->recompute_total);
			values[i] = time_datum(b->recompute_started_us, &nulls[i]);
			i++;
			values[i] = time_datum(b->recompute_finished_us, &nulls[i]);
			i++;
		}
		if (b->last_error[0] != '\0')
			values[i] = field_text(b->last_error, sizeof(b->last_error));
		else
			nulls[i] = true;
		i++;
		values[i] = time_datum(b->last_error_us, &nulls[i]);
		i++;
		values[i++] = Int32GetDatum((int32) Min(b->queries_omitted, (uint32) PG_INT32_MAX));
		if (read->lock_held >= 0)
			values[i] = BoolGetDatum(read->lock_held == 1);
		else
			nulls[i] = true;
		i++;
		Assert(i == STATUS_FILES_COLS);
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * The body of both set-returning functions: the rows emit makes of every status file, after checking
 * that the SQL declaration has the columns the C side fills.
 */
static Datum
status_file_rows(FunctionCallInfo fcinfo, const char *function, int columns,
				 void (*emit) (void *arg, const char *file_name, StatusRead *read))
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != columns)
		elog(ERROR, "%s declared with %d columns, expected %d", function, rsinfo->setDesc->natts, columns);
	for_each_status_file(emit, rsinfo);
	return (Datum) 0;
}

/* docsync.status_files(): one row per status file, trusted fields or the reason they are not. */
Datum
docsync_status_files(PG_FUNCTION_ARGS)
{
	return status_file_rows(fcinfo, "docsync.status_files()", STATUS_FILES_COLS, emit_status_file);
}

/* ---- docsync.status_file_queries() ---- */

#define QUERY_COLS 9

static void
emit_status_queries(void *arg, const char *file_name, StatusRead *read)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) arg;
	const DocsyncStatusBody *b;
	uint32		n;
	uint32		q;

	if (read->error != NULL)
		return;					/* docsync.status reports the file */
	b = &read->file->body;
	n = Min(b->query_count, (uint32) DOCSYNC_STATUS_MAX_QUERIES);
	for (q = 0; q < n; q++)
	{
		const DocsyncStatusQuery *qc = &b->queries[q];
		Datum		values[QUERY_COLS];
		bool		nulls[QUERY_COLS];
		int			i = 0;

		memset(nulls, 0, sizeof(nulls));
		values[i++] = field_text(b->database, sizeof(b->database));
		values[i++] = field_text(b->slot, sizeof(b->slot));
		values[i++] = field_text(qc->name, sizeof(qc->name));
		values[i++] = count_datum(qc->recomputes);
		values[i++] = count_datum(qc->permanent_failures);
		if (qc->recomputes > 0)
			values[i] = Float8GetDatum((double) qc->compute_us_total / (double) qc->recomputes / 1000.0);
		else
			nulls[i] = true;
		i++;
		if (qc->last_error[0] != '\0')
			values[i] = field_text(qc->last_error, sizeof(qc->last_error));
		else
			nulls[i] = true;
		i++;
		values[i] = time_datum(qc->last_error_us, &nulls[i]);
		i++;
		if (qc->batch_set_aside[0] != '\0')
			values[i] = field_text(qc->batch_set_aside, sizeof(qc->batch_set_aside));
		else
			nulls[i] = true;
		i++;
		Assert(i == QUERY_COLS);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/* docsync.status_file_queries(): per-query counters of every trusted status file. */
Datum
docsync_status_file_queries(PG_FUNCTION_ARGS)
{
	return status_file_rows(fcinfo, "docsync.status_file_queries()", QUERY_COLS, emit_status_queries);
}

/* docsync.status_directory(): the directory in force (docsync.status_dir). */
Datum
docsync_status_directory(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(docsync_status_dir ? docsync_status_dir : STATUS_DIR_DEFAULT));
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
static char *
slot_file_stem(const char *database, const char *slot)
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

		read_status_file(psprintf("%s%s", slot_file_stem(database, slot), STATUS_SUFFIX), &read);
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

/*
 * docsync.forget_slot(slot, database): removes the status and lock files of a slot no worker serves,
 * so docsync.status stops showing it (a misspelt --slot, a slot dropped for good). Refuses while a
 * worker holds the lock file, while the slot exists in that database, and while the status file's
 * heartbeat is fresh. Returns the paths removed. EXECUTE is granted to no one: superusers, or whom
 * they grant it.
 */
Datum
docsync_forget_slot(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const char *dir_path = docsync_status_dir ? docsync_status_dir : STATUS_DIR_DEFAULT;
	char	   *slot;
	char	   *database;
	char	   *stem;
	char	   *paths[2];
	bool		exists[2];
	ReplicationSlot *s;
	bool		slot_found = false;
	int			active_pid = 0;
	Oid			slot_db = InvalidOid;
	int			lock_fd = -1;
	struct stat st;
	int			i;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("docsync.forget_slot needs a slot name and a database name")));
	slot = NameStr(*PG_GETARG_NAME(0));
	database = NameStr(*PG_GETARG_NAME(1));
	/* a slot name is lower case letters, digits and '_': never a path */
	ReplicationSlotValidateName(slot, ERROR);
	if (database[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("docsync.forget_slot needs a database name")));

	stem = slot_file_stem(database, slot);
	paths[0] = psprintf("%s%s", stem, STATUS_SUFFIX);
	paths[1] = psprintf("%s.lock", stem);
	for (i = 0; i < 2; i++)
		exists[i] = lstat(paths[i], &st) == 0;

	/*
	 * A running worker holds the lock file with flock() for its lifetime. Taking the lock here (a read
	 * descriptor suffices) proves that no worker on this host holds it, and keeps one from starting
	 * on the slot until both files are gone. The descriptor is closed at the end, or by the abort.
	 */
	if (exists[1])
		lock_fd = OpenTransientFile(paths[1], O_RDONLY | O_NONBLOCK | PG_BINARY);
	if (lock_fd >= 0 && flock(lock_fd, LOCK_EX | LOCK_NB) != 0)
	{
		int			save_errno = errno;
		char		pid[32] = {0};
		ssize_t		n = pread(lock_fd, pid, sizeof(pid) - 1, 0);

		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n ")] = '\0';	/* the first line: "<pid>\n<boot id>\n" */
		n = (ssize_t) strlen(pid);
		errno = save_errno;
		if (save_errno == EWOULDBLOCK)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("docsync-worker pid %s serves slot \"%s\" of database \"%s\": it holds %s",
							n > 0 ? pid : "unknown", slot, database, paths[1]),
					 errhint("Stop that worker first.")));
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not lock \"%s\": %m", paths[1])));
	}

	/* The slot itself: while it exists in that database, its row stays and says so. */
	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	s = SearchNamedReplicationSlot(slot, false);
	if (s != NULL)
	{
		SpinLockAcquire(&s->mutex);
		slot_found = s->in_use;
		active_pid = s->active_pid;
		slot_db = s->data.database;
		SpinLockRelease(&s->mutex);
	}
	LWLockRelease(ReplicationSlotControlLock);
	if (slot_found && OidIsValid(slot_db))
	{
		char	   *slot_db_name = get_database_name(slot_db);

		if (slot_db_name != NULL && strcmp(slot_db_name, database) == 0)
		{
			if (active_pid != 0)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_IN_USE),
						 errmsg("replication slot \"%s\" of database \"%s\" is active for PID %d", slot, database, active_pid),
						 errhint("Stop the client streaming it first.")));
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("replication slot \"%s\" of database \"%s\" still exists", slot, database),
					 errdetail("Its docsync.status row stays while the slot exists; the slot also holds WAL back."),
					 errhint("If no worker is to use it, drop it first: SELECT pg_drop_replication_slot('%s');", slot)));
		}
	}

	if (!exists[0] && !exists[1])
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("no status file for slot \"%s\" of database \"%s\" in docsync.status_dir", slot, database),
				 errdetail("docsync.status_dir is %s.", dir_path),
				 errhint("docsync.status names the database and slot of every status file it shows.")));

	/* A worker on another host sharing the directory: a fresh heartbeat means it may still run. */
	if (exists[0])
	{
		StatusRead read;

		read_status_file(paths[0], &read);
		if (read.error == NULL && read.file->body.state != DOCSYNC_STATE_STOPPED)
		{
			int64		now_us = (int64) GetCurrentTimestamp() +
				(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
			const char *state = docsync_status_state_name(read.file->body.state);

			if (now_us - read.file->body.heartbeat_us < (int64) DOCSYNC_STATUS_STALE_MS * 1000)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_IN_USE),
						 errmsg("the worker of slot \"%s\" of database \"%s\" (pid %d, state %s) wrote its status file less than %d s ago",
								slot, database, read.file->body.pid, state ? state : "unknown",
								DOCSYNC_STATUS_STALE_MS / 1000),
						 errhint("Stop that worker first; once docsync.status shows it stopped, forget the slot.")));
		}
	}

	/* The status file first, the lock file last: still locked, so no worker starts in between. */
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	for (i = 0; i < 2; i++)
	{
		Datum		value;
		bool		isnull = false;

		if (!exists[i])
			continue;
		if (unlink(paths[i]) != 0 && errno != ENOENT)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not remove \"%s\": %m", paths[i]),
					 errhint("The server's operating system user needs write access to the status directory %s; "
							 "or remove the files as the worker's operating system user: rm -f '%s' '%s'",
							 dir_path, paths[0], paths[1])));
		value = CStringGetTextDatum(paths[i]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull);
	}
	if (lock_fd >= 0)
		CloseTransientFile(lock_fd);
	return (Datum) 0;
}

/* ---- docsync.output_plugin_problem() ---- */

/* An entry of output_plugin_libraries as ALTER SYSTEM SET takes it: bare when it can be, else quoted. */
static void
append_list_item(StringInfo buf, const char *item)
{
	const char *p;
	bool		bare = (item[0] >= 'a' && item[0] <= 'z') || item[0] == '_';

	for (p = item; *p && bare; p++)
		bare = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_';
	if (buf->len > 0)
		appendStringInfoString(buf, ", ");
	appendStringInfoString(buf, bare ? item : quote_literal_cstr(item));
}

/* Whether an entry was meant to name docsync: spaces around it, another case, a path or a suffix. */
static bool
means_docsync(const char *item)
{
	char	   *trimmed = pstrdup(item);
	char	   *start = trimmed;
	char	   *end;
	char	   *slash;
	char	   *p;

	while (*start == ' ' || *start == '\t')
		start++;
	end = start + strlen(start);
	while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
		*--end = '\0';
	if ((slash = strrchr(start, '/')) != NULL)
		start = slash + 1;
	if (strlen(start) > 3 && strcmp(start + strlen(start) - 3, ".so") == 0)
		start[strlen(start) - 3] = '\0';
	for (p = start; *p; p++)
		*p = pg_ascii_tolower((unsigned char) *p);
	return strcmp(start, "docsync") == 0;
}

/*
 * docsync.output_plugin_problem(): NULL when the server lets REPLICATION roles decode with docsync
 * (docsync is listed in output_plugin_libraries, or the server has no such setting); otherwise what
 * is wrong with the setting and the ALTER SYSTEM command that fixes it, keeping the other entries.
 * The list is split exactly as the server splits it (SplitGUCList: quoted names keep commas and
 * spaces, case is kept), so a list set as one quoted string is seen as the one name it is.
 */
Datum
docsync_output_plugin_problem(PG_FUNCTION_ARGS)
{
	const char *value = GetConfigOption("output_plugin_libraries", true, false);
	char	   *raw;
	List	   *names = NIL;
	ListCell   *lc;
	StringInfoData fix;
	StringInfoData problem;
	const char *one_string = NULL;
	const char *near_miss = NULL;

	if (value == NULL)
		PG_RETURN_NULL();
	raw = pstrdup(value);
	if (!SplitGUCList(raw, ',', &names))
		PG_RETURN_TEXT_P(cstring_to_text(psprintf("output_plugin_libraries (%s) is not a list of names: "
												  "run ALTER SYSTEM SET output_plugin_libraries = pgoutput, test_decoding, docsync; SELECT pg_reload_conf();",
												  value)));
	foreach(lc, names)
	{
		if (strcmp((const char *) lfirst(lc), "docsync") == 0)
			PG_RETURN_NULL();
	}

	/* The fix: every entry kept, one set as a quoted list split into its names, docsync added. */
	initStringInfo(&fix);
	foreach(lc, names)
	{
		const char *item = (const char *) lfirst(lc);

		if (strchr(item, ',') != NULL)
		{
			char	   *copy = pstrdup(item);
			char	   *part;
			char	   *save = NULL;

			if (one_string == NULL)
				one_string = item;
			for (part = strtok_r(copy, ",", &save); part != NULL; part = strtok_r(NULL, ",", &save))
			{
				char	   *end;

				while (*part == ' ' || *part == '\t')
					part++;
				end = part + strlen(part);
				while (end > part && (end[-1] == ' ' || end[-1] == '\t'))
					*--end = '\0';
				if (*part == '\0' || means_docsync(part))
					continue;
				append_list_item(&fix, part);
			}
		}
		else if (means_docsync(item))
		{
			if (near_miss == NULL)
				near_miss = item;
		}
		else if (item[0] != '\0')
			append_list_item(&fix, item);
	}
	append_list_item(&fix, "docsync");

	initStringInfo(&problem);
	if (one_string != NULL)
		appendStringInfo(&problem,
						 "output_plugin_libraries holds one name, \"%s\": the list was set as one quoted string, so the "
						 "server allows no library named docsync and refuses to decode with it for a role without superuser; "
						 "set the names as a list, unquoted or each quoted",
						 one_string);
	else if (near_miss != NULL)
		appendStringInfo(&problem,
						 "output_plugin_libraries lists \"%s\", not docsync (names must match exactly: no spaces, capitals, "
						 "path or suffix), so the server refuses to decode with docsync for a role without superuser",
						 near_miss);
	else
		appendStringInfo(&problem,
						 "docsync is not in output_plugin_libraries (%s), so the server refuses to decode with it for a role without superuser",
						 value[0] ? value : "empty");
	appendStringInfo(&problem, ": run ALTER SYSTEM SET output_plugin_libraries = %s; SELECT pg_reload_conf();", fix.data);
	PG_RETURN_TEXT_P(cstring_to_text(problem.data));
}
