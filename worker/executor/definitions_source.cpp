// The control connection on --dsn: the database and role checks at start, the definitions, and the
// wait for a definitions change to become visible.
#include "executor/definitions_source.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/error.hpp"
#include "common/log.hpp"
#include "executor/definitions_reader.hpp"
#include "executor/executor.hpp"

namespace docsync {

namespace {

constexpr auto kControlTimeout = std::chrono::seconds(30);
// How long a wait for a definitions change to become visible goes unreported: a commit in progress is
// visible within milliseconds, a synchronous-replication stall is worth saying after a few seconds.
constexpr auto kWaitReported = std::chrono::seconds(5);

}  // namespace

DatabaseIdentity DefinitionsSource::identity() {
    auto result = connection().exec(
        // The extension, or a portable install (docs/portable.md), which has docsync.install_kind().
        "SELECT current_database(), EXISTS (SELECT FROM pg_extension WHERE extname = 'docsync') "
        "OR pg_catalog.to_regprocedure('docsync.install_kind()') IS NOT NULL, "
        "(SELECT system_identifier FROM pg_catalog.pg_control_system())::text",
        pg::deadline_in(kControlTimeout));
    std::string name(result.get(0, 0));
    if (result.get(0, 1) != "t")
        throw Error("the docsync extension is not installed in database \"" + name +
                    "\": run CREATE EXTENSION docsync there (as a superuser), or on a server that loads no "
                    "docsync library the portable install (docs/portable.md), then define doc queries");
    return {name, std::string(result.get(0, 2))};
}

void DefinitionsSource::check_role(bool allow_unsafe) {
    require_harmless_role(connection(), true, "the replication role of --dsn",
                          "connect --dsn as a role with REPLICATION and nothing more (CREATE ROLE docsync_repl "
                          "LOGIN REPLICATION; SELECT docsync.grant_replication('docsync_repl'))",
                          allow_unsafe, "definitions");
}

bool DefinitionsSource::slot_exists(const std::string& slot) {
    try {
        auto result = connection().exec(
            "SELECT EXISTS (SELECT FROM pg_catalog.pg_replication_slots WHERE slot_name = $1 AND database = "
            "pg_catalog.current_database())",
            {slot}, pg::deadline_in(std::chrono::seconds(5)));
        return result.get(0, 0) == "t";
    } catch (const Error&) {
        return true;
    }
}

Definitions DefinitionsSource::fetch() {
    for (int attempt = 1;; ++attempt) {
        try {
            Definitions definitions = read_definitions(connection(), pg::deadline_in(kControlTimeout));
            // The connection is closed after the read: in a portable install the read parses each
            // definer's text, and code that a parse runs (a domain's CHECK) can leave in the session
            // what a rollback keeps (custom settings, which no SQL can drop, a sequence's lastval).
            // Kept, the connection would gather them for the worker's life.
            conn_.reset();
            // Once per problem: the catalog check reads the definitions every minute.
            for (const auto& problem : definitions.unresolved)
                if (unresolved_logged_.insert(problem).second) log_warning("definitions", "not used: " + problem);
            for (const auto& line : definitions.uncovered)
                if (uncovered_logged_.insert(line).second) log_warning("definitions", line);
            return definitions;
        } catch (const Error& e) {
            conn_.reset();
            if (!e.transient() || attempt >= 5) throw;
            log_warning("definitions", std::string("reading definitions failed, retrying: ") + e.what());
            std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
        }
    }
}

bool DefinitionsSource::ended_before(std::uint64_t xid) {
    try {
        auto result = connection().exec("SELECT pg_snapshot_xmin(pg_current_snapshot()) >= $1::text::xid8",
                                        {std::to_string(xid)}, pg::deadline_in(kControlTimeout));
        return result.get(0, 0) == "t";
    } catch (const Error& e) {
        if (!e.transient()) throw;
        conn_.reset();
        return false;
    }
}

// A commit is decoded before it is visible to new snapshots (invariant 3, docs/design.md): before
// reading the definitions a transaction changed, wait until that transaction is visible, or the read
// returns the old definitions and the change is lost until the next session. However long it takes
// (a synchronous-replication stall): the stream, and so the slot, wait with it, and waiting() says
// what for, for docsync.status.
void DefinitionsSource::wait_visible(std::uint64_t xid) {
    auto started = std::chrono::steady_clock::now();
    auto next_log = started + kWaitReported;
    auto pause = std::chrono::milliseconds(5);
    for (;;) {
        try {
            auto result = connection().exec("SELECT pg_visible_in_snapshot($1::text::xid8, pg_current_snapshot())",
                                            {std::to_string(xid)}, pg::deadline_in(kControlTimeout));
            if (result.get(0, 0) == "t") break;
        } catch (const Error& e) {
            if (!e.transient()) throw;
            conn_.reset();
        }
        auto now = std::chrono::steady_clock::now();
        if (now >= next_log) {
            auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - started).count();
            std::string what = "waiting " + std::to_string(waited) + " s for transaction " + std::to_string(xid) +
                               ", which changed the definitions, to become visible (a synchronous replication "
                               "stall, or a commit still in progress): the stream waits with it";
            log_warning("definitions", what);
            std::lock_guard lock(waiting_mutex_);
            waiting_ = what;
            next_log = now + kControlTimeout;
        }
        std::this_thread::sleep_for(pause);
        pause = std::min<std::chrono::milliseconds>(pause * 2, std::chrono::milliseconds(200));
    }
    std::lock_guard lock(waiting_mutex_);
    if (!waiting_.empty()) log_info("definitions", "transaction " + std::to_string(xid) + " is visible now");
    waiting_.clear();
}

std::string DefinitionsSource::waiting() const {
    std::lock_guard lock(waiting_mutex_);
    return waiting_;
}

pg::Connection& DefinitionsSource::connection() {
    if (!conn_ || !conn_->ok()) {
        conn_.emplace(pg::Connection::connect(dsn_, pg::deadline_in(kControlTimeout),
                                              {{"application_name", "docsync-worker control"}}, "--dsn"));
        pg::pin_text_forms(*conn_, pg::deadline_in(kControlTimeout));
    }
    return *conn_;
}

}  // namespace docsync
