/*-------------------------------------------------------------------------
 *
 * status.c
 *		The SQL functions over the workers' status files (read by status_file.c) behind the
 *		docsync.status and docsync.query_stats views: docsync.status_files, status_file_queries and
 *		status_directory. Also removes the files of a slot no worker serves any more
 *		(docsync.forget_slot), and says what is wrong with the server's output_plugin_libraries for
 *		docsync (docsync.output_plugin_problem).
 *
 * Liveness is not decided here: the views combine the heartbeat with the slot's active_pid (no pid
 * probing: the worker may run in another container sharing the directory).
 *
 *-------------------------------------------------------------------------
 */

#include "postgres.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands/dbcommands.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "replication/slot.h"
#include "storage/fd.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "docsync_status.h"
#include "status_file.h"

PG_FUNCTION_INFO_V1(docsync_status_files);
PG_FUNCTION_INFO_V1(docsync_status_file_queries);
PG_FUNCTION_INFO_V1(docsync_status_directory);
PG_FUNCTION_INFO_V1(docsync_forget_slot);
PG_FUNCTION_INFO_V1(docsync_output_plugin_problem);

/* ---- helpers ---- */

static Datum field_text(const char *field, size_t size);
static Datum time_datum(int64 us, bool *isnull);
static Datum count_datum(uint64 value);

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

		docsync_status_name_from_file(file_name, &database, &slot);
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
				 DocsyncStatusEmit emit)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != columns)
		elog(ERROR, "%s declared with %d columns, expected %d", function, rsinfo->setDesc->natts, columns);
	docsync_status_for_each_file(emit, rsinfo);
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
	PG_RETURN_TEXT_P(cstring_to_text(docsync_status_directory_path()));
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
	const char *dir_path = docsync_status_directory_path();
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

	stem = docsync_status_slot_stem(database, slot);
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

		docsync_status_read_file(paths[0], &read);
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
