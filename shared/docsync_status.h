/*
 * docsync_status.h
 *		The layout of the worker's status file, shared by the worker (writer) and the extension
 *		(reader). Plain C99; includes nothing from PostgreSQL or C++.
 *
 * One file per slot: <status-dir>/<database>.<slot>.status, where <database> is the database name
 * with '/', '%', a leading '.' and control characters written as %XX (slot names need no escaping).
 * Beside it, <database>.<slot>.lock is the lock file the running worker holds with flock() for its
 * lifetime; nothing else opens it.
 *
 * The file is exactly sizeof(DocsyncStatusFile) bytes: a header followed by the body. All integers
 * are in the writing host's byte order (the file never leaves the host, or the volume, it is written
 * on; a reader of the other byte order sees a wrong magic and says so). Strings are UTF-8, NUL-padded
 * and always NUL-terminated inside their field. The file holds no secrets: no passwords, no DSNs.
 *
 * Consistency: a seqlock. The writer makes `seq` odd, writes the body, stores body_crc (CRC-32C of
 * the whole body), then makes `seq` even again, with release barriers between the steps. A reader
 * reads seq, then the body and its CRC, then seq again, with acquire barriers between the reads, and
 * trusts the body only when both seq values are equal and even and the CRC matches; otherwise it
 * retries. A writer killed in the middle of an update leaves `seq` odd for good: a reader then
 * trusts the body only if its CRC matches (the update had finished writing).
 *
 * Versioning: `magic` and `layout_version` stay at offsets 0 and 4 in every layout. A reader meeting
 * a layout version it does not know reports it and reads nothing else. Any change to the layout
 * (even additive) bumps DOCSYNC_STATUS_LAYOUT_VERSION; the size is checked as well.
 *
 * Times are microseconds since the Unix epoch (wall clock), 0 meaning "never". Worker and server
 * must share a clock (one host, or containers on one host) for heartbeat ages to mean anything.
 */
#ifndef DOCSYNC_STATUS_H
#define DOCSYNC_STATUS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DOCSYNC_STATUS_MAGIC 0x54534443u /* "CDST" read as little-endian bytes: 'C','D','S','T' */
#define DOCSYNC_STATUS_LAYOUT_VERSION 1u

#define DOCSYNC_STATUS_NAME_LEN 64		/* database, slot and query names (NAMEDATALEN) */
#define DOCSYNC_STATUS_ERROR_LEN 256	/* error messages, truncated at a UTF-8 boundary */
#define DOCSYNC_STATUS_MAX_QUERIES 64	/* per-query counters kept; more are counted in queries_omitted */

/* The writer refreshes the heartbeat at least this often ... */
#define DOCSYNC_STATUS_HEARTBEAT_MS 500
/* ... and a heartbeat older than this is stale (the worker is gone or hung). */
#define DOCSYNC_STATUS_STALE_MS 5000

/* The worker's state. */
typedef enum DocsyncStatusState
{
	DOCSYNC_STATE_STARTING = 1,		/* connecting, loading definitions, startup recompute */
	DOCSYNC_STATE_STREAMING = 2,	/* consuming the slot */
	DOCSYNC_STATE_RECONNECTING = 3, /* lost the stream or the server; retrying */
	DOCSYNC_STATE_DRAINING = 4,		/* shutting down: finishing in-flight work, final acknowledgement */
	DOCSYNC_STATE_VALVE_RESET = 5,	/* the WAL safety valve is recreating the slot */
	DOCSYNC_STATE_STOPPED = 6		/* exited (cleanly, or told so by the reader for a stale file) */
} DocsyncStatusState;

/* The name of a state as the SQL views show it; NULL for a value outside the enum. */
static inline const char *
docsync_status_state_name(uint32_t state)
{
	switch (state)
	{
		case DOCSYNC_STATE_STARTING: return "starting";
		case DOCSYNC_STATE_STREAMING: return "streaming";
		case DOCSYNC_STATE_RECONNECTING: return "reconnecting";
		case DOCSYNC_STATE_DRAINING: return "draining";
		case DOCSYNC_STATE_VALVE_RESET: return "valve-reset";
		case DOCSYNC_STATE_STOPPED: return "stopped";
	}
	return NULL;
}

/* Counters of one doc query. */
typedef struct DocsyncStatusQuery
{
	char		name[DOCSYNC_STATUS_NAME_LEN];	/* query name; empty: unused entry */
	uint64_t	recomputes;			/* computes finished, failed ones included */
	uint64_t	failures;			/* computes that ended in a permanent failure */
	uint64_t	compute_us_total;	/* time spent in computes; mean = total / recomputes */
	int64_t		last_error_us;		/* time of last_error, 0: none */
	char		last_error[DOCSYNC_STATUS_ERROR_LEN];	/* last permanent failure, with SQLSTATE */
} DocsyncStatusQuery;

/* Everything the worker reports; covered by body_crc. */
typedef struct DocsyncStatusBody
{
	int64_t		heartbeat_us;		/* time of this update */
	int64_t		started_us;			/* worker start time */
	int32_t		pid;				/* worker process id (in its own pid namespace) */
	uint32_t	state;				/* DocsyncStatusState */
	char		database[DOCSYNC_STATUS_NAME_LEN];	/* database the slot belongs to */
	char		slot[DOCSYNC_STATUS_NAME_LEN];		/* replication slot name */
	uint64_t	generation;			/* doc version generation in force */
	uint64_t	received_lsn;		/* end of the last WAL received */
	uint64_t	acked_lsn;			/* last flush position acknowledged to the server */
	int64_t		acked_us;			/* when acked_lsn was sent, 0: never */
	uint64_t	open_txns;			/* transactions received but not yet acknowledged */
	uint64_t	dirty_depth;		/* docs waiting for a recompute */
	uint64_t	in_flight;			/* computes running */
	uint64_t	live_docs;			/* docs kept current */
	uint64_t	total_changes;		/* row changes handled since start */
	uint64_t	total_recomputes;	/* computes finished since start */
	uint64_t	total_publishes;	/* docs published since start */
	uint64_t	total_permanent_failures;	/* computes that failed for good */
	uint64_t	total_transient_retries;	/* computes retried after a transient failure */
	uint64_t	total_valve_resets;	/* WAL safety valve slot recreations */
	int64_t		last_error_us;		/* time of last_error, 0: none */
	char		last_error[DOCSYNC_STATUS_ERROR_LEN];	/* last error of any kind */
	uint32_t	query_count;		/* entries used in queries[] */
	uint32_t	queries_omitted;	/* doc queries beyond DOCSYNC_STATUS_MAX_QUERIES, not listed */
	DocsyncStatusQuery queries[DOCSYNC_STATUS_MAX_QUERIES];
} DocsyncStatusBody;

/* The whole file. */
typedef struct DocsyncStatusFile
{
	uint32_t	magic;				/* DOCSYNC_STATUS_MAGIC, offset 0 in every layout */
	uint32_t	layout_version;		/* DOCSYNC_STATUS_LAYOUT_VERSION, offset 4 in every layout */
	uint32_t	file_size;			/* sizeof(DocsyncStatusFile) of the writer */
	uint32_t	body_crc;			/* CRC-32C of body */
	uint64_t	seq;				/* seqlock counter: odd while the body is being written */
	DocsyncStatusBody body;
} DocsyncStatusFile;

/* The layout is fixed: these fail to compile if a field moves. */
#define DOCSYNC_STATUS_ASSERT(name, cond) typedef char docsync_status_assert_##name[(cond) ? 1 : -1]
DOCSYNC_STATUS_ASSERT(magic_at_0, offsetof(DocsyncStatusFile, magic) == 0);
DOCSYNC_STATUS_ASSERT(version_at_4, offsetof(DocsyncStatusFile, layout_version) == 4);
DOCSYNC_STATUS_ASSERT(seq_at_16, offsetof(DocsyncStatusFile, seq) == 16);
DOCSYNC_STATUS_ASSERT(body_at_24, offsetof(DocsyncStatusFile, body) == 24);
DOCSYNC_STATUS_ASSERT(query_size, sizeof(DocsyncStatusQuery) == 64 + 4 * 8 + 256);
DOCSYNC_STATUS_ASSERT(body_queries_at, offsetof(DocsyncStatusBody, queries) == 536);
DOCSYNC_STATUS_ASSERT(file_size, sizeof(DocsyncStatusFile) == 24 + 536 + 64 * 352);

#define DOCSYNC_STATUS_SEQ_OFFSET ((size_t) offsetof(DocsyncStatusFile, seq))

/* CRC-32C (Castagnoli, reflected, as used by iSCSI and PostgreSQL's WAL); bitwise, small inputs. */
static inline uint32_t
docsync_status_crc32c(const void *data, size_t len)
{
	const unsigned char *p = (const unsigned char *) data;
	uint32_t	crc = 0xFFFFFFFFu;
	size_t		i;
	int			k;

	for (i = 0; i < len; i++)
	{
		crc ^= p[i];
		for (k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
	}
	return crc ^ 0xFFFFFFFFu;
}

/* What a reader made of one read of a status file. */
typedef enum DocsyncStatusCheck
{
	DOCSYNC_STATUS_OK = 0,			/* header valid, seq stable and even, CRC matches */
	DOCSYNC_STATUS_RETRY,			/* an update was in progress (seq odd or changed): read again */
	DOCSYNC_STATUS_SHORT,			/* fewer bytes than a header: being created, or truncated */
	DOCSYNC_STATUS_BAD_MAGIC,		/* not a docsync status file (or of another byte order) */
	DOCSYNC_STATUS_FOREIGN_VERSION, /* another layout version: see layout_version, trust nothing else */
	DOCSYNC_STATUS_BAD_SIZE,		/* this layout version with a different size: corrupt */
	DOCSYNC_STATUS_BAD_CRC			/* seq stable and even, but the body's CRC does not match: corrupt */
} DocsyncStatusCheck;

/*
 * Judges one read: `buf` holds the first `len` bytes read from the file (the header and body read
 * between two reads of seq that returned seq_before and seq_after). The reader's loop lives with
 * each side (its barriers and sleeps differ); this judgement is shared so both read the same way.
 */
static inline DocsyncStatusCheck
docsync_status_check(const DocsyncStatusFile *buf, size_t len, uint64_t seq_before, uint64_t seq_after)
{
	if (len < DOCSYNC_STATUS_SEQ_OFFSET)
		return DOCSYNC_STATUS_SHORT;
	if (buf->magic != DOCSYNC_STATUS_MAGIC)
		return DOCSYNC_STATUS_BAD_MAGIC;
	if (buf->layout_version != DOCSYNC_STATUS_LAYOUT_VERSION)
		return DOCSYNC_STATUS_FOREIGN_VERSION;
	if (buf->file_size != sizeof(DocsyncStatusFile) || len != sizeof(DocsyncStatusFile))
		return DOCSYNC_STATUS_BAD_SIZE;
	if (seq_before != seq_after || (seq_before & 1u) != 0)
		return DOCSYNC_STATUS_RETRY;
	if (docsync_status_crc32c(&buf->body, sizeof(buf->body)) != buf->body_crc)
		return DOCSYNC_STATUS_BAD_CRC;
	return DOCSYNC_STATUS_OK;
}

/*
 * After retries ran out with seq odd and unchanging (the writer died inside an update): trusts the
 * body only when its CRC matches, i.e. the update had finished writing the body and its CRC.
 */
static inline int
docsync_status_abandoned_update_ok(const DocsyncStatusFile *buf)
{
	return docsync_status_crc32c(&buf->body, sizeof(buf->body)) == buf->body_crc;
}

#ifdef __cplusplus
}
#endif

#endif							/* DOCSYNC_STATUS_H */
