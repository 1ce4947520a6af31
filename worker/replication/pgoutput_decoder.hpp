#pragma once
// Reads the messages of PostgreSQL's built-in `pgoutput` plugin and yields the same records
// (records.hpp) the docsync decoder (decoder.hpp) yields for the same WAL, so everything after
// decoding works unchanged on servers that load no custom output plugin. docs/internals.md
// ("Reading pgoutput") lists the protocol and where the two streams differ.
//
// pgoutput cannot be told what docsync watches beyond its publication: it sends every published
// column, by name, of every published table. The decoder is given the watch list (the relids and
// attnums of the plugin's `tables` option) and, for each watched relation, its live columns as the
// catalog has them (attnum, name), and projects pgoutput's columns onto the watched ones by name:
// RELATION lists the watched columns in attnum order with their attnums, then the watched attnums
// the relation lacks as missing; tuples carry one value per RELATION column.
//
// What pgoutput does not say directly is derived the way the docsync plugin derives it:
//   - BEGIN's xid is 32 bits: it is widened to the full 64-bit xid nearest the last one seen (the
//     first reference is the server's next full xid when the session starts, see reset()), which is
//     exact while the stream is within 2^31 transactions of it, as PostgreSQL's wraparound limits
//     guarantee.
//   - old values: no old tuple on an UPDATE means the replica identity did not change (identity
//     columns SAME, the rest UNKNOWN); 'K' carries the identity columns only (the rest UNKNOWN);
//     'O' (REPLICA IDENTITY FULL) every column. A logged old value equal to the new one (same text,
//     both NULL, or the new one an unchanged TOAST value) is SAME.
//   - a transaction with nothing docsync reads (only logical messages whose prefix does not start
//     with "docsync", or changes of unwatched tables) yields no BEGIN and no COMMIT.
//
// Streamed transactions (protocol version 2): the messages of each block are held (StreamSpool,
// bounded memory, then a temporary file), the changes of unwatched relations and foreign messages
// left out; at its STREAM COMMIT the transaction is read back and decoded exactly as the same
// transaction sent whole at its commit (BEGIN with the commit's xid, position and time, the records
// in order, COMMIT), one held message per replay() call so the caller's memory stays bounded too;
// STREAM ABORT drops the transaction or, naming a subtransaction, that subtransaction's messages.
// Nothing of a streamed transaction is yielded before its STREAM COMMIT. A RELATION kept from an
// aborted subtransaction that says nothing new is not yielded.
//
// One decoder per stream session (pgoutput sends RELATION again in every session). Anything
// malformed or inconsistent throws DecodeError; no input can cause undefined behaviour.
//
// Thread ownership: the stream thread.

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/defaults.hpp"
#include "replication/decoder.hpp"
#include "replication/pgoutput_messages.hpp"
#include "replication/pgoutput_spool.hpp"
#include "replication/records.hpp"

namespace docsync {

// A live column of a watched relation, as the catalog (pg_attribute) has it.
struct CatalogColumn {
    int attnum = 0;
    std::string name;
};

// One watched relation: which columns docsync reads and what the catalog calls them.
struct PgoutputWatch {
    Oid relid = 0;
    bool all_columns = false;        // every live column (an entry without a column list)
    std::vector<int> attnums;        // the watched columns otherwise (any order, duplicates allowed)
    std::vector<CatalogColumn> columns;  // the relation's live columns
};

struct PgoutputOptions {
    int proto_version = 1;
    // Pass logical messages whose prefix starts with "docsync" (the plugin's `messages` option).
    bool messages = true;
    // The server's next full xid when the session starts (pg_current_snapshot()'s xmax): the first
    // reference for widening BEGIN's 32-bit xid.
    std::uint64_t reference_xid = 0;
    // Streamed transactions (version 2): bytes of held messages kept in memory, all open
    // transactions together, before the largest goes to a temporary file in `spill_dir` (empty:
    // $TMPDIR, else /tmp).
    std::size_t stream_memory = defaults::kStreamMemory;
    std::string spill_dir;
};

class PgoutputDecoder {
public:
    // Throws Error when proto_version is not one this decoder implements, or a watch is invalid.
    PgoutputDecoder(std::vector<PgoutputWatch> watches, PgoutputOptions options);

    // Decodes one pgoutput message, appending the records it yields (none, one, or a held-back
    // BEGIN and then the record) to `out`. Throws DecodeError; `out` then holds what the earlier
    // messages yielded and nothing of this one. After a STREAM COMMIT, replaying() is true: call
    // replay() until it is false before the next decode(). Throws Error (transient) when a temporary
    // file fails.
    void decode(std::span<const std::uint8_t> message, std::vector<Record>& out);

    // A committed streamed transaction is being read back.
    bool replaying() const { return replay_; }
    // Reads back the next held message of the committed streamed transaction, appending what it
    // yields, or at the end the COMMIT; returns the held message's size in bytes (0 at the end).
    // Throws DecodeError, or Error (transient) when a temporary file fails; the transaction is then
    // abandoned and replaying() is false.
    std::size_t replay(std::vector<Record>& out);

    // decode(), then every replay() (tests and the fuzz target: the output is not bounded).
    void decode_all(std::span<const std::uint8_t> message, std::vector<Record>& out);

    // Streamed transactions held, and their bytes in memory (stats and tests).
    const StreamSpool& spool() const { return spool_; }

    // A new stream session: forgets relations and any open transaction; `reference_xid` as in
    // PgoutputOptions.
    void reset(std::uint64_t reference_xid);

    // The full xid for a 32-bit one, nearest the reference (exposed for tests).
    std::uint64_t widen_xid(std::uint32_t xid) const;

private:
    // The current RELATION of a watched relation: the projected record, and for each projected
    // column the index of its pgoutput column (-1: pgoutput does not send it).
    struct Described {
        RelationRecord record;
        std::vector<int> source;
        std::size_t width = 0;  // pgoutput's column count for this relation
    };

    void apply(pgoutput::Parsed& parsed, std::vector<Record>& out);
    // A message between STREAM START and STOP, of (sub)transaction `xid`: held or left out.
    void hold(const pgoutput::Parsed& parsed, std::uint32_t xid, std::span<const std::uint8_t> message);
    void on_stream(const pgoutput::Parsed& parsed);
    // `kept`: a RELATION kept from an aborted subtransaction, yielded only when it changes something.
    void on_relation(pgoutput::Relation&& rel, std::vector<Record>& out, bool kept = false);
    void on_change(const pgoutput::Change& change, std::vector<Record>& out);
    void on_truncate(const pgoutput::Truncate& truncate, std::vector<Record>& out);
    void emit_in_transaction(Record&& record, std::vector<Record>& out);

    PgoutputOptions options_;
    std::unordered_map<Oid, PgoutputWatch> watches_;
    std::unordered_map<Oid, Described> relations_;
    std::uint64_t reference_xid_ = 0;
    bool in_transaction_ = false;
    bool begin_sent_ = false;
    BeginRecord pending_begin_;
    // Streamed transactions.
    StreamSpool spool_;
    bool in_block_ = false;          // between STREAM START and STOP
    std::uint32_t block_xid_ = 0;    // the block's top-level transaction
    bool replay_ = false;            // a STREAM COMMIT is being read back
    CommitRecord replay_commit_;
};

}  // namespace docsync
