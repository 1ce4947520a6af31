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
#define DOCSYNC_STATUS_LAYOUT_VERSION 4u

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
	DOCSYNC_STATE_STARTING = 1,		/* loading definitions, before the first connection */
	DOCSYNC_STATE_STREAMING = 2,	/* consuming the slot */
	DOCSYNC_STATE_RECONNECTING = 3, /* lost the stream or the server; retrying */
	DOCSYNC_STATE_DRAINING = 4,		/* shutting down: finishing in-flight work, final acknowledgement */
	DOCSYNC_STATE_VALVE_RESET = 5,	/* the WAL safety valve is recreating the slot */
	DOCSYNC_STATE_STOPPED = 6,		/* exited (cleanly, or told so by the reader for a stale file) */
	DOCSYNC_STATE_CONNECTING = 7	/* the first connection to the server: never streamed yet */
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
		case DOCSYNC_STATE_CONNECTING: return "connecting";
	}
	return NULL;
}

/* Why the worker recomputes every live doc. */
typedef enum DocsyncStatusRecompute
{
	DOCSYNC_RECOMPUTE_NONE = 0,		/* none since start */
	DOCSYNC_RECOMPUTE_STARTUP = 1,	/* at start: the sink's docs may have missed changes */
	DOCSYNC_RECOMPUTE_VALVE = 2,	/* the WAL safety valve recreated the slot */
	DOCSYNC_RECOMPUTE_NEW_SLOT = 3,	/* the worker created the slot anew on a reconnect */
	DOCSYNC_RECOMPUTE_NEW_SERVER = 4,	/* the server's identity or timeline changed under the slot */
	DOCSYNC_RECOMPUTE_SINK_RESET = 5,	/* the sink lost docs it had acknowledged */
	DOCSYNC_RECOMPUTE_SETTINGS = 6,	/* a setting doc queries follow from the server changed */
	DOCSYNC_RECOMPUTE_PUBLICATION = 7	/* pgoutput: the publication changed under an existing slot */
} DocsyncStatusRecompute;

/*
 * recompute_flags: GAP, the recompute covers changes the stream will never deliver (the slot or the
 * server changed, the sink lost docs). While it runs, docs may lack commits the slot has confirmed,
 * so docsync.wait_published waits on.
 */
#define DOCSYNC_STATUS_RECOMPUTE_GAP 1u
/*
 * SINK_UNCHECKED (independent of any recompute): the sink's connection broke (a Redis restart, an
 * outage) and the worker has not yet checked whether it lost docs. Until it has, docs the slot has
 * confirmed may be gone, so docsync.wait_published waits on.
 */
#define DOCSYNC_STATUS_SINK_UNCHECKED 2u

/* The name of a recompute reason as the SQL views show it; NULL for none or a value outside the enum. */
static inline const char *
docsync_status_recompute_name(uint32_t reason)
{
	switch (reason)
	{
		case DOCSYNC_RECOMPUTE_STARTUP: return "startup";
		case DOCSYNC_RECOMPUTE_VALVE: return "valve";
		case DOCSYNC_RECOMPUTE_NEW_SLOT: return "new slot";
		case DOCSYNC_RECOMPUTE_NEW_SERVER: return "new server";
		case DOCSYNC_RECOMPUTE_SINK_RESET: return "sink reset";
		case DOCSYNC_RECOMPUTE_SETTINGS: return "settings";
		case DOCSYNC_RECOMPUTE_PUBLICATION: return "publication";
	}
	return NULL;
}

/* Counters of one doc query. */
typedef struct DocsyncStatusQuery
{
	char		name[DOCSYNC_STATUS_NAME_LEN];	/* query name; empty: unused entry */
	uint64_t	recomputes;		/* computes finished, failed ones included */
	uint64_t	permanent_failures; /* computes that ended in a permanent failure */
	uint64_t	compute_us_total;	/* time spent in computes; mean = total / recomputes */
	int64_t		last_error_us;		/* time of last_error, 0: none */
	char		last_error[DOCSYNC_STATUS_ERROR_LEN];	/* last permanent failure, with SQLSTATE */
	char		batch_set_aside[DOCSYNC_STATUS_ERROR_LEN];	/* why its batched forms are set aside (its
														 * docs computed one by one); empty: none */
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
	uint64_t	changes;			/* row changes handled since start */
	uint64_t	recomputes;			/* computes finished since start */
	uint64_t	publishes;			/* docs published since start */
	uint64_t	permanent_failures;	/* computes that failed for good */
	uint64_t	transient_retries;	/* computes retried after a transient failure */
	uint64_t	valve_resets;		/* WAL safety valve slot recreations */
	uint64_t	not_visible_retries; /* computes retried because a commit was not visible yet */
	uint64_t	audit_samples;		/* live docs the continuous audit compared with the sink */
	uint64_t	audit_divergences;	/* of them, docs the sink held wrongly (published again) */
	uint32_t	recompute_reason;	/* DocsyncStatusRecompute of the last recompute of every live doc */
	uint32_t	recompute_flags;	/* DOCSYNC_STATUS_RECOMPUTE_* bits of that recompute */
	uint64_t	recompute_total;	/* live docs it started with */
	uint64_t	recompute_done;		/* of them, docs with an outcome (or no longer live) */
	int64_t		recompute_started_us;	/* when it started, 0: never */
	int64_t		recompute_finished_us;	/* when the last doc was done, 0: still running (or never) */
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
DOCSYNC_STATUS_ASSERT(query_size, sizeof(DocsyncStatusQuery) == 64 + 4 * 8 + 2 * 256);
DOCSYNC_STATUS_ASSERT(body_queries_at, offsetof(DocsyncStatusBody, queries) == 600);
DOCSYNC_STATUS_ASSERT(file_size, sizeof(DocsyncStatusFile) == 24 + 600 + 64 * 608);

#define DOCSYNC_STATUS_SEQ_OFFSET ((size_t) offsetof(DocsyncStatusFile, seq))

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, as in iSCSI and PostgreSQL's WAL). */
static const uint32_t docsync_status_crc32c_table[256] = {
	0x00000000u, 0xF26B8303u, 0xE13B70F7u, 0x1350F3F4u, 0xC79A971Fu, 0x35F1141Cu,
	0x26A1E7E8u, 0xD4CA64EBu, 0x8AD958CFu, 0x78B2DBCCu, 0x6BE22838u, 0x9989AB3Bu,
	0x4D43CFD0u, 0xBF284CD3u, 0xAC78BF27u, 0x5E133C24u, 0x105EC76Fu, 0xE235446Cu,
	0xF165B798u, 0x030E349Bu, 0xD7C45070u, 0x25AFD373u, 0x36FF2087u, 0xC494A384u,
	0x9A879FA0u, 0x68EC1CA3u, 0x7BBCEF57u, 0x89D76C54u, 0x5D1D08BFu, 0xAF768BBCu,
	0xBC267848u, 0x4E4DFB4Bu, 0x20BD8EDEu, 0xD2D60DDDu, 0xC186FE29u, 0x33ED7D2Au,
	0xE72719C1u, 0x154C9AC2u, 0x061C6936u, 0xF477EA35u, 0xAA64D611u, 0x580F5512u,
	0x4B5FA6E6u, 0xB93425E5u, 0x6DFE410Eu, 0x9F95C20Du, 0x8CC531F9u, 0x7EAEB2FAu,
	0x30E349B1u, 0xC288CAB2u, 0xD1D83946u, 0x23B3BA45u, 0xF779DEAEu, 0x05125DADu,
	0x1642AE59u, 0xE4292D5Au, 0xBA3A117Eu, 0x4851927Du, 0x5B016189u, 0xA96AE28Au,
	0x7DA08661u, 0x8FCB0562u, 0x9C9BF696u, 0x6EF07595u, 0x417B1DBCu, 0xB3109EBFu,
	0xA0406D4Bu, 0x522BEE48u, 0x86E18AA3u, 0x748A09A0u, 0x67DAFA54u, 0x95B17957u,
	0xCBA24573u, 0x39C9C670u, 0x2A993584u, 0xD8F2B687u, 0x0C38D26Cu, 0xFE53516Fu,
	0xED03A29Bu, 0x1F682198u, 0x5125DAD3u, 0xA34E59D0u, 0xB01EAA24u, 0x42752927u,
	0x96BF4DCCu, 0x64D4CECFu, 0x77843D3Bu, 0x85EFBE38u, 0xDBFC821Cu, 0x2997011Fu,
	0x3AC7F2EBu, 0xC8AC71E8u, 0x1C661503u, 0xEE0D9600u, 0xFD5D65F4u, 0x0F36E6F7u,
	0x61C69362u, 0x93AD1061u, 0x80FDE395u, 0x72966096u, 0xA65C047Du, 0x5437877Eu,
	0x4767748Au, 0xB50CF789u, 0xEB1FCBADu, 0x197448AEu, 0x0A24BB5Au, 0xF84F3859u,
	0x2C855CB2u, 0xDEEEDFB1u, 0xCDBE2C45u, 0x3FD5AF46u, 0x7198540Du, 0x83F3D70Eu,
	0x90A324FAu, 0x62C8A7F9u, 0xB602C312u, 0x44694011u, 0x5739B3E5u, 0xA55230E6u,
	0xFB410CC2u, 0x092A8FC1u, 0x1A7A7C35u, 0xE811FF36u, 0x3CDB9BDDu, 0xCEB018DEu,
	0xDDE0EB2Au, 0x2F8B6829u, 0x82F63B78u, 0x709DB87Bu, 0x63CD4B8Fu, 0x91A6C88Cu,
	0x456CAC67u, 0xB7072F64u, 0xA457DC90u, 0x563C5F93u, 0x082F63B7u, 0xFA44E0B4u,
	0xE9141340u, 0x1B7F9043u, 0xCFB5F4A8u, 0x3DDE77ABu, 0x2E8E845Fu, 0xDCE5075Cu,
	0x92A8FC17u, 0x60C37F14u, 0x73938CE0u, 0x81F80FE3u, 0x55326B08u, 0xA759E80Bu,
	0xB4091BFFu, 0x466298FCu, 0x1871A4D8u, 0xEA1A27DBu, 0xF94AD42Fu, 0x0B21572Cu,
	0xDFEB33C7u, 0x2D80B0C4u, 0x3ED04330u, 0xCCBBC033u, 0xA24BB5A6u, 0x502036A5u,
	0x4370C551u, 0xB11B4652u, 0x65D122B9u, 0x97BAA1BAu, 0x84EA524Eu, 0x7681D14Du,
	0x2892ED69u, 0xDAF96E6Au, 0xC9A99D9Eu, 0x3BC21E9Du, 0xEF087A76u, 0x1D63F975u,
	0x0E330A81u, 0xFC588982u, 0xB21572C9u, 0x407EF1CAu, 0x532E023Eu, 0xA145813Du,
	0x758FE5D6u, 0x87E466D5u, 0x94B49521u, 0x66DF1622u, 0x38CC2A06u, 0xCAA7A905u,
	0xD9F75AF1u, 0x2B9CD9F2u, 0xFF56BD19u, 0x0D3D3E1Au, 0x1E6DCDEEu, 0xEC064EEDu,
	0xC38D26C4u, 0x31E6A5C7u, 0x22B65633u, 0xD0DDD530u, 0x0417B1DBu, 0xF67C32D8u,
	0xE52CC12Cu, 0x1747422Fu, 0x49547E0Bu, 0xBB3FFD08u, 0xA86F0EFCu, 0x5A048DFFu,
	0x8ECEE914u, 0x7CA56A17u, 0x6FF599E3u, 0x9D9E1AE0u, 0xD3D3E1ABu, 0x21B862A8u,
	0x32E8915Cu, 0xC083125Fu, 0x144976B4u, 0xE622F5B7u, 0xF5720643u, 0x07198540u,
	0x590AB964u, 0xAB613A67u, 0xB831C993u, 0x4A5A4A90u, 0x9E902E7Bu, 0x6CFBAD78u,
	0x7FAB5E8Cu, 0x8DC0DD8Fu, 0xE330A81Au, 0x115B2B19u, 0x020BD8EDu, 0xF0605BEEu,
	0x24AA3F05u, 0xD6C1BC06u, 0xC5914FF2u, 0x37FACCF1u, 0x69E9F0D5u, 0x9B8273D6u,
	0x88D28022u, 0x7AB90321u, 0xAE7367CAu, 0x5C18E4C9u, 0x4F48173Du, 0xBD23943Eu,
	0xF36E6F75u, 0x0105EC76u, 0x12551F82u, 0xE03E9C81u, 0x34F4F86Au, 0xC69F7B69u,
	0xD5CF889Du, 0x27A40B9Eu, 0x79B737BAu, 0x8BDCB4B9u, 0x988C474Du, 0x6AE7C44Eu,
	0xBE2DA0A5u, 0x4C4623A6u, 0x5F16D052u, 0xAD7D5351u
};

static inline uint32_t
docsync_status_crc32c(const void *data, size_t len)
{
	const unsigned char *p = (const unsigned char *) data;
	uint32_t	crc = 0xFFFFFFFFu;
	size_t		i;

	for (i = 0; i < len; i++)
		crc = docsync_status_crc32c_table[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
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
