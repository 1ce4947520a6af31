#pragma once
// Helpers for integration tests that stream the docsync slot of the dev cluster
// (packaging/dev-cluster.sh; the libpq environment names the server):
//   - sql(): an ordinary connection; slot_row(), current_wal_lsn(), drop_slot()
//   - wait_until(): a condition polled with a deadline
//   - RecordingHandler: a StreamHandler that records every session and record and completes each
//     COMMIT's ticket at once, except the ones it is told to hold back
//   - StreamRunner: a Stream on its own thread, stopped and joined on destruction
//   - plugin_emits_records(): whether the installed plugin already emits records for a watched table
//   - restart_server(): pg_ctl restart of the dev cluster; pg_ctl_command() for other pg_ctl actions

#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/lsn.hpp"
#include "pg/connection.hpp"
#include "progress/coordinator.hpp"
#include "replication/stream.hpp"

namespace docsync::testing {

using namespace std::chrono_literals;

inline pg::Connection sql() { return pg::Connection::connect("", pg::deadline_in(std::chrono::seconds(10))); }

inline std::string exec1(pg::Connection& c, const std::string& q, const pg::Params& params = {}) {
    auto r = c.exec(q, params, pg::deadline_in(std::chrono::seconds(60)));
    return r.rows() > 0 && r.columns() > 0 && !r.is_null(0, 0) ? std::string(r.get(0, 0)) : std::string();
}

// Polls `condition` every `every` until it holds or `timeout` passes; returns its last value.
inline bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                       std::chrono::milliseconds every = 50ms) {
    auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (condition()) return true;
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(every);
    }
}

struct SlotState {
    bool exists = false;
    Lsn confirmed_flush = 0;
    Lsn restart_lsn = 0;
    std::string active_pid;  // empty when inactive
    std::string wal_status;
};

inline SlotState slot_row(pg::Connection& c, const std::string& slot) {
    auto r = c.exec("SELECT confirmed_flush_lsn, restart_lsn, active_pid, wal_status FROM pg_replication_slots "
                    "WHERE slot_name = $1",
                    {slot}, pg::deadline_in(std::chrono::seconds(10)));
    SlotState s;
    if (r.rows() == 0) return s;
    s.exists = true;
    if (!r.is_null(0, 0)) s.confirmed_flush = parse_lsn(r.get(0, 0)).value_or(0);
    if (!r.is_null(0, 1)) s.restart_lsn = parse_lsn(r.get(0, 1)).value_or(0);
    s.active_pid = std::string(r.get(0, 2));
    s.wal_status = std::string(r.get(0, 3));
    return s;
}

inline Lsn current_wal_lsn(pg::Connection& c) { return parse_lsn(exec1(c, "SELECT pg_current_wal_lsn()")).value_or(0); }

// Waits until the slot's confirmed_flush_lsn reaches `lsn`.
inline bool wait_for_confirmed(pg::Connection& c, const std::string& slot, Lsn lsn, std::chrono::milliseconds timeout) {
    return wait_until([&] { return slot_row(c, slot).confirmed_flush >= lsn; }, timeout);
}

// Drops the slot if it exists, ending whatever streams it first.
inline void drop_slot(pg::Connection& c, const std::string& slot) {
    for (int i = 0; i < 100; ++i) {
        auto s = slot_row(c, slot);
        if (!s.exists) return;
        if (!s.active_pid.empty()) {
            exec1(c, "SELECT pg_terminate_backend($1::int)", {s.active_pid});
            std::this_thread::sleep_for(100ms);
            continue;
        }
        Error error("");
        c.try_exec("SELECT pg_drop_replication_slot($1)", {slot}, pg::deadline_in(10s), &error);
    }
    FAIL("could not drop slot " << slot);
}

// Whether the installed plugin emits BEGIN … COMMIT for a change to a watched table (it accepts the
// `tables` option and produces output). Uses a temporary slot.
inline bool plugin_emits_records() {
    auto c = sql();
    exec1(c, "SET client_min_messages = warning");
    exec1(c, "CREATE TABLE IF NOT EXISTS docsync_probe(id int PRIMARY KEY)");
    std::string oid = exec1(c, "SELECT 'docsync_probe'::regclass::oid::text");
    Error error("");
    auto created = c.try_exec("SELECT pg_create_logical_replication_slot('docsync_probe_slot', 'docsync', true)", {},
                              pg::deadline_in(30s), &error);
    if (!created) return false;
    auto other = sql();
    exec1(other, "INSERT INTO docsync_probe SELECT coalesce(max(id), 0) + 1 FROM docsync_probe");
    auto r = c.try_exec("SELECT count(*) FROM pg_logical_slot_get_binary_changes('docsync_probe_slot', NULL, NULL, "
                        "'format', 'binary', 'tables', $1)",
                        {oid}, pg::deadline_in(30s), &error);
    bool emits = r && r.get(0, 0) != "0";
    c.try_exec("SELECT pg_drop_replication_slot('docsync_probe_slot')", {}, pg::deadline_in(10s), &error);
    return emits;
}

// The shell command that runs pg_ctl on the dev cluster's server (PGDATA of DOCSYNC_CLUSTER_DIR)
// as the server's user, waiting up to 60 s, with the shutdown `mode`; append the action.
inline std::string pg_ctl_command(const std::string& mode) {
    const char* dir = std::getenv("DOCSYNC_CLUSTER_DIR");
    const char* bindir = std::getenv("DOCSYNC_PG_BINDIR");
    REQUIRE_MESSAGE((dir && bindir), "DOCSYNC_CLUSTER_DIR and DOCSYNC_PG_BINDIR come from packaging/dev-cluster.sh");
    std::string as_server = ::geteuid() == 0 ? "runuser -u postgres -- " : "";
    return as_server + bindir + "/pg_ctl -D " + dir + "/data -l " + dir + "/server.log -w -t 60 -m " + mode;
}

// Restarts the dev cluster's server with pg_ctl: mode "fast" or "immediate" (a crash: the slot comes
// back from its last checkpointed state).
inline void restart_server(const std::string& mode = "fast") {
    std::string pg_ctl = pg_ctl_command(mode);
    std::string cmd;
    if (mode == "immediate")  // restart -m immediate leaves the server stopped on some versions: stop, then start
        cmd = pg_ctl + " stop >/dev/null && " + pg_ctl + " start >/dev/null";
    else
        cmd = pg_ctl + " restart >/dev/null";
    REQUIRE(std::system(cmd.c_str()) == 0);
}

struct SeenCommit {
    Lsn end_lsn;
    std::uint64_t ticket;
    std::uint64_t epoch;
};

// Records what the stream hands up; completes every COMMIT at once unless held. `commits`, and the
// holding, count only transactions that touched a table outside the docsync schema.
class RecordingHandler : public StreamHandler {
public:
    explicit RecordingHandler(DeliveryProgressCoordinator& coordinator) : coordinator_(coordinator) {}

    void on_session(const SessionInfo& session) override {
        std::lock_guard lock(mutex_);
        sessions.push_back(session);
    }
    void on_record(const Record& record, Lsn, std::uint64_t ticket) override {
        std::lock_guard lock(mutex_);
        records.push_back(record);
        if (auto* r = std::get_if<RelationRecord>(&record)) schemas_[r->relid] = r->schema;
        if (std::holds_alternative<BeginRecord>(record)) touched_user_table_ = false;
        if (auto* ch = std::get_if<ChangeRecord>(&record)) touched_user_table_ |= schemas_[ch->relid] != "docsync";
        if (auto* t = std::get_if<TruncateRecord>(&record))
            for (auto relid : t->relids) touched_user_table_ |= schemas_[relid] != "docsync";
        if (auto* c = std::get_if<CommitRecord>(&record)) {
            // Transactions that only touched the extension's own tables (docsync.worker_state, written
            // by advance_generation at every session start) are done at once, as the engine does.
            if (!touched_user_table_) {
                docsync_commits++;
                coordinator_.complete(ticket);
                return;
            }
            commits.push_back({c->end_lsn, ticket, sessions.empty() ? 0 : sessions.back().epoch});
            if (hold_all || (hold_commit_index && *hold_commit_index == commits.size() - 1)) {
                held.push_back(ticket);
                return;
            }
            coordinator_.complete(ticket);
        }
    }

    // Completes the held tickets.
    void release() {
        std::vector<std::uint64_t> tickets;
        {
            std::lock_guard lock(mutex_);
            tickets.swap(held);
        }
        for (auto t : tickets) coordinator_.complete(t);
    }

    template <class F>
    auto with_lock(F f) {
        std::lock_guard lock(mutex_);
        return f();
    }
    std::size_t session_count() { return with_lock([&] { return sessions.size(); }); }
    std::size_t commit_count() { return with_lock([&] { return commits.size(); }); }

    std::optional<std::size_t> hold_commit_index;  // set before streaming: the n-th COMMIT (0-based) is held
    std::atomic<bool> hold_all{false};               // hold every COMMIT until release()
    std::vector<SessionInfo> sessions;
    std::vector<Record> records;
    std::vector<SeenCommit> commits;  // transactions that touched a table outside the docsync schema
    std::size_t docsync_commits = 0;  // transactions that touched only the docsync schema
    std::vector<std::uint64_t> held;

private:
    DeliveryProgressCoordinator& coordinator_;
    std::map<Oid, std::string> schemas_;
    bool touched_user_table_ = false;
    std::mutex mutex_;
};

// Options for a test stream against the dev cluster: fast status updates and backoff.
inline StreamOptions test_options(const std::string& slot) {
    StreamOptions o;
    o.dsn = "";  // the libpq environment
    o.slot = slot;
    o.status_interval = 200ms;
    o.backoff_initial = 50ms;
    o.backoff_max = 1000ms;
    o.connect_timeout = 10s;
    o.valve_interval = 200ms;
    o.max_retained_wal = 0;
    return o;
}

// A Stream running on its own thread.
class StreamRunner {
public:
    StreamRunner(StreamOptions options, DeliveryProgressCoordinator& coordinator, StreamHandler& handler)
        : stream(std::move(options), coordinator, handler), thread_([this] {
              try {
                  stream.run();
              } catch (...) {
                  std::lock_guard lock(mutex_);
                  error_ = std::current_exception();
              }
              done_ = true;
          }) {}
    ~StreamRunner() { stop(); }

    void stop() {
        stream.stop();
        if (thread_.joinable()) thread_.join();
    }
    bool done() const { return done_; }
    // The message of the exception run() ended with, empty when none.
    std::string error() {
        std::lock_guard lock(mutex_);
        if (!error_) return {};
        try {
            std::rethrow_exception(error_);
        } catch (const std::exception& e) {
            return e.what();
        }
    }
    bool streaming() { return stream.stats().state == StreamState::Streaming; }

    Stream stream;

private:
    std::mutex mutex_;
    std::exception_ptr error_;
    std::atomic<bool> done_{false};
    std::thread thread_;
};

}  // namespace docsync::testing
