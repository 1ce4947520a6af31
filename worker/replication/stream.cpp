// The replication stream (see stream.hpp).
#include "replication/stream.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <span>
#include <thread>

#include "common/error.hpp"
#include "common/sqlstate.hpp"
#include "common/log.hpp"
#include "docsync_wire.h"
#include "pg/connection.hpp"
#include "replication/decoder.hpp"

namespace docsync {

namespace {

using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::string_view kComponent = "stream";
// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01 00:00 UTC).
constexpr std::int64_t kPgEpochOffsetUs = 946684800LL * 1000000;
// Messages handled before the loop looks at its timers and flags again.
constexpr int kMessagesPerTurn = 512;

std::int64_t pg_now_us() {
    auto now = std::chrono::system_clock::now().time_since_epoch();
    return std::chrono::duration_cast<std::chrono::microseconds>(now).count() - kPgEpochOffsetUs;
}

void put64(std::string& out, std::uint64_t v) {
    for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::uint64_t get64(const char* p) {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
    return v;
}

// A quoted identifier for replication commands ("" doubled inside).
std::string quote_ident(std::string_view name) {
    std::string out = "\"";
    for (char c : name) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

// A standard string literal for replication command options ('' doubled inside).
std::string quote_string(std::string_view text) {
    std::string out = "'";
    for (char c : text) {
        if (c == '\'') out += '\'';
        out += c;
    }
    return out + "'";
}

int poll_timeout_ms(SteadyClock::time_point until) {
    auto left = std::chrono::duration_cast<milliseconds>(until - SteadyClock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, 1000));
}

// The slot as pg_replication_slots shows it.
struct SlotRow {
    bool exists = false;
    std::string plugin;
    std::string slot_type;
    std::string database;
    Lsn confirmed_flush = 0;
    std::string wal_status;
    std::optional<std::uint64_t> retained;  // pg_current_wal_lsn() - confirmed_flush_lsn
    std::string active_pid;
};

SlotRow read_slot(pg::Connection& conn, const std::string& slot, pg::Deadline deadline) {
    auto r = conn.exec_simple(
        "SELECT plugin, slot_type, database, confirmed_flush_lsn, wal_status, "
        "(pg_catalog.pg_current_wal_lsn() - confirmed_flush_lsn)::bigint, active_pid, "
        "database = pg_catalog.current_database() "
        "FROM pg_catalog.pg_replication_slots WHERE slot_name = " + conn.quote_literal(slot),
        deadline);
    SlotRow row;
    if (r.rows() == 0) return row;
    row.exists = true;
    row.plugin = r.get(0, 0);
    row.slot_type = r.get(0, 1);
    row.database = r.get(0, 2);
    if (!r.is_null(0, 3)) row.confirmed_flush = parse_lsn(r.get(0, 3)).value_or(0);
    row.wal_status = r.get(0, 4);
    if (!r.is_null(0, 5)) row.retained = static_cast<std::uint64_t>(std::max<long long>(0, std::stoll(std::string(r.get(0, 5)))));
    row.active_pid = r.get(0, 6);
    if (row.slot_type == "logical" && r.get(0, 7) != "t")
        throw Error("replication slot \"" + slot + "\" belongs to database \"" + row.database +
                    "\", not to the database of --dsn; point --dsn at that database or use another --slot");
    return row;
}

}  // namespace

const char* to_string(StreamState state) {
    switch (state) {
        case StreamState::Idle: return "idle";
        case StreamState::Connecting: return "connecting";
        case StreamState::Streaming: return "streaming";
        case StreamState::Paused: return "paused";
        case StreamState::Backoff: return "backoff";
        case StreamState::Stopped: return "stopped";
        case StreamState::Failed: return "failed";
    }
    return "unknown";
}

Stream::Stream(StreamOptions options, DeliveryProgressCoordinator& coordinator, StreamHandler& handler)
    : options_(std::move(options)), coordinator_(coordinator), handler_(handler) {
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) throw Error(std::string("eventfd failed: ") + std::strerror(errno));
    coordinator_.set_acknowledger(this);
}

Stream::~Stream() {
    coordinator_.set_acknowledger(nullptr);
    if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Stream::wake() {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
}

void Stream::acknowledge(Lsn lsn) {
    Lsn current = acked_.load();
    while (lsn > current && !acked_.compare_exchange_weak(current, lsn)) {
    }
    wake();
}

void Stream::stop() {
    stop_ = true;
    wake();
}

void Stream::request_restart() {
    restart_ = true;
    wake();
}

StreamStats Stream::stats() const {
    std::lock_guard lock(stats_mutex_);
    return stats_;
}

void Stream::set_state(StreamState state) {
    std::lock_guard lock(stats_mutex_);
    stats_.state = state;
}

void Stream::record_error(const std::string& message) {
    std::lock_guard lock(stats_mutex_);
    stats_.last_error = message;
}

void Stream::run() {
    bool valve_pending = false;
    bool first = true;
    int failures = 0;
    std::mt19937_64 rng(std::random_device{}());
    while (!stop_) {
        SessionInfo info;
        info.reconnect = !first;
        Outcome outcome = Outcome::Lost;
        bool streamed = false;
        try {
            set_state(StreamState::Connecting);
            outcome = run_session(valve_pending, info);
            streamed = true;
        } catch (const Error& e) {
            streamed = info.epoch != 0;  // the session had started: reset the backoff
            if (!e.transient()) {
                set_state(StreamState::Failed);
                record_error(e.what());
                log_error(kComponent, e.what());
                throw;
            }
            record_error(e.what());
            log_warning(kComponent, std::string("replication connection lost: ") + e.what());
        } catch (...) {
            set_state(StreamState::Failed);
            throw;
        }
        first = false;
        valve_pending = outcome == Outcome::Valve;
        if (outcome == Outcome::Stopped) break;
        {
            std::lock_guard lock(stats_mutex_);
            stats_.reconnects++;
        }
        if (outcome != Outcome::Lost) {
            failures = 0;
            continue;
        }
        if (streamed) failures = 0;
        // Capped exponential backoff with jitter (half to all of the step).
        auto step = options_.backoff_initial * (1LL << std::min(failures, 16));
        step = std::min<milliseconds>(step, options_.backoff_max);
        failures++;
        std::uniform_int_distribution<long long> jitter(step.count() / 2, std::max<long long>(step.count(), 1));
        auto until = SteadyClock::now() + milliseconds(jitter(rng));
        set_state(StreamState::Backoff);
        while (!stop_ && SteadyClock::now() < until) {
            pollfd pfd{wake_fd_, POLLIN, 0};
            ::poll(&pfd, 1, poll_timeout_ms(until));
            std::uint64_t drained;
            [[maybe_unused]] auto n = ::read(wake_fd_, &drained, sizeof drained);
        }
    }
    set_state(StreamState::Stopped);
}

Stream::Outcome Stream::run_session(bool valve_recreate, SessionInfo& info) {
    const auto cmd_deadline = [&] { return pg::deadline_in(options_.connect_timeout); };
    auto conn = pg::Connection::connect(options_.dsn, cmd_deadline(),
                                        {{"replication", "database"}, {"application_name", options_.application_name}},
                                        "--dsn");

    pg::pin_text_forms(conn, cmd_deadline());  // keys print as the pool and docsync.channel() print them

    // Which server, which timeline.
    auto ident = conn.exec_simple("IDENTIFY_SYSTEM", cmd_deadline());
    if (ident.rows() != 1 || ident.columns() < 2) throw Error("IDENTIFY_SYSTEM returned an unexpected result");
    info.system_identifier = ident.get(0, 0);
    info.timeline = std::stoi(std::string(ident.get(0, 1)));
    // Another server under the same slot name (a restore from a file-level backup, a promoted
    // standby with a slot made by hand): positions of the last session mean nothing here.
    // Or the same server restored from a file-level backup: its WAL ends before what this worker
    // already acknowledged, so that history is gone.
    std::optional<Lsn> server_lsn = ident.columns() >= 3 && !ident.is_null(0, 2) ? parse_lsn(ident.get(0, 2)) : std::nullopt;
    bool went_back = server_lsn && *server_lsn < acked_.load();
    info.identity_changed = !last_system_identifier_.empty() &&
                            (info.system_identifier != last_system_identifier_ || info.timeline != last_timeline_ || went_back);
    if (info.identity_changed)
        log_warning(kComponent, "the server changed: system identifier " + last_system_identifier_ + " timeline " +
                                    std::to_string(last_timeline_) + " is now " + info.system_identifier +
                                    " timeline " + std::to_string(info.timeline) +
                                    (went_back ? ", and its WAL ends at " + format_lsn(*server_lsn) +
                                                     ", before the acknowledged " + format_lsn(acked_.load()) +
                                                     " (restored from a backup?)"
                                               : std::string()) +
                                    "; starting over from the slot's position on this server");
    last_system_identifier_ = info.system_identifier;
    last_timeline_ = info.timeline;

    // The slot: check, and create or recreate it when asked.
    SlotRow slot = read_slot(conn, options_.slot, cmd_deadline());
    bool recreate = false;
    if (slot.exists) {
        if (slot.slot_type != "logical" || slot.plugin != "docsync")
            throw Error("replication slot \"" + options_.slot + "\" is a " + slot.slot_type + " slot of plugin \"" +
                        slot.plugin + "\", not a docsync slot; pass another --slot, or drop it with "
                        "SELECT pg_drop_replication_slot('" + options_.slot + "')");
        if (slot.wal_status == "lost") {
            log_error(kComponent, "WAL SAFETY VALVE: replication slot \"" + options_.slot +
                                      "\" was invalidated by the server (wal_status = lost; see "
                                      "max_slot_wal_keep_size); dropping and recreating it, every live doc "
                                      "will be recomputed");
            recreate = true;
        } else if (valve_recreate) {
            recreate = true;
        } else if (options_.max_retained_wal > 0 && slot.retained && *slot.retained > options_.max_retained_wal) {
            log_error(kComponent, "WAL SAFETY VALVE: replication slot \"" + options_.slot + "\" holds " +
                                      std::to_string(*slot.retained) + " bytes of WAL the worker has not "
                                      "acknowledged, over --max-retained-wal " +
                                      std::to_string(options_.max_retained_wal) +
                                      "; dropping and recreating it, every live doc will be recomputed");
            recreate = true;
        }
    } else if (!options_.create_slot && !valve_recreate) {
        throw Error("replication slot \"" + options_.slot + "\" does not exist; start the worker once with "
                    "--create-slot to create it (or SELECT pg_create_logical_replication_slot('" + options_.slot +
                    "', 'docsync'))", sqlstate::kUndefinedObject, false);
    }
    if (recreate) {
        conn.exec_simple("DROP_REPLICATION_SLOT " + quote_ident(options_.slot) + " WAIT", cmd_deadline());
        info.valve_fired = true;
        slot = SlotRow{};
    }
    if (!slot.exists) {
        conn.exec_simple("CREATE_REPLICATION_SLOT " + quote_ident(options_.slot) + " LOGICAL docsync (SNAPSHOT 'nothing')",
                         pg::deadline_in(options_.slot_create_timeout));
        info.slot_created = true;
        slot = read_slot(conn, options_.slot, cmd_deadline());
        if (!slot.exists) throw Error("replication slot \"" + options_.slot + "\" vanished right after it was created");
        log_info(kComponent, "created replication slot \"" + options_.slot + "\" at " + format_lsn(slot.confirmed_flush));
    }
    if (valve_recreate) info.valve_fired = true;
    if (info.valve_fired) {
        std::lock_guard lock(stats_mutex_);
        stats_.valve_fired++;
    }
    info.start_lsn = slot.confirmed_flush;

    // The generation (contract C).
    std::uint64_t floor = options_.generation_floor ? options_.generation_floor() : 0;
    bool force = info.slot_created || info.identity_changed;
    auto has_fn = conn.exec_simple(
        "SELECT count(*) FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = 'docsync' AND p.proname = 'advance_generation'",
        cmd_deadline());
    if (has_fn.get(0, 0) != "0") {
        auto g = conn.exec_simple("SELECT docsync.advance_generation(" + conn.quote_literal(options_.slot) + ", " +
                                      conn.quote_literal(info.system_identifier) + ", " +
                                      std::to_string(info.timeline) + ", " + std::to_string(floor) + ", " +
                                      (force ? "true" : "false") + ")",
                                  cmd_deadline());
        info.generation = std::stoull(std::string(g.get(0, 0)));
        info.generation_from_server = true;
    } else {
        info.generation = std::max<std::uint64_t>(std::max(floor, last_generation_) + (force ? 1 : 0), 1);
        log_warning(kComponent, "docsync.advance_generation() is not installed; using generation " +
                                    std::to_string(info.generation) +
                                    " from the sink (server identity changes are not detected); "
                                    "run ALTER EXTENSION docsync UPDATE");
    }

    last_generation_ = info.generation;

    // "Slot is active" is retried this long.
    milliseconds active_grace;
    if (options_.slot_active_timeout) {
        active_grace = *options_.slot_active_timeout;
    } else {
        auto t = conn.exec_simple(
            "SELECT setting::bigint FROM pg_catalog.pg_settings WHERE name = 'wal_sender_timeout'", cmd_deadline());
        active_grace = milliseconds(t.rows() ? std::stoll(std::string(t.get(0, 0))) : 60000) + options_.slot_active_margin;
    }

    // A new session: new epoch, decoder state and positions.
    {
        std::lock_guard lock(stats_mutex_);
        stats_.sessions++;
        stats_.generation = info.generation;
    }
    if (info.slot_created || info.identity_changed) {
        // A new slot starts at the current WAL: nothing before it will be delivered, and the
        // coordinator's positions from the old slot (or another server) no longer apply; never
        // acknowledge a position this server has not reached.
        coordinator_.rebase(info.start_lsn);
        Lsn current = acked_.load();
        while (!acked_.compare_exchange_weak(current, info.start_lsn)) {
        }
    } else {
        coordinator_.new_epoch();
        coordinator_.set_checkpoint_floor(info.start_lsn);
        acknowledge(info.start_lsn);
    }
    info.epoch = coordinator_.stats().epoch;
    Decoder decoder;
    handler_.on_session(info);

    // START_REPLICATION, retrying "slot is active" while an old walsender may still hold the slot.
    std::string options_sql = "\"proto_version\" '" + std::to_string(DOCSYNC_PROTO_VERSION_MAX) + "', \"format\" 'binary'";
    if (options_.tables) {
        if (auto tables = options_.tables()) options_sql += ", \"tables\" " + quote_string(*tables);
    }
    std::string start_sql = "START_REPLICATION SLOT " + quote_ident(options_.slot) + " LOGICAL " +
                            (info.reconnect ? std::string("0/0") : format_lsn(info.start_lsn)) + " (" + options_sql + ")";
    auto active_until = SteadyClock::now() + active_grace;
    for (;;) {
        try {
            conn.start_copy(start_sql, cmd_deadline());
            break;
        } catch (const Error& e) {
            if (e.sqlstate() != sqlstate::kObjectInUse) {
                if (e.sqlstate() == sqlstate::kObjectNotInPrerequisiteState &&
                    std::string_view(e.what()).find("can no longer") != std::string_view::npos)
                    return Outcome::Valve;  // invalidated between the check and the start
                if (e.transient()) throw;
                throw Error(std::string("could not start streaming from slot \"") + options_.slot + "\": " + e.what(),
                            e.sqlstate(), false);
            }
            if (stop_) return Outcome::Stopped;
            if (SteadyClock::now() >= active_until) {
                auto holder = read_slot(conn, options_.slot, cmd_deadline());
                throw Error("replication slot \"" + options_.slot + "\" is held by the process with pid " +
                                (holder.active_pid.empty() ? std::string("(unknown)") : holder.active_pid) +
                                " (still after " + std::to_string(active_grace.count()) +
                                " ms); another docsync-worker or pg_recvlogical is streaming it: stop it, or end it "
                                "with SELECT pg_terminate_backend(" + holder.active_pid + ")",
                            sqlstate::kObjectInUse, false);
            }
            log_info(kComponent, std::string("waiting for the slot: ") + e.what());
            pollfd pfd{wake_fd_, POLLIN, 0};
            ::poll(&pfd, 1, 500);
        }
    }
    log_info(kComponent, "streaming slot \"" + options_.slot + "\" from " +
                             (info.reconnect ? std::string("its confirmed position ") : std::string()) +
                             format_lsn(info.start_lsn) + ", epoch " + std::to_string(info.epoch) + ", generation " +
                             std::to_string(info.generation));
    set_state(StreamState::Streaming);

    PGconn* raw = conn.raw();
    // The control check, every valve_interval on a connection of its own: the slot's retained WAL
    // and state for the safety valve, and whether the server still accepts new connections.
    std::unique_ptr<pg::Connection> valve_conn;
    int control_failures = 0;  // consecutive failed checks
    Lsn received = info.start_lsn;
    Lsn sent_flush = 0;
    bool in_txn = false;
    bool skipping = false;
    std::size_t txn_bytes = 0;
    StreamStats local;  // counters of this session, folded into stats_ every turn
    auto next_status = SteadyClock::now();
    auto next_valve = SteadyClock::now() + options_.valve_interval;

    auto send_status = [&](bool reply_requested) {
        Lsn flush = std::max(acked_.load(), sent_flush);
        std::string msg;
        msg.reserve(34);
        msg.push_back('r');
        put64(msg, std::max(received, flush));  // written
        put64(msg, flush);                      // flushed: what the slot may confirm
        put64(msg, flush);                      // applied
        put64(msg, static_cast<std::uint64_t>(pg_now_us()));
        msg.push_back(reply_requested ? 1 : 0);
        if (PQputCopyData(raw, msg.data(), static_cast<int>(msg.size())) != 1)
            throw pg::error_from(raw, nullptr, "could not send a standby status update");
        if (PQflush(raw) < 0) throw pg::error_from(raw, nullptr, "could not send a standby status update");
        if (flush != sent_flush && log_enabled(LogLevel::Debug)) log_debug(kComponent, "ack " + format_lsn(flush));
        sent_flush = flush;
        local.status_updates++;
        next_status = SteadyClock::now() + options_.status_interval;
    };
    auto publish_stats = [&](StreamState state) {
        std::lock_guard lock(stats_mutex_);
        stats_.state = state;
        stats_.records += local.records;
        stats_.bytes += local.bytes;
        stats_.transactions += local.transactions;
        stats_.redelivered_skipped += local.redelivered_skipped;
        stats_.keepalives += local.keepalives;
        stats_.status_updates += local.status_updates;
        stats_.received_lsn = std::max(stats_.received_lsn, received);
        stats_.sent_flush_lsn = std::max(stats_.sent_flush_lsn, sent_flush);
        if (local.retained_wal) stats_.retained_wal = local.retained_wal;
        local = StreamStats{};
    };
    auto finish = [&](Outcome outcome) {
        // A final acknowledgement, then end the copy politely; the connection closes either way.
        try {
            send_status(false);
            if (PQputCopyEnd(raw, nullptr) == 1) {
                auto until = pg::deadline_in(milliseconds(2000));
                while (PQflush(raw) == 1 && conn.wait_socket(true, until)) {
                }
            }
        } catch (const Error& e) {
            log_warning(kComponent, std::string("final status update failed: ") + e.what());
        }
        publish_stats(StreamState::Connecting);
        return outcome;
    };

    auto handle_message = [&](const char* buf, int len) {
        if (len < 1) throw Error("empty replication message");
        if (buf[0] == 'k') {
            if (len < 18) throw Error("truncated keepalive message", sqlstate::kProtocolViolation, true);
            Lsn wal_end = get64(buf + 1);
            bool reply = buf[17] != 0;
            local.keepalives++;
            received = std::max(received, wal_end);
            if (!in_txn) coordinator_.acknowledge_idle(wal_end);
            if (reply) send_status(false);
            return;
        }
        if (buf[0] != 'w')
            throw Error(std::string("unexpected replication message type ") + buf[0], sqlstate::kProtocolViolation, true);
        if (len < 25) throw Error("truncated XLogData message", sqlstate::kProtocolViolation, true);
        Lsn wal_start = get64(buf + 1);
        Lsn wal_end = get64(buf + 9);
        received = std::max(received, wal_end);
        std::span<const std::uint8_t> payload(reinterpret_cast<const std::uint8_t*>(buf + 25),
                                              static_cast<std::size_t>(len - 25));
        Record record = decoder.decode(payload);
        local.records++;
        local.bytes += payload.size();
        if (auto* b = std::get_if<BeginRecord>(&record)) {
            if (in_txn) throw DecodeError("malformed docsync stream: BEGIN inside a transaction");
            in_txn = true;
            txn_bytes = payload.size();
            // The server resends transactions that were done but not yet confirmed to it when the
            // connection dropped; those whose COMMIT starts before the acknowledged position are done.
            skipping = b->commit_lsn < coordinator_.checkpoint();
            if (skipping) {
                local.redelivered_skipped++;
                return;
            }
            handler_.on_record(record, wal_start, 0);
            return;
        }
        if (auto* c = std::get_if<CommitRecord>(&record)) {
            if (!in_txn) throw DecodeError("malformed docsync stream: COMMIT outside a transaction");
            in_txn = false;
            txn_bytes += payload.size();
            if (skipping) {
                skipping = false;
                return;
            }
            auto ticket = coordinator_.register_txn(c->end_lsn, txn_bytes);
            txn_bytes = 0;
            local.transactions++;
            handler_.on_record(record, wal_start, ticket);
            return;
        }
        bool is_change = std::holds_alternative<ChangeRecord>(record) || std::holds_alternative<TruncateRecord>(record);
        if (is_change && !in_txn) throw DecodeError("malformed docsync stream: a change outside a transaction");
        if (in_txn) txn_bytes += payload.size();
        // RELATION records are handed up even in a skipped transaction: later ones rely on them.
        if (skipping && !std::holds_alternative<RelationRecord>(record)) return;
        handler_.on_record(record, wal_start, 0);
    };

    for (;;) {
        if (stop_) return finish(Outcome::Stopped);
        if (restart_.exchange(false)) return finish(Outcome::Restart);

        // Over a cap, wait for completions; but a transaction is always read whole while nothing
        // else is pending (one larger than the byte cap must not wedge the stream).
        std::size_t pending = coordinator_.pending_groups();
        bool paused = pending >= options_.max_pending_txns ||
                      (pending > 0 && coordinator_.pending_bytes() + txn_bytes >= options_.max_pending_bytes);
        bool buffered = false;  // libpq may still hold complete messages: do not sleep
        if (!paused) {
            buffered = true;
            for (int i = 0; i < kMessagesPerTurn && !stop_ && !restart_; ++i) {
                char* buf = nullptr;
                int n = PQgetCopyData(raw, &buf, 1);
                if (n == 0) {
                    buffered = false;
                    break;
                }
                if (n == -1) {  // the server ended the copy: its final result says why
                    pg::Result end(PQgetResult(raw));
                    if (end.status() == PGRES_FATAL_ERROR) throw pg::error_from(raw, end.raw(), "replication stream ended");
                    throw Error("the server ended the replication stream", sqlstate::kConnectionFailure, true);
                }
                if (n == -2) throw pg::error_from(raw, nullptr, "replication stream");
                std::unique_ptr<char, decltype(&PQfreemem)> owned(buf, &PQfreemem);
                handle_message(owned.get(), n);
                if (coordinator_.pending_groups() >= options_.max_pending_txns ||
                    coordinator_.pending_bytes() + txn_bytes >= options_.max_pending_bytes)
                    break;
            }
        }

        auto now = SteadyClock::now();
        if (acked_.load() > sent_flush || now >= next_status) send_status(false);

        if (now >= next_valve) {
            next_valve = now + options_.valve_interval;
            try {
                if (!valve_conn)
                    valve_conn = std::make_unique<pg::Connection>(
                        pg::Connection::connect(options_.dsn, cmd_deadline(), {{"application_name", options_.application_name + " valve"}},
                                                "--dsn"));
                auto r = valve_conn->exec(
                    "SELECT (pg_catalog.pg_current_wal_lsn() - confirmed_flush_lsn)::bigint, wal_status "
                    "FROM pg_catalog.pg_replication_slots WHERE slot_name = $1",
                    {options_.slot}, pg::deadline_in(milliseconds(5000)));
                control_failures = 0;
                if (r.rows() == 1) {
                    long long retained = r.is_null(0, 0) ? 0 : std::stoll(std::string(r.get(0, 0)));
                    local.retained_wal = static_cast<Lsn>(std::max(0LL, retained));
                    bool lost = r.get(0, 1) == "lost";
                    if (options_.max_retained_wal > 0 &&
                        (lost || static_cast<std::uint64_t>(std::max(0LL, retained)) > options_.max_retained_wal)) {
                        log_error(kComponent, "WAL SAFETY VALVE: replication slot \"" + options_.slot + "\" " +
                                                  (lost ? std::string("was invalidated (wal_status = lost)")
                                                        : "holds " + std::to_string(retained) +
                                                              " bytes of unacknowledged WAL, over --max-retained-wal " +
                                                              std::to_string(options_.max_retained_wal)) +
                                                  "; dropping and recreating it, every live doc will be recomputed");
                        publish_stats(StreamState::Connecting);
                        return Outcome::Valve;  // the connection closes; the next session recreates the slot
                    }
                }
            } catch (const Error& e) {
                valve_conn.reset();
                // A fast shutdown waits for this walsender until everything it sent is confirmed,
                // which cannot happen while doc queries cannot connect: leave, so the server can stop.
                // The server says so (57P0x; a refused connection carries only its message, which may
                // be translated); failing to connect three checks in a row is taken the same way.
                const std::string& state = e.sqlstate();
                bool shutting_down = state == sqlstate::kAdminShutdown || state == sqlstate::kCrashShutdown ||
                                     state == sqlstate::kCannotConnectNow ||
                                     std::string_view(e.what()).find("the database system is shutting down") !=
                                         std::string_view::npos;
                if (shutting_down || ++control_failures >= 3) {
                    log_warning(kComponent, std::string(shutting_down ? "the server is shutting down"
                                                                      : "new connections to the server fail")
                                                + "; leaving the stream so it can stop: " + e.what());
                    return finish(Outcome::Lost);
                }
                log_warning(kComponent, std::string("the control check on a new connection failed (retried): ") + e.what());
            }
        }

        int rc = PQflush(raw);
        if (rc < 0) throw pg::error_from(raw, nullptr, "replication stream");
        publish_stats(paused ? StreamState::Paused : StreamState::Streaming);
        if (stop_ || restart_) continue;

        auto until = std::min(next_status, next_valve);
        pollfd fds[2] = {{PQsocket(raw), static_cast<short>((paused ? 0 : POLLIN) | (rc == 1 ? POLLOUT : 0)), 0},
                         {wake_fd_, POLLIN, 0}};
        if (fds[0].fd < 0) throw Error("the replication connection has no socket", sqlstate::kConnectionFailure, true);
        int timeout = buffered ? 0 : paused ? std::min(poll_timeout_ms(until), 50) : poll_timeout_ms(until);
        int n = ::poll(fds, 2, timeout);
        if (n < 0 && errno != EINTR) throw Error(std::string("poll failed: ") + std::strerror(errno), {}, true);
        if (n > 0 && (fds[0].revents & (POLLIN | POLLERR | POLLHUP)) && !paused) {
            if (!PQconsumeInput(raw)) throw pg::error_from(raw, nullptr, "replication stream");
        }
        if (n > 0 && (fds[1].revents & POLLIN)) {
            std::uint64_t drained;
            [[maybe_unused]] auto r = ::read(wake_fd_, &drained, sizeof drained);
        }
    }
}

}  // namespace docsync
