// The read-only executor; the contract is in executor.hpp.
#include "executor/executor.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <type_traits>

#include "common/error.hpp"
#include "common/sqlstate.hpp"
#include "common/log.hpp"
#include "common/lsn.hpp"
#include "executor/batch_forms.hpp"
#include "executor/bounded_forms.hpp"
#include "executor/compute_statements.hpp"
#include "executor/json_check.hpp"
#include "executor/runner.hpp"
#include "pg/connection.hpp"

namespace docsync {

namespace {

using SteadyClock = std::chrono::steady_clock;

std::string millis(std::chrono::milliseconds d) { return std::to_string(d.count()); }

// Refuses, before it reaches the server, a stored query that is not one SELECT: the extension checks
// this when a query is defined, but the definition tables can be written around the API.
std::optional<std::string> refusal_of(const std::string& what, const std::string& refused, const std::string& sql) {
    if (!refused.empty()) return what + " is refused: " + refused;
    if (!looks_like_select(sql))
        return what + " is not a SELECT; doc and keys queries are one SELECT (or WITH … SELECT, VALUES, TABLE)";
    return std::nullopt;
}

std::string keys_what(const KeysQuery& query) {
    return "the keys query of the watch of \"" + query.query + "\" on " + query.table;
}

}  // namespace

struct Executor::Slot {
    std::optional<pg::Connection> conn;
    bool busy = false;
    bool standby = false;
    unsigned failures = 0;
    SteadyClock::time_point next_attempt{};
    std::uint64_t epoch = 0;  // the definitions epoch its prepared statements were planned in
    std::uint64_t sessions = 0;  // the sessions epoch (renew_sessions) it was connected in
};

struct Executor::Lease {
    Executor* owner = nullptr;
    std::size_t index = 0;
    Slot* slot = nullptr;
    std::string error;  // set when no connection could be had
    bool keep = true;
    ~Lease() {
        if (owner && slot) owner->give_back(index, keep);
    }
};

Executor::Executor(ExecutorOptions options) : options_(std::move(options)) {
    if (options_.pool_size == 0) throw Error("--pool must be at least 1");
    for (unsigned i = 0; i < options_.pool_size; ++i) slots_.push_back(std::make_unique<Slot>());
    // The first connection is made now: an unreachable server or an unsafe role stops the start.
    auto conn = pg::Connection::connect(options_.pool_dsn, pg::deadline_in(options_.connect_timeout),
                                        {{"application_name", options_.application_name}}, "--pool-dsn");
    pin(conn, pg::deadline_in(std::chrono::seconds(30)));
    // A pool role with REPLICATION itself is the replication role given as --pool-dsn.
    bool replication_role = conn.exec("SELECT rolreplication FROM pg_catalog.pg_roles WHERE rolname = current_user",
                                      pg::deadline_in(std::chrono::seconds(30)))
                                .get(0, 0) == "t";
    require_harmless_role(conn, false, std::string("the pool role \"") + conn.user() + "\"",
                          std::string(replication_role ? "it has REPLICATION, so it looks like the replication role: "
                                                         "--dsn and --pool-dsn look swapped (or both name the "
                                                         "replication role). "
                                                       : "") +
                              "doc queries are customer SQL and must run as a role that reaches no superuser, "
                              "no REPLICATION, BYPASSRLS or CREATEROLE role, no pg_read_server_files, "
                              "pg_write_server_files, pg_execute_server_program, pg_signal_backend, pg_read_all_data "
                              "or pg_write_all_data, and owns no table; connect --pool-dsn as a plain role with SELECT "
                              "on what the docs read (SELECT docsync.grant_reader('<role>'))",
                          options_.allow_unsafe_pool, "executor");
    // Which server and database the pool reaches (a standby shares its primary's system identifier).
    auto identity = conn.exec("SELECT pg_catalog.current_database(), (SELECT system_identifier FROM "
                              "pg_catalog.pg_control_system())::text, pg_catalog.pg_is_in_recovery()",
                              pg::deadline_in(std::chrono::seconds(30)));
    database_ = identity.get(0, 0);
    system_identifier_ = identity.get(0, 1);
    slots_[0]->standby = standby_ = identity.get(0, 2) == "t";
    if (standby_ && options_.lend_reader)
        throw Error("--pool-dsn reaches a hot standby, but a portable install computes on the primary: its "
                    "docsync.compute_as lends each compute its reader role by a GRANT in the compute's "
                    "transaction, which a standby cannot run; point --pool-dsn at the primary "
                    "(docs/portable.md)");
    slots_[0]->conn.emplace(std::move(conn));
}

Executor::~Executor() = default;

void Executor::pin(pg::Connection& conn, pg::Deadline deadline) {
    pg::pin_text_forms(conn, deadline);
    conn.exec("SELECT set_config('default_transaction_read_only', 'on', false),"
              " set_config('statement_timeout', $1, false),"
              " set_config('idle_in_transaction_session_timeout', $2, false)",
              {millis(options_.statement_timeout), millis(options_.statement_timeout * 2 + std::chrono::seconds(5))},
              deadline);
}

std::shared_ptr<std::mutex> Executor::lend_turn(const std::string& reader_role) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& turn = lend_turns_[reader_role];
    if (!turn) turn = std::make_shared<std::mutex>();
    return turn;
}

void Executor::definitions_changed() {
    definitions_epoch_.fetch_add(1, std::memory_order_acq_rel);
    std::lock_guard<std::mutex> lock(mutex_);
    unbatchable_.clear();
}

void Executor::renew_sessions() { sessions_epoch_.fetch_add(1, std::memory_order_acq_rel); }

bool Executor::standby() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return standby_;
}

Executor::Lease Executor::acquire() {
    std::size_t index = 0;
    {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            auto it = std::find_if(slots_.begin(), slots_.end(), [](const auto& s) { return !s->busy; });
            if (it != slots_.end()) {
                index = static_cast<std::size_t>(it - slots_.begin());
                (*it)->busy = true;
                break;
            }
            free_.wait(lock);
        }
    }
    Lease lease;
    lease.owner = this;
    lease.index = index;
    lease.slot = slots_[index].get();
    Slot& slot = *lease.slot;
    std::uint64_t sessions = sessions_epoch_.load(std::memory_order_acquire);
    if (slot.conn && slot.conn->ok() && slot.sessions == sessions) return lease;
    slot.conn.reset();
    if (SteadyClock::now() < slot.next_attempt) {
        lease.error = "the pool connection is down; reconnecting with backoff";
        return lease;
    }
    try {
        auto conn = pg::Connection::connect(options_.pool_dsn, pg::deadline_in(options_.connect_timeout),
                                            {{"application_name", options_.application_name}}, "--pool-dsn");
        pin(conn, pg::deadline_in(options_.connect_timeout));
        slot.standby = conn.exec("SELECT pg_is_in_recovery()", pg::deadline_in(options_.connect_timeout)).get(0, 0) == "t";
        slot.conn.emplace(std::move(conn));
        slot.sessions = sessions;
        slot.failures = 0;
        std::lock_guard<std::mutex> lock(mutex_);
        standby_ = slot.standby;
    } catch (const Error& e) {
        ++slot.failures;
        auto wait = options_.reconnect_backoff * std::min<unsigned>(1u << std::min(slot.failures, 6u), 50u);
        slot.next_attempt = SteadyClock::now() + wait;
        lease.error = e.what();
        log_warning("executor", lease.error);
    }
    return lease;
}

void Executor::give_back(std::size_t index, bool keep) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!keep) slots_[index]->conn.reset();
    slots_[index]->busy = false;
    free_.notify_one();
}

template <typename Check>
OutcomeKind Executor::in_compute(const std::string& search_path, const std::string& reader_role,
                                 const std::string& sql, const SqlArgs& args,
                                 const Visibility& need, const std::string& what, std::string& error,
                                 std::string& sqlstate, Lsn& snapshot_lsn, Check&& check) {
    const bool lend = options_.lend_reader && !reader_role.empty();
    // Computes of one reader role take turns here rather than on the server, where a lending waits
    // for the other's transaction to end with its statement timeout running (ExecutorOptions).
    std::shared_ptr<std::mutex> turn = lend ? lend_turn(reader_role) : nullptr;
    std::unique_lock<std::mutex> my_turn = turn ? std::unique_lock<std::mutex>(*turn) : std::unique_lock<std::mutex>();
    Lease lease = acquire();
    if (!lease.slot->conn) {
        error = what + ": " + lease.error;
        return OutcomeKind::Transient;
    }
    pg::Connection& conn = *lease.slot->conn;
    OutcomeKind kind = OutcomeKind::Ok;
    try {
        // Definitions reloaded since this connection prepared its statements: a shadowing object
        // (CREATE TABLE app.t before public.t on the search_path) does not re-plan them, so they go.
        std::uint64_t epoch = definitions_epoch_.load(std::memory_order_acquire);
        if (lease.slot->epoch != epoch) {
            try {
                conn.forget_prepared(pg::deadline_in(options_.statement_timeout + std::chrono::seconds(5)));
            } catch (const Error&) {
                lease.keep = false;
                throw;
            }
            lease.slot->epoch = epoch;
        }
        if (lease.slot->standby) {
            // A standby's xip is always empty: wait for replay to pass what the compute completes,
            // checked before the snapshot is taken.
            auto r = conn.exec("SELECT pg_last_wal_replay_lsn()",
                               pg::deadline_in(options_.statement_timeout + std::chrono::seconds(5)));
            if (r.is_null(0, 0)) {
                lease.slot->standby = false;  // promoted: use the primary's check from now on
                return OutcomeKind::NotVisible;
            }
            auto replayed = parse_lsn(r.get(0, 0));
            if (!replayed || *replayed < need.max_end_lsn) return OutcomeKind::NotVisible;
        }
        // A portable install's reader check follows the query in its group (ExecutorOptions).
        const bool reader_check = options_.check_reader && !reader_role.empty();
        ComputeStatements st = compute_statements(search_path, reader_role, sql, args,
                                                  {.lend = lend, .keep_prepared = !options_.lend_reader,
                                                   .reader_check = reader_check});
        auto deadline = pg::deadline_in(options_.statement_timeout + std::chrono::milliseconds(500));
        std::vector<pg::Step> steps;
        auto run = [&](std::vector<pg::Statement> statements) {
            try {
                auto more = conn.pipeline(statements, deadline);
                steps.insert(steps.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
            } catch (const Error&) {
                lease.keep = false;  // lost, or left in the middle of the pipeline
                throw;
            }
        };
        // One exchange: the query runs before its snapshot is checked, and its result is dropped when
        // the check fails. While checks fail (a synchronous standby stalling commits, say), the check
        // goes first and the query runs only once it passes, so waiting costs no doc queries.
        bool speculate = !check_first_.load(std::memory_order_relaxed);
        auto with_cleanup = [&](std::vector<pg::Statement> statements) {
            statements.insert(statements.end(), st.cleanup.begin(), st.cleanup.end());
            return statements;
        };
        if (speculate && reader_check) {
            run(with_cleanup({st.begin, st.snapshot_check, st.query, st.held}));
        } else if (speculate) {
            run(with_cleanup({st.begin, st.snapshot_check, st.query}));
        } else {
            st.snapshot_check.sync = true;
            run({st.begin, st.snapshot_check});
        }
        std::optional<Error> failed;
        OutcomeKind seen = OutcomeKind::Ok;
        try {
            seen = judge_snapshot(steps, need, lease.slot->standby, snapshot_lsn);
        } catch (const Error& e) {
            failed = e;
        }
        if (!speculate) {
            std::vector<pg::Statement> rest;
            if (!failed && seen == OutcomeKind::Ok) rest.push_back(st.query);
            if (!failed && seen == OutcomeKind::Ok && reader_check) rest.push_back(st.held);
            run(with_cleanup(std::move(rest)));
        }
        // Leave the session as it was pinned: no transaction, no advisory locks.
        for (std::size_t i = steps.size() - st.cleanup.size(); i < steps.size(); ++i) {
            if (steps[i].error) {
                log_warning("executor", std::string("dropping a pool connection that did not clean up: ") +
                                            steps[i].error->what());
                lease.keep = false;
            }
        }
        if (failed) throw *failed;
        check_first_.store(seen == OutcomeKind::NotVisible, std::memory_order_relaxed);
        if (seen != OutcomeKind::Ok) return seen;
        if (steps[2].error) throw *steps[2].error;
        std::optional<std::string> changed;
        if (reader_check) {
            if (steps[3].error) throw *steps[3].error;
            changed = reader_changed(steps[3].result, reader_role, search_path);
        }
        if (changed) {
            error = what + " is refused: " + *changed +
                    "; its result is discarded, never published. A doc or keys query must not change the role "
                    "or the search_path it computes under (set_config('role', …), set_config('search_path', …))";
            kind = OutcomeKind::Permanent;
        } else if (lend) {
            kind = check(runner::unpack(steps[2].result), error);
        } else {
            kind = check(steps[2].result, error);
        }
    } catch (const Error& e) {
        sqlstate = e.sqlstate();
        error = what + " failed: " + e.what();
        kind = e.transient() ? OutcomeKind::Transient : OutcomeKind::Permanent;
        if (sqlstate == docsync::sqlstate::kQueryCanceled)
            error =
                what + " timed out after " + millis(options_.statement_timeout) + " ms (" + e.what() + ")";
    }
    if (!conn.ok()) lease.keep = false;
    return kind;
}

namespace {

// The one-row rule, the size cap and JSON validity for one doc whose query returned `rows` rows
// (2: two or more, as a bounded form returns them), the first being `value` (nullopt: SQL NULL,
// or a doc the server found over the cap, `oversize` its size). Ok with `doc` set, or with it empty
// when there is no doc (no row, or NULL: publishes null).
OutcomeKind judge_doc(const std::string& what, std::size_t rows, std::optional<std::string_view> value,
                      std::optional<std::size_t> oversize, std::size_t max_doc_bytes,
                      std::optional<std::string>& doc, std::string& error) {
    if (rows > 1) {
        error = what + " returned more than one row for one doc; a doc query returns at most one row per set of params";
        return OutcomeKind::Permanent;
    }
    std::optional<std::size_t> size = oversize;
    if (!size && value && value->size() > max_doc_bytes) size = value->size();
    if (rows == 1 && size) {
        error = what + " returned a doc of " + std::to_string(*size) + " bytes, over --max-doc-bytes (" +
                std::to_string(max_doc_bytes) + ")";
        return OutcomeKind::Permanent;
    }
    if (rows == 0 || !value) return OutcomeKind::Ok;
    if (!valid_json(*value)) {
        error = what + " returned a value that is not valid JSON; return json or jsonb";
        return OutcomeKind::Permanent;
    }
    doc.emplace(*value);
    return OutcomeKind::Ok;
}

std::optional<std::string_view> text_at(const pg::Result& r, int row, int column) {
    if (r.is_null(row, column)) return std::nullopt;
    return r.get(row, column);
}

std::string max_keys_error(const std::string& what, std::size_t max_keys) {
    return what + " returned more than " + std::to_string(max_keys) + " rows, over --max-keys (" + std::to_string(max_keys) +
           "); narrow keys_sql or raise --max-keys (a truncated key set would leave docs stale)";
}


}  // namespace

DocOutcome Executor::run_doc(const DocQuery& query, const SqlArgs& args, const Visibility& need) {
    DocOutcome out;
    std::string what = "doc query \"" + query.name + "\"";
    if (auto refused = refusal_of(what, query.refused, query.sql)) {
        out.kind = OutcomeKind::Permanent;
        out.error = *refused;
        return out;
    }
    // At most two rows: one more than a doc has.
    std::string sql = bounded_forms::doc_form(query.sql, 0, options_.max_doc_bytes, 2);
    out.kind = in_compute(query.search_path, query.reader_role, sql, args, need, what, out.error, out.sqlstate,
                          out.snapshot_lsn, [&](const pg::Result& r, std::string& error) {
                              if (r.rows() > 0 && r.columns() != 2)
                                  throw Error(what + ": its bounded form returned a malformed result");
                              std::optional<std::string_view> value;
                              std::optional<std::size_t> size;
                              if (r.rows() > 0) {
                                  value = text_at(r, 0, 0);
                                  size = bounded_forms::oversize(text_at(r, 0, 1));
                              }
                              return judge_doc(what, static_cast<std::size_t>(r.rows()), value, size,
                                               options_.max_doc_bytes, out.doc, error);
                          });
    if (out.kind != OutcomeKind::Ok) out.doc.reset();
    if (out.sqlstate == sqlstate::kSyntaxError) out.error += " (" + std::string(bounded_forms::kOneColumnHint) + ")";
    return out;
}

// The doc query's SQL in an unreferenced WITH (so never run) types each $n as a compute does; the
// outer SELECT prints each through its type's output function, as the reader with the
// query's search_path (a type outside pg_catalog is resolved as the compute resolves it).
KeyPrintOutcome Executor::print_keys(const DocQuery& query, const SqlArgs& values) {
    KeyPrintOutcome out;
    std::string what = "the key check of doc query \"" + query.name + "\"";
    if (auto refused = refusal_of(what, query.refused, query.sql)) {
        out.kind = OutcomeKind::Permanent;
        out.error = *refused;
        return out;
    }
    std::string sql = "WITH docsync_doc AS (\n" + query.sql + "\n) SELECT ";
    // format's %s is the type's output function, what a change's key prints; a cast to text may
    // differ from it (inet keeps a /32). A bpchar[]'s elements are cut of their trailing spaces,
    // no part of their value (engine/key_text.hpp), as the worker spells such a key read from data.
    for (std::size_t i = 0; i < values.size(); ++i) {
        bool bpchar_array = i < query.key_types.size() && query.key_types[i] == "_bpchar";
        sql += (i ? ", " : "") + std::string("pg_catalog.format('%s', $") + std::to_string(i + 1) +
               (bpchar_array ? "::pg_catalog.text[])" : ")");
    }
    Lsn unused = 0;
    out.kind = in_compute(query.search_path, query.reader_role, sql, values, Visibility{}, what, out.error, out.sqlstate,
                          unused, [&](const pg::Result& r, std::string& error) {
                              if (r.rows() != 1 || r.columns() != static_cast<int>(values.size())) {
                                  error = what + " returned " + std::to_string(r.rows()) + " rows";
                                  return OutcomeKind::Permanent;
                              }
                              for (int c = 0; c < r.columns(); ++c)
                                  out.printed.push_back(r.is_null(0, c) ? SqlValue() : SqlValue(std::string(r.get(0, c))));
                              return OutcomeKind::Ok;
                          });
    return out;
}

std::uint64_t Executor::batched_forms_set_aside() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return unbatchable_.size();
}

std::map<std::string, std::string> Executor::batched_forms_set_aside_by_query() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::map<std::string, std::string> out;
    for (const auto& [form, set_aside] : unbatchable_) {
        std::string& why = out[set_aside.query];
        why += (why.empty() ? "" : "; ") + set_aside.why;
    }
    return out;
}

bool Executor::batchable(const std::string& batch_sql) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return !batch_sql.empty() && !unbatchable_.count(batch_sql);
}

template <class Outcome, class Judge, class One>
BatchOutcome<Outcome> Executor::run_batched(const std::string& query, const std::string& search_path,
                                            const std::string& reader_role,
                                            const std::string& batch_sql, const std::string& statement,
                                            std::size_t max_rows, const std::vector<SqlArgs>& args,
                                            const Visibility& need, const std::string& what, Judge&& judge,
                                            One&& one) {
    std::vector<Outcome> outcomes(args.size());
    std::string error;
    std::string sqlstate;
    Lsn snapshot_lsn = 0;
    OutcomeKind kind = in_compute(search_path, reader_role, statement, batch_forms::batch_params(args), need, what, error, sqlstate,
                                  snapshot_lsn, [&](const pg::Result& r, std::string&) {
                                      if (static_cast<std::size_t>(r.rows()) >= max_rows)
                                          throw Error(what + ": its batched form returned " + std::to_string(r.rows()) +
                                                      " rows or more, more than its docs' rows can be; they run apart");
                                      auto rows = r.columns() >= 2 ? batch_forms::rows_by_ordinal(r, args.size())
                                                                   : std::vector<std::vector<int>>();
                                      if (rows.empty())
                                          throw Error(what + ": its batched form returned a malformed result");
                                      for (std::size_t i = 0; i < outcomes.size(); ++i)
                                          judge(r, rows[i], outcomes[i]);
                                      return OutcomeKind::Ok;
                                  });
    BatchOutcome<Outcome> out;
    // A timeout may be one doc's doing: the halves run apart, down to the doc at fault, which then
    // holds the slot alone (a transient outcome) while the others publish.
    bool one_may_time_out = kind == OutcomeKind::Transient && sqlstate == docsync::sqlstate::kQueryCanceled;
    if ((kind == OutcomeKind::Permanent && !batch_forms::form_may_be_at_fault(sqlstate)) || one_may_time_out) {
        out.split = true;
        out.error = error;
        return out;
    }
    if (kind == OutcomeKind::Permanent) {
        // Run them one by one: when any succeeds, the batched form was at fault, and the query's
        // work goes one by one from now on.
        bool any_ok = false;
        for (std::size_t i = 0; i < args.size(); ++i) {
            out.outcomes.push_back(one(i));
            any_ok = any_ok || out.outcomes.back().kind == OutcomeKind::Ok;
        }
        if (any_ok) {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                unbatchable_[batch_sql] = SetAside{query, batch_forms::set_aside_reason(what, error, sqlstate)};
            }
            log_warning("executor", what + " cannot run batched (" + error + "); running it once per doc from now on");
        }
        return out;
    }
    for (auto& outcome : outcomes) {
        if (kind != OutcomeKind::Ok) {  // not visible yet, or an infrastructure fault: each item's
            outcome = Outcome{};
            outcome.kind = kind;
            outcome.error = error;
            outcome.sqlstate = sqlstate;
        }
        if constexpr (std::is_same_v<Outcome, DocOutcome>)
            if (outcome.kind == OutcomeKind::Ok) outcome.snapshot_lsn = snapshot_lsn;
        out.outcomes.push_back(std::move(outcome));
    }
    return out;
}

DocBatchOutcome Executor::run_docs(const DocQuery& query, const std::vector<SqlArgs>& args, const Visibility& need) {
    if (args.size() < 2 || !batchable(query.batch_sql) || !query.refused.empty())
        return Runner::run_docs(query, args, need);
    std::string what = "doc query \"" + query.name + "\"";
    // A right result has a row for each param set (`present` NULL when its query returned none);
    // twice as many are cut: some doc has two rows or more, and they run apart to find which.
    std::size_t max_rows = 2 * args.size() + 1;
    return run_batched<DocOutcome>(
        query.name, query.search_path, query.reader_role, query.batch_sql,
        bounded_forms::doc_form(query.batch_sql, 2, options_.max_doc_bytes, max_rows), max_rows, args, need, what,
        [&](const pg::Result& r, const std::vector<int>& rows, DocOutcome& doc) {
            if (r.columns() != 4) throw Error(what + ": its bounded batched form returned a malformed result");
            std::optional<std::string_view> value;
            std::optional<std::size_t> size;
            if (!rows.empty()) {
                value = text_at(r, rows.front(), 2);
                size = bounded_forms::oversize(text_at(r, rows.front(), 3));
            }
            doc.kind = judge_doc(what, rows.size(), value, size, options_.max_doc_bytes, doc.doc, doc.error);
            if (doc.kind != OutcomeKind::Ok) doc.doc.reset();
        },
        [&](std::size_t i) { return run_doc(query, args[i], need); });
}

KeysOutcome Executor::run_keys(const KeysQuery& query, const SqlArgs& args, std::size_t max_keys,
                               const Visibility& need) {
    KeysOutcome out;
    std::string what = keys_what(query);
    if (auto refused = refusal_of(what, query.refused, query.sql)) {
        out.kind = OutcomeKind::Permanent;
        out.error = *refused;
        return out;
    }
    Lsn snapshot_lsn = 0;
    // One row more than --max-keys tells a key set over it.
    out.kind = in_compute(query.search_path, query.reader_role, bounded_forms::keys_form(query.sql, max_keys + 1), args,
                          need, what, out.error, out.sqlstate, snapshot_lsn, [&](const pg::Result& r, std::string& error) {
                              if (static_cast<std::size_t>(r.rows()) > max_keys) {
                                  error = max_keys_error(what, max_keys);
                                  return OutcomeKind::Permanent;
                              }
                              if (r.rows() > 0 && r.columns() < 1) {
                                  error = what + " returned no columns";
                                  return OutcomeKind::Permanent;
                              }
                              out.keys.reserve(static_cast<std::size_t>(r.rows()));
                              for (int row = 0; row < r.rows(); ++row) {
                                  SqlArgs key;
                                  for (int c = 0; c < r.columns(); ++c) key.push_back(r.get_optional(row, c));
                                  out.keys.push_back(std::move(key));
                              }
                              return OutcomeKind::Ok;
                          });
    if (out.kind != OutcomeKind::Ok) out.keys.clear();
    return out;
}

KeysBatchOutcome Executor::run_keys_batch(const KeysQuery& query, const std::vector<SqlArgs>& args,
                                          std::size_t max_keys, const Visibility& need) {
    if (args.size() < 2 || !batchable(query.batch_sql) || !query.refused.empty())
        return Runner::run_keys_batch(query, args, max_keys, need);
    std::string what = keys_what(query);
    // A right result has up to --max-keys rows for each param set (one, `present` NULL, for a set
    // with none); one more is cut, and they run apart. So do rows adding up to more than one lookup
    // alone may return: a batch holds no more than a lookup (the halves run apart down to one).
    std::size_t max_rows = args.size() * std::max<std::size_t>(max_keys, 1) + 1;
    std::size_t max_bytes = (std::max<std::size_t>(max_keys, 1) + 1) * bounded_forms::kMaxKeyRowBytes;
    return run_batched<KeysOutcome>(
        query.query, query.search_path, query.reader_role, query.batch_sql,
        bounded_forms::keys_form(query.batch_sql, max_rows, max_bytes), max_rows, args, need, what,
        [&](const pg::Result& r, const std::vector<int>& rows, KeysOutcome& lookup) {
            if (r.columns() < 3) {
                lookup.kind = OutcomeKind::Permanent;
                lookup.error = what + " returned no columns";
            } else if (rows.size() > max_keys) {
                lookup.kind = OutcomeKind::Permanent;
                lookup.error = max_keys_error(what, max_keys);
            } else {
                for (int row : rows) {
                    SqlArgs key;
                    for (int c = 2; c < r.columns(); ++c) key.push_back(r.get_optional(row, c));
                    lookup.keys.push_back(std::move(key));
                }
            }
        },
        [&](std::size_t i) { return run_keys(query, args[i], max_keys, need); });
}

}  // namespace docsync
