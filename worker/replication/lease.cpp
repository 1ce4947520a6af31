// The worker's lease on its slot (see lease.hpp).
#include "replication/lease.hpp"

#include <unistd.h>

#include "common/error.hpp"
#include "common/log.hpp"

namespace docsync {

namespace {

constexpr auto kStatementTimeout = std::chrono::seconds(5);
constexpr auto kEndTimeout = std::chrono::seconds(20);  // ending sessions waits up to 2 s for each

// The lease key of $1 (the slot's name) for a seed, as SQL.
std::string key_sql(long long seed) {
    return "pg_catalog.hashtextextended($1, " + std::to_string(seed) + ")";
}

// A role that may stream or read a replication slot: only such a session can be a worker.
constexpr const char* kWorkerRole = "(r.rolreplication OR r.rolsuper)";

// A query over the sessions that hold the active lease key of $1 in this database: `select` over
// l (pg_locks), a (pg_stat_activity) and r (pg_roles, NULL for a session of no role).
std::string holders_sql(const std::string& select) {
    return "SELECT " + select +
           " FROM pg_catalog.pg_locks l "
           "CROSS JOIN (SELECT " + key_sql(kLeaseActiveSeed) + " AS k) k "
           "LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid "
           "LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.usesysid "
           "WHERE l.locktype = 'advisory' AND l.granted AND l.mode = 'ExclusiveLock' AND l.objsubid = 1 "
           "AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = "
           "pg_catalog.current_database()) "
           "AND l.classid = ((k.k >> 32) & 4294967295)::oid AND l.objid = (k.k & 4294967295)::oid";
}

}  // namespace

Lease::Lease(LeaseOptions options) : options_(std::move(options)) {}

void Lease::connect() {
    if (!unleased_) held_ = false;  // a new session holds no lock; an unleased worker held none
    standby_ = false;
    conn_.reset();
    auto conn = std::make_unique<pg::Connection>(pg::Connection::connect(
        options_.dsn, pg::deadline_in(options_.connect_timeout), {{"application_name", options_.application_name}},
        "--dsn"));
    // The session idles for as long as the worker runs. A dead peer is noticed by TCP keepalives
    // (no-ops on Unix sockets), and a server-wide idle_session_timeout must not end the lease of a
    // healthy worker.
    conn->exec_simple("SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3; "
               "SET idle_session_timeout = 0; SET statement_timeout = 0",
               pg::deadline_in(kStatementTimeout));
    conn_ = std::move(conn);
}

std::string Lease::query(const std::string& sql, std::chrono::seconds timeout) {
    auto r = conn_->exec(sql, {options_.slot}, pg::deadline_in(timeout));
    if (r.rows() != 1 || r.columns() != 1) throw Error("lease query returned an unexpected result", {}, true);
    return std::string(r.get(0, 0));
}

void Lease::set_role(bool active) {
    std::string name = options_.application_name + (active ? " active pid " : " standby pid ") + std::to_string(getpid());
    conn_->exec("SET application_name = " + conn_->quote_literal(name), pg::deadline_in(kStatementTimeout));
}

Lease::Take Lease::take() {
    if (!conn_) connect();
    if (query("SELECT pg_catalog.pg_try_advisory_lock(" + key_sql(kLeaseActiveSeed) + ")") == "t") return Take::Leased;
    return query(holders_sql(std::string("coalesce(pg_catalog.bool_or(") + kWorkerRole + "), false)")) == "t"
               ? Take::Worker
               : Take::Squatted;
}

bool Lease::slot_free() {
    return query("SELECT NOT coalesce((SELECT s.active FROM pg_catalog.pg_replication_slots s "
                 "WHERE s.slot_name = $1), false)") == "t";
}

void Lease::warn_squatted() {
    if (unleased_) return;
    log_warning("lease", "the lease of slot \"" + options_.slot + "\" is held by " + holder() +
                             ": this worker runs without the lease while nobody else streams the slot, the slot "
                             "alone keeping a second worker out, and a spare cannot tell when to take over; end "
                             "that session with SELECT pg_terminate_backend(pid), and the worker takes the lease");
}

bool Lease::try_acquire() {
    if (held_) return true;
    try {
        Take took = take();
        if (took == Take::Worker) return false;
        if (took == Take::Squatted) {
            if (!slot_free()) return false;  // a worker streams it, without the lease too
            warn_squatted();
        }
        held_ = true;
        unleased_ = took == Take::Squatted;
        if (standby_) {
            query("SELECT pg_catalog.pg_advisory_unlock_shared(" + key_sql(kLeaseStandbySeed) + ")");
            standby_ = false;
        }
        set_role(true);
        return true;
    } catch (const Error&) {
        conn_.reset();  // whatever the session held ends with it
        held_ = false;
        unleased_ = false;
        standby_ = false;
        throw;
    }
}

void Lease::release() {
    conn_.reset();
    held_ = false;
    unleased_ = false;
    standby_ = false;
}

void Lease::stand_by() {
    if (standby_ || held_) return;
    try {
        if (!conn_) connect();
        query("SELECT pg_catalog.pg_try_advisory_lock_shared(" + key_sql(kLeaseStandbySeed) + ")");
        standby_ = true;
        set_role(false);
    } catch (const Error&) {
        conn_.reset();
        throw;
    }
}

Lease::State Lease::check() {
    if (held_ && unleased_) {
        // Without the lease: take it once the squatter lets it go; step down only for a worker.
        try {
            switch (take()) {
                case Take::Leased:
                    unleased_ = false;
                    set_role(true);
                    log_info("lease", "took the lease of slot \"" + options_.slot + "\", free again");
                    return State::Held;
                case Take::Worker:
                    held_ = false;
                    unleased_ = false;
                    return State::Lost;
                case Take::Squatted:
                    return State::Held;
            }
        } catch (const Error&) {
            conn_.reset();  // this worker held no lock on it: it stays unleased, and asks again
            return State::Unknown;
        }
    }
    if (conn_ && held_) {
        try {
            conn_->exec("SELECT 1", pg::deadline_in(kStatementTimeout));
            return State::Held;
        } catch (const Error&) {
            conn_.reset();  // the session is gone, and the lease with it
            held_ = false;
        }
    }
    try {
        return try_acquire() ? State::Held : State::Lost;
    } catch (const Error&) {
        return State::Unknown;
    }
}

int Lease::end_hung_holder() {
    if (!conn_) connect();
    // Each end waits up to 2 s for the session to be gone, so that its lock is free when this returns.
    std::string lease_ended = query(holders_sql(std::string("pg_catalog.count(*) FILTER (WHERE ") + kWorkerRole +
                                                " AND pg_catalog.pg_terminate_backend(l.pid, 2000))::text"),
                                    kEndTimeout);
    std::string stream_ended = query(
        "SELECT pg_catalog.count(*) FILTER (WHERE pg_catalog.pg_terminate_backend(s.active_pid, 2000))::text "
        "FROM pg_catalog.pg_replication_slots s WHERE s.slot_name = $1 AND s.active_pid IS NOT NULL",
        kEndTimeout);
    return std::stoi(lease_ended) + std::stoi(stream_ended);
}

std::optional<double> Lease::holder_idle() {
    if (!conn_) connect();
    std::string seconds = query(holders_sql(
        std::string("coalesce(pg_catalog.min(EXTRACT(epoch FROM pg_catalog.clock_timestamp() - a.state_change)) "
                    "FILTER (WHERE ") + kWorkerRole + ")::text, '')"));
    if (seconds.empty()) return std::nullopt;
    return std::stod(seconds);
}

std::optional<int> Lease::holder_process() {
    if (!conn_) connect();
    std::string pid = query(holders_sql(std::string("coalesce(pg_catalog.min(pg_catalog.substring(a.application_name, ") +
                                        "' active pid ([0-9]{1,9})$')) FILTER (WHERE " + kWorkerRole + "), '')"));
    if (pid.empty()) return std::nullopt;
    return std::stoi(pid);
}

std::string Lease::database() {
    if (!conn_) connect();
    return query("SELECT pg_catalog.current_database() WHERE $1::text IS NOT NULL");
}

std::string Lease::holder() {
    try {
        if (!conn_) connect();
        return query(holders_sql(
            "coalesce(pg_catalog.string_agg(pg_catalog.format('backend pid %s (%s%s, since %s UTC, role %s%s)', l.pid, "
            "coalesce(NULLIF(a.application_name, ''), '?'), coalesce(' on ' || pg_catalog.host(a.client_addr), ''), "
            "coalesce(pg_catalog.to_char(a.backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), '?'), "
            "coalesce(r.rolname::text, '?'), CASE WHEN coalesce(" + std::string(kWorkerRole) +
            ", false) THEN '' ELSE ', which is no docsync worker: it has neither REPLICATION nor SUPERUSER' END), "
            "'; '), 'nobody')"));
    } catch (const Error& e) {
        conn_.reset();
        if (!unleased_) held_ = false;
        standby_ = false;
        return std::string("(unknown: ") + e.what() + ")";
    }
}

}  // namespace docsync
