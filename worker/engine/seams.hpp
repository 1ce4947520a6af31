#pragma once
// The seams the engine owns and other components implement: Runner (executor/ runs customer SQL),
// Publisher (publish/ delivers docs). The engine includes neither libpq nor a sink; unit tests
// implement these with fakes.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/lsn.hpp"

namespace docsync {

// One value passed to a doc or keys query, in PostgreSQL text form; nullopt is SQL NULL.
using SqlValue = std::optional<std::string>;
using SqlArgs = std::vector<SqlValue>;

// A doc query as defined with docsync.define_query.
struct DocQuery {
    std::string name;                 // channel segment: db:<name>:…
    std::string sql;                  // parameterised: $1 … $n are the params in order
    std::vector<std::string> params;  // param names, in $n order
    std::string search_path;          // in force at definition; SET LOCAL for each compute
    std::string refused;              // non-empty: why the worker must not run it (docsync.refusal())
    std::string fingerprint;          // what its docs depend on besides rows (docsync.fingerprint())
    // The statement that computes many of its docs at once (docsync.batch_sql()): $k is an array of
    // the k-th params, one element per doc. Empty when the query has none (no params, an array
    // param): its docs are computed one by one.
    std::string batch_sql;
    // Its definer's reader role: each compute runs as it (docsync.compute_as, plugin/reader.c).
    // Empty: the pool role's own rights (definitions made in tests, not read from the server).
    std::string reader_role;
    // The base type (pg_type name) of each param, "" for a type outside pg_catalog: a channel's key
    // must be in its type's canonical text (engine/key_text.hpp). Empty when unknown.
    std::vector<std::string> key_types;
};

// A reverse-index keys query (docsync.watch(..., keys_sql => ...)): returns one column per doc param.
struct KeysQuery {
    std::string query;        // the doc query it feeds
    std::string sql;          // $1 … $n are keys_args values from the changed row
    std::string search_path;
    std::string table;        // "schema.table" of the watch, for messages
    std::string refused;      // its doc query's refusal: lookups are refused with it
    std::string batch_sql;    // the lookups of many key values at once, as DocQuery::batch_sql
    std::string reader_role;  // its watch definer's reader role, as DocQuery::reader_role
};

// What a compute must see (invariant 3, docs/design.md). On a primary every xid in `xids` must be
// visible in the compute's snapshot; on a standby replay must have passed `max_end_lsn`. Otherwise
// the outcome is NotVisible and the engine requeues the compute with a short backoff.
struct Visibility {
    std::vector<std::uint64_t> xids;  // full 64-bit xids
    Lsn max_end_lsn = 0;
};

enum class OutcomeKind {
    Ok,          // the query ran; see the payload
    NotVisible,  // the snapshot does not yet include what the compute completes: retry soon
    Permanent,   // query error, timeout, size or keys cap: recorded; completes its transactions
    Transient,   // infrastructure fault (docsync::sqlstate_is_transient): retried, holds the slot
};

struct DocOutcome {
    OutcomeKind kind = OutcomeKind::Ok;
    std::optional<std::string> doc;  // Ok: the doc as JSON text; nullopt when the query returned no row
    std::string error;               // not Ok: what went wrong, naming the query
    std::string sqlstate;            // not Ok: the server's SQLSTATE when there was one
    Lsn snapshot_lsn = 0;            // Ok: the WAL insert position read after the compute's snapshot: every
                                     // commit it sees ends at or before it (asynchronous ones included)
    // Set by the engine, never by a runner: the server's key check refused the channel (`error`
    // says why); nothing was computed, and the channel is refused like a key_text refusal.
    bool key_refused = false;
};

// What PostgreSQL prints for each value of a channel's key (Runner::print_keys).
struct KeyPrintOutcome {
    OutcomeKind kind = OutcomeKind::Ok;
    SqlArgs printed;  // Ok: one per value, in order; NULL stays NULL
    std::string error;
    std::string sqlstate;  // not Ok: 22xxx when PostgreSQL cannot read a value as its param's type
};

struct KeysOutcome {
    OutcomeKind kind = OutcomeKind::Ok;
    std::vector<SqlArgs> keys;  // Ok: each row's values in column order (column i feeds doc param $i+1)
    std::string error;
    std::string sqlstate;
};

// What one statement computing several docs (or lookups) of one query returned.
template <class Outcome>
struct BatchOutcome {
    // The statement failed as a whole with an error any one of its docs may have caused (a query
    // error, a timeout): `outcomes` is empty, and the engine runs the docs again in smaller batches,
    // down to single docs, so only the doc at fault records the failure. `error` says what failed.
    bool split = false;
    std::string error;
    std::vector<Outcome> outcomes;  // otherwise one per param set, in order
};
using DocBatchOutcome = BatchOutcome<DocOutcome>;
using KeysBatchOutcome = BatchOutcome<KeysOutcome>;

// Runs customer SQL. Called from the engine's worker threads, concurrently: implementations are
// thread-safe. Never throws for a query's own failure: that is an outcome.
class Runner {
public:
    virtual ~Runner() = default;
    // Exactly one column and at most one row; no row → Ok with doc == nullopt.
    virtual DocOutcome run_doc(const DocQuery& query, const SqlArgs& args, const Visibility& need) = 0;
    // At most max_keys rows; more is a Permanent outcome, never a silent truncation.
    virtual KeysOutcome run_keys(const KeysQuery& query, const SqlArgs& args, std::size_t max_keys,
                                 const Visibility& need) = 0;
    // The docs of `query` for each of `args` (one or more), in one statement where the runner can;
    // `need` is what all of them complete. Each doc's outcome is its own: the one-row rule and the
    // size cap hold per doc. This default computes them one by one.
    virtual DocBatchOutcome run_docs(const DocQuery& query, const std::vector<SqlArgs>& args,
                                     const Visibility& need) {
        DocBatchOutcome out;
        for (const auto& one : args) out.outcomes.push_back(run_doc(query, one, need));
        return out;
    }
    // The lookups of `query` for each of `args`, as run_docs: max_keys holds per lookup.
    virtual KeysBatchOutcome run_keys_batch(const KeysQuery& query, const std::vector<SqlArgs>& args,
                                            std::size_t max_keys, const Visibility& need) {
        KeysBatchOutcome out;
        for (const auto& one : args) out.outcomes.push_back(run_keys(query, one, max_keys, need));
        return out;
    }
    // Each value of a channel's key as PostgreSQL prints it when read as the type `query` gives
    // its param: the server's spelling check for key types engine/key_text.hpp cannot check
    // (key_type_checked). Runs as the query's reader, with its search_path, as a compute does.
    // This default prints every value as written (a runner that cannot ask the server).
    virtual KeyPrintOutcome print_keys(const DocQuery& query, const SqlArgs& values) {
        (void)query;
        KeyPrintOutcome out;
        out.printed = values;
        return out;
    }
    // Batched forms set aside since start because they failed where the docs alone ran (their
    // queries are computed one statement per doc): a metric, so that it is seen.
    virtual std::uint64_t batched_forms_set_aside() const { return 0; }
    // Those forms by doc query (a keys query's under the doc query it feeds): why each was set
    // aside and what lifts it, for docsync.queries. A definitions change gives them another try.
    virtual std::map<std::string, std::string> batched_forms_set_aside_by_query() const { return {}; }
    // The definitions were reloaded (the definitions generation moved): whatever the runner keeps
    // planned from the catalog as it was (prepared statements) must not be used for computes that
    // start after this call. PostgreSQL re-plans a prepared statement when an object it uses
    // changes, not when a new one would now win name resolution (a table or function created in an
    // earlier schema of the search_path).
    virtual void definitions_changed() {}
};

// One doc for Publisher::publish_many; it points at what the caller keeps alive for the call.
struct Publication {
    const std::string* channel = nullptr;
    const std::optional<std::string>* doc = nullptr;
    DocVersion version;
};

// What a sink retains for one channel (Publisher::read_back).
struct RetainedDoc {
    // The doc as the sink holds it: compact JSON text (envelope/envelope.hpp); nullopt for a null doc
    // (a tombstone).
    std::optional<std::string> doc;
    DocVersion version;
};

// The live set of --live all, kept outside the sink (docs/design.md, "sink checks"): every doc the
// engine starts keeping current is named to it (before its first publish), every doc it stops
// keeping (its query dropped, its key refused) is forgotten, and load() gives back what the
// slot's earlier workers named, so a doc the sink never held or lost is recomputed at the next
// start and by the WAL safety valve. named() and forgotten() never block (the stream thread calls
// them under the engine's mutex): the journal writes in batches of its own. load() may block.
class LiveJournal {
public:
    virtual ~LiveJournal() = default;
    virtual std::vector<std::string> load() = 0;
    virtual void named(const std::string& channel) = 0;
    virtual void forgotten(const std::string& channel) = 0;
};

// Delivers a computed doc to its channel. Called from the engine's worker threads, concurrently.
class Publisher {
public:
    virtual ~Publisher() = default;
    // Returns only when the doc's outcome is durable for the sink; a nullopt doc publishes null and
    // leaves a versioned tombstone. Throws docsync::Error (transient) when the sink is unavailable:
    // the engine retries and the transactions waiting on the doc stay pending (they hold the slot).
    virtual void publish(const std::string& channel, const std::optional<std::string>& doc, DocVersion version) = 0;
    // Publishes several docs at once (a sink writes and syncs them together, or sends them in one
    // round trip). Returns, per doc in order, nullopt once it is durable, or the docsync::Error
    // publish would have thrown for it. This default publishes them one by one.
    virtual std::vector<std::optional<Error>> publish_many(const std::vector<Publication>& docs) {
        std::vector<std::optional<Error>> out;
        out.reserve(docs.size());
        for (const auto& d : docs) {
            try {
                publish(*d.channel, *d.doc, d.version);
                out.emplace_back();
            } catch (const Error& e) {
                out.emplace_back(e);
            } catch (const std::exception& e) {
                out.emplace_back(Error(e.what(), {}, true));
            }
        }
        return out;
    }
    // Every channel the sink already holds a doc for (the live set of `--live all` at start).
    virtual std::vector<std::string> retained_channels() = 0;
    // The highest generation among the docs the sink holds (0 when it holds none): a new generation
    // is always above it, so docs from a new server are never rejected for an older generation.
    virtual std::uint64_t max_generation() = 0;
    // The highest version among the docs the sink holds or held ({0, 0} when none): the sink's
    // high-water mark. Its position can never pass the WAL end of the server that computed it, so
    // a server whose WAL ends before it, in the same generation, was restored to an earlier point
    // (docs/design.md, "restores"). A sink that keeps no positions answers {max_generation(), 0}.
    virtual DocVersion max_version() { return {max_generation(), 0}; }
    // Whether the sink lost docs it had acknowledged since the last call: it restarted without them,
    // was flushed, or its file was truncated or replaced. Returns the reason, or nullopt; the first
    // call only takes note of the sink's state. Throws docsync::Error when the sink cannot be asked.
    virtual std::optional<std::string> lost_docs() { return std::nullopt; }
    // How many times the sink's connection broke so far (a restart, an outage): after a break and
    // until lost_docs() has run again, what the sink holds is unknown, and nothing may be called
    // published (docs/design.md, "sink checks"). 0 for a sink that cannot break.
    virtual std::uint64_t breaks() const { return 0; }
    // Waits up to `timeout` for the sink's connection to break; true when it did (breaks() has
    // grown). The default returns false at once: the caller waits on its own.
    virtual bool wait_for_break(std::chrono::milliseconds) { return false; }
    // A failure no retry can fix (stdout's reader went away): the reason, and the worker stops with
    // an error, leaving what it could not publish unacknowledged. nullopt while publishing can work.
    virtual std::optional<std::string> fatal() { return std::nullopt; }

    // Whether the sink keeps what it was given, so read_back can tell what it holds (stdout keeps
    // nothing: what it wrote is gone).
    virtual bool retains() const { return false; }
    // The key types of every doc query, as JSON ({"order":["int4"],…}: engine/key_text.hpp), for the
    // sink's subscribers to refuse channels whose keys are not in canonical text before asking for
    // them (docsync-gateway reads Redis's docsync:key_types). Called at every definitions load.
    // A sink without such subscribers ignores it; a failure is logged, never thrown.
    virtual void describe_keys(const std::string& key_types_json) { (void)key_types_json; }
    // Retained channels no doc stands behind (no such query, another number of params, a key not in
    // canonical text), found among retained_channels() at start: a sink that can gives each an expiry
    // (Redis: the tombstone TTL, unless it has one), so that nothing nobody computes lives forever.
    // A failure is logged, never thrown.
    virtual void expire_orphans(const std::vector<std::string>& channels) { (void)channels; }
    // The newest doc the sink retains for `channel` and its version, or nullopt when it holds none.
    // Throws docsync::Error when the sink cannot be asked or what it holds cannot be read.
    virtual std::optional<RetainedDoc> read_back(const std::string&) { return std::nullopt; }
    // Publishes a doc unless the sink already retains a newer version for its channel: the repair of
    // a doc the sink holds wrongly, which may race with the engine publishing the same doc anew and
    // must never put an older doc in front of a newer one. Throws as publish does.
    virtual void restore(const std::string& channel, const std::optional<std::string>& doc, DocVersion version) {
        publish(channel, doc, version);
    }
};

}  // namespace docsync
