// One connection's worth of the replication stream (see session.hpp).
#include "replication/session.hpp"

#include <span>
#include <string>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sqlstate.hpp"
#include "docsync_wire.h"
#include "replication/pgoutput_publication.hpp"

namespace docsync {

namespace {

using std::chrono::milliseconds;

constexpr std::string_view kComponent = kStreamComponent;
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

pg::Connection connect_replication(const StreamOptions& options) {
    auto conn = pg::Connection::connect(options.dsn, pg::deadline_in(options.connect_timeout),
                                        {{"replication", "database"}, {"application_name", options.application_name}},
                                        "--dsn");
    // Keys print as the pool and docsync.channel() print them.
    pg::pin_text_forms(conn, pg::deadline_in(options.connect_timeout));
    return conn;
}

}  // namespace

Stream::Session::Session(Stream& stream, SessionInfo& info)
    : stream_(stream), options_(stream.options_), info_(info), conn_(connect_replication(stream.options_)) {}

Stream::Outcome Stream::Session::run(bool valve_recreate) {
    identify();
    check_slot(valve_recreate);
    raise_generation();
    auto active_grace = slot_active_grace();
    begin();
    if (auto outcome = start_replication(active_grace)) return *outcome;
    return receive();
}

void Stream::Session::identify() {
    auto ident = conn_.exec_simple("IDENTIFY_SYSTEM", cmd_deadline());
    if (ident.rows() != 1 || ident.columns() < 2) throw Error("IDENTIFY_SYSTEM returned an unexpected result");
    info_.system_identifier = ident.get(0, 0);
    info_.timeline = std::stoi(std::string(ident.get(0, 1)));
    // Another server under the same slot name (a restore from a file-level backup, a promoted
    // standby with a slot made by hand): positions of the last connection mean nothing here.
    // Or the same server restored from a file-level backup: its WAL ends before what this worker
    // already acknowledged, so that history is gone.
    std::optional<Lsn> server_lsn = ident.columns() >= 3 && !ident.is_null(0, 2) ? parse_lsn(ident.get(0, 2)) : std::nullopt;
    bool went_back = server_lsn && *server_lsn < stream_.acked_.load();
    const std::string& last_identifier = stream_.last_system_identifier_;
    info_.identity_changed = !last_identifier.empty() && (info_.system_identifier != last_identifier ||
                                                          info_.timeline != stream_.last_timeline_ || went_back);
    if (info_.identity_changed)
        log_warning(kComponent, "the server changed: system identifier " + last_identifier + " timeline " +
                                    std::to_string(stream_.last_timeline_) + " is now " + info_.system_identifier +
                                    " timeline " + std::to_string(info_.timeline) +
                                    (went_back ? ", and its WAL ends at " + format_lsn(*server_lsn) +
                                                     ", before the acknowledged " + format_lsn(stream_.acked_.load()) +
                                                     " (restored from a backup?)"
                                               : std::string()) +
                                    "; starting over from the slot's position on this server");
    stream_.last_system_identifier_ = info_.system_identifier;
    stream_.last_timeline_ = info_.timeline;
}

void Stream::Session::check_slot(bool valve_recreate) {
    SlotRow slot = read_slot(conn_, options_.slot, cmd_deadline());
    bool recreate = false;
    plugin_ = options_.plugin;
    if (plugin_ == "auto") {
        plugin_ = slot.exists ? (slot.plugin == "pgoutput" ? "pgoutput" : "docsync")
                              : (server_allows_plugin(conn_, "docsync", cmd_deadline()) ? "docsync" : "pgoutput");
        log_info(kComponent, "--plugin auto: " + plugin_);
    }
    if (slot.exists) {
        if (slot.slot_type != "logical" || slot.plugin != plugin_)
            throw Error("replication slot \"" + options_.slot + "\" is a " + slot.slot_type + " slot of plugin \"" +
                        slot.plugin + "\", not a " + plugin_ + " slot; pass another --slot or --plugin " +
                        (slot.plugin == "docsync" || slot.plugin == "pgoutput" ? slot.plugin : std::string("auto")) +
                        ", or drop it with SELECT pg_drop_replication_slot('" + options_.slot + "')");
        if (slot.wal_status == "lost") {
            log_valve(true, 0);
            recreate = true;
        } else if (valve_recreate) {
            recreate = true;
        } else if (options_.max_retained_wal > 0 && slot.retained && *slot.retained > options_.max_retained_wal) {
            log_valve(false, *slot.retained);
            recreate = true;
        }
    } else if (!options_.create_slot && !valve_recreate) {
        throw Error("replication slot \"" + options_.slot + "\" does not exist; start the worker once with "
                    "--create-slot to create it (or SELECT pg_create_logical_replication_slot('" + options_.slot +
                    "', '" + plugin_ + "'))", sqlstate::kUndefinedObject, false);
    }
    // The publication must exist before the slot does: pgoutput reads it as of each change.
    info_.pgoutput = plugin_ == "pgoutput";
    if (plugin_ == "pgoutput") prepare_pgoutput();
    if (recreate) {
        conn_.exec_simple("DROP_REPLICATION_SLOT " + quote_ident(options_.slot) + " WAIT", cmd_deadline());
        info_.valve_fired = true;
        slot = SlotRow{};
    }
    if (!slot.exists) {
        conn_.exec_simple("CREATE_REPLICATION_SLOT " + quote_ident(options_.slot) + " LOGICAL " + plugin_ + " (SNAPSHOT 'nothing')",
                          pg::deadline_in(options_.slot_create_timeout));
        info_.slot_created = true;
        slot = read_slot(conn_, options_.slot, cmd_deadline());
        if (!slot.exists) throw Error("replication slot \"" + options_.slot + "\" vanished right after it was created");
        log_info(kComponent, "created replication slot \"" + options_.slot + "\" at " + format_lsn(slot.confirmed_flush));
    }
    if (valve_recreate) info_.valve_fired = true;
    if (info_.valve_fired) stream_.update_stats([](StreamStats& stats) { stats.valve_resets++; });
    info_.start_lsn = slot.confirmed_flush;
}

void Stream::Session::raise_generation() {
    std::uint64_t floor = options_.generation_floor ? options_.generation_floor() : 0;
    DocVersion sink = options_.sink_high_water ? options_.sink_high_water() : DocVersion{floor, 0};
    floor = std::max(floor, sink.generation);
    bool force = info_.slot_created || info_.identity_changed;
    advance_generation(floor, force);
    if (sink.generation == 0) return;  // the sink holds nothing: no history to compare
    if (info_.generation > sink.generation) {
        // Raised by the server (another timeline or server) or by this session: the sink's docs
        // are of a history this stream does not continue.
        if (!force) {
            log_warning(kComponent, "the sink holds docs of generation " + std::to_string(sink.generation) +
                                        ", but this server gives generation " + std::to_string(info_.generation) +
                                        " (a new timeline or server since they were published): what changed "
                                        "in between will not be streamed");
            info_.new_history = true;
        }
        return;
    }
    if (force || sink.generation != info_.generation || sink.lsn == 0) return;
    // Same generation: the sink's positions come from this server's history only if its WAL has
    // reached them. pg_current_wal_insert_lsn() is at or past every position a compute reported.
    auto r = conn_.exec_simple("SELECT pg_catalog.pg_current_wal_insert_lsn()", cmd_deadline());
    auto wal_end = parse_lsn(r.get(0, 0));
    if (!wal_end || *wal_end >= sink.lsn) return;
    log_warning(kComponent, "the sink holds a doc at " + format_lsn(sink.lsn) + " (generation " +
                                std::to_string(sink.generation) + "), but this server's WAL ends at " +
                                format_lsn(*wal_end) + " (restored from a backup?): its history went back; "
                                "raising the generation and recomputing every live doc");
    info_.new_history = true;
    advance_generation(floor, true);
}

void Stream::Session::advance_generation(std::uint64_t floor, bool force) {
    auto has_fn = conn_.exec_simple(
        "SELECT count(*) FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = 'docsync' AND p.proname = 'advance_generation'",
        cmd_deadline());
    if (has_fn.get(0, 0) != "0") {
        auto g = conn_.exec_simple("SELECT docsync.advance_generation(" + conn_.quote_literal(options_.slot) + ", " +
                                       conn_.quote_literal(info_.system_identifier) + ", " +
                                       std::to_string(info_.timeline) + ", " + std::to_string(floor) + ", " +
                                       (force ? "true" : "false") + ")",
                                   cmd_deadline());
        info_.generation = std::stoull(std::string(g.get(0, 0)));
        info_.generation_from_server = true;
    } else {
        info_.generation = std::max<std::uint64_t>(std::max(floor, stream_.last_generation_) + (force ? 1 : 0), 1);
        log_warning(kComponent, "docsync.advance_generation() is not installed; using generation " +
                                    std::to_string(info_.generation) +
                                    " from the sink (server identity changes are not detected); "
                                    "run ALTER EXTENSION docsync UPDATE");
    }
    stream_.last_generation_ = info_.generation;
}

milliseconds Stream::Session::slot_active_grace() {
    if (options_.slot_active_timeout) return *options_.slot_active_timeout;
    auto t = conn_.exec_simple("SELECT setting::bigint FROM pg_catalog.pg_settings WHERE name = 'wal_sender_timeout'",
                               cmd_deadline());
    return milliseconds(t.rows() ? std::stoll(std::string(t.get(0, 0))) : 60000) + options_.slot_active_margin;
}

void Stream::Session::begin() {
    stream_.update_stats([&](StreamStats& stats) {
        stats.sessions++;
        stats.generation = info_.generation;
    });
    if (info_.slot_created || info_.identity_changed) {
        // A new slot starts at the current WAL: nothing before it will be delivered, and the
        // coordinator's positions from the old slot (or another server) no longer apply; never
        // acknowledge a position this server has not reached.
        stream_.coordinator_.rebase(info_.start_lsn);
        Lsn current = stream_.acked_.load();
        while (!stream_.acked_.compare_exchange_weak(current, info_.start_lsn)) {
        }
    } else {
        stream_.coordinator_.new_epoch();
        stream_.coordinator_.set_checkpoint_floor(info_.start_lsn);
        stream_.acknowledge(info_.start_lsn);
    }
    info_.epoch = stream_.coordinator_.stats().epoch;
    stream_.ack_cap_ = kNoCap;
    stream_.handler_.on_session(info_);
}

std::optional<Stream::Outcome> Stream::Session::start_replication(milliseconds active_grace) {
    std::string plugin_options = "\"proto_version\" '" + std::to_string(DOCSYNC_PROTO_VERSION_MAX) + "', \"format\" 'binary'";
    if (pgoutput_) {
        plugin_options = std::string(pgoutput_streaming_ ? "\"proto_version\" '2', \"streaming\" 'on'" : "\"proto_version\" '1'") +
                         ", \"publication_names\" " + quote_string(quote_ident(publication_name(options_.slot))) +
                         ", \"messages\" 'true'";
    } else if (options_.tables) {
        if (auto tables = options_.tables()) plugin_options += ", \"tables\" " + quote_string(*tables);
    }
    std::string start_sql = "START_REPLICATION SLOT " + quote_ident(options_.slot) + " LOGICAL " +
                            (info_.reconnect ? std::string("0/0") : format_lsn(info_.start_lsn)) + " (" +
                            plugin_options + ")";
    auto active_until = Clock::now() + active_grace;
    stream_.drain_wake();  // what woke the stream so far (begin()'s acknowledgement) is no reason to retry
    for (;;) {
        try {
            conn_.start_copy(start_sql, cmd_deadline());
            break;
        } catch (const Error& e) {
            // The server invalidated the slot between the check and the start (55000; its message
            // differs between versions, the slot's state does not).
            if (e.sqlstate() == sqlstate::kObjectNotInPrerequisiteState &&
                read_slot(conn_, options_.slot, cmd_deadline()).wal_status == "lost")
                return Outcome::Valve;
            // Dropped between the check and the start: with --create-slot the next session creates
            // it again, as it would have had the drop come a moment sooner.
            if (e.sqlstate() == sqlstate::kUndefinedObject && options_.create_slot)
                throw Error(std::string("replication slot \"") + options_.slot + "\" was dropped as streaming started (" +
                                e.what() + "); creating it again",
                            e.sqlstate(), true);
            if (e.sqlstate() != sqlstate::kObjectInUse) {
                if (e.transient()) throw;
                throw Error(std::string("could not start streaming from slot \"") + options_.slot + "\": " + e.what(),
                            e.sqlstate(), false);
            }
            // An old walsender may still hold the slot.
            if (stream_.stop_) return Outcome::Stopped;
            if (Clock::now() >= active_until) {
                auto holder = read_slot(conn_, options_.slot, cmd_deadline());
                throw Error("replication slot \"" + options_.slot + "\" is held by the process with pid " +
                                (holder.active_pid.empty() ? std::string("(unknown)") : holder.active_pid) +
                                " (still after " + std::to_string(active_grace.count()) +
                                " ms); another docsync-worker or pg_recvlogical is streaming it: stop it, or end it "
                                "with SELECT pg_terminate_backend(" + holder.active_pid + ")",
                            sqlstate::kObjectInUse, false);
            }
            log_info(kComponent, std::string("waiting for the slot: ") + e.what());
            stream_.wait_wake(500);
        }
    }
    log_info(kComponent, "streaming slot \"" + options_.slot + "\" from " +
                             (info_.reconnect ? std::string("its confirmed position ") : std::string()) +
                             format_lsn(info_.start_lsn) + ", epoch " + std::to_string(info_.epoch) + ", generation " +
                             std::to_string(info_.generation) +
                             (!pgoutput_ ? std::string()
                              : pgoutput_streaming_ ? std::string(", pgoutput protocol version 2 with streamed transactions")
                                                    : std::string(", pgoutput protocol version 1")));
    stream_.set_state(StreamState::Streaming);
    return std::nullopt;
}

Stream::Outcome Stream::Session::receive() {
    copy_.emplace(conn_);
    received_ = info_.start_lsn;
    stream_.received_ = received_;
    next_status_ = Clock::now();
    next_control_ = Clock::now() + options_.valve_interval;
    DeliveryProgressCoordinator& coordinator = stream_.coordinator_;
    for (;;) {
        if (stream_.stop_) return finish(Outcome::Stopped);
        if (stream_.restart_.exchange(false)) return finish(Outcome::Restart);

        // Over a cap, wait for completions; but a transaction is always read whole while nothing
        // else is pending (one larger than the byte cap must not wedge the stream).
        std::size_t pending = coordinator.pending_groups();
        bool paused = pending >= options_.max_pending_txns ||
                      (pending > 0 && coordinator.pending_bytes() + txn_bytes_ >= options_.max_pending_bytes);
        bool buffered = !paused && read_messages();  // libpq may still hold complete messages: do not sleep

        // The server sends no further keepalive for WAL it has sent once the written position
        // reported reaches it, so a keepalive's WAL end that waited on pending transactions (WAL no
        // transaction of the slot's wrote, right after one that did) is acknowledged here, when they
        // have completed; a read-your-writes wait for that WAL would otherwise last until more comes.
        if (!in_txn_ && idle_end_ > coordinator.checkpoint()) coordinator.acknowledge_idle(idle_end_);
        auto now = Clock::now();
        if (acknowledgeable() > sent_flush_ || now >= next_status_) send_status();
        if (now >= next_control_) {
            next_control_ = now + options_.valve_interval;
            if (auto outcome = control_check()) return *outcome;
        }

        bool unsent = !copy_->flush();
        publish_stats(paused ? StreamState::Paused : StreamState::Streaming);
        if (stream_.stop_ || stream_.restart_) continue;

        stream_.handler_.on_idle();
        auto until = std::min(next_status_, next_control_);
        int timeout = buffered ? 0 : paused ? std::min(poll_timeout_ms(until), 50) : poll_timeout_ms(until);
        if (int tick = stream_.handler_.idle_tick_ms(); tick > 0) timeout = std::min(timeout, tick);
        // While a committed streamed transaction is read back nothing is read from the server
        // either: libpq would buffer whatever it sends meanwhile, in memory and without bound.
        bool replaying = pgoutput_ && pgoutput_->replaying();
        if (copy_->wait(!paused && !replaying, unsent, stream_.wake_fd_, timeout)) stream_.drain_wake();
    }
}

bool Stream::Session::read_messages() {
    DeliveryProgressCoordinator& coordinator = stream_.coordinator_;
    for (int i = 0; i < kMessagesPerTurn && !stream_.stop_ && !stream_.restart_; ++i) {
        if (pgoutput_ && pgoutput_->replaying()) {
            replay_pgoutput();
        } else {
            auto message = copy_->read();
            if (!message) return false;
            handle_message(*message);
        }
        if (coordinator.pending_groups() >= options_.max_pending_txns ||
            coordinator.pending_bytes() + txn_bytes_ >= options_.max_pending_bytes)
            break;
    }
    return true;
}

void Stream::Session::handle_message(std::string_view message) {
    const char* buf = message.data();
    std::size_t len = message.size();
    if (len < 1) throw Error("empty replication message");
    if (buf[0] == 'k') {
        if (len < 18) throw Error("truncated keepalive message", sqlstate::kProtocolViolation, true);
        Lsn wal_end = get64(buf + 1);
        bool reply = buf[17] != 0;
        local_.keepalives++;
        note_received(wal_end);
        // A keepalive's WAL end is acknowledged only when nothing is open or pending; one that comes
        // while transactions are pending is offered again once they complete (receive()).
        if (!in_txn_) {
            idle_end_ = std::max(idle_end_, wal_end);
            stream_.coordinator_.acknowledge_idle(wal_end);
        }
        if (reply) send_status();
        return;
    }
    if (buf[0] != 'w')
        throw Error(std::string("unexpected replication message type ") + buf[0], sqlstate::kProtocolViolation, true);
    if (len < 25) throw Error("truncated XLogData message", sqlstate::kProtocolViolation, true);
    Lsn wal_start = get64(buf + 1);
    Lsn wal_end = get64(buf + 9);
    note_received(wal_end);
    std::span<const std::uint8_t> payload(reinterpret_cast<const std::uint8_t*>(buf + 25), len - 25);
    local_.bytes += payload.size();
    if (pgoutput_) {
        decoded_.clear();
        pgoutput_->decode(payload, decoded_);
        for (std::size_t i = 0; i < decoded_.size(); ++i) {
            local_.records++;
            handle_record(decoded_[i], wal_start, i == 0 ? payload.size() : 0);
        }
        if (pgoutput_->replaying()) replay_wal_start_ = wal_start;  // a STREAM COMMIT
        return;
    }
    Record record = decoder_.decode(payload);
    local_.records++;
    handle_record(record, wal_start, payload.size());
}

void Stream::Session::handle_record(const Record& record, Lsn wal_start, std::size_t bytes) {
    StreamHandler& handler = stream_.handler_;
    if (auto* b = std::get_if<BeginRecord>(&record)) {
        if (in_txn_) throw DecodeError("malformed docsync stream: BEGIN inside a transaction");
        in_txn_ = true;
        txn_bytes_ = bytes;
        // The server resends transactions that were done but not yet confirmed to it when the
        // connection dropped; those whose COMMIT starts before the acknowledged position are done.
        skipping_ = b->commit_lsn < stream_.coordinator_.checkpoint();
        if (skipping_) {
            local_.redelivered_skipped++;
            return;
        }
        handler.on_record(record, wal_start, 0);
        return;
    }
    if (auto* c = std::get_if<CommitRecord>(&record)) {
        if (!in_txn_) throw DecodeError("malformed docsync stream: COMMIT outside a transaction");
        in_txn_ = false;
        txn_bytes_ += bytes;
        if (skipping_) {
            skipping_ = false;
            return;
        }
        // Registered in stream order, before the handler sees it.
        auto ticket = stream_.coordinator_.register_txn(c->end_lsn, txn_bytes_);
        txn_bytes_ = 0;
        local_.transactions++;
        handler.on_record(record, wal_start, ticket);
        return;
    }
    bool is_change = std::holds_alternative<ChangeRecord>(record) || std::holds_alternative<TruncateRecord>(record);
    if (is_change && !in_txn_) throw DecodeError("malformed docsync stream: a change outside a transaction");
    if (in_txn_) txn_bytes_ += bytes;
    // RELATION records are handed up even in a skipped transaction: later ones rely on them.
    if (skipping_ && !std::holds_alternative<RelationRecord>(record)) return;
    handler.on_record(record, wal_start, 0);
}

void Stream::Session::send_status() {
    Lsn flush = std::max(acknowledgeable(), sent_flush_);
    std::string msg;
    msg.reserve(34);
    msg.push_back('r');
    put64(msg, std::max(received_, flush));  // written
    put64(msg, flush);                       // flushed: what the slot may confirm
    put64(msg, flush);                       // applied
    put64(msg, static_cast<std::uint64_t>(pg_now_us()));
    msg.push_back(0);  // no reply requested
    copy_->send(msg, "could not send a standby status update");
    if (flush != sent_flush_ && log_enabled(LogLevel::Debug)) log_debug(kComponent, "ack " + format_lsn(flush));
    sent_flush_ = flush;
    local_.status_updates++;
    next_status_ = Clock::now() + options_.status_interval;
}

std::optional<Stream::Outcome> Stream::Session::control_check() {
    try {
        if (!control_)
            control_ = std::make_unique<pg::Connection>(pg::Connection::connect(
                options_.dsn, cmd_deadline(), {{"application_name", options_.application_name + " valve"}}, "--dsn"));
        auto r = control_->exec(
            "SELECT (pg_catalog.pg_current_wal_lsn() - confirmed_flush_lsn)::bigint, wal_status "
            "FROM pg_catalog.pg_replication_slots WHERE slot_name = $1",
            {options_.slot}, pg::deadline_in(milliseconds(5000)));
        control_failures_ = 0;
        if (r.rows() != 1) return std::nullopt;
        long long retained = r.is_null(0, 0) ? 0 : std::stoll(std::string(r.get(0, 0)));
        local_.retained_wal = static_cast<Lsn>(std::max(0LL, retained));
        bool lost = r.get(0, 1) == "lost";
        if (options_.max_retained_wal > 0 && (lost || local_.retained_wal > options_.max_retained_wal)) {
            log_valve(lost, local_.retained_wal);
            publish_stats(StreamState::Connecting);
            return Outcome::Valve;  // the connection closes; the next one recreates the slot
        }
    } catch (const Error& e) {
        control_.reset();
        // A fast shutdown waits for this walsender until everything it sent is confirmed, which
        // cannot happen while doc queries cannot connect: leave, so the server can stop. The server
        // says so (57P0x: a connection ended by the shutdown, or a new one refused); failing to
        // connect three checks in a row is taken the same way.
        const std::string& state = e.sqlstate();
        bool shutting_down = state == sqlstate::kAdminShutdown || state == sqlstate::kCrashShutdown ||
                             state == sqlstate::kCannotConnectNow;
        if (shutting_down || ++control_failures_ >= 3) {
            log_warning(kComponent, std::string(shutting_down ? "the server is shutting down"
                                                              : "new connections to the server fail") +
                                        "; leaving the stream so it can stop: " + e.what());
            return finish(Outcome::Lost);
        }
        log_warning(kComponent, std::string("the control check on a new connection failed (retried): ") + e.what());
    }
    return std::nullopt;
}

Stream::Outcome Stream::Session::finish(Outcome outcome) {
    // A final acknowledgement, then end the copy politely; the connection closes either way.
    try {
        send_status();
        copy_->end(pg::deadline_in(milliseconds(2000)));
    } catch (const Error& e) {
        log_warning(kComponent, std::string("final status update failed: ") + e.what());
    }
    publish_stats(StreamState::Connecting);
    return outcome;
}

void Stream::Session::log_valve(bool lost, std::uint64_t retained) const {
    log_error(kComponent, "WAL SAFETY VALVE: replication slot \"" + options_.slot + "\" " +
                              (lost ? std::string("was invalidated by the server (wal_status = lost; see "
                                                  "max_slot_wal_keep_size)")
                                    : "holds " + std::to_string(retained) +
                                          " bytes of WAL the worker has not acknowledged, over --max-retained-wal " +
                                          std::to_string(options_.max_retained_wal)) +
                              "; dropping and recreating it, every live doc will be recomputed");
}

void Stream::Session::publish_stats(StreamState state) {
    stream_.update_stats([&](StreamStats& stats) {
        stats.state = state;
        stats.records += local_.records;
        stats.bytes += local_.bytes;
        stats.transactions += local_.transactions;
        stats.redelivered_skipped += local_.redelivered_skipped;
        stats.keepalives += local_.keepalives;
        stats.status_updates += local_.status_updates;
        stats.received_lsn = std::max(stats.received_lsn, received_);
        stats.sent_flush_lsn = std::max(stats.sent_flush_lsn, sent_flush_);
        if (local_.retained_wal) stats.retained_wal = local_.retained_wal;
    });
    local_ = StreamStats{};
}

}  // namespace docsync
