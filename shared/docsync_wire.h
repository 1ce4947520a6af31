/*
 * docsync_wire.h
 *      The docsync wire format: the records the output plugin emits and the worker decodes, in
 *      binary and in the plugin's text format. This comment is the one specification of both; the
 *      plugin (plugin/records.c), the worker's decoder and the documentation refer to it.
 *
 * Plain C99, shared by the plugin (C, inside the server) and the worker (C++). Nothing here includes
 * PostgreSQL or C++ headers.
 *
 * Framing. Every logical decoding output message (one CopyData 'w' payload, or one row of
 * pg_logical_slot_get_binary_changes) carries exactly one record. Byte 0 is the record type; the rest
 * is the body below. A record never spans messages and a message never holds two records.
 *
 * Scalars.
 *   uv    unsigned LEB128 varint: 7 bits a byte, least significant group first, high bit set on every
 *         byte but the last; at most 10 bytes; the 10th byte may only carry the top bit of a 64-bit
 *         value. Decoders reject longer or overflowing encodings.
 *   sv    signed varint: zigzag ((n << 1) ^ (n >> 63)) then uv.
 *   str   uv byte length, then that many bytes (UTF-8 in the server encoding, no terminator).
 *   u8    one byte.
 *
 * Records (proto_version 1).
 *   'B' BEGIN     uv xid (full 64-bit: epoch << 32 | xid), uv commit_lsn (start of the COMMIT record),
 *                 sv commit_time (TimestampTz: microseconds since 2000-01-01 00:00 UTC)
 *   'R' RELATION  uv relid (the watched relation; the root for partitions), str schema, str name,
 *                 u8 replica_identity ('d','f','n','i' as pg_class.relreplident), uv natts, then per
 *                 projected column: uv attnum (in the watched relation), str name, uv type oid,
 *                 u8 column flags (DOCSYNC_COL_*). Sent before the first change (or TRUNCATE) of a
 *                 relation in a stream and again after any invalidation of it (ALTER, RENAME,
 *                 TRUNCATE, …), so the stream stays right across DDL, even in the middle of a
 *                 transaction; a later RELATION for the same relid replaces the earlier one.
 *                 A change to a partition is reported as its topmost watched ancestor, with the
 *                 columns mapped by name (a partition's column order may differ): partitions of one
 *                 watched root share the root's RELATION. For a missing
 *                 column (DOCSYNC_COL_MISSING) attnum is 0 when it was listed by name, name is ""
 *                 when it was listed by attnum, and type oid is 0.
 *   'I' INSERT    uv relid, tuple new
 *   'U' UPDATE    uv relid, tuple new, tuple old
 *   'D' DELETE    uv relid, tuple old
 *   'T' TRUNCATE  u8 flags (DOCSYNC_TRUNCATE_*), uv nrels, nrels × uv relid (watched relations only,
 *                 each once, partitions reported as their watched root; a RELATION for each precedes it
 *                 when not yet sent)
 *   'M' MESSAGE   u8 transactional (0 or 1), str prefix, str content (bytes); a non-transactional
 *                 message may arrive outside BEGIN … COMMIT
 *   'C' COMMIT    uv commit_lsn (as in BEGIN), uv end_lsn (end of the COMMIT record: the position to
 *                 acknowledge)
 *
 * Tuples. uv natts (equal to the RELATION's natts), then per projected column, in RELATION order, one
 * u8 value kind (DOCSYNC_VAL_*), followed by str text only for DOCSYNC_VAL_TEXT. Values are in the
 * type's text output form.
 *   new tuple (INSERT, UPDATE): TEXT, NULL, TOAST (unchanged out-of-line value, not logged) or UNKNOWN.
 *   old tuple (UPDATE): TEXT or NULL when the server logged the old value and it differs from the new
 *     one; SAME when the old value is known equal to the new one (it was logged and is equal, or it is
 *     a replica identity column and the server logged no old tuple because the key did not change);
 *     UNKNOWN when the server did not log it (not part of the replica identity). So when an UPDATE
 *     carries no old tuple, the identity columns are SAME and the others UNKNOWN; under REPLICA
 *     IDENTITY FULL every old value is known.
 *   old tuple (DELETE): TEXT, NULL or UNKNOWN (not logged).
 *   UNKNOWN is also used for a listed column that does not exist in the relation (a typo, or DDL since
 *   the definitions were made); its RELATION entry carries DOCSYNC_COL_MISSING.
 *
 * Transactions. BEGIN comes before the first emitted change of a transaction and COMMIT after its
 * last; a transaction none of whose changes pass the filter emits nothing at all. Subtransactions are
 * folded into their top-level transaction (rolled-back ones emit nothing). Only watched relations
 * emit changes, and only their listed columns; tables of the extension's own schema (docsync) are
 * always emitted, with every column, so the worker sees definition changes at their exact place in
 * the stream.
 *
 * Text format (plugin option format 'text', for tests and people; not for machines that need the
 * volatile values): the same records, one line each, with no xids, LSNs, times or relids (the
 * lsn and xid columns of pg_logical_slot_get_changes and its kin have those):
 *   BEGIN
 *   RELATION schema.name replident <d|f|n|i>: col <type oid>[ identity][ missing], …
 *   INSERT schema.name new(col=value …)
 *   UPDATE schema.name new(col=value …) old(col=value …)
 *   DELETE schema.name old(col=value …)
 *   TRUNCATE schema.name[, schema.name …][ CASCADE][ RESTART IDENTITY]
 *   MESSAGE transactional|nontransactional 'prefix' 'content'
 *   COMMIT
 * A value is a single-quoted literal ('' for a quote; \\, \n, \r, \t, and \xNN for other bytes below
 * 0x20 and 0x7f; other bytes as they are), so a record is always one line, or NULL, TOAST, SAME or
 * UNKNOWN. Identifiers are written as they are when they match [a-z_][a-z0-9_]*, else double-quoted
 * with "" for a quote; a missing column listed by attnum is written "#attnum". For example:
 *   BEGIN
 *   RELATION public.orders replident d: id 23 identity, status 25
 *   INSERT public.orders new(id='1' status='new')
 *   UPDATE public.orders new(id='1' status='paid') old(id=SAME status=UNKNOWN)
 *   DELETE public.orders old(id='1' status=UNKNOWN)
 *   TRUNCATE public.orders, public.order_items CASCADE
 *   MESSAGE transactional 'docsync.reload' 'now'
 *   COMMIT
 * tests/wire_golden.txt pairs real binary records (hex) with their text lines; tests/wire_golden.sh
 * regenerates it from a live slot.
 */
#ifndef DOCSYNC_WIRE_H
#define DOCSYNC_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define DOCSYNC_PROTO_VERSION_MIN 1
#define DOCSYNC_PROTO_VERSION_MAX 1

/* Record types (byte 0 of every record). */
#define DOCSYNC_REC_BEGIN    'B'
#define DOCSYNC_REC_RELATION 'R'
#define DOCSYNC_REC_INSERT   'I'
#define DOCSYNC_REC_UPDATE   'U'
#define DOCSYNC_REC_DELETE   'D'
#define DOCSYNC_REC_TRUNCATE 'T'
#define DOCSYNC_REC_MESSAGE  'M'
#define DOCSYNC_REC_COMMIT   'C'

/* Value kinds in tuples. */
#define DOCSYNC_VAL_NULL    'n'
#define DOCSYNC_VAL_TEXT    't'
#define DOCSYNC_VAL_TOAST   'u' /* unchanged out-of-line value: not logged, equal to the old one */
#define DOCSYNC_VAL_SAME    's' /* old tuple only: equal to the new value */
#define DOCSYNC_VAL_UNKNOWN '?' /* not logged, or the column does not exist */

/* Column flags in RELATION. */
#define DOCSYNC_COL_IDENTITY 0x01 /* part of the relation's replica identity */
#define DOCSYNC_COL_MISSING  0x02 /* listed, but the relation has no such column */

/* TRUNCATE flags. */
#define DOCSYNC_TRUNCATE_CASCADE         0x01
#define DOCSYNC_TRUNCATE_RESTART_IDENTITY 0x02

/* Longest uv encoding. */
#define DOCSYNC_UV_MAX_BYTES 10

/* Writes v as uv into out (room for DOCSYNC_UV_MAX_BYTES); returns the bytes written. */
static inline size_t
docsync_uv_encode(uint64_t v, uint8_t *out)
{
	size_t n = 0;

	while (v >= 0x80)
	{
		out[n++] = (uint8_t) (v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t) v;
	return n;
}

/*
 * Reads a uv from [*pos, end). On success stores it in *v, advances *pos and returns 1; on a
 * truncated, over-long or overflowing encoding returns 0 and leaves *pos alone.
 */
static inline int
docsync_uv_decode(const uint8_t **pos, const uint8_t *end, uint64_t *v)
{
	const uint8_t *p = *pos;
	uint64_t result = 0;
	unsigned shift = 0;

	for (;;)
	{
		uint8_t b;

		if (p >= end || shift > 63)
			return 0;
		b = *p++;
		if (shift == 63 && (b & 0x7e) != 0)
			return 0; /* bits beyond 64 */
		result |= (uint64_t) (b & 0x7f) << shift;
		if ((b & 0x80) == 0)
			break;
		shift += 7;
	}
	*v = result;
	*pos = p;
	return 1;
}

static inline uint64_t
docsync_zigzag_encode(int64_t v)
{
	return ((uint64_t) v << 1) ^ (uint64_t) (v >> 63);
}

static inline int64_t
docsync_zigzag_decode(uint64_t v)
{
	return (int64_t) (v >> 1) ^ -(int64_t) (v & 1);
}

#endif /* DOCSYNC_WIRE_H */
