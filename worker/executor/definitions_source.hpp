#pragma once
// The worker's control connection on --dsn: checks the database and the role at start, reads the
// definitions (read_definitions, retrying transient failures) and waits for a transaction that
// changed them to become visible. Reconnects when the connection was lost, and after each
// definitions read, which closes it.
//
// Threads: used at start by the main thread, then only by the stream thread; waiting() may be called
// from any thread.

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "engine/definitions.hpp"
#include "pg/connection.hpp"

namespace docsync {

// The database a connection reached and its server's system identifier (a hot standby shares its
// primary's).
struct DatabaseIdentity {
    std::string database;
    std::string system_identifier;
};

class DefinitionsSource {
public:
    explicit DefinitionsSource(std::string dsn) : dsn_(std::move(dsn)) {}

    // The database --dsn reaches (its name names the status file) and its server. Throws
    // docsync::Error when the extension is not installed there.
    DatabaseIdentity identity();

    // The --dsn role holds the slot and reads definitions: like the pool role, it must reach no
    // superuser and nothing else dangerous, except REPLICATION, which it needs. Throws docsync::Error
    // naming what it reaches, unless `allow_unsafe` (then a warning is logged).
    void check_role(bool allow_unsafe);

    // The current definitions, with a warning logged for each part not used, and once for each query
    // that reads a table no watch covers (its docs go stale). A transient failure is
    // retried (5 attempts in all); the last one, or a permanent one, throws docsync::Error.
    Definitions fetch();

    // Returns once transaction `xid` is visible to new snapshots, however long it takes.
    void wait_visible(std::uint64_t xid);

    // Whether every transaction with an xid below `xid` has ended (a new snapshot's xmin is past it);
    // false when that cannot be told now.
    bool ended_before(std::uint64_t xid);

    // Whether the slot exists in this database (true when that cannot be told).
    bool slot_exists(const std::string& slot);

    // What wait_visible waits for now, for docsync.status, or empty.
    std::string waiting() const;

    // The control connection (reconnected when lost), for the stream thread's other catalog reads.
    pg::Connection& control() { return connection(); }

private:
    pg::Connection& connection();

    std::string dsn_;
    std::optional<pg::Connection> conn_;
    mutable std::mutex waiting_mutex_;
    std::string waiting_;
    // The uncovered-table warnings already logged: each is logged once, not at every reload.
    std::set<std::string> uncovered_logged_;
    std::set<std::string> unresolved_logged_;  // "not used" warnings given
};

}  // namespace docsync
