// The status tables of a portable install; see status_table.hpp.
#include "lifecycle/status_table.hpp"

#include <cstdio>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/lsn.hpp"

namespace docsync::lifecycle {

namespace {

constexpr auto kHeartbeat = std::chrono::seconds(1);
constexpr auto kWriteTimeout = std::chrono::seconds(5);
constexpr auto kWarnEvery = std::chrono::minutes(1);

std::optional<std::string> wall_time(status::WallTime t) {
    if (t == status::WallTime{}) return std::nullopt;
    char buf[40];
    double seconds = std::chrono::duration<double>(t.time_since_epoch()).count();
    std::snprintf(buf, sizeof buf, "%.6f", seconds);
    return std::string(buf);
}

std::optional<std::string> text_or_null(const std::string& text) {
    if (text.empty()) return std::nullopt;
    return text;
}

}  // namespace

bool portable_install(const std::string& dsn) {
    auto conn = pg::Connection::connect(dsn, pg::deadline_in(kWriteTimeout), {{"application_name", "docsync-worker"}},
                                        "--dsn");
    auto has = conn.exec("SELECT pg_catalog.to_regprocedure('docsync.install_kind()') IS NOT NULL",
                         pg::deadline_in(kWriteTimeout));
    if (has.get(0, 0) != "t") return false;
    return conn.exec("SELECT docsync.install_kind()", pg::deadline_in(kWriteTimeout)).get(0, 0) == "portable";
}

StatusTable::StatusTable(std::string dsn, std::string slot, std::int32_t pid, status::WallTime started_at)
    : dsn_(std::move(dsn)), slot_(std::move(slot)), pid_(pid), started_at_(started_at) {}

void StatusTable::publish(const status::StatusSnapshot& snapshot, bool force) {
    auto now = std::chrono::steady_clock::now();
    bool gap_running = snapshot.recompute.gap && snapshot.recompute.finished_at == status::WallTime{};
    bool changed = !written_ || snapshot.state != state_ || gap_running != gap_running_ ||
                   snapshot.recompute.gap != gap_ || snapshot.recompute.id != recompute_id_ ||
                   snapshot.sink_unchecked != sink_unchecked_;
    if (!force && !changed && now < written_at_ + kHeartbeat) return;
    try {
        write(snapshot);
        written_ = true;
        written_at_ = now;
        state_ = snapshot.state;
        gap_ = snapshot.recompute.gap;
        gap_running_ = gap_running;
        recompute_id_ = snapshot.recompute.id;
        sink_unchecked_ = snapshot.sink_unchecked;
    } catch (const std::exception& e) {
        conn_.reset();
        if (warned_at_ == std::chrono::steady_clock::time_point{} || now >= warned_at_ + kWarnEvery) {
            warned_at_ = now;
            log_warning("status", std::string("cannot write docsync.worker_status (") + e.what() +
                                      "): docsync.status shows this worker as it last was; the --dsn role needs "
                                      "INSERT, UPDATE, DELETE on docsync.worker_status and docsync.worker_query_status");
        }
    }
}

void StatusTable::withdraw() {
    if (!written_) return;
    try {
        auto deadline = pg::deadline_in(kWriteTimeout);
        if (!conn_ || !conn_->ok())
            conn_.emplace(pg::Connection::connect(dsn_, deadline, {{"application_name", "docsync-worker status"}}, "--dsn"));
        conn_->exec("DELETE FROM docsync.worker_status WHERE slot_name = $1 AND worker_pid = $2",
                    {slot_, std::to_string(pid_)}, deadline);
    } catch (const std::exception& e) {
        log_warning("status", std::string("cannot remove this worker's row of docsync.worker_status (") + e.what() +
                                  "): SELECT docsync.forget_slot('" + slot_ + "') removes it");
    }
}

void StatusTable::write(const status::StatusSnapshot& s) {
    auto deadline = pg::deadline_in(kWriteTimeout);
    if (!conn_ || !conn_->ok())
        conn_.emplace(pg::Connection::connect(dsn_, deadline, {{"application_name", "docsync-worker status"}}, "--dsn"));
    const auto& r = s.recompute;
    bool recompute = r.reason != DOCSYNC_RECOMPUTE_NONE;
    auto num = [](std::uint64_t v) { return std::optional<std::string>(std::to_string(v)); };
    pg::Params row = {
        slot_,
        std::to_string(pid_),
        status::portable_state_name(s.state),
        wall_time(started_at_),
        s.generation ? num(s.generation) : std::nullopt,
        s.received_lsn ? std::optional<std::string>(format_lsn(s.received_lsn)) : std::nullopt,
        s.acked_lsn ? std::optional<std::string>(format_lsn(s.acked_lsn)) : std::nullopt,
        wall_time(s.acked_at),
        num(s.open_txns), num(s.dirty_depth), num(s.in_flight), num(s.live_docs),
        num(s.totals.changes), num(s.totals.recomputes), num(s.totals.publishes), num(s.totals.permanent_failures),
        num(s.totals.transient_retries), num(s.totals.valve_resets), num(s.totals.not_visible_retries),
        num(s.totals.audit_samples), num(s.totals.audit_divergences),
        status::portable_recompute_name(r.reason),
        std::string(recompute && r.gap ? "t" : "f"),
        recompute ? num(r.done) : std::nullopt,
        recompute ? num(r.total) : std::nullopt,
        recompute ? wall_time(r.started_at) : std::nullopt,
        recompute ? wall_time(r.finished_at) : std::nullopt,
        std::string(s.sink_unchecked ? "t" : "f"),
        text_or_null(s.last_error),
        s.last_error.empty() ? std::nullopt : wall_time(s.last_error_at),
    };
    pg::Params name_list, recompute_list, failure_list, mean_list, error_list, error_at_list, set_aside_list;
    for (const auto& q : s.queries) {
        name_list.push_back(q.name);
        recompute_list.push_back(std::to_string(q.recomputes));
        failure_list.push_back(std::to_string(q.permanent_failures));
        mean_list.push_back(q.recomputes ? std::optional<std::string>(std::to_string(
                                               static_cast<double>(q.compute_us_total) / 1000.0 /
                                               static_cast<double>(q.recomputes)))
                                         : std::nullopt);
        error_list.push_back(text_or_null(q.last_error));
        error_at_list.push_back(q.last_error.empty() ? std::nullopt : wall_time(q.last_error_at));
        set_aside_list.push_back(text_or_null(q.batch_set_aside));
    }
    const std::string names = pg::text_array(name_list), recomputes = pg::text_array(recompute_list),
                      failures = pg::text_array(failure_list), mean_ms = pg::text_array(mean_list),
                      errors = pg::text_array(error_list), error_at = pg::text_array(error_at_list),
                      set_aside = pg::text_array(set_aside_list);

    conn_->exec("BEGIN", deadline);
    conn_->exec(
        "INSERT INTO docsync.worker_status AS w (slot_name, layout_version, worker_pid, state, started_at, heartbeat_at,"
        " generation, received_lsn, acked_lsn, acked_at, open_txns, dirty_depth, in_flight, live_docs, changes,"
        " recomputes, publishes, permanent_failures, transient_retries, valve_resets, not_visible_retries,"
        " audit_samples, audit_divergences, recompute, recompute_gap, recompute_done, recompute_total,"
        " recompute_started_at, recompute_finished_at, sink_unchecked, last_error, last_error_at, queries_omitted)"
        " VALUES ($1, 1, $2, $3, to_timestamp($4::float8), clock_timestamp(), $5, $6, $7, to_timestamp($8::float8),"
        " $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25,"
        " to_timestamp($26::float8), to_timestamp($27::float8), $28, $29, to_timestamp($30::float8), 0)"
        " ON CONFLICT (slot_name) DO UPDATE SET database = EXCLUDED.database, layout_version = 1,"
        " worker_pid = EXCLUDED.worker_pid, state = EXCLUDED.state, started_at = EXCLUDED.started_at,"
        " heartbeat_at = EXCLUDED.heartbeat_at, generation = EXCLUDED.generation, received_lsn = EXCLUDED.received_lsn,"
        " acked_lsn = EXCLUDED.acked_lsn, acked_at = EXCLUDED.acked_at, open_txns = EXCLUDED.open_txns,"
        " dirty_depth = EXCLUDED.dirty_depth, in_flight = EXCLUDED.in_flight, live_docs = EXCLUDED.live_docs,"
        " changes = EXCLUDED.changes, recomputes = EXCLUDED.recomputes, publishes = EXCLUDED.publishes,"
        " permanent_failures = EXCLUDED.permanent_failures, transient_retries = EXCLUDED.transient_retries,"
        " valve_resets = EXCLUDED.valve_resets, not_visible_retries = EXCLUDED.not_visible_retries,"
        " audit_samples = EXCLUDED.audit_samples, audit_divergences = EXCLUDED.audit_divergences,"
        " recompute = EXCLUDED.recompute, recompute_gap = EXCLUDED.recompute_gap,"
        " recompute_done = EXCLUDED.recompute_done, recompute_total = EXCLUDED.recompute_total,"
        " recompute_started_at = EXCLUDED.recompute_started_at, recompute_finished_at = EXCLUDED.recompute_finished_at,"
        " sink_unchecked = EXCLUDED.sink_unchecked, last_error = EXCLUDED.last_error,"
        " last_error_at = EXCLUDED.last_error_at, queries_omitted = 0",
        row, deadline);
    conn_->exec("DELETE FROM docsync.worker_query_status WHERE slot_name = $1 AND query <> ALL ($2::text[])",
                {slot_, names}, deadline);
    conn_->exec(
        "INSERT INTO docsync.worker_query_status AS q (slot_name, query, recomputes, permanent_failures,"
        " mean_compute_ms, last_error, last_error_at, batch_set_aside)"
        " SELECT $1, u.name, u.recomputes, u.failures, u.mean_ms, u.error, to_timestamp(u.error_at), u.set_aside"
        "   FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::float8[], $6::text[], $7::float8[], $8::text[])"
        "     AS u(name, recomputes, failures, mean_ms, error, error_at, set_aside)"
        " ON CONFLICT (slot_name, query) DO UPDATE SET recomputes = EXCLUDED.recomputes,"
        " permanent_failures = EXCLUDED.permanent_failures, mean_compute_ms = EXCLUDED.mean_compute_ms,"
        " last_error = EXCLUDED.last_error, last_error_at = EXCLUDED.last_error_at,"
        " batch_set_aside = EXCLUDED.batch_set_aside",
        {slot_, names, recomputes, failures, mean_ms, errors, error_at, set_aside}, deadline);
    conn_->exec("COMMIT", deadline);
}

}  // namespace docsync::lifecycle
