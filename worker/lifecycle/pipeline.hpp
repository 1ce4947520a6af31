#pragma once
// The stream's handler in docsync-worker: hands each decoded record to the engine, and keeps the
// definitions and the plugin's `tables` option current (a reload at a definitions change, coalesced
// when messages flood in). Every member runs on the stream thread, except the setters, called
// before the stream starts.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.hpp"
#include "executor/definitions_source.hpp"
#include "progress/commit_latency.hpp"
#include "publish/watermark.hpp"
#include "replication/stream.hpp"

namespace docsync::lifecycle {

class Pipeline final : public StreamHandler {
public:
    Pipeline(Engine& engine, DefinitionsSource& definitions, CommitLatency& latency, std::vector<std::string> warm)
        : engine_(engine), definitions_(definitions), latency_(latency), warm_(std::move(warm)) {}

    void set_stream(Stream* stream) { stream_ = stream; }
    // Called on the stream thread when a recompute of every live doc starts that covers a gap in
    // the stream: the status file should say so at once (docsync.wait_published reads it).
    void on_gap(std::function<void()> callback) { on_gap_ = std::move(callback); }
    // With Redis: docsync:watermark, told each session's generation before its acknowledgements.
    void set_watermark(publish::RedisWatermark* watermark) { watermark_ = watermark; }
    // With pgoutput, how often the definitions and their fingerprints are read again between
    // definitions messages (--catalog-check); 0: never.
    void set_catalog_check(std::chrono::milliseconds every) { catalog_check_ = every; }
    // With pgoutput, the publication the slot reads from: each catalog check also checks that it
    // still sends what the watches need (replication/pgoutput_publication.hpp).
    void set_publication(std::string name) { publication_ = std::move(name); }

    // Stream thread, at every session start: the newest definitions and their `tables` option.
    std::optional<std::string> session_tables();

    void on_session(const SessionInfo& session) override;
    void on_record(const Record& record, Lsn, std::uint64_t ticket) override;
    void on_idle() override {
        if (reload_pending_) maybe_reload();
        maybe_check_catalog();
        maybe_check_publication_mark();
        maybe_recompute_after_open();
    }
    int idle_tick_ms() const override {
        if (reload_pending_) return 20;
        if (open_below_) return 1000;
        if (!pgoutput_) return 0;
        auto mark = mark_check_interval();
        if (catalog_check_.count() <= 0) return static_cast<int>(mark.count());
        return static_cast<int>(std::min<std::int64_t>(catalog_check_.count(), mark.count()));
    }

private:
    // A coalesced reload, once the interval since the last one has passed: a flood of definitions
    // messages costs one reload per interval, and the interval grows with what a reload costs, so
    // reloads never take more than a fifth of the stream thread's time.
    void maybe_reload();
    // A transaction changed the definitions. The engine holds its ticket until the definitions are
    // loaded (and their recomputes done); the stream restarts only when the plugin must emit other
    // tables or columns. A redelivered definitions transaction finds nothing new and completes.
    void reload_definitions();
    // Installs definitions just read, and restarts the stream when the plugin must emit other tables.
    void install(Definitions defs);
    // pgoutput: DDL that changes what a doc query reads raises the definitions generation only through
    // docsync's event triggers, which a portable install lacks and a session can disable
    // (session_replication_role = replica, ALTER EVENT TRIGGER … DISABLE); pgoutput's RELATION
    // messages show a table's new shape, but not a rewrite, a function or a type. Every
    // --catalog-check the definitions are read again, and when a query's fingerprint (what its docs
    // depend on besides rows), the generation or the tables changed, they are installed: the live docs
    // of the queries that changed are recomputed. Every session start reads them too. The
    // publication is checked too (publication_shortfall): a table taken out of it by hand, a column
    // list or an action dropped, and pgoutput would never send those changes while the slot is
    // acknowledged past them; the stream restarts, and the session start sets the publication right
    // (or stops naming the statements for an owner) and recomputes every live doc.
    void maybe_check_catalog();
    // Whether the publication falls short of the watches (logged); false when it cannot be told now.
    bool publication_falls_short();
    // pgoutput: every kMarkCheck, whether the publication was edited since the session set it up
    // (SessionInfo::publication_mark), even when the edit was undone since (a table taken out and put
    // back, its actions narrowed and set back): pgoutput never sent what changed in between. An edit
    // still in place restarts the stream, whose start sets it right and recomputes every live doc;
    // an undone one recomputes every live doc as a gap at once. The stream confirms nothing past a
    // position until a look that started after it was received, and the look after that one, found
    // the mark unmoved (Stream::cap_acknowledgements), and no gap recompute runs: a confirmed
    // position is what docsync.wait_published trusts, and an edit committed before it may have
    // hidden changes. While durable positions wait on the cap, the looks come every kMarkCheckHeld.
    void maybe_check_publication_mark();
    std::chrono::milliseconds mark_check_interval() const {
        return stream_ && stream_->acknowledgements_capped() && !mark_check_failed_ ? kMarkCheckHeld : kMarkCheck;
    }
    // SessionInfo::publication_open_below: once the transactions open at the publication change
    // have ended (checked once a second), recomputes every live doc again.
    void maybe_recompute_after_open();

    static constexpr std::chrono::milliseconds kMinReloadInterval{250};
    static constexpr std::chrono::milliseconds kMarkCheck{1000};
    static constexpr std::chrono::milliseconds kMarkCheckHeld{50};

    Engine& engine_;
    DefinitionsSource& definitions_;
    CommitLatency& latency_;
    Stream* stream_ = nullptr;
    std::function<void()> on_gap_;
    publish::RedisWatermark* watermark_ = nullptr;
    const std::vector<std::string> warm_;
    std::string tables_;
    std::string publication_;
    std::uint64_t sessions_ = 0;
    std::uint64_t xid_ = 0;          // of the transaction being decoded
    std::uint64_t pending_xid_ = 0;  // of the last transaction that asked for a reload
    bool reload_pending_ = false;    // a coalesced reload is due (maybe_reload)
    std::uint64_t ignored_messages_ = 0;
    std::chrono::steady_clock::time_point last_reload_{};
    bool pgoutput_ = false;                       // this session streams pgoutput
    std::chrono::milliseconds catalog_check_{0};  // --catalog-check
    std::chrono::steady_clock::time_point last_catalog_check_{};
    std::string publication_mark_;  // SessionInfo::publication_mark, then as last seen
    std::chrono::steady_clock::time_point last_mark_check_{};
    bool mark_check_failed_ = false;  // the last look could not be made: the next comes after kMarkCheck
    Lsn cleared_next_ = 0;            // received when the last look started: confirmed after the next
    std::uint64_t open_below_ = 0;  // SessionInfo::publication_open_below, until they have ended
    std::chrono::steady_clock::time_point last_open_check_{};
    std::chrono::steady_clock::duration reload_interval_ = kMinReloadInterval;
    std::int64_t commit_time_ = 0;  // its commit timestamp (PostgreSQL epoch, microseconds)
};

}  // namespace docsync::lifecycle
