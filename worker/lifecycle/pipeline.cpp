// Stream records to the engine; definitions reloads.
#include "lifecycle/pipeline.hpp"

#include <algorithm>

#include "common/log.hpp"
#include "engine/definitions.hpp"
#include "replication/pgoutput_publication.hpp"

namespace docsync::lifecycle {

std::optional<std::string> Pipeline::session_tables() {
    auto defs = definitions_.fetch();
    tables_ = plugin_tables(defs);
    reload_pending_ = false;
    log_info("definitions", "definitions generation " + std::to_string(defs.generation) + ": " +
                                std::to_string(defs.queries.size()) + " queries, " +
                                std::to_string(defs.watches.size()) + " watches, tables '" + tables_ + "'");
    engine_.load_definitions(std::move(defs));
    last_catalog_check_ = std::chrono::steady_clock::now();
    return tables_;
}

void Pipeline::on_session(const SessionInfo& session) {
    pgoutput_ = session.pgoutput;
    open_below_ = session.publication_open_below;
    publication_mark_ = session.publication_mark;
    last_mark_check_ = std::chrono::steady_clock::now();
    // The session read the mark before it streamed: nothing it receives is cleared yet.
    cleared_next_ = session.start_lsn;
    if (pgoutput_ && !publication_.empty() && !publication_mark_.empty() && stream_)
        stream_->cap_acknowledgements(session.start_lsn);
    engine_.reset_stream();
    latency_.forget_all();
    engine_.set_generation(session.generation);
    if (watermark_) watermark_->set_generation(session.generation);
    if (!session.generation_from_server)
        log_warning("stream", "docsync.advance_generation() is missing: doc generations are kept in this process only");
    // Whatever the sink holds may have missed changes: at start, and whenever this session's
    // stream does not continue the last one's (a recreated or new slot, another server).
    bool first = sessions_++ == 0;
    if (first || session.valve_fired || session.slot_created || session.identity_changed || session.new_history ||
        session.publication_changed) {
        RecomputeReason reason = RecomputeReason::Startup;
        if (session.valve_fired) {
            reason = RecomputeReason::Valve;
            log_warning("engine", "the WAL safety valve recreated the slot: recomputing every live doc");
        } else if (session.new_history || (!first && session.identity_changed)) {
            reason = RecomputeReason::NewServer;
            log_warning("engine", "the server changed under the slot (system identifier " +
                                      session.system_identifier + ", timeline " +
                                      std::to_string(session.timeline) + "): recomputing every live doc");
        } else if (!first && session.slot_created) {
            reason = RecomputeReason::NewSlot;
            log_warning("engine", "the slot was created anew: changes before it were never decoded; "
                                  "recomputing every live doc");
        } else if (!first) {
            reason = RecomputeReason::Publication;
            log_info("engine", "the publication gained tables or columns: pgoutput never sends their changes made "
                               "before that; recomputing every live doc");
        }
        // Changes before this session may never be delivered, unless it continues the last one.
        bool gap = session.valve_fired || session.slot_created || session.identity_changed || session.new_history ||
                   session.publication_changed;
        engine_.recompute_all_live(reason, gap);
        if (gap && on_gap_) on_gap_();
    }
    // Computes held since start (EngineOptions::hold_computes) begin now, at this session's
    // generation, after its recompute flagged every live doc: none is computed twice.
    if (first) engine_.release_computes();
    // The docs --warm names, once, now that doc versions have this session's generation.
    if (first && !warm_.empty()) {
        log_info("engine", "computing the " + std::to_string(warm_.size()) + " doc(s) --warm names");
        for (const auto& channel : warm_) engine_.warm(channel);
    }
}

void Pipeline::on_record(const Record& record, Lsn, std::uint64_t ticket) {
    if (const auto* change = std::get_if<ChangeRecord>(&record)) {
        engine_.on_change(*change);
    } else if (const auto* begin = std::get_if<BeginRecord>(&record)) {
        xid_ = begin->xid;
        commit_time_ = begin->commit_time;
        engine_.on_begin(*begin);
    } else if (const auto* relation = std::get_if<RelationRecord>(&record)) {
        engine_.on_relation(*relation);
    } else if (const auto* truncate = std::get_if<TruncateRecord>(&record)) {
        engine_.on_truncate(*truncate);
    } else if (const auto* message = std::get_if<MessageRecord>(&record)) {
        if (message->transactional && message->prefix == kDefinitionsMessagePrefix) {
            // Anyone may emit one (pg_logical_emit_message is PUBLIC): one without a generation
            // is not docsync's, and the others only ask for a coalesced reload.
            if (!definitions_message_generation(message->content)) {
                ++ignored_messages_;
                return;
            }
        }
        engine_.on_message(*message);
    } else if (const auto* commit = std::get_if<CommitRecord>(&record)) {
        latency_.committed(ticket, commit_time_);
        if (engine_.on_commit(*commit, ticket)) {
            pending_xid_ = xid_;
            reload_pending_ = true;
            // A definition table written (only the API writes one) reloads at once: the next
            // transaction's changes must meet the new watches. A definitions message alone (DDL,
            // or anyone's pg_logical_emit_message) joins the pending reload, which runs at once
            // after a quiet interval, else once it has passed (maybe_reload): a flood costs one
            // reload per interval, and the reload recomputes what DDL changed meanwhile.
            if (engine_.last_commit_wrote_definitions()) reload_definitions();
        }
        maybe_check_catalog();
        maybe_check_publication_mark();
        maybe_recompute_after_open();
    }
    if (reload_pending_) maybe_reload();
}

void Pipeline::maybe_reload() {
    auto now = std::chrono::steady_clock::now();
    if (now < last_reload_ + reload_interval_) return;
    if (ignored_messages_ > 0) {
        log_warning("definitions", std::to_string(ignored_messages_) +
                                       " \"docsync.definitions\" message(s) without a generation were ignored: "
                                       "docsync did not emit them (pg_logical_emit_message is executable by any role)");
        ignored_messages_ = 0;
    }
    reload_definitions();
}

void Pipeline::reload_definitions() {
    reload_pending_ = false;
    auto started = std::chrono::steady_clock::now();
    definitions_.wait_visible(pending_xid_);
    auto defs = definitions_.fetch();
    log_info("definitions", "definitions changed in-stream: generation " + std::to_string(defs.generation));
    install(std::move(defs));
    last_reload_ = std::chrono::steady_clock::now();
    reload_interval_ = std::max<std::chrono::steady_clock::duration>(kMinReloadInterval,
                                                                      4 * (last_reload_ - started));
}

namespace {

// Whether `next` differs from the definitions in force in what the worker acts on between
// generations: a query's fingerprint (DDL on what it reads), or the set of queries.
bool dependencies_moved(const Definitions& now, const Definitions& next) {
    if (now.generation != next.generation || now.queries.size() != next.queries.size()) return true;
    for (const auto& q : next.queries) {
        const DocQuery* before = now.find_query(q.name);
        if (!before || before->fingerprint != q.fingerprint || before->refused != q.refused) return true;
    }
    return false;
}

}  // namespace

void Pipeline::maybe_check_catalog() {
    if (!pgoutput_ || catalog_check_.count() <= 0) return;
    auto now = std::chrono::steady_clock::now();
    if (now < last_catalog_check_ + catalog_check_) return;
    last_catalog_check_ = now;
    auto defs = definitions_.fetch();
    if (!dependencies_moved(engine_.definitions(), defs) && plugin_tables(defs) == tables_) {
        if (publication_falls_short()) stream_->request_restart();
        return;
    }
    log_info("definitions", "what the doc queries read changed without a definitions message (DDL that docsync's "
                            "event triggers did not see): reloading, generation " + std::to_string(defs.generation));
    install(std::move(defs));
}

bool Pipeline::publication_falls_short() {
    if (publication_.empty() || !stream_) return false;
    std::string shortfall;
    try {
        auto& conn = definitions_.control();
        auto deadline = pg::deadline_in(std::chrono::seconds(30));
        shortfall = publication_shortfall(conn, publication_, plan_pgoutput(conn, tables_, deadline), deadline);
    } catch (const Error& e) {
        // A lost connection, or a watched table that lost its replica identity since the session
        // start (the plan refuses it, naming the fix; PostgreSQL refuses its UPDATEs and DELETEs
        // meanwhile, so none goes unsent): told, and checked again at the next catalog check. The
        // next session start stops on the latter, as the worker's start does.
        log_warning("definitions", std::string("could not check publication ") + publication_ + ": " + e.what());
        return false;
    }
    if (shortfall.empty()) return false;
    log_warning("definitions", shortfall + " (changed by hand?): pgoutput would never send the changes it misses; "
                               "restarting the stream to set it right and recompute every live doc");
    return true;
}

void Pipeline::maybe_check_publication_mark() {
    if (!pgoutput_ || publication_.empty() || !stream_ || publication_mark_.empty()) return;
    auto now = std::chrono::steady_clock::now();
    if (now < last_mark_check_ + mark_check_interval()) return;
    last_mark_check_ = now;
    const Lsn received = stream_->received();
    std::string mark;
    try {
        mark = publication_mark(definitions_.control(), publication_, pg::deadline_in(std::chrono::seconds(30)));
    } catch (const Error& e) {
        log_warning("definitions", std::string("could not look at publication ") + publication_ + ": " + e.what() +
                                       "; nothing streamed since the last look is confirmed until one succeeds");
        mark_check_failed_ = true;
        return;
    }
    mark_check_failed_ = false;
    // What the last look cleared is confirmed now, a look later: an edit's commit is in the WAL
    // before it is visible, and the stream may have received it before the look's snapshot saw it.
    // Nothing is while a gap recompute runs (this look's or a session start's): it holds the waits
    // through the status the worker writes, which a lock on the status table, say, may hold up.
    Lsn cleared = cleared_next_;
    cleared_next_ = received;
    if (mark == publication_mark_) {
        if (!engine_.recompute_progress().holds_waits()) stream_->cap_acknowledgements(cleared);
        return;
    }
    publication_mark_ = mark;
    if (mark.empty() || publication_falls_short()) {
        if (mark.empty()) log_warning("definitions", "publication " + publication_ + " was dropped: restarting the stream");
        stream_->request_restart();
        return;
    }
    log_warning("definitions", "publication " + publication_ +
                                   " was edited since the stream started, and is whole again (a table taken out and "
                                   "put back, or its actions narrowed and set back?): pgoutput never sent the changes "
                                   "made in between; recomputing every live doc");
    engine_.recompute_all_live(RecomputeReason::Publication, true);
    if (on_gap_) on_gap_();
}

void Pipeline::maybe_recompute_after_open() {
    if (!open_below_) return;
    auto now = std::chrono::steady_clock::now();
    if (now < last_open_check_ + std::chrono::seconds(1)) return;
    last_open_check_ = now;
    if (!definitions_.ended_before(open_below_)) return;
    open_below_ = 0;
    log_info("engine", "the transactions open when the publication gained tables or columns have ended: "
                       "recomputing every live doc for what they wrote before that");
    engine_.recompute_all_live(RecomputeReason::Publication, true);
    if (on_gap_) on_gap_();
}

void Pipeline::install(Definitions defs) {
    std::string tables = plugin_tables(defs);
    engine_.load_definitions(std::move(defs));
    last_catalog_check_ = std::chrono::steady_clock::now();
    if (tables != tables_) {
        log_info("definitions", "the watched tables changed: restarting the stream with tables '" + tables + "'");
        tables_ = tables;
        stream_->request_restart();
    }
}

}  // namespace docsync::lifecycle
