#pragma once
// The read-only executor: the engine's Runner over a pool of libpq connections (--pool-dsn).
//
// Every session is pinned at connect time (default_transaction_read_only = on, statement_timeout,
// idle_in_transaction_session_timeout, application_name); the pool role is checked harmless at
// start. Every compute runs in its own BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY transaction
// (a portable install's is read-only from its docsync.compute_as on: ExecutorOptions::lend_reader)
// with the query's stored search_path (SET LOCAL), checks that its snapshot includes what it
// completes (invariant 3, docs/design.md: pg_current_snapshot() on a primary,
// pg_last_wal_replay_lsn() before BEGIN on a standby), runs the customer's SQL under a client-side
// deadline enforced with PQcancel, and ends with ROLLBACK and pg_advisory_unlock_all().
//
// Threads: run_doc and run_keys may be called from any number of threads at once; each call borrows
// one pooled connection for its whole compute. Lost connections are replaced with backoff.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include "engine/seams.hpp"
#include "executor/role_check.hpp"

namespace docsync::pg {
class Connection;
using Deadline = std::chrono::steady_clock::time_point;
}

namespace docsync {

struct ExecutorOptions {
    std::string pool_dsn;                                              // --pool-dsn
    unsigned pool_size = 4;                                            // --pool
    std::chrono::milliseconds statement_timeout{std::chrono::seconds(5)};  // --statement-timeout
    std::size_t max_doc_bytes = 1024 * 1024;                           // --max-doc-bytes
    bool allow_unsafe_pool = false;                                    // --allow-unsafe-pool
    // A portable install (docs/portable.md): its docsync.compute_as cannot keep a compute from
    // changing its role back, so each compute with a reader role checks, in its own transaction
    // after the query and before its result is used, that current_user is still that reader role
    // and the search_path still the query's; otherwise the result is dropped and the outcome is
    // Permanent, naming what changed. The extension's compute_as refuses the change itself.
    bool check_reader = false;
    // A portable install (docs/portable.md): the pool role is a member of no reader role, and
    // docsync.compute_as lends it the compute's one by a GRANT that the compute's ROLLBACK undoes, so
    // its transaction begins READ WRITE (compute_as makes it read-only once lent). Two lendings of
    // one reader role to the pool role wait for each other on the server (pg_auth_members is unique
    // on role and member), so the computes of one reader role take turns in the executor instead,
    // holding no pool connection and no statement timeout while they wait. A pool on a hot standby,
    // where nothing can be lent, is refused at start.
    bool lend_reader = false;
    std::string application_name = "docsync-worker pool";
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
    std::chrono::milliseconds reconnect_backoff{std::chrono::milliseconds(200)};  // doubles up to 50×
};

class Executor final : public Runner {
public:
    std::uint64_t batched_forms_set_aside() const override;
    std::map<std::string, std::string> batched_forms_set_aside_by_query() const override;
    // Every pool connection drops its prepared statements (DEALLOCATE ALL) before its next compute,
    // and every batched form set aside gets another try (a grant_reader may have fixed it).
    void definitions_changed() override;
    // Every pool connection is replaced before its next compute, so it takes the server's settings
    // anew (executor/settings_watch.hpp: database and role defaults, a reloaded configuration).
    void renew_sessions();
    // Connects the first pool connection and checks the role; throws docsync::Error when the server
    // cannot be reached or the role is not harmless (unless allow_unsafe_pool, which logs a warning),
    // or with lend_reader when it is a hot standby.
    explicit Executor(ExecutorOptions options);
    ~Executor() override;
    Executor(const Executor&) = delete;
    Executor& operator=(const Executor&) = delete;

    DocOutcome run_doc(const DocQuery& query, const SqlArgs& args, const Visibility& need) override;
    KeysOutcome run_keys(const KeysQuery& query, const SqlArgs& args, std::size_t max_keys,
                         const Visibility& need) override;
    // Many docs (lookups) in one compute: the query's batched form (DocQuery::batch_sql) with each
    // param's values as one array. A failure the batched form itself may cause (a syntax or
    // semantic error) runs them one by one; when any of those succeeds, the query runs one by one
    // from then on. Any other query error asks the engine to split the batch.
    DocBatchOutcome run_docs(const DocQuery& query, const std::vector<SqlArgs>& args, const Visibility& need) override;
    KeyPrintOutcome print_keys(const DocQuery& query, const SqlArgs& values) override;
    KeysBatchOutcome run_keys_batch(const KeysQuery& query, const std::vector<SqlArgs>& args, std::size_t max_keys,
                                    const Visibility& need) override;

    // Whether the pool's server was a hot standby when last seen.
    bool standby() const;
    // The database the pool's first connection reached, and its server's system identifier (a
    // standby's is its primary's).
    const std::string& database() const { return database_; }
    const std::string& system_identifier() const { return system_identifier_; }

    struct Slot;

private:
    struct Lease;
    Lease acquire();
    void give_back(std::size_t index, bool keep);

    // The turn of the computes of one reader role (ExecutorOptions::lend_reader).
    std::shared_ptr<std::mutex> lend_turn(const std::string& reader_role);

    // Pins a pool session: text forms (pg::pin_text_forms), read-only, statement and idle timeouts.
    void pin(pg::Connection& conn, pg::Deadline deadline);

    // Runs `sql` with `args` in a pinned compute transaction and hands its result to `check`;
    // returns the outcome kind and error, and the server's WAL position when the transaction's
    // snapshot was taken in `snapshot_lsn`. One network round trip (a pipeline): BEGIN, the
    // snapshot check, the query; then ROLLBACK and pg_advisory_unlock_all(), which run even when the
    // query failed. A query whose snapshot turns out not to include what it completes ran for
    // nothing: its result is dropped and the outcome is NotVisible; from then on the check goes
    // first (check_first_) until one passes.
    template <typename Check>
    OutcomeKind in_compute(const std::string& search_path, const std::string& reader_role, const std::string& sql,
                           const SqlArgs& args,
                           const Visibility& need, const std::string& what, std::string& error,
                           std::string& sqlstate, Lsn& snapshot_lsn, Check&& check);

    // Whether `batch_sql` is there and has not failed where single computes succeed.
    bool batchable(const std::string& batch_sql) const;
    // Runs `args` through `statement` (`batch_sql` bounded to `max_rows` rows, bounded_forms.hpp)
    // in one compute and `judge(result, rows, outcome)` gives each item its outcome from its rows.
    // A failure the batched form itself may cause runs the items one by one with `one(i)` (and, when
    // any succeeds, sets `batch_sql` aside under `query`, the doc query it serves); any other query
    // error, and a result cut at `max_rows`, asks for a split; not visible or transient holds for
    // every item.
    template <class Outcome, class Judge, class One>
    BatchOutcome<Outcome> run_batched(const std::string& query, const std::string& search_path,
                                      const std::string& reader_role,
                                      const std::string& batch_sql, const std::string& statement, std::size_t max_rows,
                                      const std::vector<SqlArgs>& args, const Visibility& need,
                                      const std::string& what, Judge&& judge, One&& one);

    ExecutorOptions options_;
    mutable std::mutex mutex_;
    std::condition_variable free_;
    std::vector<std::unique_ptr<Slot>> slots_;
    bool standby_ = false;
    std::atomic<bool> check_first_{false};
    // Bumped by definitions_changed(); a connection whose Slot::epoch is older forgets its statements.
    std::atomic<std::uint64_t> definitions_epoch_{0};
    // Bumped by renew_sessions(); a connection whose Slot::sessions is older is replaced.
    std::atomic<std::uint64_t> sessions_epoch_{0};
    // Batched forms that failed where single computes succeeded, until the definitions change:
    // each with the doc query it serves and why it was set aside.
    struct SetAside {
        std::string query;
        std::string why;
    };
    std::map<std::string, SetAside> unbatchable_;
    std::map<std::string, std::shared_ptr<std::mutex>> lend_turns_;  // by reader role, under mutex_
    std::string database_;
    std::string system_identifier_;
};

}  // namespace docsync
