/*-------------------------------------------------------------------------
 *
 * status.c
 *		Reads the workers' status files (layout: shared/docsync_status.h) for the docsync.status and
 *		docsync.query_stats views, and defines the docsync.status_dir setting.
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
#include <unistd.h>

#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/fd.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"

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
} StatusRead;

PG_FUNCTION_INFO_V1(docsync_status_files);
PG_FUNCTION_INFO_V1(docsync_status_file_queries);
PG_FUNCTION_INFO_V1(docsync_status_directory);

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

/* Calls emit for every "*.status" file in docsync.status_dir, in directory order. */
static void
for_each_status_file(void (*emit) (void *arg, const char *file_name, StatusRead *read), void *arg)
{
	const char *dir_path = docsync_status_dir ? docsync_status_dir : STATUS_DIR_DEFAULT;
	DIR		   *dir;
	struct dirent *de;
	MemoryContext per_file;
	MemoryContext old;

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
		MemoryContextSwitchTo(old);
		if (!read.missing)
			emit(arg, de->d_name, &read);
		MemoryContextReset(per_file);
	}
	FreeDir(dir);
	MemoryContextDelete(per_file);
}

/* ---- docsync.status_files() ---- */

#define STATUS_FILES_COLS 32

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
		values[i++] = count_datum(b->total_changes);
		values[i++] = count_datum(b->total_recomputes);
		values[i++] = count_datum(b->total_publishes);
		values[i++] = count_datum(b->total_permanent_failures);
		values[i++] = count_datum(b->total_transient_retries);
		values[i++] = count_datum(b->total_valve_resets);
		values[i++] = count_datum(b->total_not_visible_retries);
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
		Assert(i == STATUS_FILES_COLS);
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* docsync.status_files(): one row per status file, trusted fields or the reason they are not. */
Datum
docsync_status_files(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != STATUS_FILES_COLS)
		elog(ERROR, "docsync.status_files() declared with %d columns, expected %d",
			 rsinfo->setDesc->natts, STATUS_FILES_COLS);
	for_each_status_file(emit_status_file, rsinfo);
	return (Datum) 0;
}

/* ---- docsync.status_file_queries() ---- */

#define QUERY_COLS 8

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
		values[i++] = count_datum(qc->failures);
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
		Assert(i == QUERY_COLS);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

/* docsync.status_file_queries(): per-query counters of every trusted status file. */
Datum
docsync_status_file_queries(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != QUERY_COLS)
		elog(ERROR, "docsync.status_file_queries() declared with %d columns, expected %d",
			 rsinfo->setDesc->natts, QUERY_COLS);
	for_each_status_file(emit_status_queries, rsinfo);
	return (Datum) 0;
}

/* docsync.status_directory(): the directory in force (docsync.status_dir). */
Datum
docsync_status_directory(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(docsync_status_dir ? docsync_status_dir : STATUS_DIR_DEFAULT));
}
